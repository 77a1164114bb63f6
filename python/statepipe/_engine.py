"""The engine: states held in this process or on worker processes."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._codec import PROTOCOL
from ._codec import dumps as _dumps, loads as _loads

_log = logging.getLogger("statepipe")

_PLACEMENTS = ("auto", "process", "workers")


class ModelError(_native.ModelError):
    """The model raised an exception while evolving a state.

    Attributes: ``state`` (the id of the state being evolved), ``step``
    (the engine's ``evolve_many`` count, from 1) and ``worker_traceback``
    (the traceback as the process that ran the model printed it). Nothing
    is lost: every state that raised is kept, unevolved, under a new id
    (``kept``: ``{state: id it is kept under}``), and every other state of
    the step was evolved (``results``: what ``evolve_many`` would have
    returned for them, ``{parent: [(child id, output), ...]}``).
    """

    @property
    def state(self) -> int:
        return int(self.args[1])

    @property
    def step(self) -> int:
        return int(self.args[2])

    @property
    def worker_traceback(self) -> str:
        return str(self.args[3])

    @property
    def kept(self) -> Dict[int, int]:
        return {int(p): int(c) for p, c in self.args[4]} if len(self.args) > 4 else {}

    @property
    def results(self) -> Dict[int, List[Tuple[int, Any]]]:
        if len(self.args) <= 5:
            return {}
        return {p: [(c, _loads(o)) for c, o in kids] for p, kids in self.args[5]}

    def __str__(self) -> str:
        return str(self.args[0])


class ModelPickleError(_native.StatepipeError, TypeError):
    """The model (or a state or input) cannot be pickled, so it cannot be
    sent to workers."""


def _pickle_model(model: Any) -> bytes:
    try:
        import cloudpickle
    except ImportError as e:  # pragma: no cover - a dependency of the package
        raise ModelPickleError("statepipe needs cloudpickle to send models: pip install cloudpickle") from e
    try:
        return cloudpickle.dumps(model, protocol=PROTOCOL)
    except Exception as e:
        raise ModelPickleError(
            f"cannot pickle the model {type(model).__name__!r} to send it to the workers: "
            f"{type(e).__name__}: {e} (an attribute such as an open file, a lock or a "
            "connection cannot travel; create it lazily in the model's methods)"
        ) from e


def _start_dashboard(addr: str, title: str) -> "_native.NativeDashboard":
    """Starts a run's live page at ``addr`` and prints its banner (the URL,
    a token hint, a warning off loopback) on ``sys.stderr``, where a
    terminal and a notebook both show it."""
    if not isinstance(addr, str):
        raise TypeError(f"dashboard must be an address 'HOST:PORT' (a str), not {type(addr).__name__}")
    board = _native.NativeDashboard(addr, title)
    try:
        print(board.banner, file=sys.stderr, flush=True)
    except Exception:  # no usable stderr (pythonw): the URL is still dashboard_url
        pass
    return board


def _check_model(model: Any) -> None:
    if not callable(getattr(model, "evolve", None)):
        raise TypeError(
            f"a statepipe model needs an evolve(state, input, rng) method; {type(model).__name__!r} has none"
        )


class Engine:
    """Holds states and evolves them with ``model``.

    - ``Engine(model, workers=N)`` evolves the first step in this process,
      timing the model's calls, and then stays in process or moves the
      states to ``N`` worker processes on this machine (``python -m
      statepipe.worker``, the caller's interpreter and ``sys.path``,
      killed when the engine closes), whichever it predicts is faster over
      ``steps`` steps (``None``: unknown, only the time of a step decides).
      It is the rule of the Rust ``statepipe_cluster::Auto`` engine and of
      ``statepipe pf``: a model whose call costs microseconds loses to its
      own messaging on workers. :attr:`placement` says where it ran and
      why (also logged at INFO on the ``statepipe`` logger).
      ``placement="workers"`` starts the workers at once and keeps every
      step there.
    - ``Engine(model, workers=N, listen="HOST:PORT", secret=S)`` waits for
      ``N`` workers started elsewhere with ``statepipe-worker --connect
      HOST:PORT`` and the same secret (``STATEPIPE_SECRET``).
    - ``Engine(model, workers=0)`` (or ``in_process=True``, or
      ``placement="process"``) runs the model in this process: no pickling
      of the model, no workers. A model with ``evolve_batch`` is then
      called once per step on all the named states (``vectorised=False``
      turns that off); see :class:`_Batched`.

    In process the model runs on the calling thread (Python holds the
    GIL), one state after another. Every random number derives from
    ``seed``, the step and the parent's id, so results are the same bits
    for any number of workers, in process or moved.

    ``dashboard="127.0.0.1:8787"`` (any of the above) serves a live,
    read-only page of the run at that address (port 0: any free one) until
    the engine closes: steps and their times, each worker's load and
    transfers, losses and recoveries, and the particle filter's
    log-likelihood and effective sample size. The URL is printed on
    ``sys.stderr`` and is :attr:`dashboard_url`. It binds only the address
    given and warns when that is not loopback; with
    ``STATEPIPE_DASHBOARD_TOKEN`` set every request must carry the token.
    In process (no master) the page shows the particle filter's progress
    only.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        model: Any,
        workers: int = 0,
        *,
        listen: Optional[str] = None,
        secret: Optional[str] = None,
        seed: int = 0,
        in_process: bool = False,
        pins: Sequence[int] = (),
        timeout: float = 60.0,
        python: Optional[str] = None,
        vectorised: bool = True,
        placement: str = "auto",
        steps: Optional[int] = None,
        dashboard: Optional[str] = None,
    ) -> None:
        self._board: Optional[_native.NativeDashboard] = None
        _check_model(model)
        if placement not in _PLACEMENTS:
            raise ValueError(f"placement must be one of {', '.join(_PLACEMENTS)}, not {placement!r}")
        if steps is not None and steps < 0:
            raise ValueError(f"steps must be >= 0, not {steps}")
        timeout = float(timeout)
        if not (0 < timeout < 1e9):  # NaN fails too
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout}")
        self.model = model
        self.seed = int(seed)
        self._reset_epoch = 0
        self._told = False
        if placement == "process":
            in_process = True
        if placement == "workers" and (in_process or (workers == 0 and listen is None)):
            raise ValueError('placement="workers" needs workers >= 1 (and not in_process=True)')
        local = in_process or (workers == 0 and listen is None)
        if not local and workers < 1:
            raise ValueError(f"workers must be >= 1 with listen=, not {workers}")
        pickled = b"" if local else _pickle_model(model)
        if listen is not None and not local:
            secret = secret if secret is not None else os.environ.get("STATEPIPE_SECRET")
            if not secret:
                raise ValueError("listen= needs a secret (secret= or STATEPIPE_SECRET), the one the workers are given")
        if dashboard is not None:
            title = getattr(model, "_statepipe_title", None) or f"statepipe engine: {type(model).__name__}"
            self._board = _start_dashboard(dashboard, str(title))
        try:
            self._start(model, workers, listen, secret, pickled, local, pins, timeout, python, vectorised,
                        placement, steps)
        except BaseException:
            if self._board is not None:
                self._board.close()
            raise

    def _start(
        self,
        model: Any,
        workers: int,
        listen: Optional[str],
        secret: Optional[str],
        pickled: bytes,
        local: bool,
        pins: Sequence[int],
        timeout: float,
        python: Optional[str],
        vectorised: bool,
        placement: str,
        steps: Optional[int],
    ) -> None:
        board = self._board
        # What add_workers starts: the workers of placement="workers".
        self._command = [python or sys.executable, "-m", "statepipe.worker", "--sys-path", os.pathsep.join(sys.path)]
        self._pins = list(pins)
        self._timeout = timeout
        if local:
            if vectorised and callable(getattr(model, "evolve_batch", None)):
                self._native = _Batched(model, self.seed)  # type: ignore[assignment]
            else:
                self._native = _native.NativeEngine.local(model, b"", self.seed)
            return
        if listen is not None:
            assert secret is not None
            self._native = _native.NativeEngine.listen(
                model, pickled, self.seed, workers, listen, secret, timeout, board
            )
        else:
            cmd = self._command
            if placement == "workers":
                self._native = _native.NativeEngine.spawn(
                    model, pickled, self.seed, workers, cmd, list(pins), timeout, board
                )
            else:
                self._native = _native.NativeEngine.auto(
                    model, pickled, self.seed, workers, cmd, list(pins), timeout, steps, board
                )

    # -- lifecycle -----------------------------------------------------
    def close(self) -> None:
        """Shuts the workers down and forgets every state; stops the
        dashboard (its port is closed when this returns)."""
        try:
            self._native.close()
        finally:
            board, self._board = getattr(self, "_board", None), None
            if board is not None:
                board.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def workers(self) -> int:
        """Worker processes (0: in this process, including an engine that
        chose to stay or has not chosen yet)."""
        return self._native.workers

    @property
    def placement(self) -> str:
        """Where the states are evolved, in one line: ``'in process'``,
        ``'on N workers'``, or an engine's choice and its reasons."""
        if isinstance(self._native, _Batched):
            return "in process (evolve_batch)"
        return self._native.placement

    @property
    def step(self) -> int:
        """``evolve_many`` calls so far."""
        return self._native.step

    @property
    def dashboard_url(self) -> Optional[str]:
        """The live page's URL (``dashboard=``); None without one, or once
        the engine is closed."""
        board = self._board
        return board.url if board is not None and not board.closed else None

    def _set_total_steps(self, n: int) -> None:
        """Tells the dashboard, if any, how many steps the run takes."""
        if self._board is not None:
            self._board.set_total_steps(n)

    def _record_pf_step(self, step: int, loglik: float, ess: float, particles: int) -> None:
        """Shows the particle filter's step ``step`` (from 1) on the
        dashboard, if any: the log-likelihood estimate so far and the
        effective sample size of the step's normalised weights."""
        if self._board is not None:
            self._board.record_pf_step(step, loglik, ess, particles)

    def pids(self) -> List[int]:
        """Process ids of the workers this engine started."""
        return self._native.pids()

    def stats(self) -> str:
        """The master's per-worker statistics, as a table."""
        return self._native.stats_table()

    # -- workers joining and leaving mid-run ---------------------------
    def _on_workers(self) -> "_native.NativeEngine":
        if isinstance(self._native, _Batched):
            raise _native.StatepipeError(
                "only an engine on workers from the start adds or retires workers: "
                'make it with placement="workers" (or listen=)'
            )
        return self._native

    def add_workers(self, n: int, *, timeout: Optional[float] = None) -> None:
        """Starts ``n`` more worker processes on this machine (``python -m
        statepipe.worker``, as ``placement="workers"`` does) and admits
        them between steps, waiting ``timeout`` seconds (default: the
        engine's) for them to join. From the next :meth:`evolve_many` on
        they take states: the master's start-of-step rebalance and its
        steals give them work. Results do not change.

        Only an engine on workers from the start (``placement="workers"``
        or ``listen=``) adds workers; the others raise
        :class:`StatepipeError`. A ``listen=`` engine also admits, at the
        start of each step, any remote worker that joined its address."""
        if int(n) < 1:
            raise ValueError(f"add_workers needs n >= 1, not {n}")
        t = self._timeout if timeout is None else float(timeout)
        self._on_workers().add_workers(int(n), self._command, self._pins, t)

    def retire_workers(self, which: Union[int, Sequence[int]]) -> List[int]:
        """Retires workers between steps and returns their indices.

        ``which`` is a count ``n`` (the ``n`` workers that joined last) or
        a list of worker indices (their order of joining, as in
        :meth:`worker_stats`). Each goes the way of a worker sent SIGTERM:
        its states move to the workers that stay, a replication round
        commits without it, and it exits 0 (:meth:`exited_workers` shows
        the exit of those this engine started). Nothing is lost or
        recovered, so results do not change. Raises
        :class:`StatepipeError`, retiring nothing, for an index that names
        no worker taking states, or when none would stay."""
        native = self._on_workers()
        if isinstance(which, int):
            staying = native.staying_workers()
            if not 0 < which < len(staying):
                raise ValueError(
                    f"retire_workers({which}): {len(staying)} workers take states; retire from 1 to {len(staying) - 1}"
                )
            ids = staying[-which:]
        else:
            ids = [int(w) for w in which]
        native.retire_workers(ids)
        return ids

    def staying_workers(self) -> List[int]:
        """The indices of the workers that take states now (not retired,
        left or lost), in the order they joined."""
        return self._on_workers().staying_workers()

    def worker_stats(self) -> List[Dict[str, int]]:
        """Each worker's counters, in the order they joined (empty in
        process): ``evolved`` (calls), ``batches``, ``stolen_states`` and
        ``rebalanced_states`` (states moved to it), ``left`` (1 once it
        left or was retired)."""
        if isinstance(self._native, _Batched):
            return []
        return [dict(w) for w in self._native.worker_stats()]

    def exited_workers(self) -> Dict[int, int]:
        """Worker processes this engine started that have exited since the
        last call: ``{pid: exit code}`` (minus the signal's number for one
        a signal ended). A retired worker exits 0."""
        if isinstance(self._native, _Batched):
            return {}
        return dict(self._native.exited())

    # -- operations ----------------------------------------------------
    def reset(self, states: Union[int, Iterable[Any]]) -> List[int]:
        """Forgets every state and holds new ones; returns their ids.

        ``states`` is a list of states, or a count ``n``: then the model's
        ``reset(rng)`` makes each, the k-th with the generator of
        (seed, reset epoch, k), in this process.
        """
        if isinstance(states, int):
            self._reset_epoch += 1
            reset = getattr(self.model, "reset", None)
            if not callable(reset):
                raise TypeError("reset(n) needs a model with a reset(rng) method; pass the states instead")
            states = [reset(_native.call_rng_for(self.seed ^ 0x5EED, self._reset_epoch, k)) for k in range(states)]
        if isinstance(self._native, _Batched):
            return self._native.reset(list(states))
        return self._native.reset_states([_dumps(s) for s in states])

    def evolve_many(self, inputs: Mapping[int, Any]) -> Dict[int, List[Tuple[int, Any]]]:
        """Evolves each named state with its input.

        Returns ``{parent: [(child id, output), ...]}``; each parent is
        replaced by its children. Raises :class:`ModelError` if the model
        raised (the first such state in ``inputs``' order).
        """
        if isinstance(self._native, _Batched):
            return self._native.evolve(inputs)
        ids = list(inputs.keys())
        objs = [inputs[i] for i in ids]
        raw = self._evolve_raw(ids, [_dumps(v) for v in objs], self._costs(objs))
        return {p: [(c, _loads(o)) for c, o in kids] for p, kids in raw}

    def _costs(self, inputs: Sequence[Any]) -> Optional[List[float]]:
        """The model's ``expected_cost`` of each input, computed here before
        pickling (the master reads it from the input's bytes, without
        Python); None in process, where nothing balances by cost."""
        cost = getattr(self.model, "expected_cost", None)
        if cost is None or not self._native.workers:
            return None
        return [float(cost(v)) for v in inputs]

    def _evolve_raw(
        self, ids: List[int], inputs: List[bytes], costs: Optional[List[float]] = None
    ) -> List[Tuple[int, List[Tuple[int, bytes]]]]:
        try:
            return self._native.evolve_many(ids, inputs, costs)
        except _native.ModelError as e:
            if isinstance(e, ModelError):
                raise
            raise ModelError(*e.args) from None
        finally:
            if not self._told and self._native.step:
                self._told = True
                _log.info("statepipe engine: %s", self.placement)

    def fetch(self, ids: Sequence[int]) -> List[Any]:
        """Copies of the named states, in order."""
        if isinstance(self._native, _Batched):
            return self._native.fetch(ids)
        return [_loads(b) for b in self._native.fetch_states(list(ids))]

    def drop(self, ids: Sequence[int]) -> None:
        """Forgets the named states."""
        if isinstance(self._native, _Batched):
            return self._native.drop(ids)
        self._native.drop_states(list(ids))


