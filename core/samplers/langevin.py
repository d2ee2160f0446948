"""The Langevin step shared by SGLD, pSGLD and the block-parallel samplers.

Conventions
-----------
Positions, gradients and preconditioners are NamedTuples of arrays with the
same structure. ``nonnegative`` is a tuple of booleans, one per leaf: those
leaves are mirrored (absolute value) after the step, which keeps
non-negative factors non-negative (PARAFAC'18 §III, remark). ``step_size``
is a scalar or, for leaves with a leading chain axis, one value per chain.

Integrators: the Euler-Maruyama step (SGLD) draws fresh noise each step. The
Leimkuhler-Matthews step uses the same gradient and the mean of this step's
and the previous step's draws, (z_k + z_{k+1}) / 2: the chain's invariant law
is then exact for Gaussian targets and O(eps^2)-accurate in general, where
Euler's is O(eps) (Leimkuhler & Matthews 2013; Chen, Ding & Carin 2015 for
stochastic gradients).
"""

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["langevin_step", "mirror", "per_chain", "float_position"]


def mirror(leaf):
    """Reflect a leaf at zero: the absolute value, in place-free form."""
    return np.abs(leaf)


def per_chain(value, leaf, name="step_size"):
    """A scalar unchanged, or an array of per-chain values reshaped to broadcast against ``leaf``.

    Raises
    ------
    ParameterError
        Per-chain values whose shape is not that of the leaf's leading axes (one value per chain).
    """
    if np.ndim(value) == 0:
        return value
    value = np.asarray(value)
    if value.shape != np.shape(leaf)[:value.ndim]:
        raise ParameterError(f"{name}: {value.shape} per-chain values do not match the leading axes of a leaf of "
                             f"shape {np.shape(leaf)} (one value per chain)")
    return value.reshape(value.shape + (1,) * (np.ndim(leaf) - value.ndim))


def float_position(position):
    """``position`` with its integer (or boolean) leaves as float64 arrays; float leaves are kept as they are.

    Raises
    ------
    ParameterError
        On a leaf that is not numbers (the noise is drawn in the leaf's float type).
    """
    leaves = []
    for name, leaf in zip(position._fields, position):
        dtype = np.asarray(leaf).dtype
        if dtype.kind not in "biuf":
            raise ParameterError(f"position leaf {name} has dtype {dtype}: expected real numbers")
        leaves.append(leaf if dtype.kind == "f" else np.asarray(leaf, dtype=np.float64))
    return type(position)(*leaves)


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
    step_size : float or ndarray
        eps, or one eps per chain (the leading axis of every leaf).
    preconditioner : NamedTuple of ndarray, optional
        Diagonal G, leaf by leaf.
    nonnegative : tuple of bool, optional
        Leaves to mirror.
    noise : NamedTuple of ndarray, optional
        Standard normal draws to use instead of drawing from ``rng`` (for the
        Leimkuhler-Matthews step: (z_k + z_{k+1}) / 2, whose variance is 1/2).

    Returns
    -------
    NamedTuple of ndarray
        The new position (inputs are not modified).

    References
    ----------
    ICASSP'16 eq. 3; PARAFAC'18 eq. 6 and 8.
    """
    if nonnegative is not None and (isinstance(nonnegative, (bool, np.bool_)) or len(nonnegative) != len(position)):
        raise ParameterError(f"nonnegative={nonnegative!r}: expected one flag per leaf of the position "
                             f"({', '.join(position._fields)})")  # True met a TypeError, a short tuple an IndexError
    leaves = []
    for i, (x, g) in enumerate(zip(position, gradient)):
        step = per_chain(step_size, x)
        z = noise[i] if noise is not None else rng.standard_normal(np.shape(x), dtype=np.asarray(x).dtype)
        if preconditioner is None:
            new = x + step * g + np.sqrt(2.0 * step) * z
        else:
            G = preconditioner[i]
            new = x + step * (G * g) + np.sqrt(2.0 * step) * np.sqrt(G) * z
        if nonnegative is not None and nonnegative[i]:
            new = mirror(new)
        leaves.append(np.asarray(new, dtype=np.asarray(x).dtype))
    return type(position)(*leaves)
