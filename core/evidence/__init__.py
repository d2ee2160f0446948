"""Evidence (log marginal likelihood) estimators: STI, the rank-selection engine, Chib's method.

Names are imported from their submodules on first use, so importing the package is cheap.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "chib": ['ChibReplicates', 'ChibResult', 'chib_log_marginal_likelihood', 'chib_poisson_nmf', 'chib_replicates',
                 'log_mean_exp'],
        "log_space_sti": ['log_space_sti'],
        "parafac_rank": ['ParafacChains', 'select_parafac_rank'],
        "rank_selection": ['ChainRecord', 'ChainSettings', 'Preset', 'RankSelection', 'select_rank', 'to_json'],
        "rank_one": ['rank_one_log_evidence'],
        "small_counts": ['SmallCountsEvidence', 'row_log_likelihood', 'small_counts_log_evidence'],
        "sti_nmf": ['NMFChains', 'select_rank_sti'],
        "tempering_check": ['largest_decrease'],
        "sti": [
            'LangevinSettings',
            'STIResult',
            'TemperatureGrid',
            'curvature',
            'integration_weights',
            'power_posterior_chains',
            'stochastic_thermodynamic_integration',
            'temperature_grid',
            'thermodynamic_integral',
            'zero_variance_correction',
        ],
    },
)
