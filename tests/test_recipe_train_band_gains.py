"""``recipes/train_band_gains.py``: a reduced run on the NOIZEUS copy and stand-ins for the recorded noises writes
a dictionary whose band-gain networks the enhancer loads and uses, leaving the dictionary it started from as it
was, at 8 kHz and at 16 kHz; missing recordings and a dictionary of another rate are refused before any work."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))

import train_band_gains  # noqa: E402
from sepsti.band_gains import OFFSETS  # noqa: E402
from test_cli_train import _wideband_corpus  # noqa: E402
from test_dictionary import _dictionary  # noqa: E402

pytest.importorskip("sklearn")
# the stand-in wideband corpus is not the distributed speaker set, whose split it would move
pytestmark = pytest.mark.filterwarnings("ignore:wideband manifest:UserWarning")
QUICK_KINDS = sorted(train_band_gains.RECORDED)[:4]


def _stand_ins(root, rng):
    """A short recording of coloured noise at each path the quick run's noise types name (``*`` read as ``x``)."""
    import soundfile

    for kind in QUICK_KINDS:
        for pattern in train_band_gains.RECORDED[kind]:
            path = root / pattern.replace("*", "x")
            path.parent.mkdir(parents=True, exist_ok=True)
            noise = np.cumsum(rng.standard_normal(3 * 22050)) * 0.002
            soundfile.write(path, noise - noise.mean(), 22050, format="OGG", subtype="VORBIS")


def test_a_quick_run_writes_the_callers_dictionary_with_networks_the_enhancer_uses(noizeus_root, tmp_path, rng,
                                                                                    capsys):
    from sepsti.commands.evaluate import enhance_signal
    from sepsti.corpora.noizeus import mixtures
    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path, save_dictionary

    _stand_ins(tmp_path / "root", rng)
    shipped = load_dictionary(narrowband_dictionary_path())
    networks = shipped.band_gains  # the caller's file holds networks of an earlier version's 185 inputs
    earlier = networks._replace(mean=networks.mean[:, :185], scale=networks.scale[:, :185],
                                hidden=(networks.hidden[0][:, -186:], *networks.hidden[1:]))
    mine = tmp_path / "mine.npz"
    save_dictionary(mine, shipped._replace(band_gains=None), dtype=np.float32)
    with np.load(mine) as stored:
        np.savez(mine, **stored, **{f"band_gains_{part}": getattr(earlier, part) for part in ("mean", "scale",
                                                                                              "output")},
                 **{f"band_gains_hidden_{i}": layer for i, layer in enumerate(earlier.hidden, start=1)})
    before = mine.read_bytes()
    wide = _wideband_corpus(tmp_path / "wide", rng)
    train_band_gains.main(["--quick", "--corpus", str(noizeus_root), "--wideband", str(wide), "--root",
                           str(tmp_path / "root"), "--dictionary", str(mine), "--out", str(tmp_path / "out")])
    assert mine.read_bytes() == before
    written = load_dictionary(tmp_path / "out" / "mine.npz")
    np.testing.assert_array_equal(written.W, load_dictionary(mine, band_gains=False).W)
    networks = written.band_gains
    assert networks.num_networks == 2 and [layer.shape[2] for layer in networks.hidden] == [64, 32]
    results = json.loads((tmp_path / "out" / "train_band_gains.json").read_text())
    counts = results["mixtures_by_type"]
    # sp01-sp02: the corpus's files (4 SNRs) and one higher SNR; the clean sentences twice; 2 SNRs of each
    # recording; two wideband talkers (the train split's first two), each clean and in two mixtures
    assert results["talkers"] == ["13-1-0000", "15-1-0000"]
    talkers = sum(counts.values()) - (4 + 2 * 2 * len(QUICK_KINDS) + 2 * 5 * 4)
    assert talkers == 2 * 3 and counts["clean"] == 4 + 2
    # each clean sentence separated once for its two copies
    assert results["separations"] == sum(counts.values()) - 2
    assert all(counts[kind] >= 2 * 2 for kind in QUICK_KINDS)
    assert all(counts[noise] >= 2 * 5 for noise in ("babble", "car", "street", "train"))
    assert [fit["rows"] for fit in results["networks"]] == [20_000, 20_000]
    kinds = sorted(counts)
    assert [fit["without"] for fit in results["networks"]] == [kinds[0::2], kinds[1::2]]
    assert (tmp_path / "out" / "train_band_gains.png").stat().st_size > 0
    assert "wrote" in capsys.readouterr().out
    mixture = mixtures(noizeus_root, split="test", noises=["car"], snrs=[5])[0]
    corrected = enhance_signal(mixture.noisy, mixture.sample_rate, written)
    plain = enhance_signal(mixture.noisy, mixture.sample_rate, written._replace(band_gains=None))
    assert corrected.shape == plain.shape and not np.allclose(corrected, plain)


