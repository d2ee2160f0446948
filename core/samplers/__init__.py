"""Samplers: kernels over an explicit state, one driver, adaptation and diagnostics."""

# HMC / NUTS: kernels share HMCState; import the modules for their init/build_kernel.
from core.samplers import hmc, nuts  # noqa: E402
from core.samplers.diagnostics import (effective_sample_size, mcse_mean, mcse_variance,  # noqa: E402
                                       split_rhat, to_inference_data)
from core.samplers.dual_averaging import DualAveragingState, dual_averaging  # noqa: E402
from core.samplers.hmc import HMCInfo, HMCState, find_reasonable_step_size  # noqa: E402
from core.samplers.integrators import IntegratorState, leapfrog  # noqa: E402
from core.samplers.mass_matrix import (LowRankTransform, WelfordState, low_rank_preconditioner,  # noqa: E402
                                       numerical_precision, reparametrize, warmup_schedule, welford_variance)
from core.samplers.nuts import NUTSInfo  # noqa: E402
from core.samplers.warmup import WarmupResult, window_adaptation  # noqa: E402

__all__ = [*globals().get("__all__", []),
           "hmc", "nuts", "HMCState", "HMCInfo", "NUTSInfo", "IntegratorState", "leapfrog",
           "find_reasonable_step_size", "DualAveragingState", "dual_averaging", "WelfordState",
           "welford_variance", "warmup_schedule", "LowRankTransform", "low_rank_preconditioner",
           "numerical_precision", "reparametrize", "WarmupResult", "window_adaptation",
           "effective_sample_size", "split_rhat", "mcse_mean", "mcse_variance", "to_inference_data"]

# PLTF block Gibbs: import the module for its init/build_kernel.
from core.samplers import gibbs  # noqa: E402
from core.samplers.gibbs import GibbsInfo, GibbsState  # noqa: E402

__all__ += ["gibbs", "GibbsState", "GibbsInfo"]

# SGLD / pSGLD: import the modules for their init/build_kernel.
from core.samplers import psgld, sgld  # noqa: E402
from core.samplers.langevin import langevin_step, mirror  # noqa: E402
from core.samplers.psgld import PSGLDInfo, PSGLDState  # noqa: E402
from core.samplers.sgld import SGLDInfo, SGLDState  # noqa: E402
from core.samplers.step_size import PolynomialDecayState, polynomial_decay, step_sizes  # noqa: E402

__all__ += ["sgld", "psgld", "SGLDState", "SGLDInfo", "PSGLDState", "PSGLDInfo", "langevin_step", "mirror",
            "PolynomialDecayState", "polynomial_decay", "step_sizes"]

# PLTF SADA: import the module for its init/build_kernel.
from core.samplers import sada  # noqa: E402
from core.samplers.sada import SADAInfo, SADAState  # noqa: E402

__all__ += ["sada", "SADAState", "SADAInfo"]
