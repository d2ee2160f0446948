"""ICASSP'16 Fig. 4: rank selection by STI on speech, against the enhancement it leads to.

On a NOIZEUS corpus (``--corpus``): the clean train split (sp01-sp20,
257 x 1661 magnitudes on the int16 scale) gives log p(X | R) by STI for
R in {32, 64, 128, 256, 512}. ``--settings``: ``speech`` (default; what
``sepsti select-rank`` and ``sepsti train --rank auto`` run: the validated
reference-path preset on the speech model,
:data:`sepsti.commands.select_rank.SPEECH_MODEL`); ``paper``: ICASSP'16's
settings on the magnitudes themselves (lambda = 4e-4, block SGLD, T = 5
uniform, K = 1250 keeping 500, 8 x 8 blocks, a = 5e-7, b = 0.51). For every R an EM
dictionary (``sepsti.denoise.train_dictionary``) enhances the noisy test
files (sp21-sp30, every noise type and SNR present) with a rank-5 noise
dictionary, twice: as ``sepsti enhance`` does (``sdr``/``sir``/``sar``: quiet-frame
noise dictionary, sparse speech activations) and with maximum-likelihood
activations (``sdr_plain``/...: the paper's plain semi-supervised NMF);
BSS_EVAL v3 gives SDR/SIR/SAR, averaged per SNR. ``sdr_plateau_rank`` is the
first R after which the application's mean SDR gains less than 0.25 dB.

``largest_decrease_se`` checks the STI chains: E_t[log p(X | theta)] must
rise with t (its derivative is a variance); a fall of more than ~3 joint
standard errors means the chains never reached their power posteriors, and
the "evidence" then ranks the EM starts, not the models.

``--sti-json`` reuses the JSON of a ``sepsti select-rank`` run (same
settings) instead of rerunning STI; it is read and checked (its ranks those of ``--ranks``) before
the dictionaries are trained. ``--quick``: K = 100 keeping 50, two
test utterances at one SNR (the middle one found), 50 EM iterations for the
dictionaries. The JSON records ``quick``, ``dictionary_em_iterations`` and
``seed`` beside the STI ``settings``.
"""

import json
import time
from pathlib import Path

import numpy as np

from _common import noizeus_corpus, rank_list, recipe_parser, run_recipe, write_results

from sepsti.core.errors import ParameterError

NAME = "sti_speech"
RANKS = [32, 64, 128, 256, 512]


