"""Models: log-likelihoods, priors and their gradients on data subsets."""

from core.models.poisson_parafac import ParafacFactors, PoissonParafac, reconstruct

__all__ = ["ParafacFactors", "PoissonParafac", "reconstruct"]
