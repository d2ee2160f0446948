"""Factorization by EM / MAP: Poisson NMF (KL multiplicative updates) with optional priors, PLTF, Poisson PARAFAC
and NMF-GPP; CORCONDIA.

Names are imported from their submodules on first use, so importing the package is cheap.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "corcondia": ['CorcondiaResult', 'corcondia', 'core_consistency'],
        "em": ['EMResult', 'initialize_nmf', 'poisson_log_likelihood', 'poisson_nmf_em'],
        "map": ['MAPResult', 'initialize_nmf_gpp', 'map_nmf_gpp'],
        "parafac_map": ['ParafacMAPResult', 'poisson_parafac_map'],
        "pltf_em": ['PLTFEMResult', 'initialize_pltf', 'pltf_em'],
    },
)
