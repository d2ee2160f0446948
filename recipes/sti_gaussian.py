"""ICASSP'16 Fig. 1: STI against the exact log marginal likelihood of the Gaussian additive model.

For several true R, data are drawn with mu = 5, sigma_theta^2 = 3, sigma_x^2 = 5,
N = 5000; for every candidate R_m the evidence is estimated by STI and
compared with the closed form (O(N), matrix determinant lemma). Every
configuration uses N_s = 250 (with replacement), K = 3000 iterations per
chain with the first 1000 as burn-in, b = 0.51, the step fixed after burn-in;
T counts intervals (T + 1 temperatures). All chains of one R_m run at once
as array operations (the model is batched), one chain per temperature.

Three configurations run on the same data:

* ``sti`` (this project's default): T = 40 intervals on the power grid
  t_i = (i/T)^6 with Simpson's rule in u = t^(1/6); the step of the chain at
  t is eps_k = min(1, (a/k)^b) / lambda_t with a = 250, lambda_t the largest
  curvature of its power posterior at the start (power iteration on
  gradients), so eps * lambda = 0.5 after burn-in at every t and every R_m;
  the control-variate gradient around the last burn-in sample (SGLD-CV) and
  the first-order control-variate log-likelihood estimate; the
  Leimkuhler-Matthews noise (same cost as SGLD, exact invariant law on
  Gaussian targets); theta^(k-1) scored on S^(k); a zero-variance control
  variate (the gradient along the stiffest direction) on each trace.
* ``sti_uniform``: the same chains on the paper's uniform grid with T = 40
  intervals and the trapezoid rule: which schedule is more accurate.
* ``sti_paper``: the paper's settings verbatim -- SGLD (Euler), T = 10
  intervals on a uniform grid, trapezoid rule, eq. 9 (theta^(k) on S^(k)),
  a = 1e-8, no control variates.

``quadrature_error*`` is the error each grid makes with exact expectations,
so that Monte-Carlo and discretisation error can be told apart.
``--ablation`` adds, for true R = 5, the error of each ingredient switched
off in turn (the bias decomposition of the README). ``--draws N`` checks the
default's error bars over N further data draws (true R = 5; R_m = 2 and 5;
draw k from seed ``--seed`` + 100 + k, its chains too), as shipped and with
chains three times as long: mean error and its standard error, rms z, share
within 2 standard errors.
"""

import time
import warnings
from dataclasses import asdict, fields, replace

import numpy as np

from _common import non_negative_int, recipe_parser, run_recipe, write_results

from sepsti.core.evidence.sti import LangevinSettings, TemperatureGrid, stochastic_thermodynamic_integration
from sepsti.core.models.gaussian_additive import GaussianAdditiveModel
from sepsti.core.random import stream

NAME = "sti_gaussian"
PRIOR = dict(mu=5.0, sigma2_theta=3.0, sigma2_x=5.0)
BUDGET = dict(num_steps=3000, num_keep=2000, subset_size=250)
DEFAULT = dict(grid=TemperatureGrid(40, "power", 6.0, "simpson"),
               chain=LangevinSettings(**BUDGET, sampler="sgld", step_a=250.0, step_b=0.51, step_scale="curvature",
                                      control_variate="gradient", integrator="lm", zero_variance=True,
                                      evaluate="before_update"))
UNIFORM = dict(DEFAULT, grid=TemperatureGrid(40, "uniform", rule="trapezoid"))
PAPER = dict(grid=TemperatureGrid(10, "uniform", 1.0, "trapezoid"),
             chain=LangevinSettings(**BUDGET, sampler="sgld", step_a=1e-8, step_b=0.51, control_variate=False,
                                    evaluate="after_update"))
ABLATION = {
    "default": {},
    "Euler (SGLD) instead of Leimkuhler-Matthews": dict(integrator="euler"),
    "subsampled gradient (no SGLD-CV)": dict(control_variate="likelihood"),
    "no zero-variance control variate": dict(zero_variance=False),
    "eps*lambda = 0.1 (a = 11.3)": dict(step_a=11.3),
    "eps*lambda = 0.1, Euler": dict(step_a=11.3, integrator="euler"),
    "eps*lambda = 0.1, Euler, subsampled gradient": dict(step_a=11.3, integrator="euler",
                                                         control_variate="likelihood", zero_variance=False),
    "full-batch gradient, Euler, eps*lambda = 0.1": dict(step_a=11.3, integrator="euler", subset_size=None,
                                                         control_variate="likelihood", zero_variance=False),
    "T = 20, power 5 (previous default grid)": dict(num_intervals=20, power=5.0),
}


def changed(settings, **changes):
    """``settings`` with fields of its grid or its chain replaced by name."""
    grid_names = {field.name for field in fields(TemperatureGrid)}
    return dict(grid=replace(settings["grid"], **{k: v for k, v in changes.items() if k in grid_names}),
                chain=replace(settings["chain"], **{k: v for k, v in changes.items() if k not in grid_names}))


