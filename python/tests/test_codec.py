"""How values become bytes: numeric numpy arrays as array frames, the rest
as pickles; any bytes a peer could send decode or fail with a clear error."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import statepipe
from statepipe import _codec

PLAIN = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(endianness="="),
    hnp.integer_dtypes(endianness=">"),
    hnp.unsigned_integer_dtypes(endianness="?"),
    hnp.floating_dtypes(endianness="?"),
    hnp.complex_number_dtypes(endianness="?"),
)
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


def same_array(a, b):
    """Same type, dtype, shape and bytes (so the same bits, NaNs included)."""
    return type(b) is np.ndarray and b.dtype == a.dtype and b.shape == a.shape and a.tobytes() == b.tobytes()


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(PLAIN, SHAPES))
def test_a_plain_array_travels_as_a_frame_and_comes_back_the_same(a):
    b = _codec.dumps(a)
    assert b[0] == 0
    back = _codec.loads(b)
    assert same_array(a, back)
    assert back.flags.c_contiguous and back.flags.writeable
    back[...] = 0  # its own memory: writing it leaves the frame alone
    assert same_array(a, _codec.loads(b))


@pytest.mark.parametrize(
    "v",
    [
        np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        np.arange(10.0)[::2],
        np.array([object(), 1], dtype=object)[1:],
        np.zeros(2, dtype=[("a", "<f8"), ("b", "<i4")]),
        np.ma.masked_array([1.0, 2.0], mask=[0, 1]),
        np.array(["ab", "c"]),
        (1, np.zeros(2), "x"),
        {"w": np.ones(3)},
        None,
        3.5,
    ],
    ids=["fortran", "strided", "object", "records", "subclass", "strings", "tuple", "dict", "none", "float"],
)
def test_everything_else_is_pickled_as_it_was(v):
    b = _codec.dumps(v)
    assert b[:1] == b"\x80"
    back = _codec.loads(b)
    assert type(back) is type(v)
    if isinstance(v, np.ndarray):
        assert back.dtype == v.dtype and back.shape == v.shape
        assert back.tobytes() == v.tobytes()
        if v.ndim > 1 and v.flags.f_contiguous:
            assert back.flags.f_contiguous and not back.flags.c_contiguous  # Fortran order kept
    else:
        assert pickle.dumps(back) == pickle.dumps(v)


def frame(dtype: bytes, shape, data: bytes, version: int = 1) -> bytes:
    head = bytes([0, version, len(dtype)]) + dtype + bytes([len(shape)])
    return head + b"".join(n.to_bytes(8, "little") for n in shape) + data


@pytest.mark.parametrize(
    "b, why",
    [
        (b"\x00", "shorter than its header"),
        (b"\x00\x02\x03<f8\x00", "version 2"),
        (b"\x00\x01\x09<f8", "cut inside its dtype"),
        (frame(b"|O", (1,), bytes(8)), "not a plain boolean or numeric type"),
        (frame(b"<U2", (1,), bytes(8)), "not a plain boolean or numeric type"),
        (frame(b"zz", (1,), bytes(8)), "dtype b'zz'"),
        (frame(b"\xff", (1,), bytes(8)), "dtype"),
        (frame(b"<f8", (3,), bytes(16)), "needs 24 bytes of data, it holds 16"),
        (frame(b"<f8", (2**62, 2**62), bytes(8)), "needs"),
        (frame(b"<f8", (1,), b"")[:-5], "cut inside its shape"),
        (bytes([0, 1, 3]) + b"<f8" + bytes([65]), "65 dimensions"),
    ],
)
def test_a_malformed_frame_is_a_clear_error(b, why):
    with pytest.raises(ValueError, match="malformed statepipe array frame") as e:
        _codec.loads(b)
    assert why in str(e.value)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_after_the_frame_byte_decode_or_fail_clearly(tail):
    try:
        v = _codec.loads(b"\x00" + tail)
    except ValueError as e:
        assert "malformed statepipe array frame" in str(e)
    else:
        assert type(v) is np.ndarray and v.dtype.kind in "biufc"


def test_arrays_cross_workers_bit_for_bit():
    class Noisy:
        def evolve(self, x, scale, rng):
            return [((x * scale + rng.standard_normal(x.shape)).astype(x.dtype), x[:1].copy())]

    got = []
    for kw in ({"workers": 0}, {"workers": 2, "placement": "workers"}):
        with statepipe.Engine(Noisy(), seed=3, **kw) as e:
            ids = e.reset([np.full((2, 3), 1.5, dtype=">f4"), np.arange(4, dtype=np.float16)])
            out = e.evolve_many({ids[0]: 2.0, ids[1]: 0.5})
            kids = [out[i][0][0] for i in ids]
            got.append((e.fetch(kids), [out[i][0][1] for i in ids]))
    (states0, outs0), (states1, outs1) = got
    for a, b in zip(states0 + outs0, states1 + outs1):
        assert same_array(a, b)
    assert states1[0].dtype == np.dtype(">f4") and states1[0].shape == (2, 3)