class _Batched:
    """An in-process engine for a vectorised model: states are rows of one
    numpy array, and each ``evolve_many`` is one call

        model.evolve_batch(states, inputs, rng) -> (parents, children, outputs)

    with ``states`` the named states stacked (axis 0), ``inputs`` their
    inputs as an array, and ``rng`` a numpy Generator derived from (seed,
    step). It returns, per child, the row of its parent in ``states``
    (non-decreasing), the children stacked, and their outputs (a sequence).
    Results are reproducible for a seed, but not the same bits as the
    per-state path (one generator per step, not one per state).

    Pickled bytes never appear: it mirrors NativeEngine's methods on
    Python objects, and :class:`Engine` skips its own pickling for it.
    """

    workers = 0

    def __init__(self, model: Any, seed: int) -> None:
        self.model, self.seed, self.step = model, seed, 0
        self._next = 1
        self._row: Dict[int, int] = {}
        self._ids: List[int] = []
        self._states: Any = None

    def _store(self, ids: List[int], states: Any) -> None:
        import numpy as np

        self._ids = list(ids)
        self._states = np.asarray(states)
        self._row = {i: k for k, i in enumerate(self._ids)}

    def _fresh(self, n: int) -> List[int]:
        ids = list(range(self._next, self._next + n))
        self._next += n
        return ids

    def pids(self) -> List[int]:
        return []

    def stats_table(self) -> str:
        return ""

    def close(self) -> None:
        self._store([], [])

    def _rows(self, ids: Sequence[int]) -> List[int]:
        missing = [i for i in ids if i not in self._row]
        if missing:
            raise _native.StatepipeError(f"{len(missing)} unknown state ids: {missing[:8]}")
        return [self._row[i] for i in ids]

    def reset(self, states: List[Any]) -> List[int]:
        ids = self._fresh(len(states))
        self._store(ids, states)
        return ids

    def evolve(self, inputs: Mapping[int, Any]) -> Dict[int, List[Tuple[int, Any]]]:
        import numpy as np

        ids = list(inputs.keys())
        rows = self._rows(ids)
        self.step += 1
        rng = _native.call_rng_for(self.seed, self.step, 0).generator
        parents, children, outputs = self.model.evolve_batch(
            self._states[rows], np.asarray([inputs[i] for i in ids]), rng
        )
        parents = np.asarray(parents, dtype=np.int64)
        if len(parents) != len(children) or len(parents) != len(outputs):
            raise TypeError("evolve_batch must return (parents, children, outputs) of one length")
        if len(parents) and (np.any(np.diff(parents) < 0) or parents[0] < 0 or parents[-1] >= len(ids)):
            raise TypeError("evolve_batch's parents must be non-decreasing rows of the states it was given")
        kid_ids = self._fresh(len(parents))
        out: Dict[int, List[Tuple[int, Any]]] = {i: [] for i in ids}
        for k, p in enumerate(parents.tolist()):
            out[ids[p]].append((kid_ids[k], outputs[k]))
        keep = np.ones(len(self._ids), dtype=bool)
        keep[rows] = False
        kept = [i for i, f in zip(self._ids, keep) if f]
        states = np.concatenate([self._states[keep], np.asarray(children).reshape((-1,) + self._states.shape[1:])])
        self._store(kept + kid_ids, states)
        return out

    def fetch(self, ids: Sequence[int]) -> List[Any]:
        return [self._states[r] for r in self._rows(ids)]

    def drop(self, ids: Sequence[int]) -> None:
        rows = set(self._rows(ids))
        keep = [r for r in range(len(self._ids)) if r not in rows]
        self._store([self._ids[r] for r in keep], self._states[keep])
