"""Samplers: kernels over an explicit state, one driver, adaptation and diagnostics.

Names are imported from their submodules on first use, so importing the package is cheap.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['chains', 'gibbs', 'group_move', 'hmc', 'metric', 'nuts', 'psgld', 'sada', 'sgld'],
    submod_attrs={
        "chains": ['ChainInfo', 'NUTSResult', 'NUTSSettings', 'SampleDiagnostics', 'TransitionInfo', 'sample_nuts'],
        "metric": ['AutoMetricSettings', 'MetricChoice', 'PilotResult', 'TargetStructure'],
        "diagnostics": [
            'effective_sample_size',
            'mcse_mean',
            'mcse_variance',
            'split_rhat',
            'to_inference_data',
        ],
        "dual_averaging": ['DualAveragingState', 'dual_averaging'],
        "group_move": ['GroupMoveInfo', 'adapt_log_proposal_std'],
        "gibbs": ['GibbsInfo', 'GibbsState'],
        "hmc": ['HMCInfo', 'HMCState', 'find_reasonable_step_size'],
        "integrators": ['IntegratorState', 'leapfrog'],
        "langevin": ['langevin_step', 'mirror', 'per_chain'],
        "mass_matrix": [
            'LowRankTransform',
            'WelfordState',
            'low_rank_preconditioner',
            'numerical_precision',
            'reparametrize',
            'warmup_schedule',
            'welford_covariance',
            'welford_variance',
        ],
        "nuts": ['NUTSInfo'],
        "psgld": ['PSGLDInfo', 'PSGLDState'],
        "sada": ['SADAInfo', 'SADAState'],
        "sgld": ['SGLDInfo', 'SGLDState'],
        "step_size": ['PolynomialDecayState', 'polynomial_decay', 'step_sizes'],
        "warmup": ['WarmupResult', 'window_adaptation'],
    },
)
