"""Subsample scaling N/N_s and the STI temperature t, applied in one place.

Conventions
-----------
A model sums its log-likelihood over a ``subset`` (``None`` = all data) and
reports ``n_data`` and ``subset_size(subset)``. Everything a stochastic-
gradient sampler needs -- the unbiased full-data estimate (N/N_s) * sum over
the subset, and the tempered gradient of log p(theta) + t log p(x | theta) --
is formed here, not inside models or samplers.

References
----------
ICASSP'16 eq. 9-10; PARAFAC'18 eq. 6-7.
"""

__all__ = ["subset_scale", "log_likelihood_estimate", "tempered_gradient", "tree_add_scaled"]


def subset_scale(model, subset):
    """N / N_s for ``subset`` (1 for the full data)."""
    return model.n_data / model.subset_size(subset)


def tree_add_scaled(a, b, scale):
    """``a + scale * b`` leaf by leaf, for NamedTuples of arrays."""
    return type(a)(*(x + scale * y for x, y in zip(a, b)))


def log_likelihood_estimate(model, theta, subset, *, reference=None):
    """Unbiased estimate of log p(x | theta) from ``subset``.

    Without ``reference``: (N/N_s) sum_{n in S} log p(x_n | theta) (ICASSP'16
    eq. 9). With ``reference = (theta_ref, full_ref)``, where ``full_ref`` is
    log p(x | theta_ref) on all data, the control-variate (difference)
    estimator full_ref + (N/N_s) sum_{n in S} [log p(x_n | theta) -
    log p(x_n | theta_ref)]: still unbiased, and with far less subsampling
    variance when theta stays near theta_ref.
    """
    scale = subset_scale(model, subset)
    if reference is None:
        return scale * model.log_likelihood(theta, subset)
    theta_ref, full_ref = reference
    return full_ref + scale * (model.log_likelihood(theta, subset) - model.log_likelihood(theta_ref, subset))


def tempered_gradient(model, theta, subset, temperature=1.0, *, with_likelihood=False):
    """Gradient of log p(theta) + t (N/N_s) sum_{n in subset} log p(x_n | theta).

    Parameters
    ----------
    model : model object
        Exposes ``grad_log_prior``, ``grad_log_likelihood`` (and
        ``log_likelihood_and_grad`` when ``with_likelihood``).
    theta : NamedTuple of ndarray
        Position.
    subset : object or None
        The data subset that drives this update.
    temperature : float
        t in [0, 1]; at t = 0 the likelihood is not evaluated at all.
    with_likelihood : bool
        Also return the (N/N_s)-scaled log-likelihood of ``theta`` on ``subset``.

    Returns
    -------
    gradient : NamedTuple of ndarray
    likelihood_gradient_mean : NamedTuple of ndarray or None
        (t / N_s) sum_{n in subset} grad log p(x_n | theta), the quantity
        pSGLD's preconditioner averages (PARAFAC'18 eq. 9); None at t = 0.
    log_likelihood : float, only when ``with_likelihood``
    """
    prior_gradient = model.grad_log_prior(theta)
    if temperature == 0.0 and not with_likelihood:
        return prior_gradient, None
    scale = subset_scale(model, subset)
    if with_likelihood:
        value, likelihood_gradient = model.log_likelihood_and_grad(theta, subset)
    else:
        likelihood_gradient = model.grad_log_likelihood(theta, subset)
    gradient = tree_add_scaled(prior_gradient, likelihood_gradient, temperature * scale)
    mean = type(theta)(*(temperature * scale / model.n_data * g for g in likelihood_gradient))
    if with_likelihood:
        return gradient, mean, scale * value
    return gradient, mean
