"""Evidence (log marginal likelihood) estimators: STI and Chib's method."""

__all__ = []

from core.evidence.chib import ChibResult, chib_log_marginal_likelihood, chib_poisson_nmf, log_mean_exp  # noqa: E402

__all__ += ["ChibResult", "chib_log_marginal_likelihood", "chib_poisson_nmf", "log_mean_exp"]

from core.evidence.sti import (STIResult, integration_weights, stochastic_thermodynamic_integration,  # noqa: E402
                               temperature_grid, thermodynamic_integral)

__all__ += ["STIResult", "integration_weights", "stochastic_thermodynamic_integration", "temperature_grid",
            "thermodynamic_integral"]

from core.evidence.parafac_rank import RankSelection, select_parafac_rank  # noqa: E402

__all__ += ["RankSelection", "select_parafac_rank"]
