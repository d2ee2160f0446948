"""MLSP'12 Model III (Fig. 4): hierarchical NMF of an audio magnitude spectrogram, block Gibbs vs SADA.

    X(f, t) ~ Poisson(sum_{i,k} Z1(f, i) Z2(i, k) Z3(k, t)),   spec "fi,ik,kt->ft",

Z1 a spectral dictionary of I = 4 templates, Z2 a "chord" dictionary of K = 3
combinations of templates, Z3 their weights over time. As in the paper, Z1 is
estimated first (Poisson NMF EM at rank 4, 200 iterations, columns scaled to
unit sum) and then held fixed; the block sampler (Alg. 1) and SADA (Alg. 2)
sample Z2 and Z3 from the same prior draw.

Audio: with ``--corpus DIR`` the first 86 frames (2.75 s) of the NOIZEUS clean
file ``sp01.wav`` (found anywhere below DIR); otherwise a synthetic 2.75 s
signal of three piano-like chords over four notes. The magnitude spectrogram
is :func:`sepsti.features.magnitude` (512-point STFT, hop 256, int16 amplitude
scale, 257 bins), rescaled to a mean of 20 per bin and rounded to integer
counts for the samplers (on the int16 scale X holds ~1e8 counts, and both
chains then crawl: each sweep moves the factors by ~1/sqrt(count)).

Priors (chosen here; the paper gives none): Z2 ~ Gamma(1, 1), Z3 ~ Gamma(1, b)
with ``b = I K / mean frame total`` (I templates, K chords) so that the prior mean
of Xhat matches the data's level. 400 sweeps per sampler (``--quick``: 60).

Run: ``python recipes/pltf_hierarchical_audio.py [--quick] [--out DIR] [--seed S] [--corpus DIR]``.
JSON keys: ``settings``, ``block``, ``sada`` (log-likelihood traces, seconds per sweep,
mean log-likelihood over the last quarter), ``em_log_likelihood``.
"""

import time
from pathlib import Path

import numpy as np

from _common import recipe_parser, run_recipe, write_results

from sepsti.core.errors import ParameterError
from sepsti.core.factorization.pltf_em import pltf_em
from sepsti.core.models.pltf import pltf_model
from sepsti.core.random import stream
from sepsti.core.samplers import gibbs, sada
from sepsti.core.samplers.driver import run_chain

NAME = "pltf_hierarchical_audio"
NUM_TEMPLATES, NUM_CHORDS, NUM_FRAMES = 4, 3, 86
MEAN_COUNT = 20.0


def synthetic_signal(seed):
    """Three chords over four notes with decaying harmonics and a little noise, 8 kHz."""
    from sepsti.features import SAMPLE_RATE

    rng = stream(seed, 3)
    notes = np.array([220.0, 277.2, 329.6, 440.0])
    chords = [(0, 1, 2), (1, 2, 3), (0, 2, 3)]
    duration = NUM_FRAMES * 256 / SAMPLE_RATE + 0.1
    t = np.arange(int(duration * SAMPLE_RATE)) / SAMPLE_RATE
    y = np.zeros_like(t)
    onsets = np.arange(0.0, duration, 0.45)
    for n, onset in enumerate(onsets):
        active = t >= onset
        envelope = np.where(active, np.exp(-(t - onset) * 3.0), 0.0)
        for note in chords[n % len(chords)]:
            for harmonic in range(1, 6):
                y += envelope * np.sin(2 * np.pi * notes[note] * harmonic * t) * 0.6 ** harmonic
    y += 0.01 * rng.standard_normal(t.size)
    return 0.3 * y / np.abs(y).max()


def load_audio(corpus, seed):
    if corpus is None:
        return synthetic_signal(seed), "synthetic chords"
    import soundfile

    paths = sorted(Path(corpus).rglob("sp01.wav"))
    if not paths:
        raise ParameterError(f"--corpus {corpus}: no sp01.wav below it")
    y, _ = soundfile.read(paths[0])
    return y, str(paths[0])


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True)
    parser.add_argument("--corpus", type=Path, default=None, help="NOIZEUS folder (default: a synthetic signal)")
    args = parser.parse_args()
    num_steps = 60 if args.quick else 400
    from sepsti.features import magnitude

    y, source = load_audio(args.corpus, args.seed)
    spectrogram = magnitude(y)[:, :NUM_FRAMES]
    X = np.rint(spectrogram * (MEAN_COUNT / spectrogram.mean())).astype(np.int64)
    num_bins, num_frames = X.shape

    dictionary_model = pltf_model("fi,it->ft", dict(f=num_bins, i=NUM_TEMPLATES, t=num_frames))
    em = pltf_em(dictionary_model, X, max_iter=200, tol=0, map_estimate=False, seed=args.seed)
    Z1 = em.factors[0] / em.factors[0].sum(axis=0, keepdims=True)
    # a frame's prior mean total is Σ_ik E[Z2] E[Z3] = I K / b (Z1's columns sum to one)
    rate_weights = NUM_TEMPLATES * NUM_CHORDS / X.sum(axis=0).mean()
    model = pltf_model("fi,ik,kt->ft", dict(k=NUM_CHORDS, t=num_frames), prior_shape=1.0,
                       prior_rate=[None, 1.0, rate_weights], fixed={0: Z1})
    start_factors = model.sample_prior(stream(args.seed, 2))
    results = {"settings": {"source": source, "shape": [num_bins, num_frames], "num_templates": NUM_TEMPLATES,
                            "num_chords": NUM_CHORDS, "num_steps": num_steps, "prior_Z2": "Gamma(1, 1)",
                            "prior_Z3": f"Gamma(1, {rate_weights:.3g})", "total_count": int(X.sum()),
                            "mean_count": MEAN_COUNT,
                            "seed": args.seed},
               "em_log_likelihood": float(em.objective[-1])}
    for name, module in (("block", gibbs), ("sada", sada)):
        state = module.init(model, X, start_factors)
        start = time.perf_counter()
        chain = run_chain(module.build_kernel(model, X), state, stream(args.seed, 1), num_steps=num_steps,
                          transform=lambda s: 0.0, progress=True, desc=name)
        seconds = time.perf_counter() - start
        trace = np.asarray(chain.info.log_likelihood)
        results[name] = {"log_likelihood": trace, "seconds_per_sweep": seconds / num_steps,
                         "mean_log_likelihood_last_quarter": float(trace[3 * num_steps // 4:].mean())}
        print(f"{name:5s}: {seconds / num_steps * 1e3:.1f} ms per sweep, mean log-likelihood over the last quarter "
              f"{results[name]['mean_log_likelihood_last_quarter']:.1f} (EM with Z1 free: {em.objective[-1]:.1f})")
    write_results(args, results, figure(results))


def figure(results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, style in (("block", "C0"), ("sada", "C1")):
        trace = np.asarray(results[name]["log_likelihood"])
        ax.plot(np.arange(1, trace.size + 1), trace, style, label=f"{name} sampler")
    ax.set_xscale("log")
    low = min(np.percentile(results[name]["log_likelihood"], 5) for name in ("block", "sada"))
    high = max(np.max(results[name]["log_likelihood"]) for name in ("block", "sada"))
    ax.set_ylim(low, high + 0.05 * (high - low))
    ax.set_xlabel("sweep")
    ax.set_ylabel("log p(X | Z)")
    ax.set_title(f"Model III on {Path(results['settings']['source']).name}")
    ax.legend()
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, NAME)
