"""Models: log-likelihoods, priors and their gradients on data subsets."""

from core.models.poisson_parafac import ParafacFactors, PoissonParafac, reconstruct

__all__ = ["ParafacFactors", "PoissonParafac", "reconstruct"]

from core.models.pltf import Contraction, PLTFModel, SourceLayout, gamma_log_pdf, parse_spec, pltf_model  # noqa: E402

__all__ += ["Contraction", "PLTFModel", "SourceLayout", "gamma_log_pdf", "parse_spec", "pltf_model"]

from core.models.gaussian_additive import GaussianAdditiveModel, GaussianAdditiveTheta  # noqa: E402
from core.models.poisson_nmf import NMFTheta, PoissonNMF  # noqa: E402
from core.models.subsample import log_likelihood_estimate, subset_scale, tempered_gradient  # noqa: E402

__all__ += ["GaussianAdditiveModel", "GaussianAdditiveTheta", "NMFTheta", "PoissonNMF", "log_likelihood_estimate",
            "subset_scale", "tempered_gradient"]

from core.models.nmf_gpp import NMFGPP, NMFGPPParams  # noqa: E402

__all__ += ["NMFGPP", "NMFGPPParams"]
