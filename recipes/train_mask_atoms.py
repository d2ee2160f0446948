"""Mask atoms for the shipped 8 kHz dictionary, learned on the NOIZEUS training mixtures (:mod:`sepsti.mask_atoms`).

The enhancer, as ``sepsti enhance`` runs it with the shipped 8 kHz dictionary, separates every mixture of the
train split (sp01–sp20, each noise and SNR the corpus holds); its speech activations and noise part are
recorded frame by frame with the mixture's and the clean speech's magnitudes. Atoms are learned on sp01–sp15
from the dictionary's centre frame; sp16–sp20 (another talker) choose the update kept. The band is read from
the clean training speech (:func:`sepsti.mask_atoms.speech_band`); the factor on the atoms is the one of
:attr:`sepsti.mask_atoms.MaskTraining.factors` with which the enhancer (``sepsti evaluate``'s code) gives the
held-out mixtures the highest mean SDR. The dictionary is written again with the atoms in its ``mask_atoms``
field, to ``DIR/<its name>.npz`` (``--out``; for the shipped one copy it to
``sepsti/data/narrowband_dictionary.npz`` to ship it). ``--dictionary``: another speech dictionary at the
corpus's rate (``sepsti train``'s), whose own fields are kept. ``--quick``: sp01–sp02 and sp16 at one SNR, five
updates, two factors.

Usage::

    python recipes/train_mask_atoms.py [--corpus DIR] [--dictionary PATH] [--quick] [--out DIR]
"""

import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from _common import dictionary_to_extend, noizeus_corpus, recipe_parser, run_recipe, write_results  # noqa: E402

NAME = "train_mask_atoms"
#: The train split's sentences the atoms are learned on; the rest of it chooses the update kept.
FIT_IDS = tuple(f"sp{number:02d}" for number in range(1, 16))
#: Band edges (Hz) of the summary of the learned atoms over the centre frame.
SUMMARY_BANDS = (0, 300, 1000, 2000, 3000, 3500, 4000)


