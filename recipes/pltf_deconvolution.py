"""MLSP'12 Model I (Fig. 2): 1-D deconvolution as a PLTF model with a fixed delta tensor.

    X(t) ~ Poisson(sum_r Z1(r) Z2(t - r)) = Poisson(sum_{r,d} Z1(r) Z2(d) Z3(d, t, r)),
    Z3(d, t, r) = delta(d - t + r)   (fixed),   spec "r,d,dtr->t".

Data: a filter Z1 of length 8 (a decaying, slightly oscillating response scaled
to sum 8) convolved with an excitation Z2 of length 60 drawn from Gamma(0.4,
0.1) (sparse bursts), T = 67 samples. Priors Gamma(1, 0.5 * 2^(r/2)) on Z1(r)
(a causal filter whose prior mean halves every two lags: without it, shifted
solutions Z1(r - s), Z2(d + s) form near-equal modes that a chain started from
the prior can settle in) and Gamma(0.4, 0.1) on Z2 (its generating prior). Block Gibbs (Alg. 1) and SADA
(Alg. 2) each run 3000 sweeps (1000 burn-in) from the same prior draw; the
recipe plots the true and posterior-mean factors (each Z1, true and drawn, rescaled to unit sum and
Z2 by the inverse factor, since the pair is identified only up to scale), X
against the posterior mean Xhat, and both samplers' log-likelihood traces.

Run: ``python recipes/pltf_deconvolution.py [--quick] [--out DIR] [--seed S]``.
JSON keys: ``settings``, ``true``, ``block``, ``sada`` (posterior means, traces,
errors, seconds), ``checks``.
"""

import time

import numpy as np

from _common import recipe_parser, run_recipe, write_results

from sepsti.core.models.pltf import pltf_model
from sepsti.core.random import stream
from sepsti.core.samplers import gibbs, sada
from sepsti.core.samplers.driver import run_chain

NAME = "pltf_deconvolution"
FILTER_LENGTH = 8
EXCITATION_LENGTH = 60


def delta_tensor(num_excitation, num_output, num_filter):
    """Z3(d, t, r) = 1 where d = t - r."""
    delta = np.zeros((num_excitation, num_output, num_filter))
    for r in range(num_filter):
        d = np.arange(num_excitation)
        delta[d, d + r, r] = 1.0
    return delta


def simulate(seed):
    rng = stream(seed, 0)
    lags = np.arange(FILTER_LENGTH)
    filt = np.exp(-lags / 2.5) * (1.0 + 0.4 * np.cos(1.3 * lags))
    filt *= FILTER_LENGTH / filt.sum()
    excitation = rng.gamma(0.4, 1.0 / 0.1, EXCITATION_LENGTH)
    num_output = FILTER_LENGTH + EXCITATION_LENGTH - 1
    # a causal filter whose prior mean halves every two lags (2, 1.4, 1, ...): it breaks the shift
    # ambiguity Z1(r) -> Z1(r - s), Z2(d) -> Z2(d + s) that otherwise leaves near-equal modes
    filter_rate = 0.5 * 2.0 ** (lags / 2.0)
    model = pltf_model("r,d,dtr->t", prior_shape=[1.0, 0.4, None], prior_rate=[filter_rate, 0.1, None],
                       fixed={2: delta_tensor(EXCITATION_LENGTH, num_output, FILTER_LENGTH)})
    truth = (filt, excitation, model.fixed[2])
    X = model.sample_data(rng, truth)
    return model, truth, X


