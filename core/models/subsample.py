"""Subsample scaling N/N_s, the STI temperature t and control variates, applied in one place.

Conventions
-----------
A model sums its log-likelihood over a ``subset`` (``None`` = all data) and
reports ``n_data`` and ``subset_size(subset)``. Everything a stochastic-
gradient sampler needs -- the unbiased full-data estimate (N/N_s) * sum over
the subset, and the tempered gradient of log p(theta) + t log p(x | theta) --
is formed here, not inside models or samplers.

Batched models (``model.batched``) take positions whose leaves carry a
leading chain axis and return one log-likelihood per chain; the temperature
may then be an array with one entry per chain. Everything here broadcasts a
per-chain scalar over the remaining axes of each leaf.

A :class:`Reference` (a position with its full-data log-likelihood and
gradient) turns the plain subsample estimates into control-variate (difference)
estimates: unbiased, and nearly free of subsampling noise while the chain stays
close to the reference (Baker, Fearnhead, Fox & Nemeth 2019 for the gradient).

References
----------
ICASSP'16 eq. 9-10; PARAFAC'18 eq. 6-7; Baker et al. (2019), "Control
variates for stochastic gradient MCMC", Stat. Comput. 29.
"""

from typing import Any, NamedTuple

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["Reference", "index_subset", "subset_scale", "log_likelihood_estimate", "tempered_gradient",
           "tree_add_scaled", "make_reference", "tree_vdot"]


class Reference(NamedTuple):
    """A control-variate reference point.

    Attributes
    ----------
    position : NamedTuple of ndarray
    log_likelihood : float or ndarray
        log p(x | position) on all data (one per chain when batched).
    gradient : NamedTuple of ndarray or None
        Its full-data gradient; ``None`` for the zeroth-order (difference)
        estimator of the log-likelihood only.
    """

    position: Any
    log_likelihood: Any
    gradient: Any = None


def index_subset(subset):
    """``subset`` as an integer index array; a boolean mask (which NumPy would read as indices 0 and 1, or
    count by its length) is refused."""
    subset = np.asarray(subset)
    if subset.dtype.kind not in "iu":
        hint = "; give np.flatnonzero(mask) for a mask" if subset.dtype.kind == "b" else ""
        raise ParameterError(f"subset: expected integer indices, got dtype {subset.dtype}{hint}")
    return subset


def subset_scale(model, subset):
    """N / N_s for ``subset`` (1 for the full data)."""
    size = model.subset_size(subset)
    if not size:  # an empty subset scales nothing up (it met a ZeroDivisionError)
        raise ParameterError("subset: no data entries; a subset holds at least one")
    return model.n_data / size


def _expand(scale, leaf):
    """A per-chain ``scale`` of shape (C,) reshaped to broadcast against ``leaf`` of shape (C, ...)."""
    if np.ndim(scale) == 0:
        return float(scale)  # a Python float keeps float32 leaves float32
    scale = np.asarray(scale)
    return scale.reshape(scale.shape + (1,) * (np.ndim(leaf) - scale.ndim))


def tree_add_scaled(a, b, scale):
    """``a + scale * b`` leaf by leaf, for NamedTuples of arrays; ``scale`` may hold one value per chain."""
    return type(a)(*(x + _expand(scale, y) * y for x, y in zip(a, b)))


def tree_vdot(a, b, batch_ndim=0):
    """Sum over every leaf of a * b, keeping the first ``batch_ndim`` (chain) axes."""
    total = 0.0
    for x, y in zip(a, b):
        product = np.asarray(x) * np.asarray(y)
        total = total + product.sum(axis=tuple(range(batch_ndim, product.ndim)))
    return total


def make_reference(model, theta, *, with_gradient=True):
    """The :class:`Reference` at ``theta``: one full-data pass."""
    if with_gradient:
        value, gradient = model.log_likelihood_and_grad(theta, None)
        return Reference(theta, value, gradient)
    return Reference(theta, model.log_likelihood(theta, None), None)


def _as_reference(reference):
    if reference is None or isinstance(reference, Reference):
        return reference
    theta_ref, full_ref = reference
    return Reference(theta_ref, full_ref, None)


def _difference(a, b):
    return type(a)(*(x - y for x, y in zip(a, b)))