def main(argv=None):
    parser = recipe_parser(NAME, __doc__.splitlines()[0], plot=True,
                           writes="DIR/<the dictionary's name>.npz, the dictionary with them")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="NOIZEUS-style folder (default: $SEPSTI_NOIZEUS or ../shared/data/noizeus)")
    parser.add_argument("--dictionary", type=Path, default=None,
                        help="the speech dictionary to learn mask atoms for, at the corpus's rate (default: the "
                             "shipped 8 kHz one)")
    args = parser.parse_args(argv)

    from sepsti.commands.evaluate import enhance_signal
    from sepsti.core.errors import ParameterError
    from sepsti.core.io import check_output_path
    from sepsti.core.progress import progress_bar
    from sepsti.corpora.noizeus import TRAIN_IDS, corpus_index, iter_mixtures
    from sepsti.dictionary import save_dictionary
    from sepsti.mask_atoms import (MaskTraining, centre_frame, learn_mask_atoms, mask_atoms, record_separation,
                                   speech_band)
    from sepsti.metrics import bss_eval

    source, dictionary, storage = dictionary_to_extend(args.dictionary)
    corpus = noizeus_corpus(args.corpus)
    index = corpus_index(corpus)
    training = MaskTraining(max_iter=5, factors=(0.5, 0.8)) if args.quick else MaskTraining()
    ids = ["sp01", "sp02", "sp16"] if args.quick else list(TRAIN_IDS)
    snrs = [min(index.snrs)] if args.quick else None
    mixtures = list(iter_mixtures(index, split=ids, snrs=snrs))
    rates = {mixture.sample_rate for mixture in mixtures} - {dictionary.sample_rate}
    if rates:
        raise ParameterError(f"dictionary {source}: at {dictionary.sample_rate} Hz, the corpus's files at {min(rates)} "
                             f"Hz; pass --dictionary with one at the corpus's rate")
    args.out.mkdir(parents=True, exist_ok=True)  # the inputs checked first: a bad one leaves no folder behind
    target = check_output_path(args.out / f"{Path(source).stem}.npz", overwrite=args.overwrite, inputs=[source])

    fit, held_out, held_out_mixtures = [], [], []
    with progress_bar(len(mixtures), desc="separating", unit="mixture") as bar:
        for mixture in mixtures:
            record = record_separation(mixture.noisy, mixture.clean, dictionary.W, framing=dictionary.framing)
            if record is not None:
                (fit if mixture.utterance in FIT_IDS else held_out).append(record)
                if mixture.utterance not in FIT_IDS:
                    held_out_mixtures.append(mixture)
            bar.update(1)
    sums, bins = dictionary.W.sum(axis=0), dictionary.framing.n_bins
    start = centre_frame(dictionary.W, dictionary.framing)
    learned, history = learn_mask_atoms(start, fit, held_out, max_iter=training.max_iter)
    band = speech_band(np.concatenate([record.clean for record in fit + held_out], axis=1), training.band_db)
    candidates = {factor: dictionary._replace(mask_atoms=mask_atoms(learned, start, band, factor) * sums)
                  for factor in training.factors}
    sdr = {}
    with progress_bar(len(candidates) * len(held_out_mixtures), desc="choosing the factor", unit="mixture") as bar:
        for factor, candidate in candidates.items():
            scores = []
            for mixture in held_out_mixtures:
                estimate = enhance_signal(mixture.noisy, mixture.sample_rate, candidate)
                scores.append(bss_eval(mixture.clean, mixture.noisy, estimate)["sdr"])
                bar.update(1)
            sdr[factor] = float(np.mean(scores))
    factor = max(sdr, key=sdr.get)
    save_dictionary(target, candidates[factor], overwrite=args.overwrite, dtype=storage)

    frequencies = np.arange(bins) * dictionary.sample_rate / dictionary.n_fft
    growth = learned / np.maximum(start, np.finfo(np.float64).tiny)  # learned over the centre frame, entry by entry
    kept = max(history, key=lambda row: row[2])[0]
    summary = {f"{low}-{high} Hz": float(np.median(growth[(frequencies >= low) & (frequencies < high)]))
               for low, high in zip(SUMMARY_BANDS, SUMMARY_BANDS[1:])}
    inside = frequencies[band]
    print(f"{len(fit)} mixtures fitted, {len(held_out)} held out; update {kept} kept: held-out masked SNR "
          f"{history[0][2]:.2f} -> {history[kept][2]:.2f} dB; band {inside.min():.0f}-{inside.max():.0f} Hz; "
          f"learned over centre frame (median) " + ", ".join(f"{name} x{value:.2f}" for name, value in summary.items()))
    print("held-out mean SDR by factor: " + ", ".join(f"{key}: {value:.2f} dB" for key, value in sdr.items())
          + f"; {factor} kept")
    print(f"wrote {target}")
    results = {"corpus": str(corpus), "speech_dictionary": str(source), "dictionary": str(target),
               "training": training._asdict(),
               "fit_mixtures": len(fit), "held_out_mixtures": len(held_out), "update_kept": kept,
               "history": [{"update": update, "fit_snr_db": fit_snr, "held_out_snr_db": held_snr}
                           for update, fit_snr, held_snr in history],
               "band_hz": [float(inside.min()), float(inside.max())], "learned_over_centre_by_band": summary,
               "held_out_sdr_db_by_factor": {str(key): value for key, value in sdr.items()}, "factor_kept": factor}
    write_results(args, results, _figure(history, frequencies, np.median(growth, axis=1), band))


def _figure(history, frequencies, growth, band):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    updates, fit_snr, held_snr = zip(*history)
    left.plot(updates, fit_snr, label="fitted mixtures")
    left.plot(updates, held_snr, label="held-out mixtures")
    left.set(xlabel="update", ylabel="masked-magnitude SNR (dB)", title="learning the mask atoms")
    left.legend()
    right.semilogy(frequencies, growth)
    right.fill_between(frequencies, growth.min(), growth.max(), where=band, alpha=0.15, label="band used")
    right.set(xlabel="frequency (Hz)", ylabel="learned / centre frame", title="learned atoms (median over atoms)")
    right.legend()
    figure.tight_layout()
    return figure


if __name__ == "__main__":
    run_recipe(main, NAME)