def run_sampler(module, model, X, seed, num_steps, burn_in):
    rng = stream(seed, 1)
    start_factors = model.sample_prior(stream(seed, 2))  # the same start for both samplers
    state = module.init(model, X, start_factors)
    start = time.perf_counter()
    result = run_chain(module.build_kernel(model, X), state, rng, num_steps=num_steps, burn_in=burn_in,
                       transform=lambda s: (s.factors[0], s.factors[1], model.xhat(s.factors)), progress=True,
                       desc=module.__name__.rsplit(".", 1)[-1])
    seconds = time.perf_counter() - start
    filt, excitation, xhat = (np.asarray(x) for x in result.samples)
    # the pair is identified up to Z1 * c, Z2 / c: align each draw's filter to unit sum first
    scale = filt.sum(axis=1, keepdims=True)
    return {"filter": (filt / scale).mean(axis=0), "excitation": (excitation * scale).mean(axis=0),
            "xhat": xhat.mean(axis=0), "log_likelihood": np.asarray(result.info.log_likelihood), "seconds": seconds}


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True)
    args = parser.parse_args()
    num_steps, burn_in = (600, 200) if args.quick else (3000, 1000)
    model, truth, X = simulate(args.seed)
    true_filter = truth[0] / truth[0].sum()
    true_excitation = truth[1] * truth[0].sum()
    true_xhat = model.xhat(truth)
    results = {"settings": {"spec": model.spec, "filter_length": FILTER_LENGTH,
                            "excitation_length": EXCITATION_LENGTH, "num_steps": num_steps, "burn_in": burn_in,
                            "prior_filter": "Gamma(1, 0.5 * 2^(r/2))", "prior_excitation": "Gamma(0.4, 0.1)",
                            "seed": args.seed},
               "true": {"filter": true_filter, "excitation": true_excitation, "X": X, "xhat": true_xhat,
                        "log_likelihood": model.log_likelihood(truth, X)}}
    for name, module in (("block", gibbs), ("sada", sada)):
        out = run_sampler(module, model, X, args.seed, num_steps, burn_in)
        out["filter_error"] = float(np.linalg.norm(out["filter"] - true_filter) / np.linalg.norm(true_filter))
        out["xhat_error"] = float(np.linalg.norm(out["xhat"] - true_xhat) / np.linalg.norm(true_xhat))
        out["excitation_correlation"] = float(np.corrcoef(out["excitation"], true_excitation)[0, 1])
        out["mean_log_likelihood"] = float(out["log_likelihood"][burn_in:].mean())
        results[name] = out
        print(f"{name:5s}: filter error {out['filter_error']:.3f}, Xhat error {out['xhat_error']:.3f}, "
              f"excitation correlation {out['excitation_correlation']:.3f}, "
              f"mean log-likelihood {out['mean_log_likelihood']:.1f}, {out['seconds']:.1f} s")
    gap = abs(results["block"]["mean_log_likelihood"] - results["sada"]["mean_log_likelihood"])
    results["checks"] = {"samplers_agree_on_mean_log_likelihood": bool(gap < 3.0),
                         "block_filter_error_below_0.3": bool(results["block"]["filter_error"] < 0.3),
                         "sada_filter_error_below_0.3": bool(results["sada"]["filter_error"] < 0.3)}
    print(f"true log-likelihood {results['true']['log_likelihood']:.1f}; checks: {results['checks']}")
    write_results(args, results, figure(results, burn_in))


def figure(results, burn_in):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(4, 1, figsize=(8, 10))
    true = results["true"]
    axes[0].stem(true["filter"], linefmt="k-", markerfmt="ko", basefmt=" ", label="true")
    for name, style in (("block", "C0"), ("sada", "C1")):
        axes[0].plot(results[name]["filter"], style + "x--", label=name)
    axes[0].set_title("Z1 (filter, unit sum)")
    axes[0].legend()
    axes[1].plot(true["excitation"], "k-", label="true")
    for name, style in (("block", "C0"), ("sada", "C1")):
        axes[1].plot(results[name]["excitation"], style + "--", label=name)
    axes[1].set_title("Z2 (excitation, rescaled)")
    axes[1].legend()
    axes[2].plot(true["X"], "k.", label="X")
    axes[2].plot(true["xhat"], "k-", alpha=0.5, label="true intensity")
    for name, style in (("block", "C0"), ("sada", "C1")):
        axes[2].plot(results[name]["xhat"], style + "--", label=f"{name} Xhat")
    axes[2].set_title("observed signal and model output")
    axes[2].legend()
    for name, style in (("block", "C0"), ("sada", "C1")):
        axes[3].plot(results[name]["log_likelihood"], style, lw=0.7, label=name)
    axes[3].axhline(true["log_likelihood"], color="k", ls=":", label="at the true factors")
    axes[3].axvline(burn_in, color="grey", lw=0.5)
    axes[3].set_xscale("log")
    axes[3].set_xlabel("sweep")
    axes[3].set_ylabel("log p(X | Z)")
    axes[3].legend()
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, NAME)
