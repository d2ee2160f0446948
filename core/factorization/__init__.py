"""Factorization by EM / MAP: Poisson NMF (KL multiplicative updates) with optional priors; CORCONDIA."""

from core.factorization.corcondia import CorcondiaResult, core_consistency, corcondia
from core.factorization.em import EMResult, initialize_nmf, poisson_log_likelihood, poisson_nmf_em

__all__ = ["EMResult", "initialize_nmf", "poisson_log_likelihood", "poisson_nmf_em",
           "CorcondiaResult", "core_consistency", "corcondia"]

from core.factorization.pltf_em import PLTFEMResult, initialize_pltf, pltf_em  # noqa: E402

__all__ += ["PLTFEMResult", "initialize_pltf", "pltf_em"]

from core.factorization.map import MAPResult, initialize_nmf_gpp, limit_blas_threads, map_nmf_gpp  # noqa: E402

__all__ += ["MAPResult", "initialize_nmf_gpp", "limit_blas_threads", "map_nmf_gpp"]
