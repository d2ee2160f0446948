"""Evidence (log marginal likelihood) estimators: STI and Chib's method."""

__all__ = []

from core.evidence.chib import ChibResult, chib_log_marginal_likelihood, chib_poisson_nmf, log_mean_exp  # noqa: E402

__all__ += ["ChibResult", "chib_log_marginal_likelihood", "chib_poisson_nmf", "log_mean_exp"]