def test_missing_recordings_are_named_before_any_work(noizeus_root, tmp_path):
    from sepsti.core.errors import ParameterError

    with pytest.raises(ParameterError, match=r"--root .*: no usr/share/games/widelands/data/sound/animals/\*\.ogg "
                                             r"\(noise type 'animals'\)"):
        train_band_gains.main(["--quick", "--corpus", str(noizeus_root), "--root", str(tmp_path), "--wideband",
                               str(_wideband_corpus(tmp_path / "wide", np.random.default_rng(0))),
                               "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_a_quick_run_at_16_kHz_trains_on_the_wideband_talkers_alone(tmp_path, rng):
    """No NOIZEUS corpus needed: the talkers at the dictionary's rate, clean and in mixtures of the recorded noises
    at full band; the written dictionary's networks change a 16 kHz enhancement."""
    from sepsti.commands.evaluate import enhance_signal
    from sepsti.dictionary import load_dictionary, save_dictionary, wideband_dictionary_path

    _stand_ins(tmp_path / "root", rng)
    mine = tmp_path / "wide16.npz"
    save_dictionary(mine, load_dictionary(wideband_dictionary_path())._replace(band_gains=None), dtype=np.float32)
    train_band_gains.main(["--quick", "--corpus", str(tmp_path / "absent"), "--root", str(tmp_path / "root"),
                           "--wideband", str(_wideband_corpus(tmp_path / "wide", rng)), "--dictionary", str(mine),
                           "--out", str(tmp_path / "out")])
    results = json.loads((tmp_path / "out" / "train_band_gains.json").read_text())
    assert results["sample_rate"] == 16000 and results["sentences"] == [] and results["corpus"] is None
    counts = results["mixtures_by_type"]
    # two talkers, each clean once and in two mixtures of the four recorded types
    assert counts.pop("clean") == 2 and sum(counts.values()) == 2 * 2 and set(counts) <= set(QUICK_KINDS)
    written = load_dictionary(tmp_path / "out" / "wide16.npz")
    assert written.sample_rate == 16000 and written.band_gains.num_networks == 2
    t = np.arange(3 * 16000) / 16000
    noisy = 0.1 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 2 * t) > 0) + 0.02 * rng.standard_normal(t.size)
    corrected = enhance_signal(noisy, 16000, written)
    assert not np.allclose(corrected, enhance_signal(noisy, 16000, written._replace(band_gains=None)))


def test_trainings_stack_the_networks_each_seed_trains_alone(tmp_path, rng):
    """``--trainings 2 --seed 5`` writes the networks of a run at seed 5 followed by those of a run at seed 6, which
    differ: a training draws everything from its own seed and nothing from the one before it."""
    from sepsti.dictionary import load_dictionary, save_dictionary, wideband_dictionary_path

    _stand_ins(tmp_path / "root", rng)
    mine = tmp_path / "wide16.npz"
    save_dictionary(mine, load_dictionary(wideband_dictionary_path())._replace(band_gains=None), dtype=np.float32)
    wide = _wideband_corpus(tmp_path / "wide", rng)

    def trained(*options):
        out = tmp_path / "_".join(options)
        train_band_gains.main(["--quick", "--root", str(tmp_path / "root"), "--wideband", str(wide), "--dictionary",
                               str(mine), "--out", str(out), *options])
        return load_dictionary(out / "wide16.npz").band_gains, json.loads((out / "train_band_gains.json").read_text())

    (stacked, results), (first, _), (second, _) = (trained("--trainings", "2", "--seed", "5"),
                                                   trained("--seed", "5"), trained("--seed", "6"))
    assert results["seeds"] == [5, 6] and [fit["seed"] for fit in results["networks"]] == [5, 5, 6, 6]
    # the second training takes the first's separations of the two talkers' clean speech
    assert sum(results["mixtures_by_type"].values()) == 2 * 2 * 3 and results["separations"] == 2 * 2 * 3 - 2
    assert stacked.num_networks == 4 and first.num_networks == second.num_networks == 2
    for part, alone in zip(_arrays(stacked), zip(_arrays(first), _arrays(second))):
        np.testing.assert_array_equal(part, np.concatenate(alone))
    assert not np.allclose(first.output, second.output)