def log_likelihood_estimate(model, theta, subset, *, reference=None):
    """Unbiased estimate of log p(x | theta) from ``subset``.

    Without ``reference``: (N/N_s) sum_{n in S} log p(x_n | theta) (ICASSP'16
    eq. 9). With ``reference = (theta_ref, full_ref)`` (or a
    :class:`Reference` without gradient), where ``full_ref`` is
    log p(x | theta_ref) on all data, the difference estimator
    full_ref + (N/N_s) sum_{n in S} [log p(x_n | theta) - log p(x_n | theta_ref)].
    With a :class:`Reference` carrying the full-data gradient g_ref, the
    first-order one: full_ref + g_ref . d + (N/N_s) sum_{n in S}
    [log p(x_n | theta) - log p(x_n | theta_ref) - grad log p(x_n | theta_ref) . d],
    d = theta - theta_ref, whose subsampling variance is O(|d|^4) instead of
    O(|d|^2) (zero for a log-likelihood quadratic in theta). All are unbiased
    for ``subset`` drawn independently of ``theta``.
    """
    reference = _as_reference(reference)
    scale = subset_scale(model, subset)
    if reference is None:
        return scale * model.log_likelihood(theta, subset)
    if reference.gradient is None:
        return reference.log_likelihood + scale * (model.log_likelihood(theta, subset)
                                                   - model.log_likelihood(reference.position, subset))
    value = model.log_likelihood(theta, subset)
    value_ref, gradient_ref = model.log_likelihood_and_grad(reference.position, subset)
    return _first_order(reference, theta, value, value_ref, gradient_ref, scale)


def _first_order(reference, theta, value, value_ref, gradient_ref, scale):
    batch_ndim = np.ndim(reference.log_likelihood)
    d = _difference(theta, reference.position)
    return (reference.log_likelihood + tree_vdot(reference.gradient, d, batch_ndim)
            + scale * (value - value_ref - tree_vdot(gradient_ref, d, batch_ndim)))


def _check_temperature(temperature):
    """Refuse a temperature outside [0, 1] (-1 or 2 sampled an improper or another target; NaN diverged)."""
    if isinstance(temperature, float) and 0.0 <= temperature <= 1.0:  # the common case, at every step
        return
    array = np.asarray(temperature)
    if isinstance(temperature, (bool, np.bool_)) or array.dtype.kind not in "iuf" or not (
            array.size and array.min() >= 0 and array.max() <= 1):  # NaN fails both
        raise ParameterError(f"temperature={temperature!r} must lie in [0, 1] (one per chain for batched models)")


def tempered_gradient(model, theta, subset, temperature=1.0, *, with_likelihood=False, reference=None):
    """Gradient of log p(theta) + t (N/N_s) sum_{n in subset} log p(x_n | theta).

    Parameters
    ----------
    model : model object
        Exposes ``grad_log_prior``, ``grad_log_likelihood`` (and
        ``log_likelihood_and_grad`` when ``with_likelihood`` or ``reference``).
    theta : NamedTuple of ndarray
        Position (leaves with a leading chain axis for batched models).
    subset : object or None
        The data subset that drives this update.
    temperature : float or ndarray
        t in [0, 1] (one per chain for batched models); at a scalar t = 0 the
        likelihood is not evaluated at all unless ``with_likelihood``.
    with_likelihood : bool
        Also return the estimate of log p(x | theta) on ``subset``
        (:func:`log_likelihood_estimate`, with the same ``reference``).
    reference : Reference, optional
        With a full-data gradient, the likelihood gradient is the control-
        variate estimate g_ref + (N/N_s) sum_{n in S} [grad log p(x_n | theta)
        - grad log p(x_n | theta_ref)] (SGLD-CV, Baker et al. 2019); without
        one, only the log-likelihood estimate uses the reference.

    Returns
    -------
    gradient : NamedTuple of ndarray
    likelihood_gradient_mean : NamedTuple of ndarray or None
        (t / N) times the likelihood-gradient estimate, i.e. (t / N_s)
        sum_{n in subset} grad log p(x_n | theta) without a reference -- the
        quantity pSGLD's preconditioner averages (PARAFAC'18 eq. 9); None at
        a scalar t = 0.
    log_likelihood : float or ndarray, only when ``with_likelihood``
    """
    _check_temperature(temperature)
    reference = _as_reference(reference)
    prior_gradient = model.grad_log_prior(theta)
    if np.ndim(temperature) == 0 and temperature == 0.0 and not with_likelihood:
        return prior_gradient, None
    scale = subset_scale(model, subset)
    if with_likelihood or (reference is not None and reference.gradient is not None):
        value, likelihood_gradient = model.log_likelihood_and_grad(theta, subset)
    else:
        likelihood_gradient = model.grad_log_likelihood(theta, subset)
    estimate = None
    if reference is not None and reference.gradient is not None:
        value_ref, gradient_ref = model.log_likelihood_and_grad(reference.position, subset)
        if with_likelihood:
            estimate = _first_order(reference, theta, value, value_ref, gradient_ref, scale)
        likelihood_gradient = tree_add_scaled(reference.gradient, _difference(likelihood_gradient, gradient_ref),
                                              scale)
        weight = temperature if np.ndim(temperature) == 0 else np.asarray(temperature)
    else:
        if with_likelihood:
            estimate = (scale * value if reference is None else
                        reference.log_likelihood + scale * (value - model.log_likelihood(reference.position, subset)))
        weight = (float(temperature) if np.ndim(temperature) == 0 else np.asarray(temperature)) * scale
    gradient = tree_add_scaled(prior_gradient, likelihood_gradient, weight)
    mean = type(theta)(*(_expand(weight / model.n_data, g) * g for g in likelihood_gradient))
    if with_likelihood:
        return gradient, mean, estimate
    return gradient, mean
