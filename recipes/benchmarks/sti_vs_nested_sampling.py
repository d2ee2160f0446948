"""STI against a general-purpose nested sampler (dynesty) on the Gaussian additive model.

Same data (true R = 2, mu = 5, sigma_theta^2 = 3, sigma_x^2 = 5, N = 5000),
same model object, for each candidate R_m: the exact log evidence (O(N),
matrix determinant lemma), STI with this project's default settings (see
``recipes/sti_gaussian.py``: 41 temperatures, K = 3000, N_s = 250, all chains
batched) and dynesty's static nested sampler with its
default settings, 500 live points and at most 50,000 likelihood calls (each
call evaluates the full-data log-likelihood, as a general-purpose sampler
must). Prints both errors, both stated uncertainties, both times and the
speed ratio.

    python recipes/benchmarks/sti_vs_nested_sampling.py [--quick] [--out DIR] [--seed S]

``--quick``: R_m in {1, 4, 8} only. Writes ``DIR/sti_vs_nested_sampling.json``: per R_m the exact log
evidence, both estimates with their stated uncertainties, their times and dynesty's likelihood calls.
dynesty is an optional benchmark dependency (``pip install dynesty``).
"""

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import recipe_parser, run_recipe, write_results  # noqa: E402

from sepsti.core.errors import ParameterError  # noqa: E402

NAME = "sti_vs_nested_sampling"
RANKS = [1, 2, 3, 4, 6, 8]


def main():
    # dynesty's runs use seed --seed + R_m
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0], seed_offset=max(RANKS))
    args = parser.parse_args()

    import numpy as np
    from scipy.stats import norm

    try:
        import dynesty
    except ImportError:
        raise ParameterError("dynesty is not installed: pip install dynesty (the 'bench' extra)") from None

    from sepsti.core.evidence.sti import stochastic_thermodynamic_integration
    from sepsti.core.models.gaussian_additive import GaussianAdditiveModel, GaussianAdditiveTheta
    from sepsti.core.random import stream
    from sti_gaussian import DEFAULT, PRIOR, as_json

    _, x = GaussianAdditiveModel.sample(stream(args.seed, 1000), 5000, 2, **PRIOR)
    ranks = [1, 4, 8] if args.quick else RANKS
    print(f"dynesty {dynesty.__version__}; data: true R = 2, N = 5000")
    print(f"{'R_m':>4} {'exact':>11} | {'STI err':>8} {'±':>5} {'s':>6} | {'dynesty err':>12} {'±':>6} {'calls':>6} "
          f"{'s':>6} | {'speed-up':>8}")
    totals = [0.0, 0.0]
    worst = [0.0, 0.0]
    rows = []
    for rank in ranks:
        model = GaussianAdditiveModel(x, rank, **PRIOR)
        exact = model.log_marginal_likelihood()
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ours = stochastic_thermodynamic_integration(model, model.sample_prior, seed=args.seed, **DEFAULT)
        seconds_sti = time.perf_counter() - start

        def log_likelihood(theta):
            return model.log_likelihood(GaussianAdditiveTheta(np.asarray(theta)))

        def prior_transform(u):
            return PRIOR["mu"] + np.sqrt(PRIOR["sigma2_theta"]) * norm.ppf(u)

        start = time.perf_counter()
        sampler = dynesty.NestedSampler(log_likelihood, prior_transform, rank, nlive=500,
                                        rstate=np.random.default_rng(args.seed + rank))
        sampler.run_nested(maxcall=50000, print_progress=False)
        seconds_nested = time.perf_counter() - start
        result = sampler.results
        log_z, log_z_err, calls = float(result.logz[-1]), float(result.logzerr[-1]), int(np.sum(result.ncall))
        totals[0] += seconds_sti
        totals[1] += seconds_nested
        worst[0] = max(worst[0], abs(ours.log_marginal_likelihood - exact))
        worst[1] = max(worst[1], abs(log_z - exact))
        rows.append({"rank": rank, "exact": exact, "sti": ours.log_marginal_likelihood, "sti_stderr": ours.stderr,
                     "sti_seconds": seconds_sti, "dynesty": log_z, "dynesty_stderr": log_z_err, "dynesty_calls": calls,
                     "dynesty_seconds": seconds_nested})
        print(f"{rank:>4} {exact:11.2f} | {ours.log_marginal_likelihood - exact:8.2f} {ours.stderr:5.2f} "
              f"{seconds_sti:6.1f} | "
              f"{log_z - exact:12.2f} {log_z_err:6.2f} {calls:6d} {seconds_nested:6.1f} | "
              f"{seconds_nested / seconds_sti:7.1f}x", flush=True)
    print(f"total: STI {totals[0]:.1f} s, dynesty {totals[1]:.1f} s, ratio {totals[1] / totals[0]:.1f}x; "
          f"largest error: STI {worst[0]:.3f} nats, dynesty {worst[1]:.2f} nats")
    write_results(args, {"dynesty": dynesty.__version__, "true_R": 2, "num_samples": 5000,
                         "sti_settings": as_json(DEFAULT), "nlive": 500, "maxcall": 50000, "seed": args.seed,
                         "results": rows,
                         "seconds": {"sti": totals[0], "dynesty": totals[1]},
                         "largest_error": {"sti": worst[0], "dynesty": worst[1]}})


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