def test_trainings_whose_seeds_pass_2_to_the_32_are_refused_before_any_work(tmp_path):
    from sepsti.core.errors import ParameterError
    from sepsti.dictionary import wideband_dictionary_path

    with pytest.raises(ParameterError, match=r"--seed 4294967295 with 2 trainings: their seeds must stay below"):
        train_band_gains.main(["--quick", "--root", str(tmp_path), "--seed", str(2 ** 32 - 1), "--trainings", "2",
                               "--dictionary", str(wideband_dictionary_path()), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def _arrays(networks):
    """The arrays of a :class:`sepsti.band_gains.BandGains`, in order."""
    return [networks.mean, networks.scale, *networks.hidden, networks.output]


@pytest.mark.parametrize("rate", [8000, 16000])
def test_the_talkers_mixtures_are_made_at_the_dictionarys_rate(tmp_path, rng, rate):
    """Each talker's 1.6 s at the rate asked, clean talker_copies times and in talker_mixtures noisy mixtures whose
    noise (a recording, or keystrokes made at that rate) spans the whole talker."""
    from sepsti.corpora import wideband

    _stand_ins(tmp_path / "root", rng)
    talkers = wideband.select(_wideband_corpus(tmp_path / "wide", rng), "train")[:2]
    recordings = {kind: train_band_gains._recordings(tmp_path / "root", kind) for kind in QUICK_KINDS}
    training = train_band_gains.QUICK._replace(talker_copies=3)
    mixtures = train_band_gains._talker_mixtures(talkers, recordings, {}, training, rate, seed=0)
    assert len(mixtures) == 2 * (3 + training.talker_mixtures)
    assert all(len(noisy) == len(clean) == int(1.6 * rate) for _, noisy, clean in mixtures)
    noises = [noisy - clean for kind, noisy, clean in mixtures if kind != train_band_gains.CLEAN]
    assert len(noises) == 2 * training.talker_mixtures and all(np.all(noise[:rate // 10] != 0) for noise in noises)


def test_a_networks_rows_are_its_picks_of_each_separation_in_order(rng):
    """One network's rows, built into one array: each example's inputs and targets at its picked band-frames (none,
    repeated, out of order), the examples in turn."""
    from sepsti.band_gains import NUM_BANDS, NUM_INPUTS, TrainingExample

    examples = [("kind", TrainingExample(rng.standard_normal((5, NUM_BANDS, m)).astype(np.float32),
                                         rng.random((NUM_BANDS, m), dtype=np.float32), np.ones((NUM_BANDS, m))))
                for m in (3, 40, 7)]
    picks = [np.array([5, 5, 0]), np.zeros(0, dtype=int), np.array([139, 2, 60, 2])]
    X, y, gains = train_band_gains._rows(examples, picks)
    assert X.shape == (7, NUM_INPUTS) and X.dtype == np.float64 and y.dtype == np.float32
    np.testing.assert_array_equal(X[:3], examples[0][1].inputs()[[5, 5, 0]])
    np.testing.assert_array_equal(X[3:], examples[2][1].inputs()[[139, 2, 60, 2]])
    np.testing.assert_array_equal(y, np.concatenate([examples[0][1].target.reshape(-1)[[5, 5, 0]],
                                                     examples[2][1].target.reshape(-1)[[139, 2, 60, 2]]]))
    np.testing.assert_array_equal(gains, X[:, _GAIN_INPUT])  # the mask's band gain, as the networks read it


def test_networks_fitted_two_at_a_time_are_those_fitted_one_after_another(rng):
    """The fitting processes give every network, and how its fit went, as fitting them in turn with one BLAS thread
    (as the recipe runs) would, to the bit, in the order of the picks."""
    from threadpoolctl import threadpool_limits

    from sepsti.band_gains import NUM_BANDS, TrainingExample

    examples = [(kind, TrainingExample(rng.standard_normal((5, NUM_BANDS, m)).astype(np.float32),
                                       rng.random((NUM_BANDS, m), dtype=np.float32), np.ones((NUM_BANDS, m))))
                for kind, m in (("a", 30), ("b", 50))]
    training = train_band_gains.QUICK._replace(rows=3000, max_iter=4)
    picks = [[rng.integers(0, NUM_BANDS * m, 1000 + 500 * k) for m in (30, 50)] for k in range(3)]
    apart = train_band_gains._fitted_apart(examples, picks, training, seed=5)
    assert len(apart) == 3 and not train_band_gains._FITTING  # nothing held once done
    for chosen, ((scaler, network), fit) in zip(picks, apart):
        X, y, _ = train_band_gains._rows(examples, chosen)
        with threadpool_limits(limits=1, user_api="blas"):
            fitted_alone = train_band_gains._fit(X, y, training.hidden, training.max_iter, 5)
        (scaler_alone, network_alone), fit_alone = fitted_alone
        assert fit == fit_alone and fit["rows"] == len(X)
        np.testing.assert_array_equal(scaler.mean_, scaler_alone.mean_)
        for mine, alone in zip(network.coefs_ + network.intercepts_, network_alone.coefs_ + network_alone.intercepts_):
            np.testing.assert_array_equal(mine, alone)


#: The input holding the mask's band gain at the frame: in the band's own inputs (after its lower neighbour's),
#: the fourth of the kinds read at every offset.
_GAIN_INPUT = (5 * len(OFFSETS) + 3) + 3 * len(OFFSETS) + OFFSETS.index(0)


def test_distil_writes_one_network_learning_the_stacks_moves(tmp_path, rng, monkeypatch):
    """``--distil``: the dictionary's networks are the teacher; one network learns their moves on the band-frames
    of the seed's mixtures, and is written alone, predicting the move; the enhancer uses it."""
    from sepsti.band_gains import ensemble_moves
    from sepsti.commands.evaluate import enhance_signal
    from sepsti.denoise import MASK_FLOOR
    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path, save_dictionary, wideband_dictionary_path

    _stand_ins(tmp_path / "root", rng)
    teacher = load_dictionary(narrowband_dictionary_path()).band_gains  # twelve networks predicting the gain
    mine = tmp_path / "wide16.npz"
    save_dictionary(mine, load_dictionary(wideband_dictionary_path())._replace(band_gains=teacher), dtype=np.float32)
    teacher = load_dictionary(mine).band_gains  # as stored
    fitted = []
    fit = train_band_gains._fit
    monkeypatch.setattr(train_band_gains, "_fit", lambda X, y, *rest: fitted.append((X.copy(), y)) or fit(X, y, *rest))
    train_band_gains.main(["--quick", "--root", str(tmp_path / "root"), "--wideband",
                           str(_wideband_corpus(tmp_path / "wide", rng)), "--dictionary", str(mine), "--distil",
                           "--out", str(tmp_path / "out")])
    [(X, y)] = fitted
    assert len(X) == train_band_gains.QUICK_DISTILLATION.rows
    predictions = teacher.predict(X.astype(np.float32))
    np.testing.assert_allclose(y, ensemble_moves(predictions, X[:, _GAIN_INPUT], MASK_FLOOR), rtol=0, atol=1e-12)
    assert np.sum(y < 0) > len(y) / 10
    student = load_dictionary(tmp_path / "out" / "wide16.npz")
    assert student.band_gains.predicts == "move" and student.band_gains.num_networks == 1
    assert [layer.shape[2] for layer in student.band_gains.hidden] == list(
        train_band_gains.QUICK_DISTILLATION.hidden)
    results = json.loads((tmp_path / "out" / "train_band_gains.json").read_text())
    assert results["distilled_from"] == teacher.num_networks == results["networks"][0]["distilled_from"]
    assert results["distillation"]["hidden"] == list(train_band_gains.QUICK_DISTILLATION.hidden)
    t = np.arange(3 * 16000) / 16000
    noisy = 0.1 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 2 * t) > 0) + 0.02 * rng.standard_normal(t.size)
    corrected = enhance_signal(noisy, 16000, student)
    assert not np.allclose(corrected, enhance_signal(noisy, 16000, student._replace(band_gains=None)))


@pytest.mark.parametrize("networks, options, message", [
    (None, [], "holds no networks; --distil needs networks predicting the gain"),
    ("move", [], "holds a network predicting the move, already distilled"),
    ("gain", ["--trainings", "2"], "--distil learns from the mixtures of one training .seed --seed.: drop"),
])
def test_distil_refuses_a_dictionary_without_a_teacher_and_several_trainings(tmp_path, networks, options, message):
    from sepsti.core.errors import ParameterError
    from sepsti.dictionary import load_dictionary, save_dictionary, wideband_dictionary_path

    shipped = load_dictionary(wideband_dictionary_path())
    assert shipped.band_gains.predicts == "move"  # the shipped network, distilled
    band_gains = networks and shipped.band_gains._replace(predicts=networks)
    save_dictionary(tmp_path / "d.npz", shipped._replace(band_gains=band_gains), dtype=np.float32)
    with pytest.raises(ParameterError, match=message):
        train_band_gains.main(["--quick", "--root", str(tmp_path), "--dictionary", str(tmp_path / "d.npz"),
                               "--distil", "--out", str(tmp_path / "out"), *options])
    assert not (tmp_path / "out").exists()


def test_a_dictionary_at_another_rate_is_refused(noizeus_root, tmp_path, rng):
    from sepsti.core.errors import ParameterError
    from sepsti.dictionary import save_dictionary

    _stand_ins(tmp_path / "root", rng)
    four = tmp_path / "four.npz"
    save_dictionary(four, _dictionary(rng)._replace(W=rng.gamma(1.0, 1.0, (129, 4)), sample_rate=4000, n_fft=256,
                                                    hop_length=128))
    with pytest.raises(ParameterError, match="at 4000 Hz; the correction is trained at 8 kHz"):
        train_band_gains.main(["--quick", "--corpus", str(noizeus_root), "--root", str(tmp_path / "root"),
                               "--wideband", str(_wideband_corpus(tmp_path / "wide", rng)),
                               "--dictionary", str(four), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
