"""The one loop that runs a Markov chain.

Kernels know nothing of burn-in, thinning, storage or progress: a kernel is
``step_fn(rng, state, iteration) -> (state, info)`` and this driver does the
rest. Samples are stored after burn-in (every ``thin``-th), infos for every
iteration, so diagnostics of the warm-up stay available.
"""

from typing import Any, NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least
from sepsti.core.errors import ParameterError
from sepsti.core.progress import progress_bar

__all__ = ["ChainResult", "run_chain", "stack_tree"]


class ChainResult(NamedTuple):
    """What a chain run returns.

    Attributes
    ----------
    samples : pytree of ndarray
        ``transform(state)`` of every kept iteration, stacked on a new first axis.
    info : pytree of ndarray
        The kernel's info of every iteration (burn-in included), stacked.
    state : Any
        The final state, to continue the chain.
    num_divergent : int
        Iterations after burn-in whose info flagged ``is_divergent``.
    """

    samples: Any
    info: Any
    state: Any
    num_divergent: int


def stack_tree(items):
    """Stack a list of equally shaped NamedTuples, dicts or arrays along a new first axis."""
    first = items[0]
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(stack_tree([getattr(x, f) for x in items]) for f in first._fields))
    if isinstance(first, dict):
        return {k: stack_tree([x[k] for x in items]) for k in first}
    if isinstance(first, tuple):
        return tuple(stack_tree(list(col)) for col in zip(*items))
    return np.stack([np.asarray(x) for x in items])


def run_chain(step_fn, state, rng, *, num_steps, burn_in=0, thin=1, transform=None,
              progress=False, desc=None):
    """Run ``num_steps`` iterations of a kernel and keep the post-burn-in samples.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(rng, state, iteration) -> (state, info)``; ``iteration``
        counts from 1.
    state : Any
        Initial state. If it has a ``logdensity`` field it must be finite.
    rng : numpy.random.Generator
        The chain's random stream.
    num_steps : int
        Total iterations, burn-in included.
    burn_in : int
        Iterations whose samples are not kept.
    thin : int
        Keep every ``thin``-th post-burn-in sample.
    transform : callable, optional
        Maps a state to what is stored (default: ``state.position`` if the
        state has one, else the state).
    progress : bool
        Enable a progress bar on stderr. It is drawn when stderr is a terminal, when bars
        are forced (a command's ``--progress``) or with ``SEPSTI_PROGRESS=1``
        (:mod:`sepsti.core.progress`).
    desc : str, optional
        Label of the progress bar.

    Returns
    -------
    ChainResult

    Raises
    ------
    ParameterError
        On a non-finite initial log density, counts that are not integers (2.0 included)
        or are inconsistent, or an ``rng`` that is not a Generator.
    """
    num_steps = integer_at_least("num_steps", num_steps, 1)
    burn_in = integer_at_least("burn_in", burn_in, 0)
    thin = integer_at_least("thin", thin, 1)
    if burn_in >= num_steps:
        raise ParameterError(f"burn_in={burn_in} must be below num_steps={num_steps}: nothing would be kept")
    if not isinstance(rng, np.random.Generator):  # a seed met an AttributeError in the first step
        raise ParameterError(f"rng={rng!r}: expected a numpy.random.Generator (sepsti.core.random.stream(seed))")
    logdensity = getattr(state, "logdensity", None)
    if logdensity is not None and not np.all(np.isfinite(logdensity)):
        raise ParameterError(f"initial log density is {logdensity}: start the chain where the density is finite")
    if transform is None:
        transform = (lambda s: s.position) if hasattr(state, "position") else (lambda s: s)

    kept, infos = [], []
    num_divergent = 0
    with progress_bar(num_steps, desc=desc, enabled=progress) as bar:
        for iteration in range(1, num_steps + 1):
            state, info = step_fn(rng, state, iteration)
            infos.append(info)
            if iteration > burn_in:
                if getattr(info, "is_divergent", False):
                    num_divergent += 1
                if (iteration - burn_in - 1) % thin == 0:
                    kept.append(transform(state))
            bar.update()
    return ChainResult(stack_tree(kept), stack_tree(infos) if infos and infos[0] is not None else None,
                       state, num_divergent)
