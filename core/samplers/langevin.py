"""The Langevin step shared by SGLD, pSGLD and the block-parallel samplers.

Conventions
-----------
Positions, gradients and preconditioners are NamedTuples of arrays with the
same structure. ``nonnegative`` is a tuple of booleans, one per leaf: those
leaves are mirrored (absolute value) after the step, which keeps
non-negative factors non-negative (PARAFAC'18 §III, remark).
"""

import numpy as np

__all__ = ["langevin_step", "mirror"]


def mirror(leaf):
    """Reflect a leaf at zero: the absolute value, in place-free form."""
    return np.abs(leaf)


def langevin_step(rng, position, gradient, step_size, *, preconditioner=None, nonnegative=None, noise=None):
    """One (preconditioned) overdamped Langevin step.

    theta' = theta + eps G grad + sqrt(G) eta,  eta ~ N(0, 2 eps I),
    with G = I without a preconditioner; then mirroring of non-negative leaves.

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the noise (unused when ``noise`` is given).
    position, gradient : NamedTuple of ndarray
        Current point and the (tempered, subsample-scaled) gradient of the
        log target at it.
    step_size : float
        eps.
    preconditioner : NamedTuple of ndarray, optional
        Diagonal G, leaf by leaf.
    nonnegative : tuple of bool, optional
        Leaves to mirror.
    noise : NamedTuple of ndarray, optional
        Standard normal draws to use instead of drawing from ``rng``.

    Returns
    -------
    NamedTuple of ndarray
        The new position (inputs are not modified).

    References
    ----------
    ICASSP'16 eq. 3; PARAFAC'18 eq. 6 and 8.
    """
    leaves = []
    scale = np.sqrt(2.0 * step_size)
    for i, (x, g) in enumerate(zip(position, gradient)):
        z = noise[i] if noise is not None else rng.standard_normal(np.shape(x), dtype=np.asarray(x).dtype)
        if preconditioner is None:
            new = x + step_size * g + scale * z
        else:
            G = preconditioner[i]
            new = x + step_size * (G * g) + scale * np.sqrt(G) * z
        if nonnegative is not None and nonnegative[i]:
            new = mirror(new)
        leaves.append(np.asarray(new, dtype=np.asarray(x).dtype))
    return type(position)(*leaves)
