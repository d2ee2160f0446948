"""Models: log-likelihoods, priors and their gradients on data subsets.

Names are imported from their submodules on first use, so importing the package is cheap.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "gaussian_additive": ['GaussianAdditiveModel', 'GaussianAdditiveTheta'],
        "nmf_gpp": ['NMFGPP', 'NMFGPPParams'],
        "pltf": ['Contraction', 'PLTFModel', 'SourceLayout', 'gamma_log_pdf', 'parse_spec', 'pltf_model'],
        "poisson_nmf": ['NMFTheta', 'PoissonNMF'],
        "poisson_parafac": ['ParafacFactors', 'PoissonParafac', 'reconstruct'],
        "subsample": ['Reference', 'log_likelihood_estimate', 'make_reference', 'subset_scale', 'tempered_gradient',
                      'tree_vdot'],
    },
)
