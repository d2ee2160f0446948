"""Speed of NUTS on NMF-GPP (Experiment 1, beta = 10): gradient evaluations and effective samples per second.

Figures, all on the same input in the same run:

1. log density + gradient per second, ours (``NMFGPP.logdensity_and_grad``:
   one compiled pass, packed lower-triangular Cholesky products, link from
   one ``erfcx`` per entry, fused residual sweep) against two NumPy
   references of the same model:
   - *before*: ``NMFGPP.logdensity_and_grad_numpy``, the previous
     implementation (per-component Cholesky products as BLAS matmuls on the
     square factors, link with SciPy ufuncs ``log_ndtr``/``erfcx``);
   - *literal*: a transcription of the paper's appendix F (vec ordering,
     Cholesky factors of the full Kronecker covariances I_M ⊗ K, eq. 22–23
     with ``erf``/``exp`` written out), the form of the authors' NumPy code.
   All three agree to rounding; the script checks it before timing.
2. NUTS from the MAP on the same posterior, run by ``raman_nuts.run_one``:
   smallest and median bulk ESS over the latent parameters per second of
   sampling, and gradient evaluations per second inside the sampler (tree
   overhead included), twice: as the paper runs it (dual averaging to 0.8,
   windowed diagonal mass matrix), and with ``--metric gauss-newton`` and
   ``--scale-moves`` (dense metric (I + σ⁻² JᵀJ)⁻¹ fixed at the end of a
   diagonal first half of warm-up, plus Metropolis moves along the D/H scale
   symmetry after each transition; the posterior is the same).

No peer NUTS library (BlackJAX, PyMC) is installed here, so the NUTS figure
has no peer column. Timings are wall-clock on one thread; on a shared machine
note the load average printed beside them.
"""

import os
import time

import numpy as np
from scipy import linalg
from scipy.special import erf

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import recipe_parser  # noqa: E402

from core.factorization.map import limit_blas_threads, map_nmf_gpp  # noqa: E402
from core.models.nmf_gpp import NMFGPP, exponential_kernel_2d, squared_exponential_kernel  # noqa: E402
from core.random import stream  # noqa: E402
from corpora.raman import simulate_raman  # noqa: E402
from raman_nuts import run_one  # noqa: E402


class ReferenceNMFGPP:
    """The paper's formulas as written: vec(D), vec(H), full Kronecker covariances, literal eq. 22–23."""

    def __init__(self, X, num_components, plate_shape, beta, noise_std, jitter=1e-6):
        self.X, self.M, self.sigma_n = X, num_components, noise_std
        K, L = X.shape
        cov_d = np.kron(np.eye(num_components), exponential_kernel_2d(plate_shape, beta))
        cov_h = np.kron(np.eye(num_components), squared_exponential_kernel(L, beta))
        cov_d += jitter * np.eye(cov_d.shape[0])
        cov_h += jitter * np.eye(cov_h.shape[0])
        self.C_d = linalg.cholesky(cov_d, lower=False)  # upper: cov = C^T C, d = C^T delta
        self.C_h = linalg.cholesky(cov_h, lower=False)
        self.s_d = np.sqrt(np.diag(cov_d))
        self.s_h = np.sqrt(np.diag(cov_h))

    @staticmethod
    def link(x, s):
        return -np.log(0.5 - 0.5 * erf(x / (np.sqrt(2) * s)))

    @staticmethod
    def link_prime(x, s):
        return np.exp(ReferenceNMFGPP.link(x, s) - x ** 2 / (2 * s ** 2)) / (np.sqrt(2 * np.pi) * s)

    def logdensity_and_grad(self, theta):
        K, L = self.X.shape
        delta, eta = theta[:K * self.M], theta[K * self.M:]
        d, h = self.C_d.T @ delta, self.C_h.T @ eta
        # vec over components: D[:, m] = d[m K:(m+1) K], H[m] = h[m L:(m+1) L]
        D = self.link(d, self.s_d).reshape(self.M, K).T
        H = self.link(h, self.s_h).reshape(self.M, L)
        R = D @ H - self.X
        logp = -0.5 * (np.sum(R ** 2) / self.sigma_n ** 2 + delta @ delta + eta @ eta)
        g_h = -(D.T @ R).ravel() / self.sigma_n ** 2 * self.link_prime(h, self.s_h)
        g_d = -(R @ H.T).T.ravel() / self.sigma_n ** 2 * self.link_prime(d, self.s_d)
        grad_delta = self.C_d @ g_d - delta
        grad_eta = self.C_h @ g_h - eta
        return logp, np.concatenate([grad_delta, grad_eta])

    def to_reference(self, theta, K):
        """Our layout (delta (K, M) row-major) → vec layout (component-major)."""
        delta = theta[:K * self.M].reshape(K, self.M).T.ravel()
        return np.concatenate([delta, theta[K * self.M:]])

    def from_reference(self, theta, K):
        """vec layout → our layout."""
        delta = theta[:K * self.M].reshape(self.M, K).T.ravel()
        return np.concatenate([delta, theta[K * self.M:]])


