"""statepipe: a distributed evolve engine for Python models.

States live on worker processes (one Python interpreter each, so no GIL is
shared between workers); the master, written in Rust, batches evolve
requests, places work by its expected cost and steals queued states for
idle workers, forwarding the pickled states untouched. An engine given
workers runs its first step in this process and moves to the workers only
if they are predicted to pay (:attr:`Engine.placement` says where it runs).

A model is any object with

- ``reset(rng) -> state`` (used by :meth:`Engine.reset` with a count),
- ``evolve(state, input, rng) -> list[(state, output)]``: the children of
  ``state`` given ``input``, each with an output (may be empty),
- optionally ``expected_cost(input) -> float``: the relative cost of a call,
  which the master balances work by,
- optionally ``evolve_batch(states, inputs, rng)``: a vectorised evolve,
  used by an in-process engine (``workers=0``).

``rng`` is a :class:`statepipe.Rng`: a lazily made ``numpy.random.Generator``
derived from (run seed, step, parent id) exactly as the Rust engine derives
its generators, so results do not depend on the number of workers.

>>> import statepipe
>>> class Walk:
...     def reset(self, rng):
...         return 0.0
...     def evolve(self, x, _input, rng):
...         y = x + rng.normal()
...         return [(y, y)]
>>> with statepipe.Engine(Walk(), workers=0, seed=1) as e:
...     ids = e.reset(3)
...     out = e.evolve_many({i: None for i in ids})
>>> len(out)
3
"""

from ._native import ModelError, Rng, StatepipeError, WorkerError
from ._engine import Engine, ModelPickleError
from .pf import PfResult, StateSpaceModel, VectorisedStateSpaceModel, particle_filter

__all__ = [
    "Engine",
    "ModelError",
    "ModelPickleError",
    "PfResult",
    "Rng",
    "StateSpaceModel",
    "StatepipeError",
    "VectorisedStateSpaceModel",
    "WorkerError",
    "particle_filter",
]