def main():
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True)
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS folder (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus)")
    parser.add_argument("--sti-json", type=Path, default=None, help="reuse a select-rank JSON")
    parser.add_argument("--ranks", type=rank_list, default=RANKS,
                        help=f"candidate ranks, comma-separated (default {','.join(map(str, RANKS))})")
    parser.add_argument("--settings", choices=["speech", "paper"], default="speech",
                        help="select-rank's defaults (the speech model) or ICASSP'16's settings")
    args = parser.parse_args()
    ranks = args.ranks
    corpus = noizeus_corpus(args.corpus)
    reused = None if args.sti_json is None else read_sti_json(args.sti_json, ranks)
    em_iterations = 50 if args.quick else 200

    from sepsti.corpora.noizeus import mixtures
    from sepsti.training import train_split
    from sepsti.denoise import denoise, train_dictionary
    from sepsti.metrics import bss_eval

    X, _ = train_split(corpus).matrix()
    test = mixtures(corpus, split="test")
    if args.quick:
        keep = sorted({m.utterance for m in test})[:2]
        middle = sorted({m.snr for m in test})[len({m.snr for m in test}) // 2]
        test = [m for m in test if m.utterance in keep and m.snr == middle]
    snrs = sorted({m.snr for m in test})
    methods = {"": {}, "_plain": {"sparsity": 0.0}}  # the application's denoising, the paper's plain NMF
    scores = {key + suffix: {snr: [] for snr in snrs} for key in ("sdr", "sir", "sar") for suffix in methods}
    for rank in ranks:
        W, _ = train_dictionary(X, rank, max_iter=em_iterations, seed=args.seed)
        for suffix, options in methods.items():
            per_snr = {snr: [] for snr in snrs}
            for mixture in test:
                speech = denoise(mixture.noisy, W, noise_rank=5, seed=args.seed, **options)
                per_snr[mixture.snr].append(bss_eval(mixture.clean, mixture.noisy, speech))
            for snr in snrs:
                for key in ("sdr", "sir", "sar"):
                    scores[key + suffix][snr].append(float(np.nanmean([s[key] for s in per_snr[snr]])))
            print(f"R = {rank:>4}{suffix or ' (sepsti)'}: SDR "
                  + ", ".join(f"{snr} dB: {scores['sdr' + suffix][snr][-1]:.2f}" for snr in snrs), flush=True)
    if reused is not None:
        log_ml, stderr, seconds_sti, settings, falls = reused
    else:
        from sepsti.core.evidence.sti_nmf import select_rank_sti
        from sepsti.commands.select_rank import SPEECH_MODEL

        chains = dict(SPEECH_MODEL) if args.settings == "speech" else {"preset": "paper", "prior_rate": 4e-4}
        if args.quick:
            chains.update(num_steps=100, num_keep=50)
        start = time.perf_counter()
        selection = select_rank_sti(X, ranks, seed=args.seed, progress=True, **chains)
        seconds_sti = time.perf_counter() - start
        log_ml = selection.log_marginal_likelihood.tolist()
        stderr = selection.stderr.tolist()
        settings = selection.settings
        falls = selection.largest_decrease.tolist()
    selected = ranks[int(np.argmax(log_ml))]

    mean_sdr = np.mean([scores["sdr"][snr] for snr in snrs], axis=0)
    plateau = _plateau(ranks, mean_sdr)
    plateau_plain = _plateau(ranks, np.mean([scores["sdr_plain"][snr] for snr in snrs], axis=0))
    out = {"ranks": ranks, "log_marginal_likelihood": log_ml, "stderr": stderr, "selected_rank": selected,
           **{key: {str(k): v for k, v in values.items()} for key, values in scores.items()},
           "seconds_sti": seconds_sti, "sdr_plateau_rank": plateau, "sdr_plain_plateau_rank": plateau_plain,
           "selection_within_one_step_of_plateau": abs(ranks.index(selected) - ranks.index(plateau)) <= 1,
           "largest_decrease_se": falls,
           "chains_equilibrated": bool(np.all(np.asarray(falls) <= 3.0)),
           "test_files": sorted({m.utterance for m in test}), "noises": sorted({m.noise for m in test}),
           "settings": settings, "quick": args.quick, "dictionary_em_iterations": em_iterations,
           "seed": args.seed}
    print(f"STI selects R = {selected}; mean SDR stops improving at R = {plateau} (sepsti enhance), "
          f"{plateau_plain} (plain NMF)")
    if not out["chains_equilibrated"]:
        print("E_t[log p] falls with t (largest falls in standard errors: "
              + ", ".join(f"R={r}: {f:.0f}" for r, f in zip(ranks, falls))
              + "): the chains did not reach their power posteriors, so these are not log marginal likelihoods")
    write_results(args, out, figure(out))


def read_sti_json(path, ranks):
    """The STI results for ``ranks`` of a ``sepsti select-rank`` JSON: log p(X | R), their standard errors, the
    seconds, the settings and the largest falls of E_t[log p] (in standard errors) per rank.

    Raises
    ------
    ParameterError
        If the file cannot be read, is not the JSON of a select-rank run, or of one of other ranks.
    """
    try:
        sti = json.loads(Path(path).read_text())
        if sti["ranks"] != ranks:
            raise ParameterError(f"--sti-json {path}: ranks {sti['ranks']} differ from --ranks {ranks}")
        falls = sti["per_temperature"]["largest_decrease_se"]
        return (sti["log_marginal_likelihood"], sti["stderr"], sti["seconds"], sti.get("settings", {}),
                [falls[str(rank)] for rank in ranks])
    except OSError as error:
        raise ParameterError(f"--sti-json {path}: cannot read it ({error.strerror or error})") from None
    except ValueError as error:
        raise ParameterError(f"--sti-json {path}: not JSON ({error})") from None
    except (KeyError, TypeError) as error:
        raise ParameterError(f"--sti-json {path}: not the JSON of a select-rank run (no {error})") from None


def _plateau(ranks, sdr, tol=0.25):
    """The first rank after which mean SDR gains less than ``tol`` dB."""
    for i in range(len(ranks) - 1):
        if sdr[i + 1] - sdr[i] < tol:
            return ranks[i]
    return ranks[-1]


def figure(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(15, 3.4))
    for ax, key in zip(axes[:3], ("sdr", "sir", "sar")):
        for color, (snr, values) in enumerate(out[key].items()):
            ax.plot(out["ranks"], values, "o-", ms=3, color=f"C{color}", label=f"{snr} dB")
            ax.plot(out["ranks"], out[key + "_plain"][snr], "x--", ms=3, color=f"C{color}", alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_xticks(out["ranks"], [str(r) for r in out["ranks"]])
        ax.set_title(key.upper() + " (dB): sepsti —, plain NMF - -", fontsize=9)
        ax.set_xlabel("R")
    axes[0].legend(fontsize=7)
    axes[3].errorbar(out["ranks"], out["log_marginal_likelihood"], yerr=2 * np.asarray(out["stderr"]), fmt="o-", ms=4)
    axes[3].set_xscale("log", base=2)
    axes[3].set_xticks(out["ranks"], [str(r) for r in out["ranks"]])
    axes[3].set_title("log p(X | R), STI")
    axes[3].set_xlabel("R")
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, NAME)