def rate(fn, theta, seconds):
    """Evaluations per second of wall time and per second of this process's CPU time (less load-sensitive)."""
    count, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        fn(theta)
        count += 1
    return count / (time.perf_counter() - start), count / max(time.process_time() - cpu_start, 1e-9)


def load():
    return os.getloadavg()[0]


def main():
    parser = recipe_parser("nuts_nmf_gpp", __doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=None, help="NUTS warm-up (default 150; quick 50)")
    parser.add_argument("--draws", type=int, default=None, help="NUTS draws (default 150; quick 50)")
    parser.add_argument("--max-tree-depth", type=int, default=10)
    parser.add_argument("--scale-moves", type=int, default=5, help="scale-move sweeps per transition (second run)")
    args = parser.parse_args()
    num_warmup = args.warmup or (50 if args.quick else 150)
    num_draws = args.draws or (50 if args.quick else 150)

    data = simulate_raman(1, seed=args.seed)
    model = NMFGPP(data.X, num_components=2, plate_shape=data.plate_shape, beta=10.0, noise_std=data.noise_std)
    reference = ReferenceNMFGPP(data.X, 2, data.plate_shape, 10.0, data.noise_std)
    K = data.X.shape[0]
    with limit_blas_threads(1):
        estimate = map_nmf_gpp(model, num_starts=1, seed=args.seed)
        theta = estimate.theta
        # Compare away from the mode, where the gradient is not a difference of near-equal terms.
        probe = theta + 0.1 * stream(args.seed, 5).standard_normal(theta.shape)
        ours_logp, ours_grad = model.logdensity_and_grad(probe)
        before_logp, before_grad = model.logdensity_and_grad_numpy(probe)
        ref_logp, ref_grad = reference.logdensity_and_grad(reference.to_reference(probe, K))
        for logp, grad in ((before_logp, before_grad), (ref_logp, reference.from_reference(ref_grad, K))):
            assert np.isclose(ours_logp, logp, rtol=1e-8), (ours_logp, logp)
            assert np.allclose(ours_grad, grad, rtol=1e-5, atol=1e-6 * np.abs(grad).max())
        seconds = 1.0 if args.quick else 3.0
        ref_theta = reference.to_reference(theta, K)
        # Interleave the measurements so that a change of machine load hits all three alike.
        rates = {"ours": [], "before": [], "literal": []}
        loads = [load()]
        for _ in range(3):
            rates["ours"].append(rate(model.logdensity_and_grad, theta, seconds / 3))
            rates["before"].append(rate(model.logdensity_and_grad_numpy, theta, seconds / 3))
            rates["literal"].append(rate(reference.logdensity_and_grad, ref_theta, seconds / 3))
        loads.append(load())
        for clock, column in (("wall", 0), ("CPU", 1)):
            ours, before, literal = (float(np.median([r[column] for r in rates[k]]))
                                     for k in ("ours", "before", "literal"))
            print(f"log density + gradient (dim {model.dim}), evaluations per {clock} second: ours {ours:.0f} "
                  f"({1e6 / ours:.0f} us), before (NumPy) {before:.0f} ({1e6 / before:.0f} us), literal appendix F "
                  f"{literal:.0f}; ratio ours/before {ours / before:.2f}, ours/literal {ours / literal:.2f} "
                  f"[load average {loads[0]:.2f} -> {loads[1]:.2f}]", flush=True)

        # NUTS as the paper runs it (diagonal metric), then with the Gauss-Newton metric and scale moves.
        for metric, scale_moves in (("diagonal", 0), ("gauss-newton", args.scale_moves)):
            load_start = load()
            record, _ = run_one(data, 10.0, num_warmup=num_warmup, num_draws=num_draws, metric=metric, rank=0,
                                max_tree_depth=args.max_tree_depth, target=0.8, seed=args.seed, progress=False,
                                scale_moves=scale_moves)
            seconds = record["sampling_seconds"]
            print(f"NUTS, metric {metric}, {scale_moves} scale-move sweeps ({num_warmup} warm-up + {num_draws} "
                  f"draws, max depth {args.max_tree_depth}): min ESS {record['min_ess']:.1f} "
                  f"({record['min_ess'] / seconds:.4f}/s), median ESS {record['median_ess']:.1f} "
                  f"({record['median_ess'] / seconds:.3f}/s), {seconds:.0f} s sampling, "
                  f"{record['gradient_evaluations'] / seconds:.0f} gradient evaluations/s in the sampler, "
                  f"step {record['step_size']:.3g}, mean depth {record['mean_tree_depth']:.2f}, "
                  f"divergences {record['divergences']} [load average {load_start:.2f} -> {load():.2f}]", flush=True)


if __name__ == "__main__":
    main()