def as_json(settings):
    """``settings`` for the results file: the grid (with its temperatures) and the chain's fields."""
    return {"grid": settings["grid"].as_dict(), "chain": asdict(settings["chain"])}


def estimate(model, settings, *, seed):
    """STI on ``model`` with ``settings``: (result, seconds, quadrature error of the grid)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        start = time.perf_counter()
        result = stochastic_thermodynamic_integration(model, model.sample_prior, seed=seed, **settings)
        seconds = time.perf_counter() - start
    t = result.temperatures
    quadrature = float(settings["grid"].weights @ model.expected_log_likelihood(t) - model.log_marginal_likelihood())
    return result, seconds, quadrature


def data(seed, index, true_rank, n_data=5000):
    _, x = GaussianAdditiveModel.sample(stream(seed, 1000 + index), n_data, true_rank, **PRIOR)
    return x


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True)
    parser.add_argument("--ablation", action="store_true", help="also run the bias decomposition (true R = 5)")
    parser.add_argument("--draws", type=non_negative_int, default=0, metavar="N",
                        help="also check the error bars over N further data draws (true R = 5)")
    args = parser.parse_args()
    true_ranks = [2, 5] if args.quick else [2, 5, 8]
    ranks = list(range(1, 8)) if args.quick else list(range(1, 11))
    configs = {"": DEFAULT, "_uniform": UNIFORM, "_paper": PAPER}
    fields = ("sti", "stderr", "quadrature_error", "seconds_per_rank")
    out = {"true_R": true_ranks, "ranks": ranks, "exact": [],
           **{field + suffix: [] for suffix in configs for field in fields},
           "settings": {"default": as_json(DEFAULT), "uniform": as_json(UNIFORM), "paper": as_json(PAPER), "N": 5000,
                        "N_s": BUDGET["subset_size"], "K": BUDGET["num_steps"], "keep": BUDGET["num_keep"], **PRIOR,
                        "T_counts": "intervals", "chains_per_temperature": 1, "seed": args.seed}}
    print(f"{'true R':>6} {'R_m':>4} {'exact':>11} | {'STI-exact':>9} {'se':>5} {'quad':>6} {'s':>5} | "
          f"{'uniform-exact':>13} {'se':>5} | {'paper-exact':>11} {'se':>7} {'s':>5}")
    for index, true_rank in enumerate(true_ranks):
        x = data(args.seed, index, true_rank)
        rows = {key: [] for key in out if key not in ("true_R", "ranks", "settings")}
        for rank in ranks:
            model = GaussianAdditiveModel(x, rank, **PRIOR)
            exact = model.log_marginal_likelihood()
            rows["exact"].append(float(exact))
            line = {}
            for suffix, settings in configs.items():
                result, seconds, quad = estimate(model, settings, seed=args.seed)
                for field, value in zip(fields, (result.log_marginal_likelihood, result.stderr, quad, seconds)):
                    rows[field + suffix].append(float(value))
                line[suffix] = (result.log_marginal_likelihood - exact, result.stderr, quad, seconds)
            d, u, p = line[""], line["_uniform"], line["_paper"]
            print(f"{true_rank:>6} {rank:>4} {exact:11.2f} | {d[0]:9.3f} {d[1]:5.3f} {d[2]:6.3f} {d[3]:5.2f} | "
                  f"{u[0]:13.2f} {u[1]:5.2f} | {p[0]:11.1f} {p[1]:7.1f} {p[3]:5.2f}", flush=True)
        for key, value in rows.items():
            out[key].append(value)
    exact = np.array(out["exact"])
    for suffix in configs:
        sti = np.array(out["sti" + suffix])
        se = np.array(out["stderr" + suffix])
        out["argmax_agrees" + suffix] = [bool(np.argmax(s) == np.argmax(e)) for s, e in zip(sti, exact)]
        out["max_abs_error" + suffix] = float(np.max(np.abs(sti - exact)))
        out["max_abs_z" + suffix] = float(np.max(np.abs(sti - exact) / np.maximum(se, 1e-12)))
    print(f"argmax agrees: {out['argmax_agrees']}; max |STI - exact| = {out['max_abs_error']:.3f} nats, "
          f"max |STI - exact| / se = {out['max_abs_z']:.1f}; "
          f"seconds per R_m: median {np.median(out['seconds_per_rank']):.2f}, "
          f"max {np.max(out['seconds_per_rank']):.2f}")
    print(f"uniform grid, same chains: max error {out['max_abs_error_uniform']:.1f} nats; paper settings: "
          f"{out['max_abs_error_paper']:.1f} nats (argmax agrees {out['argmax_agrees_paper']})")
    if args.ablation:
        out["ablation"] = ablation(args.seed, true_ranks.index(5), ranks)
    if args.draws:
        out["draws"] = error_bars_over_draws(args.seed, args.draws)
    write_results(args, out, figure(out))


#: Chains three times as long as the default's, for :func:`error_bars_over_draws`.
LONG_CHAINS = dict(num_steps=3 * BUDGET["num_steps"], num_keep=3 * BUDGET["num_keep"])


def error_bars_over_draws(seed, draws, ranks=(2, 5)):
    """The default's errors against the exact value over ``draws`` data draws (true R = 5), per R_m, as shipped and
    with :data:`LONG_CHAINS`: mean error and its standard error, rms z, share of |z| < 2."""
    configs = {"default": DEFAULT, "long_chains": changed(DEFAULT, **LONG_CHAINS)}
    errors = {(label, rank): [] for label in configs for rank in ranks}
    for k in range(draws):
        draw_seed = seed + 100 + k
        x = data(draw_seed, 0, 5)
        for rank in ranks:
            model = GaussianAdditiveModel(x, rank, **PRIOR)
            for label, settings in configs.items():
                result, _, _ = estimate(model, settings, seed=draw_seed)
                errors[label, rank].append((result.log_marginal_likelihood - model.log_marginal_likelihood(),
                                            result.stderr))
    table = {}
    print(f"\nerror bars over {draws} data draws (true R = 5): mean STI - exact ± its se, rms z, share |z| < 2")
    for (label, rank), rows in errors.items():
        error, stderr = np.array(rows).T
        z = error / stderr
        row = {"rank": rank, "mean_error": float(error.mean()),
               "mean_error_stderr": float(error.std(ddof=1) / np.sqrt(draws)) if draws > 1 else float("nan"),
               "mean_stderr": float(stderr.mean()), "rms_z": float(np.sqrt(np.mean(z ** 2))),
               "share_within_2se": float(np.mean(np.abs(z) < 2))}
        table.setdefault(label, []).append(row)
        print(f"  {label:>11} R_m={rank}: {row['mean_error']:+.4f} ± {row['mean_error_stderr']:.4f} nats "
              f"(mean se {row['mean_stderr']:.3f}), rms z {row['rms_z']:.2f}, "
              f"{row['share_within_2se']:.0%} within 2 se")
    return table


def ablation(seed, index, ranks):
    """Error of STI on the true R = 5 data with one ingredient of the default changed at a time."""
    x = data(seed, index, 5)
    table = {}
    print("\nbias decomposition, true R = 5: STI - exact (se) per R_m")
    for label, change in ABLATION.items():
        settings = changed(DEFAULT, **change)
        errors, ses, seconds = [], [], []
        for rank in ranks:
            model = GaussianAdditiveModel(x, rank, **PRIOR)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                start = time.perf_counter()
                result = stochastic_thermodynamic_integration(model, model.sample_prior, seed=seed, **settings)
                seconds.append(time.perf_counter() - start)
            errors.append(float(result.log_marginal_likelihood - model.log_marginal_likelihood()))
            ses.append(float(result.stderr))
        table[label] = {"error": errors, "stderr": ses, "seconds": seconds}
        cells = " ".join(f"{e:+6.2f}({s:.2f})" for e, s in zip(errors, ses))
        print(f"{label:48s} {cells}  [{np.mean(seconds):.2f} s]", flush=True)
    return table


def figure(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(out["true_R"])
    fig, axes = plt.subplots(2, n, figsize=(4.2 * n, 6.4), squeeze=False, sharex=True)
    for column, true_rank in enumerate(out["true_R"]):
        exact = np.asarray(out["exact"][column])
        ax, err = axes[0][column], axes[1][column]
        ax.plot(out["ranks"], exact, "k-", label="exact")
        ax.errorbar(out["ranks"], out["sti"][column], yerr=2 * np.asarray(out["stderr"][column]), fmt="o", ms=4,
                    label="STI (default)")
        ax.plot(out["ranks"], out["sti_paper"][column], "x", color="tab:red", label="STI, paper settings")
        ax.axvline(true_rank, color="grey", ls=":")
        low, high = exact.min(), exact.max()
        ax.set_ylim(low - 0.3 * (high - low) - 5, high + 0.15 * (high - low) + 5)
        ax.set_title(f"true R = {true_rank}")
        err.axhline(0, color="k", lw=0.8)
        err.errorbar(out["ranks"], np.asarray(out["sti"][column]) - exact, yerr=2 * np.asarray(out["stderr"][column]),
                     fmt="o", ms=4, label="STI − exact (±2 se)")
        err.set_xlabel("R_m")
    axes[0][0].set_ylabel("log p(x | R_m)")
    axes[1][0].set_ylabel("STI − exact (nats)")
    axes[0][0].legend(fontsize=7)
    axes[1][0].legend(fontsize=7)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, NAME)
