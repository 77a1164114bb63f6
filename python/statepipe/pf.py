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

A *vectorised* model (``vectorised = True``, see
:class:`VectorisedStateSpaceModel`) takes and returns numpy arrays of all
the particles at once; its filter runs in this process with a step cost of
a few numpy calls: no Python per particle, no pickling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

import numpy as np

from . import _native
from ._codec import dumps, loads
from ._engine import Engine, _start_dashboard

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


class VectorisedStateSpaceModel(Protocol):
    """A state-space model over arrays of particles, as numpy code is
    written: axis 0 of every array indexes the particles.

    Declare it with the class attribute ``vectorised = True``. ``rng`` is a
    ``numpy.random.Generator``, a fresh one for each step derived from
    (seed, step), so a run is reproducible for a seed whatever the model
    draws. ``summary`` is optional: by default the particles themselves,
    which must then be one float each (shape ``(n,)``).

    >>> import numpy as np
    >>> class Walk:
    ...     vectorised = True
    ...     def prior(self, rng, size):
    ...         return rng.normal(0.0, 1.0, size)
    ...     def transition(self, x, rng):
    ...         return x + rng.normal(0.0, 1.0, x.shape)
    ...     def log_obs(self, x, y):
    ...         return -0.5 * (y - x) ** 2
    >>> r = particle_filter(Walk(), [0.1, 0.3, -0.2], 400, islands=4, seed=1)
    >>> r.placement
    'in process (vectorised)'
    """

    vectorised: bool

    def prior(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` draws of the first latent value, stacked on axis 0."""

    def transition(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A draw of the next latent value of each particle in ``x`` (same
        shape)."""

    def log_obs(self, x: np.ndarray, y: Any) -> np.ndarray:
        """Log density of the observation ``y`` given each particle in
        ``x``: shape ``(len(x),)``."""


class Bootstrap:
    """The filter's evolve over a state-space model and its data: a state
    is a particle (``None`` before the prior), the input ``(t, children)``,
    each child's output ``(log_w, summary)``."""

    def __init__(self, model: Any, data: Sequence[Any]) -> None:
        self.model = model
        self.data = list(data)
        self._summary = getattr(model, "summary", None)

    @property
    def _statepipe_title(self) -> str:
        """The title of an engine's dashboard."""
        return f"pf: {type(self.model).__name__}, {len(self.data)} observations"

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
    placement: str = ""
    """Where the filter ran (the engine's placement, or ``'in process
    (vectorised)'``)."""


def _lse(v: np.ndarray) -> float:
    m = float(np.max(v)) if len(v) else -math.inf
    if m == -math.inf:
        return m
    return m + math.log(float(np.sum(np.exp(v - m))))


def systematic(log_w: np.ndarray, n: int, u: Any) -> np.ndarray:
    """Children of each particle: systematic resampling of ``log_w`` into
    ``n`` particles with the single uniform ``u`` in [0, 1).

    A 2-D ``log_w`` resamples each row independently, with ``u`` one
    uniform per row; every row's counts then sum to ``n``.
    """
    # ndarray methods and ufuncs rather than their np.* wrappers: this runs
    # every step of the vectorised filter, whose whole step is microseconds.
    log_w = np.asarray(log_w)
    w = np.exp(log_w - log_w.max(axis=-1, keepdims=True))
    cum = (w / w.sum(axis=-1, keepdims=True) * n).cumsum(axis=-1)
    below = np.ceil(cum - np.asarray(u)[..., None])
    np.maximum(below, 0, out=below)
    np.minimum(below, n, out=below)
    below = below.astype(np.int64)
    counts = below.copy()
    counts[..., 1:] -= below[..., :-1]
    counts[..., -1] += n - below[..., -1]
    return counts


def particle_filter(
    model: Any,
    data: Sequence[Any],
    n: int,
    *,
    islands: int = 8,
    seed: int = 0,
    engine: Optional[Engine] = None,
    dashboard: Optional[str] = None,
    **engine_args: Any,
) -> PfResult:
    """Runs a bootstrap particle filter of ``model`` (a
    :class:`StateSpaceModel`) on ``data`` with ``n`` particles.

    A per-particle model runs on ``engine`` when given (an engine made for
    a :class:`Bootstrap` of the same model and data), else on a new
    ``Engine(Bootstrap(model, data), seed=seed, steps=len(data),
    **engine_args)`` (e.g. ``workers=4``: in process or on the workers,
    whichever the engine's first step predicts is faster) closed at the
    end. The result is the same bits for any number of workers and either
    placement.

    A vectorised model (``vectorised = True``, see
    :class:`VectorisedStateSpaceModel`) runs in this process, all particles
    in one array, with the same estimator (the islands' systematic
    resampling draws the same uniforms); results are reproducible for a
    seed but are not the per-particle path's bits. Shipping its steps, a few
    numpy calls each, to workers would not pay, so it takes no engine and
    no ``workers``.

    ``dashboard="127.0.0.1:8787"`` serves a live page of the run at that
    address (port 0: any free one; the URL is printed on ``sys.stderr``)
    while the filter runs: the log-likelihood estimate and the effective
    sample size of every step, and with workers their load, transfers and
    losses (see :class:`Engine`). It closes when the filter returns. With
    ``engine=``, give ``dashboard=`` to that engine instead: its page then
    shows the filter and stays up as long as the engine.
    """
    if islands < 1:
        raise ValueError(f"islands ({islands}) must be at least 1")
    if n < islands:
        raise ValueError(f"{n} particles for {islands} islands: each island needs at least one")
    if n % islands:
        raise ValueError(f"islands ({islands}) must divide the particles ({n})")
    if getattr(model, "vectorised", False):
        if engine is not None or engine_args.get("workers") or engine_args.get("listen"):
            raise ValueError(
                "a vectorised model runs in this process (its step is a few numpy calls, which "
                "shipping to workers would not speed up): drop engine=/workers=/listen=, or give "
                "a per-particle model"
            )
        board = None
        if dashboard is not None:
            board = _start_dashboard(dashboard, f"pf: {type(model).__name__}, {len(data)} observations (vectorised)")
        try:
            return _run_vectorised(model, data, n, islands, seed, board)
        finally:
            if board is not None:
                board.close()
    if engine is not None and dashboard is not None:
        raise ValueError(
            "dashboard= starts the page of the engine particle_filter makes; with engine=, "
            "give dashboard= to that Engine instead"
        )
    own = engine is None
    if engine is None:
        engine_args.setdefault("steps", len(data))
        engine = Engine(Bootstrap(model, data), seed=seed, dashboard=dashboard, **engine_args)
    try:
        return _run(engine, len(data), n, islands, seed)
    finally:
        if own:
            engine.close()


#: The parent id of the vectorised filter's per-step generator: one no
#: island (whose resampling uniform is drawn from (seed, step, island))
#: takes.
_DRAWS = 2**64 - 1


def _shape_error(what: str, got: Any, want: str) -> ValueError:
    return ValueError(f"the model's {what} returned shape {np.shape(got)}, not {want}")


def _ess(w: np.ndarray) -> float:
    """Effective sample size of weights ``w`` (any scale): 1 / sum of the
    squares of the normalised weights; 0 when they are all zero."""
    total = float(w.sum())
    sq = float(np.dot(w, w))
    if not (total > 0.0 and sq > 0.0 and math.isfinite(total) and math.isfinite(sq)):
        return 0.0
    return total * total / sq


def _run_vectorised(
    model: Any, data: Sequence[Any], n: int, islands: int, seed: int, board: Any = None
) -> PfResult:
    m = n // islands
    summary = getattr(model, "summary", None)
    log_z = np.zeros(islands)
    means: List[float] = []
    log_m = math.log(m)
    x: Any = None
    lw = np.zeros((islands, m))
    rows = np.arange(n)
    uniforms, rng_for = _native.call_uniform, _native.call_rng_for
    log_islands = math.log(islands)
    if board is not None:
        board.set_total_steps(len(data))
    for t, y in enumerate(data):
        g = rng_for(seed, t, _DRAWS).generator
        if t == 0:
            x = np.asarray(model.prior(g, n))
            if x.ndim == 0 or x.shape[0] != n:
                raise _shape_error("prior(rng, size)", x, f"({n}, ...)")
        else:
            u = np.array([uniforms(seed, t, r) for r in range(islands)])
            parents = rows.repeat(systematic(lw, m, u).ravel())
            shape = x.shape
            x = np.asarray(model.transition(x[parents], g))
            if x.shape != shape:
                raise _shape_error("transition(x, rng)", x, str(shape))
        lw = np.asarray(model.log_obs(x, y), dtype=np.float64)
        if lw.shape != (n,):
            raise _shape_error("log_obs(x, y)", lw, f"({n},)")
        lw = lw.reshape(islands, m)
        s = np.asarray(summary(x) if summary is not None else x, dtype=np.float64)
        if s.shape != (n,):
            raise _shape_error("summary(x)" if summary is not None else "particles (no summary)", s, f"({n},)")
        # Per island: log(mean w) from its largest log-weight (an island
        # whose weights are all zero adds -inf, as in the per-particle path).
        top = lw.max(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            e = np.exp(lw - top[:, None])
            sums = e.sum(axis=1)
            log_z += top + np.log(sums) - log_m
            if not np.isfinite(top).all():
                log_z[np.isneginf(top)] = -np.inf
            # The weighted mean over all particles: each island's weights
            # rescaled from its largest to the overall largest.
            scale = np.exp(top - top.max())
            means.append(float(scale @ (e * s.reshape(islands, m)).sum(axis=1) / (scale @ sums)))
            if board is not None:
                # Over all particles, every island's weights rescaled alike.
                w = (e * scale[:, None]).ravel()
                ess = _ess(np.where(np.isfinite(w), w, 0.0))
                board.record_pf_step(t + 1, _lse(log_z) - log_islands, ess, n)
    return _result(log_z, means, n, "in process (vectorised)")


def _result(log_z: np.ndarray, means: List[float], n: int, placement: str) -> PfResult:
    islands = len(log_z)
    loglik = _lse(log_z) - math.log(islands)
    rel = np.exp(log_z - loglik)
    se = math.sqrt(float(np.sum((rel - 1.0) ** 2)) / (islands - 1) / islands) if islands > 1 else math.nan
    return PfResult(loglik, se, means, [float(v) for v in log_z], n, placement)


def _run(engine: Engine, steps: int, n: int, islands: int, seed: int) -> PfResult:
    m = n // islands
    ids = engine.reset([None] * n)
    isl = [ids[r * m:(r + 1) * m] for r in range(islands)]
    log_w = [np.zeros(m) for _ in range(islands)]
    log_z = [0.0] * islands
    means: List[float] = []
    watched = engine.dashboard_url is not None
    log_islands = math.log(islands)
    if watched:
        engine._set_total_steps(steps)
    for t in range(steps):
        order: List[int] = []
        counts: List[int] = []
        for r in range(islands):
            counts.extend([1] * m if t == 0 else systematic(log_w[r], m, _native.call_uniform(seed, t, r)).tolist())
            order.extend(isl[r])
        # The inputs take a few values (children counts): pickle and cost
        # each value once.
        distinct = sorted(set(counts))
        pickled = {c: dumps((t, c)) for c in distinct}
        costs = engine._costs([(t, c) for c in distinct])
        cost_of = dict(zip(distinct, costs)) if costs is not None else None
        raw = engine._evolve_raw(
            order, [pickled[c] for c in counts], [cost_of[c] for c in counts] if cost_of is not None else None
        )
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
        w = np.exp(a - lse)
        means.append(float(np.dot(w, np.asarray(all_s))))
        if watched:
            engine._record_pf_step(t + 1, _lse(np.asarray(log_z)) - log_islands, _ess(w), n)
    engine.drop([i for ids_r in isl for i in ids_r])
    return _result(np.asarray(log_z), means, n, engine.placement)
