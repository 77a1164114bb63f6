"""A bootstrap particle filter on a statepipe :class:`~statepipe.Engine`.

Particles are states on workers. Each step the caller draws every
particle's number of children by systematic resampling of the last weights
(one uniform per island, from the same generator the Rust filter uses) and
sends it as the input; the evolve propagates each child through the
transition and returns its log-weight and summary. The particles are split
into ``islands`` independent filters run in the same ``evolve_many`` calls;
each gives an unbiased likelihood estimate Z_r, the estimate is
log(mean Z_r), and its Monte-Carlo standard error comes from the spread of
the Z_r (delta method).
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

import numpy as np

from . import _native
from ._engine import Engine

try:  # Python >= 3.8
    from typing import Protocol
except ImportError:  # pragma: no cover
    Protocol = object  # type: ignore


class StateSpaceModel(Protocol):
    """What :func:`particle_filter` needs of a model (``summary`` is
    optional: the particle itself, as a float, by default)."""

    def prior(self, rng: Any) -> Any:
        """A draw of the first latent value."""

    def transition(self, x: Any, rng: Any) -> Any:
        """A draw of the next latent value given ``x``."""

    def log_obs(self, x: Any, y: Any) -> float:
        """Log density of the observation ``y`` given the latent ``x``."""


class Bootstrap:
    """The filter's evolve over a state-space model and its data: a state
    is a particle (``None`` before the prior), the input ``(t, children)``,
    each child's output ``(log_w, summary)``."""

    def __init__(self, model: Any, data: Sequence[Any]) -> None:
        self.model = model
        self.data = list(data)
        self._summary = getattr(model, "summary", None)

    def reset(self, rng: Any) -> None:
        return None

    def expected_cost(self, inp: Any) -> float:
        return inp[1] + 0.25

    def evolve(self, x: Any, inp: Any, rng: Any) -> List[Any]:
        t, k = inp
        m, y = self.model, self.data[t]
        out = []
        for _ in range(k):
            c = m.prior(rng) if x is None else m.transition(x, rng)
            s = self._summary(c) if self._summary is not None else float(c)
            out.append((c, (float(m.log_obs(c, y)), s)))
        return out


@dataclass
class PfResult:
    """What the filter estimated."""

    loglik: float
    """log(mean over islands of Z_r)."""
    loglik_se: float
    """Its Monte-Carlo standard error (NaN with one island)."""
    filtered_means: List[float] = field(default_factory=list)
    """Weighted mean of the summary at each step."""
    island_logliks: List[float] = field(default_factory=list)
    """log Z_r per island."""
    particles: int = 0


def _lse(v: np.ndarray) -> float:
    m = float(np.max(v)) if len(v) else -math.inf
    if m == -math.inf:
        return m
    return m + math.log(float(np.sum(np.exp(v - m))))


def systematic(log_w: np.ndarray, n: int, u: float) -> np.ndarray:
    """Children of each particle: systematic resampling of ``log_w`` into
    ``n`` particles with the single uniform ``u`` in [0, 1)."""
    w = np.exp(log_w - np.max(log_w))
    cum = np.cumsum(w / np.sum(w) * n)
    below = np.clip(np.ceil(cum - u), 0, n).astype(np.int64)
    counts = np.diff(below, prepend=0)
    counts[-1] += n - below[-1]
    return counts


def particle_filter(
    model: Any,
    data: Sequence[Any],
    n: int,
    *,
    islands: int = 8,
    seed: int = 0,
    engine: Optional[Engine] = None,
    **engine_args: Any,
) -> PfResult:
    """Runs a bootstrap particle filter of ``model`` (a
    :class:`StateSpaceModel`) on ``data`` with ``n`` particles.

    The filter runs on ``engine`` when given (an engine made for a
    :class:`Bootstrap` of the same model and data), else on a new
    ``Engine(Bootstrap(model, data), seed=seed, **engine_args)`` (e.g.
    ``workers=4``) closed at the end. The result is the same bits for any
    number of workers.
    """
    if islands < 1 or n % islands:
        raise ValueError(f"islands ({islands}) must divide the particles ({n})")
    own = engine is None
    if engine is None:
        engine = Engine(Bootstrap(model, data), seed=seed, **engine_args)
    try:
        return _run(engine, len(data), n, islands, seed)
    finally:
        if own:
            engine.close()


def _run(engine: Engine, steps: int, n: int, islands: int, seed: int) -> PfResult:
    m = n // islands
    ids = engine.reset([None] * n)
    isl = [ids[r * m:(r + 1) * m] for r in range(islands)]
    log_w = [np.zeros(m) for _ in range(islands)]
    log_z = [0.0] * islands
    means: List[float] = []
    dumps, loads = pickle.dumps, pickle.loads
    proto = _native.PICKLE_PROTOCOL
    for t in range(steps):
        order: List[int] = []
        inputs: List[bytes] = []
        for r in range(islands):
            counts = [1] * m if t == 0 else systematic(log_w[r], m, _native.call_uniform(seed, t, r)).tolist()
            order.extend(isl[r])
            inputs.extend(dumps((t, c), proto) for c in counts)
        raw = engine._evolve_raw(order, inputs)
        all_lw: List[float] = []
        all_s: List[float] = []
        pos = 0
        for r in range(islands):
            nxt: List[int] = []
            lw: List[float] = []
            for _parent, kids in raw[pos:pos + m]:
                for c, o in kids:
                    w, s = loads(o)
                    nxt.append(c)
                    lw.append(w)
                    all_s.append(s)
            pos += m
            arr = np.asarray(lw, dtype=np.float64)
            log_z[r] += _lse(arr) - math.log(m)
            isl[r] = nxt
            log_w[r] = arr
            all_lw.extend(lw)
        a = np.asarray(all_lw)
        lse = _lse(a)
        means.append(float(np.dot(np.exp(a - lse), np.asarray(all_s))))
    engine.drop([i for ids_r in isl for i in ids_r])
    lz = np.asarray(log_z)
    loglik = _lse(lz) - math.log(islands)
    rel = np.exp(lz - loglik)
    se = math.sqrt(float(np.sum((rel - 1.0) ** 2)) / (islands - 1) / islands) if islands > 1 else math.nan
    return PfResult(loglik, se, means, [float(x) for x in log_z], n)
