"""How states, inputs and outputs become bytes, in the caller and in workers.

Two encodings, told apart by their first byte:

- a pickle stream, protocol 5 (its first byte is ``0x80``): any picklable
  value;
- an **array frame** (first byte ``0x00``): a numpy array of booleans or
  numbers (dtype kind ``b``, ``i``, ``u``, ``f`` or ``c``), C-contiguous
  and of the exact type ``numpy.ndarray``, as its raw buffer::

      0x00, version 1, n, dtype string (n ASCII bytes, numpy's ``dtype.str``,
      byte order included), d, shape (d little-endian u64), data

  (every field before the data one byte unless said otherwise). Pickling
  such an array goes through numpy's reduce and two globals the
  unpickler imports (about 15 µs to write and 13 µs to read a small
  array); the frame costs a few µs each way, which is most of a cheap
  model's call.

A frame decodes to a writable, C-contiguous array with the same dtype,
shape and bytes as the array encoded, so a model computes the same bits
from it as from its pickle. Every other value, a Fortran-ordered or
strided array, a subclass or an array of objects or records included,
is pickled.
"""

from __future__ import annotations

import pickle
import struct
import sys
from typing import Any, Callable, Dict

from . import _native

#: The pickle protocol (5: out-of-band capable).
PROTOCOL = _native.PICKLE_PROTOCOL

_FRAME, _VERSION = 0x00, 1
_KINDS = "biufc"
_MAX_DIMS = 64


def dumps(v: Any) -> bytes:
    """``v`` as bytes: an array frame for a plain numeric numpy array,
    else its pickle."""
    np = sys.modules.get("numpy")
    if np is not None and type(v) is np.ndarray and v.dtype.kind in _KINDS and v.flags.c_contiguous:
        dt = v.dtype.str.encode("ascii")
        head = bytearray((_FRAME, _VERSION, len(dt)))
        head += dt
        head.append(v.ndim)
        head += _shape(v.ndim).pack(*v.shape)
        return bytes(head) + v.tobytes()
    return pickle.dumps(v, PROTOCOL)


def loads(b: "bytes | bytearray | memoryview") -> Any:
    """The value :func:`dumps` wrote.

    Raises ``ValueError`` for a malformed array frame, and whatever
    ``pickle.loads`` raises for a malformed pickle.
    """
    if len(b) == 0 or b[0] != _FRAME:
        return pickle.loads(b)
    return _array(memoryview(b))


#: Dtypes read so far, by their string: a few in any run (only valid
#: plain ones are kept).
_DTYPES: Dict[bytes, Any] = {}
#: Shape readers, by dimension count.
_SHAPES: Dict[int, struct.Struct] = {}


def _shape(d: int) -> struct.Struct:
    s = _SHAPES.get(d)
    if s is None:
        s = _SHAPES[d] = struct.Struct(f"<{d}Q")
    return s


def _bad(m: memoryview, why: str) -> ValueError:
    return ValueError(f"malformed statepipe array frame ({len(m)} bytes): {why}")


def _dtype(m: memoryview, key: bytes) -> Any:
    import numpy as np

    try:
        dt = np.dtype(key.decode("ascii"))
    except (UnicodeDecodeError, TypeError, ValueError) as e:
        raise _bad(m, f"dtype {key!r}: {e}") from None
    if dt.kind not in _KINDS or dt.fields is not None or dt.subdtype is not None:
        raise _bad(m, f"dtype {dt.str!r} is not a plain boolean or numeric type")
    _DTYPES[key] = dt
    return dt


def _array(m: memoryview) -> Any:
    if len(m) < 3:
        raise _bad(m, "shorter than its header")
    if m[1] != _VERSION:
        raise _bad(m, f"version {m[1]}, this statepipe reads version {_VERSION}")
    at = 3 + m[2]
    if len(m) < at + 1:
        raise _bad(m, "cut inside its dtype")
    key = bytes(m[3:at])
    dt = _DTYPES.get(key) or _dtype(m, key)
    d = m[at]
    at += 1
    if d > _MAX_DIMS:
        raise _bad(m, f"{d} dimensions (numpy allows {_MAX_DIMS})")
    if len(m) < at + 8 * d:
        raise _bad(m, "cut inside its shape")
    shape = _shape(d).unpack_from(m, at)
    at += 8 * d
    count = 1
    for n in shape:
        count *= n
    if count * dt.itemsize != len(m) - at:
        raise _bad(m, f"shape {shape} of {dt.str} needs {count * dt.itemsize} bytes of data, it holds {len(m) - at}")
    np = sys.modules["numpy"]
    if count:
        a = np.frombuffer(bytearray(m[at:]), dtype=dt)
        return a if d == 1 else a.reshape(shape)
    try:
        return np.empty(shape, dtype=dt)
    except ValueError as e:  # a side past what numpy indexes
        raise _bad(m, f"shape {shape}: {e}") from None
