"""``sepsti evaluate``: table, JSON contract, plot, selection, options, missing score packages, and bad input."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile
from scipy import stats

from test_cli_train import (NOISES, RANK, SNRS, TEST, assert_one_line_error, make_corpus,  # noqa: F401
                            no_temp_files, run, snapshot, tiny_corpus, tiny_dictionary)


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    """As the command does in its own process (there it must act before NumPy loads)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(1, user_api="blas"):
        yield


# BSS Eval dominates the time: the full run scores one utterance (4 mixtures, 8 evaluations).
SCORED = ("sp21",)
ALL_SCORES = {"sdr", "sir", "sar", "stoi", "estoi", "pesq", "high_band_db", "fricative_db"}
BAND_SCORES = {"high_band_db", "fricative_db"}  # the band above 4 kHz: none at 8 kHz


@pytest.fixture(scope="module")
def evaluated(tiny_dictionary, tmp_path_factory):
    corpus = make_corpus(tmp_path_factory.mktemp("evaluate_corpus"), seed=1, train=(), test=SCORED)
    out = tmp_path_factory.mktemp("evaluate")
    result = run(["evaluate", "--corpus", corpus, "--dictionary", tiny_dictionary,
                  "--json", out / "scores.json", "--plot", out / "scores.png"])
    return result, out, corpus


def test_json_follows_the_contract(evaluated, tiny_dictionary):
    result, out, _ = evaluated
    assert result.exit_code == 0, result.stderr
    scores = json.loads((out / "scores.json").read_text())
    assert set(scores) == {"results", "summary"}
    rows = scores["results"]
    assert len(rows) == len(SCORED) * len(NOISES) * len(SNRS)
    assert {(row["file"], row["noise"], row["snr"]) for row in rows} == {
        (utterance, noise, snr) for utterance in SCORED for noise in NOISES for snr in SNRS}
    for row in rows:
        assert set(row) == {"file", "noise", "snr", "input", "enhanced"}
        for key in ("input", "enhanced"):
            assert set(row[key]) == ALL_SCORES
            assert 0 < row[key]["stoi"] <= 1 and 0 < row[key]["estoi"] <= 1 and 1 <= row[key]["pesq"] <= 4.6
        assert all(np.isfinite(value) for metric, value in row["enhanced"].items() if metric not in BAND_SCORES)
        assert all(row[key][metric] is None for key in ("input", "enhanced") for metric in BAND_SCORES)
        assert np.isfinite(row["input"]["sdr"]) and np.isfinite(row["input"]["sir"])
        # the unprocessed input has no artifacts: SAR is infinite, which JSON writes as null
        assert row["input"]["sar"] is None
    summary = scores["summary"]
    from sepsti.denoise import EM_ITERATIONS

    # the settings the scores were made with, defaults written out
    assert summary["settings"] == {"noise_rank": 5, "iterations": EM_ITERATIONS, "seed": 0,
                                   "max_reduction_db": pytest.approx(26.0, abs=0.03)}
    assert summary["dictionaries"] == [{"path": str(tiny_dictionary), "sample_rate": 8000, "rank": RANK}]
    assert [entry["snr"] for entry in summary["by_snr"]] == sorted(SNRS)
    for entry in summary["by_snr"]:
        matching = [row for row in rows if row["snr"] == entry["snr"]]
        assert entry["count"] == len(matching)
        assert entry["input"]["sar"] is None and entry["improvement"]["sar"] is None
        assert set(entry["input"]) == set(entry["enhanced"]) == set(entry["improvement"]) == ALL_SCORES
        for metric in ALL_SCORES - BAND_SCORES:
            mean_out = np.mean([row["enhanced"][metric] for row in matching])
            assert entry["enhanced"][metric] == pytest.approx(mean_out)
            if metric == "sar":
                continue
            mean_in = np.mean([row["input"][metric] for row in matching])
            assert entry["input"][metric] == pytest.approx(mean_in)
            assert entry["improvement"][metric] == pytest.approx(mean_out - mean_in)
            # one sentence: no spread to estimate, no interval (test_summary_interval_over_sentences)
            assert entry["interval"][metric] is None
    assert summary["overall"]["count"] == len(rows)
    assert summary["pesq_modes"] == ["nb"]


def test_scores_match_the_library_on_the_files(evaluated):
    """The JSON's STOI and PESQ of a mixture are the libraries' own on the corpus files (the input row)."""
    import soundfile
    from pesq import pesq
    from pystoi import stoi

    _, out, corpus = evaluated
    row = json.loads((out / "scores.json").read_text())["results"][0]
    clean, rate = soundfile.read(corpus / "clean" / f"{row['file']}.wav")
    noisy, _ = soundfile.read(corpus / "noisy" / f"{row['noise']}_{row['snr']}dB" /
                              f"{row['file']}_{row['noise']}_sn{row['snr']}.wav")
    assert rate == 8000
    assert row["input"]["stoi"] == pytest.approx(stoi(clean, noisy, rate), abs=1e-12)
    assert row["input"]["estoi"] == pytest.approx(stoi(clean, noisy, rate, extended=True), abs=1e-12)
    assert row["input"]["pesq"] == pytest.approx(pesq(rate, clean, noisy, "nb"), abs=1e-12)


def test_input_scores_follow_the_mixing_snr_and_enhancement_helps(evaluated):
    _, out, _ = evaluated
    summary = json.loads((out / "scores.json").read_text())["summary"]
    by_snr = {entry["snr"]: entry for entry in summary["by_snr"]}
    for snr, entry in by_snr.items():
        # The unprocessed input's SDR is close to its SNR (BSS Eval's 512-tap filters absorb a little noise).
        assert entry["input"]["sdr"] == pytest.approx(snr, abs=1.0)
    assert summary["overall"]["improvement"]["sdr"] > 0


def test_table_and_plot(evaluated):
    result, out, _ = evaluated
    lines = result.stdout.splitlines()
    assert "input SDR" in lines[0] and "enhanced SDR" in lines[0]
    assert lines[0].count("STOI") == 3 and lines[0].count("PESQ") == 3 and "ESTOI" not in lines[0]
    assert len({len(line) for line in lines[:-2]}) == 1, result.stdout  # the columns line up (not "wrote ...")
    for snr in SNRS:
        assert any(line.strip().startswith(f"{snr} dB") for line in lines), result.stdout
    assert any(line.strip().startswith("all") for line in lines)
    assert (out / "scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert no_temp_files(out)


def test_selection_by_noise_and_snr(tiny_corpus, tiny_dictionary, tmp_path):
    result = run(["evaluate", "--corpus", tiny_corpus, "--dictionary", tiny_dictionary, "--noise", "hum",
                  "--snr", "5", "--json", tmp_path / "s.json", "--iterations", 5])
    assert result.exit_code == 0, result.stderr
    rows = json.loads((tmp_path / "s.json").read_text())["results"]
    assert {(row["noise"], row["snr"]) for row in rows} == {("hum", 5)}
    assert len(rows) == len(TEST)


def test_corpus_at_another_rate(tmp_path, tiny_dictionary):
    corpus = make_corpus(tmp_path / "corpus", seed=2, train=(), test=("sp21",), noises=("white",), snrs=(0,),
                         rate=16000)
    result = run(["evaluate", "--corpus", corpus, "--dictionary", tiny_dictionary, "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    scores = json.loads((tmp_path / "s.json").read_text())
    (row,) = scores["results"]
    assert scores["summary"]["pesq_modes"] == ["wb"]   # scored at the corpus's 16 kHz
    assert row["input"]["sdr"] == pytest.approx(0.0, abs=1.0)
    assert row["enhanced"]["sdr"] > row["input"]["sdr"]


def test_options_reach_the_core(tiny_corpus, tiny_dictionary, tmp_path, monkeypatch):
    import sepsti.denoise
    import sepsti.metrics

    calls, scored = [], []

    def recorder(y, W, **options):
        calls.append(options)
        return 0.5 * y

    def metrics(clean, noisy, speech):
        scored.append(np.allclose(speech, noisy))
        return {"sdr": 1.0, "sir": 2.0, "sar": 3.0}

    monkeypatch.setattr(sepsti.denoise, "denoise", recorder)
    monkeypatch.setattr(sepsti.metrics, "bss_eval", metrics)
    result = run(["evaluate", "--corpus", tiny_corpus, "--dictionary", tiny_dictionary, "--noise", "white",
                  "--noise-rank", 2, "--iterations", 9, "--seed", 7])
    assert result.exit_code == 0, result.stderr
    from sepsti.features import NARROWBAND

    assert calls == [{"noise_rank": 2, "max_iter": 9, "seed": 7, "framing": NARROWBAND, "mask_atoms": None,
                      "band_gains": None}] * (
        len(TEST) * len(SNRS))
    assert scored == [True, False] * (len(TEST) * len(SNRS))  # the input, then the enhanced speech


def test_max_reduction_reaches_the_core_in_db_of_amplitude_and_the_settings_record_the_options(
        tiny_corpus, tiny_dictionary, tmp_path, monkeypatch):
    """--max-reduction 12: no bin lowered by more than 12 dB, a mask floor of 10^(-12/20) in amplitude, as enhance
    gives it; the JSON's settings are the options given, not their defaults."""
    import sepsti.denoise
    import sepsti.metrics

    floors = []

    def recorder(y, W, **options):
        floors.append(options["mask_floor"])
        return 0.5 * y

    monkeypatch.setattr(sepsti.denoise, "denoise", recorder)
    monkeypatch.setattr(sepsti.metrics, "bss_eval", lambda clean, noisy, speech: {"sdr": 1.0, "sir": 2.0, "sar": 3.0})
    result = run(["evaluate", "--corpus", tiny_corpus, "--dictionary", tiny_dictionary, "--noise", "white",
                  "--snr", 0, "--noise-rank", 2, "--iterations", 9, "--seed", 7, "--max-reduction", 12,
                  "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    assert len(floors) == len(TEST)
    assert all(-20 * np.log10(floor) == pytest.approx(12.0, rel=1e-12) for floor in floors)
    settings = json.loads((tmp_path / "s.json").read_text())["summary"]["settings"]
    assert settings == {"noise_rank": 2, "iterations": 9, "seed": 7, "max_reduction_db": pytest.approx(12.0, rel=1e-12)}


def test_missing_score_packages_leave_bss_eval(tiny_corpus, tiny_dictionary, tmp_path, monkeypatch):
    """Without pystoi and pesq: one line on stderr, exit 0, SDR/SIR/SAR in table, JSON and plot as before."""
    import sys

    for package in ("pystoi", "pesq"):
        monkeypatch.setitem(sys.modules, package, None)  # an import of it raises ImportError
    result = run(["evaluate", "--corpus", tiny_corpus, "--dictionary", tiny_dictionary, "--noise", "white",
                  "--snr", 0, "--iterations", 5, "--json", tmp_path / "s.json", "--plot", tmp_path / "s.png"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == ["Warning: STOI and PESQ not scored: pystoi and pesq not installed "
                                          "(pip install 'sepsti[eval]')"]
    assert "STOI" not in result.stdout and "PESQ" not in result.stdout
    scores = json.loads((tmp_path / "s.json").read_text())
    assert all(set(row["input"]) == set(row["enhanced"]) == {"sdr", "sir", "sar", *BAND_SCORES}
               for row in scores["results"])
    assert set(scores["summary"]["overall"]["improvement"]) == {"sdr", "sir", "sar", *BAND_SCORES}
    assert scores["summary"]["pesq_modes"] == []
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    monkeypatch.delitem(sys.modules, "pystoi")  # only pesq missing: STOI is scored
    result = run(["evaluate", "--corpus", tiny_corpus, "--dictionary", tiny_dictionary, "--noise", "white",
                  "--snr", 0, "--iterations", 5, "--json", tmp_path / "s.json", "--overwrite"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == ["Warning: PESQ not scored: pesq not installed (pip install 'sepsti[eval]')"]
    rows = json.loads((tmp_path / "s.json").read_text())["results"]
    assert all(set(row["enhanced"]) == {"sdr", "sir", "sar", "stoi", "estoi", *BAND_SCORES} for row in rows)


def test_undefined_perceptual_scores_are_null(tmp_path, tiny_dictionary):
    """A silent mixture: every score of input and output is undefined, null in the JSON, out of the means."""
    import soundfile

    corpus = make_corpus(tmp_path / "corpus", seed=3, train=(), test=TEST, noises=("white",), snrs=(5,))
    length = soundfile.info(corpus / "clean" / "sp22.wav").frames
    soundfile.write(corpus / "clean" / "sp22.wav", np.zeros(length), 8000, subtype="PCM_16")
    soundfile.write(corpus / "noisy" / "white_5dB" / "sp22_white_sn5.wav", np.zeros(length), 8000, subtype="PCM_16")
    with pytest.warns(RuntimeWarning, match="clean reference is silent"):
        result = run(["evaluate", "--corpus", corpus, "--dictionary", tiny_dictionary, "--iterations", 5,
                      "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    scores = json.loads((tmp_path / "s.json").read_text())
    silent = next(row for row in scores["results"] if row["file"] == "sp22")
    assert all(value is None for key in ("input", "enhanced") for value in silent[key].values())
    defined = [row for row in scores["results"] if row["file"] != "sp22"]
    overall = scores["summary"]["overall"]
    for metric in ("stoi", "estoi", "pesq"):
        assert overall["enhanced"][metric] == pytest.approx(np.mean([row["enhanced"][metric] for row in defined]))


def test_a_mixture_of_little_but_digital_silence_is_scored_unchanged(tmp_path, tiny_dictionary):
    """A second of sound after 20 s of zeros: one warning line naming the file, the input scored as the output."""
    import soundfile

    corpus = make_corpus(tmp_path / "corpus", seed=3, train=(), test=TEST, noises=("white",), snrs=(5,))
    noisy_path = corpus / "noisy" / "white_5dB" / "sp22_white_sn5.wav"
    for path in (corpus / "clean" / "sp22.wav", noisy_path):
        signal, rate = soundfile.read(path, dtype="int16")
        soundfile.write(path, np.concatenate([np.zeros(20 * rate, dtype=np.int16), signal[:rate]]), rate,
                        subtype="PCM_16")
    result = run(["evaluate", "--corpus", corpus, "--dictionary", tiny_dictionary, "--iterations", 5,
                  "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]
    assert len(lines) == 1 and str(noisy_path) in lines[0] and "too little sound" in lines[0], result.stderr
    row = next(row for row in json.loads((tmp_path / "s.json").read_text())["results"] if row["file"] == "sp22")
    assert row["enhanced"].keys() == row["input"].keys()
    for metric, value in row["input"].items():  # SAR of the input itself is undefined (null)
        assert row["enhanced"][metric] == (None if value is None else pytest.approx(value, rel=1e-9)), metric


def _assert_close(ours, theirs, where="document"):
    """Equal structures, floats to 1e-9 relative or 1e-12 absolute."""
    assert type(ours) is type(theirs), where
    if isinstance(ours, dict):
        assert ours.keys() == theirs.keys(), where
        for key in ours:
            _assert_close(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(ours, list):
        assert len(ours) == len(theirs), where
        for index, (mine, other) in enumerate(zip(ours, theirs)):
            _assert_close(mine, other, f"{where}[{index}]")
    elif isinstance(ours, float):
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12), where
    else:
        assert ours == theirs, where


def test_jobs_give_the_scores_of_one_job(tmp_path, tiny_dictionary):
    """Mixtures enhanced and scored in worker processes: the same JSON, row for row, and the same warning line."""
    corpus = make_corpus(tmp_path / "corpus", seed=4, train=(), test=TEST, noises=("white",), snrs=(5,))
    silent = corpus / "noisy" / "white_5dB" / "sp22_white_sn5.wav"
    for path in (corpus / "clean" / "sp22.wav", silent):  # mostly digital silence: scored unchanged, one line
        signal, rate = soundfile.read(path, dtype="int16")
        soundfile.write(path, np.concatenate([np.zeros(20 * rate, dtype=np.int16), signal[:rate]]), rate,
                        subtype="PCM_16")
    documents, results = {}, {}
    for jobs in (1, 2):
        results[jobs] = run(["evaluate", "--corpus", corpus, "--dictionary", tiny_dictionary, "--iterations", 5,
                             "--json", tmp_path / f"{jobs}.json", "--jobs", jobs])
        assert results[jobs].exit_code == 0, results[jobs].stderr
        documents[jobs] = json.loads((tmp_path / f"{jobs}.json").read_text())
    _assert_close(documents[2], documents[1])  # ESTOI's last digits follow the arrays' memory alignment
    assert results[2].stdout.replace("2.json", "1.json") == results[1].stdout
    assert results[2].stderr == results[1].stderr and str(silent) in results[1].stderr


def _silent_references(corpus, utterances):
    """Clean and noisy files of nothing but zeros: the perceptual scores warn (their reference is silent)."""
    for utterance in utterances:
        length = soundfile.info(corpus / "clean" / f"{utterance}.wav").frames
        for path in (corpus / "clean" / f"{utterance}.wav", *corpus.glob(f"noisy/*/{utterance}_*.wav")):
            soundfile.write(path, np.zeros(length), 8000, subtype="PCM_16")


def test_jobs_give_the_warnings_of_one_job_in_order(tmp_path, tiny_dictionary):
    """Warnings raised in worker processes come to this process, in the order of the recordings."""
    corpus = make_corpus(tmp_path / "corpus", seed=5, train=(), test=("sp21", "sp22", "sp23"), noises=("white",),
                         snrs=(5,))
    _silent_references(corpus, ("sp21", "sp23"))
    warned = {}
    for jobs in (1, 2):
        with pytest.warns(RuntimeWarning) as caught:
            result = run(["evaluate", "--corpus", corpus, "--dictionary", tiny_dictionary, "--iterations", 3,
                          "--jobs", jobs])
        assert result.exit_code == 0, result.stderr
        warned[jobs] = [str(warning.message) for warning in caught]
    assert warned[2] == warned[1]
    assert "sp21_white_sn5.wav" in warned[1][0] and "sp23_white_sn5.wav" in warned[1][-1]


def test_an_all_zero_recording_is_said_to_be_scored_unchanged(tmp_path, tiny_dictionary):
    """Digital silence throughout: the enhancer leaves it as it is, and the line says so (as for short files)."""
    corpus = make_corpus(tmp_path / "corpus", seed=5, train=(), test=("sp21", "sp22"), noises=("white",), snrs=(5,))
    silent = corpus / "noisy" / "white_5dB" / "sp22_white_sn5.wav"
    soundfile.write(silent, np.zeros(soundfile.info(silent).frames), 8000, subtype="PCM_16")
    result = run(["evaluate", "--corpus", corpus, "--dictionary", tiny_dictionary, "--iterations", 3])
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "scored unchanged" in line]
    assert len(lines) == 1 and lines[0].startswith(f"Warning: {silent}: "), result.stderr


def test_warnings_print_above_the_progress_bar(tmp_path, tiny_dictionary):
    """From workers too: each on a line of its own (the bar is cleared first), in the order of the recordings."""
    import subprocess
    import sys

    corpus = make_corpus(tmp_path / "corpus", seed=5, train=(), test=("sp21", "sp22", "sp23"), noises=("white",),
                         snrs=(5,))
    _silent_references(corpus, ("sp21", "sp23"))
    result = subprocess.run([sys.executable, "-m", "sepsti", "--progress", "evaluate", "--corpus", str(corpus),
                             "--dictionary", str(tiny_dictionary), "--iterations", "3", "--jobs", "2"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "evaluate:" in result.stderr  # the bar was drawn
    pieces = [piece.strip() for line in result.stderr.splitlines() for piece in line.split("\r")]
    warned = [piece for piece in pieces if "Warning:" in piece]
    assert warned and all(piece.startswith("Warning: ") for piece in warned), result.stderr
    files = [piece.split(": ")[1] for piece in warned]
    assert files == sorted(files) and {os.path.basename(path) for path in files} == {
        "sp21_white_sn5.wav", "sp23_white_sn5.wav"}, files

def test_summary_interval_over_sentences():
    """The improvement's interval takes each sentence's mean as one replicate (two noises per sentence)."""
    from sepsti.commands.evaluate import summarize

    gains = {"sp21": (1.0, 2.0), "sp22": (4.0, 3.0), "sp23": (0.5, 1.5)}
    rows = [{"file": name, "snr": 5, "input": {"sdr": 1.0, "sir": 1.0, "sar": float("inf")},
             "enhanced": {"sdr": 1.0 + gain, "sir": 2.0, "sar": 9.0}} for name, pair in gains.items() for gain in pair]
    interval = summarize(rows)["by_snr"][0]["interval"]
    means = [np.mean(pair) for pair in gains.values()]
    reference = stats.ttest_1samp(means, 0.0).confidence_interval(0.95)
    assert interval["sdr"] == pytest.approx([reference.low, reference.high])
    assert interval["sir"] == pytest.approx([1.0, 1.0])  # every sentence gains 1: no spread
    assert interval["sar"] is None  # the input's SAR is infinite
    assert summarize(rows)["by_snr"][0]["input"]["sar"] == float("inf")  # in every row: the table's ∞, not –


def test_table_gives_means_improvements_and_the_sdr_and_stoi_intervals():
    """Two sentences at 5 dB: the input and enhanced means, the improvements in the Δ columns, the input's SAR as ∞
    and its difference as –, and a line of 95 % intervals over the sentences for SDR and one for STOI."""
    from sepsti.commands.evaluate import format_table, summarize

    inf = float("inf")
    rows = [{"file": "sp21", "snr": 5, "input": {"sdr": 1.0, "sir": 2.0, "sar": inf, "stoi": 0.70, "pesq": 1.5},
             "enhanced": {"sdr": 4.0, "sir": 8.0, "sar": 10.0, "stoi": 0.80, "pesq": 2.0}},
            {"file": "sp22", "snr": 5, "input": {"sdr": 3.0, "sir": 4.0, "sar": inf, "stoi": 0.60, "pesq": 1.3},
             "enhanced": {"sdr": 8.0, "sir": 9.0, "sar": 12.0, "stoi": 0.75, "pesq": 2.0}}]
    lines = format_table(summarize(rows)).splitlines()
    assert [line.split()[0] for line in lines[2:4]] == ["5", "all"]
    for line in lines[2:4]:
        _, before, after, gain = line.split(" | ")
        assert before.split() == ["2.00", "3.00", "∞", "0.650", "1.40"]
        assert after.split() == ["6.00", "8.50", "11.00", "0.775", "2.00"]
        assert gain.split() == ["+4.00", "+5.50", "–", "+0.125", "+0.60"]
    intervals = []
    for name, gains, digits in (("SDR", [3.0, 5.0], 2), ("STOI", [0.10, 0.15], 3)):
        low, high = stats.ttest_1samp(gains, 0.0).confidence_interval(0.95)
        interval = f"[{low:+.{digits}f}, {high:+.{digits}f}]"
        intervals.append(f"95 % interval of Δ{name} over the sentences: 5 dB {interval}, all {interval}")
    assert lines[4:] == intervals


def test_snrs_come_in_ascending_order_negative_ones_first():
    """The table's lines, the JSON's by_snr and the plot's curves go up the SNRs, -5 dB before 0 dB."""
    from sepsti.commands.evaluate import format_table, summarize

    rows = [{"file": name, "snr": snr, "input": {"sdr": float(snr)}, "enhanced": {"sdr": snr + 3.0}}
            for snr in (5, -5, 0) for name in ("sp21", "sp22")]
    summary = summarize(rows)
    assert [entry["snr"] for entry in summary["by_snr"]] == [-5, 0, 5]
    assert [entry["input"]["sdr"] for entry in summary["by_snr"]] == [-5.0, 0.0, 5.0]
    lines = format_table(summary).splitlines()
    assert [line.split()[0] for line in lines[2:6]] == ["-5", "0", "5", "all"]


def test_summary_improvement_is_the_estimate_its_interval_is_about():
    """With unequal mixtures per sentence, or a score undefined on one side only, the improvement is the mean
    of the sentences' mean paired differences, the centre of its interval, not a difference of means."""
    from sepsti.commands.evaluate import summarize

    nan = float("nan")
    gains = {"sp21": [4.0] * 8, "sp22": [1.0], "sp23": [2.0], "sp24": [0.5]}
    rows = [{"file": name, "snr": 5, "input": {"sdr": 1.0, "pesq": 1.5},
             "enhanced": {"sdr": 1.0 + gain, "pesq": 1.7}} for name, values in gains.items() for gain in values]
    rows[-1]["enhanced"]["pesq"] = nan  # sp24's PESQ undefined after enhancement
    rows[-1]["input"]["pesq"] = 0.5  # ... and its input's far from the others'
    entry = summarize(rows)["by_snr"][0]
    assert entry["improvement"]["sdr"] == pytest.approx(np.mean([4.0, 1.0, 2.0, 0.5]))
    assert entry["interval"]["sdr"][0] < entry["improvement"]["sdr"] < entry["interval"]["sdr"][1]
    assert entry["enhanced"]["sdr"] - entry["input"]["sdr"] == pytest.approx((8 * 4.0 + 3.5) / 11)
    assert entry["improvement"]["pesq"] == pytest.approx(0.2)  # the pairs with both scores
    assert entry["interval"]["pesq"] == pytest.approx([0.2, 0.2])


def test_summary_skips_undefined_scores_and_json_has_no_nan():
    from sepsti.core.io import json_safe
    from sepsti.commands.evaluate import summarize

    nan, inf = float("nan"), float("inf")
    rows = [{"file": "sp21", "snr": 0, "input": {"sdr": 1.0, "sir": inf, "sar": 3.0},
             "enhanced": {"sdr": nan, "sir": nan, "sar": nan}},
            {"file": "sp22", "snr": 0, "input": {"sdr": 3.0, "sir": 2.0, "sar": 5.0},
             "enhanced": {"sdr": 4.0, "sir": 6.0, "sar": 8.0}}]
    summary = summarize(rows)
    entry = summary["by_snr"][0]
    # sp21's undefined enhanced scores take its input's out of the means too: both columns are over sp22 (the
    # input's SDR was the mean over both files beside an enhanced one over sp22 alone)
    assert entry["input"] == {"sdr": 3.0, "sir": 2.0, "sar": 5.0}
    assert entry["enhanced"] == {"sdr": 4.0, "sir": 6.0, "sar": 8.0}
    assert entry["interval"] == {"sdr": None, "sir": None, "sar": None}  # one sentence with both scores
    text = json.dumps(json_safe({"results": rows, "summary": summary}), allow_nan=False)
    assert json.loads(text)["results"][0]["enhanced"]["sdr"] is None
    # no finite score, and not the same one in every row: undefined, not the first row's
    mixed = [{"file": name, "input": {"sdr": value}, "enhanced": {"sdr": 1.0}}
             for name, value in (("sp21", inf), ("sp22", nan), ("sp23", -inf))]
    assert np.isnan(summarize(mixed)["overall"]["input"]["sdr"])


# --------------------------------------------------------------------------------------------
# bad input


def test_nothing_matches(tiny_corpus, tiny_dictionary, tmp_path):
    cases = [(["--noise", "jet"], "jet"), (["--snr", "20"], "20"), (["--snr", "a"], "--snr"),
             (["--noise", "white,"], "--noise")]
    for options, fragment in cases:
        result = run(["evaluate", "--corpus", tiny_corpus, "--dictionary", tiny_dictionary,
                      "--json", tmp_path / "s.json", *options])
        assert_one_line_error(result, fragment)
    train_only = make_corpus(tmp_path / "train_only", test=(), noises=(), snrs=())
    assert_one_line_error(run(["evaluate", "--corpus", train_only, "--dictionary", tiny_dictionary]), "no noisy")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(run(["evaluate", "--corpus", empty, "--dictionary", tiny_dictionary]), "no NOIZEUS")
    assert_one_line_error(run(["evaluate", "--corpus", tmp_path / "nowhere", "--dictionary", tiny_dictionary]),
                          "no such corpus")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty", "train_only"]


@pytest.mark.parametrize("kind", ["truncated", "empty", "short", "nan"])
def test_a_bad_mixture_stops_before_any_output(tmp_path, tiny_dictionary, kind):
    import soundfile

    corpus = make_corpus(tmp_path / "corpus", train=(), test=TEST, noises=("white",), snrs=(5,))
    bad = corpus / "noisy" / "white_5dB" / "sp22_white_sn5.wav"
    if kind == "truncated":
        bad.write_bytes(bad.read_bytes()[:1000])
    elif kind == "empty":
        bad.write_bytes(b"")
    elif kind == "short":
        soundfile.write(corpus / "clean" / "sp22.wav", np.zeros(300), 8000, subtype="PCM_16")
        soundfile.write(bad, np.full(300, 0.1), 8000, subtype="PCM_16")
    elif kind == "nan":
        soundfile.write(bad, np.full(6400, np.nan), 8000, subtype="FLOAT")
    before = snapshot(tmp_path)
    result = run(["evaluate", "--corpus", corpus, "--dictionary", tiny_dictionary, "--json", tmp_path / "s.json",
                  "--plot", tmp_path / "s.png"])
    assert_one_line_error(result, "sp22")
    assert snapshot(tmp_path) == before


def test_bad_outputs_and_dictionary(tiny_corpus, tiny_dictionary, tmp_path):
    (tmp_path / "s.json").write_text("keep")
    (tmp_path / "s.png").write_text("keep")
    (tmp_path / "broken.npz").write_bytes(tiny_dictionary.read_bytes()[:500])
    (tmp_path / "sub").mkdir()
    base = ["evaluate", "--corpus", tiny_corpus]
    cases = [
        (["--dictionary", tiny_dictionary, "--json", tmp_path / "s.json"], ("s.json", "--overwrite")),
        (["--dictionary", tiny_dictionary, "--json", tmp_path / "new.json", "--plot", tmp_path / "s.png"],
         ("s.png", "--overwrite")),
        (["--dictionary", tiny_dictionary, "--json", tmp_path / "no" / "s.json"], ("does not exist",)),
        (["--dictionary", tiny_dictionary, "--plot", tmp_path / "s.gif"], ("s.gif", "image format")),
        (["--dictionary", tiny_dictionary, "--json", tmp_path / "x.png", "--plot", tmp_path / "x.png"], ("same",)),
        (["--dictionary", tiny_dictionary, "--json", tmp_path / "x.png", "--plot", tmp_path / "sub" / ".." / "x.png"],
         ("same",)),
        (["--dictionary", tiny_dictionary, "--json", tiny_dictionary, "--overwrite"], ("also an input",)),
        (["--dictionary", tmp_path / "broken.npz"], ("broken.npz", "not a readable dictionary")),
    ]
    before = snapshot(tmp_path)
    corpus_before = snapshot(tiny_corpus)
    for options, fragments in cases:
        assert_one_line_error(run([*base, *options]), *fragments)
    assert snapshot(tmp_path) == before
    assert snapshot(tiny_corpus) == corpus_before
    noisy = tiny_corpus / "noisy" / "white_0dB" / "sp21_white_sn0.wav"
    assert_one_line_error(run([*base, "--dictionary", tiny_dictionary, "--json", noisy, "--overwrite"]),
                          "also an input")
    assert snapshot(tiny_corpus) == corpus_before


@pytest.mark.parametrize("option, name", [("--json", "s.json"), ("--plot", "s.png")])
def test_a_json_or_plot_file_that_appears_during_the_run_is_kept(tiny_corpus, tiny_dictionary, tmp_path, monkeypatch,
                                                                 option, name):
    """Without --overwrite, a JSON or plot file another program writes at the path during the run is kept."""
    import sepsti.denoise

    target = tmp_path / name

    def racing(y, W, **options):
        target.write_text("someone else's")
        return 0.5 * y

    monkeypatch.setattr(sepsti.denoise, "denoise", racing)
    result = run(["evaluate", "--corpus", tiny_corpus, "--dictionary", tiny_dictionary, "--noise", "white",
                  "--snr", 0, option, target])
    assert_one_line_error(result, name, "created by another program")
    assert target.read_text() == "someone else's" and os.listdir(tmp_path) == [name]


# --------------------------------------------------------------------------------------------
# clean and noisy recordings paired by name (--clean / --noisy)


def _hiss(size, rate, rng):
    """Noise between 4.5 and 7 kHz in the middle fifth of ``size`` samples, 0.01 of full scale."""
    spectrum = np.fft.rfft(rng.standard_normal(size))
    frequencies = np.fft.rfftfreq(size, 1 / rate)
    hiss = np.fft.irfft(spectrum * ((frequencies > 4500) & (frequencies < 7000)), size)
    hiss[:2 * size // 5] = hiss[3 * size // 5:] = 0.0
    return 0.01 * hiss / np.abs(hiss).max()


def make_pairs(root, rates=(8000, 8000, 8000)):
    """clean/<name>.wav and noisy/<name>.flac (one folder deeper), NOIZEUS-style mixtures at 0 / 5 dB."""
    import shutil

    root = Path(root)
    (root / "clean").mkdir(parents=True)
    (root / "noisy" / "set").mkdir(parents=True)
    names = []
    for number, rate in enumerate(rates):
        corpus = make_corpus(root / "sources" / str(number), seed=10 + number, train=(), test=("sp21",),
                             noises=("white",), snrs=(5 * (number % 2),), rate=rate)
        name = f"p{number:03d}_{rate // 1000}k"
        speech, _ = soundfile.read(corpus / "clean" / "sp21.wav")
        noisy, _ = soundfile.read(next((corpus / "noisy").rglob("*.wav")))
        if rate > 8000:  # the synthetic voice has next to nothing above 4 kHz: a fricative's hiss, in both files
            hiss = _hiss(speech.size, rate, np.random.default_rng(number))
            speech, noisy = speech + hiss, noisy + hiss
        soundfile.write(root / "clean" / f"{name}.wav", speech, rate, subtype="PCM_16")
        soundfile.write(root / "noisy" / "set" / f"{name}.flac", noisy, rate, subtype="PCM_16")
        names.append(name)
    shutil.rmtree(root / "sources")
    return root / "clean", root / "noisy", names


def test_pairs_are_scored_by_name_with_the_dictionary_of_their_rate(tmp_path):
    """Without --dictionary each pair is enhanced with the shipped dictionary enhance picks for its rate."""
    from pystoi import stoi

    from sepsti.dictionary import narrowband_dictionary_path, wideband_dictionary_path

    clean, noisy, names = make_pairs(tmp_path / "pairs", rates=(8000, 16000))
    before = snapshot(tmp_path / "pairs")
    result = run(["evaluate", "--clean", clean, "--noisy", noisy, "--json", tmp_path / "s.json",
                  "--plot", tmp_path / "s.png"])
    assert result.exit_code == 0, result.stderr
    scores = json.loads((tmp_path / "s.json").read_text())
    rows = scores["results"]
    assert [row["file"] for row in rows] == names
    assert all(set(row) == {"file", "input", "enhanced"} for row in rows)
    summary = scores["summary"]
    assert summary["by_snr"] == [] and summary["noises"] == [] and summary["snrs"] == []
    assert summary["corpus"] == {"clean": str(clean), "noisy": str(noisy)}
    assert sorted((entry["path"], entry["sample_rate"]) for entry in summary["dictionaries"]) == sorted(
        [(str(narrowband_dictionary_path()), 8000), (str(wideband_dictionary_path()), 16000)])
    assert summary["pesq_modes"] == ["nb", "wb"]
    assert summary["overall"]["count"] == 2
    # the input's STOI is pystoi's on the pair's own files (the .flac read back)
    for row, name in zip(rows, names):
        reference, rate = soundfile.read(clean / f"{name}.wav")
        mixture, _ = soundfile.read(noisy / "set" / f"{name}.flac")
        assert row["input"]["stoi"] == pytest.approx(stoi(reference, mixture, rate), abs=1e-12)
        assert row["enhanced"]["sdr"] > row["input"]["sdr"]
        # the band above 4 kHz is scored at 16 kHz (the noise is white: the input has more there than the
        # clean speech), not at 8 kHz
        assert (row["input"]["high_band_db"] is None) == (rate == 8000)
        assert rate == 8000 or row["input"]["high_band_db"] > 0
    lines = result.stdout.splitlines()
    assert lines[2].split()[0] == "all" and "over the files" in result.stdout
    assert "above 4 kHz against the clean speech (dB): energy share input +" in result.stdout
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert snapshot(tmp_path / "pairs") == before


def test_each_pair_is_enhanced_with_the_dictionary_of_its_own_rate(tmp_path, monkeypatch):
    """An 8 kHz pair with the 8 kHz dictionary, a 16 kHz one with the 16 kHz dictionary, whichever was checked last;
    each with its own mask atoms (the 16 kHz dictionary has none)."""
    import sepsti.denoise
    import sepsti.metrics
    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path, wideband_dictionary_path

    used = []

    def recorder(y, W, framing, mask_atoms=None, **options):
        used.append((framing.sample_rate, W.shape, None if mask_atoms is None else mask_atoms.sum()))
        return 0.5 * y

    monkeypatch.setattr(sepsti.denoise, "denoise", recorder)
    monkeypatch.setattr(sepsti.metrics, "bss_eval", lambda clean, noisy, speech: {"sdr": 1.0, "sir": 2.0, "sar": 3.0})
    clean, noisy, _ = make_pairs(tmp_path / "pairs", rates=(8000, 16000))
    result = run(["evaluate", "--clean", clean, "--noisy", noisy])
    assert result.exit_code == 0, result.stderr
    narrow = load_dictionary(narrowband_dictionary_path())
    assert used == [(8000, narrow.W.shape, narrow.mask_atoms.sum()),
                    (16000, load_dictionary(wideband_dictionary_path()).W.shape, None)]


def test_an_undefined_score_warns_once_per_file_naming_it(tmp_path, rng):
    """A clean voice with nothing above 4 kHz has no fricative frame: one warning for the file, not one per signal."""
    rate = 16000
    t = np.arange(3 * rate) / rate
    voice = sum(np.sin(2 * np.pi * 200 * k * t) / k for k in range(1, 16)) * (1 + np.sin(2 * np.pi * 3 * t)) / 20
    (tmp_path / "clean").mkdir()
    (tmp_path / "noisy").mkdir()
    soundfile.write(tmp_path / "clean" / "hum.wav", voice, rate, subtype="FLOAT")
    soundfile.write(tmp_path / "noisy" / "hum.wav", voice + 0.01 * rng.standard_normal(voice.size), rate,
                    subtype="FLOAT")
    with pytest.warns(RuntimeWarning) as caught:
        result = run(["evaluate", "--clean", tmp_path / "clean", "--noisy", tmp_path / "noisy", "--iterations", 5,
                      "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    warned = [str(w.message) for w in caught if "fricative" in str(w.message)]
    assert warned == [f"{tmp_path / 'noisy' / 'hum.wav'}: fricative_level: the clean speech has no frame mostly "
                      "above the cutoff; the fricative level is undefined (NaN)"]
    row = json.loads((tmp_path / "s.json").read_text())["results"][0]
    assert row["input"]["fricative_db"] is None and row["enhanced"]["fricative_db"] is None


def test_band_warnings_of_many_files_come_once_per_score_with_a_count(tmp_path, rng):
    """Band-limited clean speech at 16 kHz: two warnings per file (hundreds on a test set) for scores the table does
    not show; now the first of each score, at the end, with the count of the other files. The JSON is as it was."""
    rate = 16000
    t = np.arange(3 * rate) / rate
    (tmp_path / "clean").mkdir()
    (tmp_path / "noisy").mkdir()
    for name in ("a", "b", "c"):
        voice = sum(np.sin(2 * np.pi * 200 * k * t) / k for k in range(1, 16)) * (1 + np.sin(2 * np.pi * 3 * t)) / 20
        soundfile.write(tmp_path / "clean" / f"{name}.wav", voice, rate, subtype="FLOAT")
        soundfile.write(tmp_path / "noisy" / f"{name}.wav", voice + 0.01 * rng.standard_normal(voice.size), rate,
                        subtype="FLOAT")
    with pytest.warns(RuntimeWarning) as caught:
        result = run(["evaluate", "--clean", tmp_path / "clean", "--noisy", tmp_path / "noisy", "--iterations", 3,
                      "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    first = tmp_path / "noisy" / "a.wav"
    high_band, fricative = [str(w.message) for w in caught]
    assert high_band.startswith(f"{first}: high_band_level: the clean speech has ") and high_band.endswith(
        "(band-limited speech); the high-band level is undefined (NaN); and in 2 more files"), high_band
    assert fricative == (f"{first}: fricative_level: the clean speech has no frame mostly above the cutoff; the "
                         "fricative level is undefined (NaN); and in 2 more files")
    rows = json.loads((tmp_path / "s.json").read_text())["results"]
    assert [row[key][score] for row in rows for key in ("input", "enhanced")
            for score in ("high_band_db", "fricative_db")] == [None] * 12


def test_pairs_interval_is_over_the_files(tmp_path, tiny_dictionary):
    """Each pair is its own replicate: the SDR gain's interval is the t interval of the per-file gains."""
    clean, noisy, _ = make_pairs(tmp_path / "pairs", rates=(8000,) * 4)
    result = run(["evaluate", "--clean", clean, "--noisy", noisy, "--dictionary", tiny_dictionary,
                  "--iterations", 5, "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    scores = json.loads((tmp_path / "s.json").read_text())
    gains = [row["enhanced"]["sdr"] - row["input"]["sdr"] for row in scores["results"]]
    low, high = stats.ttest_1samp(gains, 0.0).confidence_interval(0.95)
    assert scores["summary"]["overall"]["interval"]["sdr"] == pytest.approx([low, high], rel=1e-9)


def test_bad_pairs(tmp_path, tiny_dictionary, tiny_corpus, monkeypatch):
    monkeypatch.delenv("SEPSTI_NOIZEUS", raising=False)
    clean, noisy, names = make_pairs(tmp_path / "pairs", rates=(8000, 8000))
    base = ["evaluate", "--dictionary", tiny_dictionary]
    assert_one_line_error(run([*base, "--clean", clean]), "--clean and --noisy")
    assert_one_line_error(run([*base, "--corpus", tiny_corpus, "--clean", clean, "--noisy", noisy]), "--corpus")
    assert_one_line_error(run(base), "--corpus")
    assert_one_line_error(run([*base, "--clean", clean, "--noisy", noisy, "--snr", "5"]), "--snr")
    assert_one_line_error(run([*base, "--clean", clean, "--noisy", noisy, "--noise", "white"]), "--noise")
    assert_one_line_error(run([*base, "--clean", clean, "--noisy", clean]), "same")
    assert_one_line_error(run([*base, "--clean", tmp_path / "nowhere", "--noisy", noisy]), "no such clean folder")
    (noisy / "notes.txt").write_text("not audio")  # passed over
    extra = noisy / "set" / "stray.wav"
    soundfile.write(extra, np.zeros(16000), 8000)
    assert_one_line_error(run([*base, "--clean", clean, "--noisy", noisy]), "stray.wav", "no clean file")
    extra.unlink()
    first = clean / f"{names[0]}.wav"
    reference, rate = soundfile.read(first)
    soundfile.write(first, reference[:-10], rate)
    assert_one_line_error(run([*base, "--clean", clean, "--noisy", noisy, "--json", tmp_path / "s.json"]),
                          names[0], "sample-aligned")
    soundfile.write(first, reference, 16000)
    assert_one_line_error(run([*base, "--clean", clean, "--noisy", noisy]), names[0], "sample rate")
    soundfile.write(clean / "sub.wav", reference, rate)
    (clean / "deeper").mkdir()
    soundfile.write(clean / "deeper" / "sub.flac", reference, rate)
    assert_one_line_error(run([*base, "--clean", clean, "--noisy", noisy]), "sub", "same name")
    assert not (tmp_path / "s.json").exists()


def test_the_corpus_comes_from_the_environment_unless_pairs_are_given(tmp_path, tiny_dictionary, monkeypatch):
    """$SEPSTI_NOIZEUS stands for --corpus, and gives way to --clean and --noisy."""
    monkeypatch.setenv("SEPSTI_NOIZEUS", str(tmp_path / "elsewhere"))
    base = ["evaluate", "--dictionary", tiny_dictionary]
    assert_one_line_error(run(base), f"{tmp_path / 'elsewhere'}: no such corpus folder")
    clean, noisy, _ = make_pairs(tmp_path / "pairs", rates=(8000,))
    result = run([*base, "--clean", clean, "--noisy", noisy, "--iterations", 5, "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "s.json").read_text())["summary"]["corpus"] == {"clean": str(clean),
                                                                              "noisy": str(noisy)}


def test_names_label_pairs_per_snr_with_sentences_as_replicates(tmp_path, tiny_dictionary):
    """--names reads sentence, noise and SNR from the file names: rows per SNR, intervals over the sentences."""
    from scipy import stats

    clean, noisy, names = make_pairs(tmp_path / "pairs", rates=(8000,) * 4)
    labels = ["s1_white_0dB", "s1_white_5dB", "s2_white_0dB", "s2_white_5dB"]
    for name, label in zip(names, labels):
        (clean / f"{name}.wav").rename(clean / f"{label}.wav")
        (noisy / "set" / f"{name}.flac").rename(noisy / "set" / f"{label}.flac")
    result = run(["evaluate", "--clean", clean, "--noisy", noisy, "--dictionary", tiny_dictionary, "--iterations", 5,
                  "--names", r"(?P<sentence>s\d)_(?P<noise>[a-z]+)_(?P<snr>-?\d+)dB", "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    scores = json.loads((tmp_path / "s.json").read_text())
    rows = scores["results"]
    assert [(row["file"], row["name"], row["noise"], row["snr"]) for row in rows] == [
        (label[:2], label, "white", int(label.split("_")[2][:-2])) for label in labels]
    summary = scores["summary"]
    assert [entry["snr"] for entry in summary["by_snr"]] == [0, 5] and summary["snrs"] == [0, 5]
    assert summary["noises"] == ["white"]
    assert "over the sentences" in result.stdout
    # the t interval over the two sentences' mean gains
    gains = np.array([row["enhanced"]["sdr"] - row["input"]["sdr"] for row in rows])
    interval = stats.ttest_1samp([gains[:2].mean(), gains[2:].mean()], 0.0).confidence_interval(0.95)
    assert summary["overall"]["interval"]["sdr"] == pytest.approx([interval.low, interval.high], rel=1e-9)


def test_bad_names(tmp_path, tiny_dictionary, tiny_corpus):
    clean, noisy, names = make_pairs(tmp_path / "pairs", rates=(8000, 8000))
    base = ["evaluate", "--dictionary", tiny_dictionary, "--clean", clean, "--noisy", noisy]
    assert_one_line_error(run([*base, "--names", "(?P<sentence>"]), "not a regular expression")
    assert_one_line_error(run([*base, "--names", r"(?P<speaker>p\d+)_.*"]), "unknown group 'speaker'")
    assert_one_line_error(run([*base, "--names", r"(?P<sentence>x\d+)"]), names[0], "does not match")
    assert_one_line_error(run([*base, "--names", r"(?P<sentence>p\d+)_(?P<snr>\d+k)"]), "not an integer")
    # an SNR group that may stay out of the match: refused before any enhancement, not after it
    assert_one_line_error(run([*base, "--names", r"(?P<sentence>p\d+)_8k(_(?P<snr>\d+)dB)?"]), names[0],
                          "reads no SNR")
    assert_one_line_error(run(["evaluate", "--corpus", tiny_corpus, "--dictionary", tiny_dictionary,
                               "--names", ".*"]), "--names")


def test_a_signal_below_the_dictionarys_rate_comes_back_at_its_own_length(tiny_dictionary):
    """12800 samples at 6 kHz, enhanced at 8 kHz and resampled back, are 12800 samples again (one more stopped the
    run: "length 12801 differs from the clean signal's 12800")."""
    from sepsti.commands.evaluate import enhance_signal
    from sepsti.dictionary import load_dictionary

    noisy = np.random.default_rng(3).standard_normal(12800) * 0.1
    speech = enhance_signal(noisy, 6000, load_dictionary(tiny_dictionary), max_iter=2)
    assert speech.shape == noisy.shape


def test_no_reduction_scores_the_input_itself_at_every_rate(tiny_dictionary):
    """``--max-reduction 0`` in evaluate, as in enhance: the input, not its round trip through the dictionary's rate."""
    from sepsti.commands.evaluate import enhance_signal
    from sepsti.dictionary import load_dictionary

    noisy = np.random.default_rng(3).standard_normal(11025) * 0.1
    for rate in (8000, 11025):
        np.testing.assert_array_equal(enhance_signal(noisy, rate, load_dictionary(tiny_dictionary), mask_floor=1.0),
                                      noisy)



def _pair(root, rate, clean_scale=1.0, noisy_scale=1.0, subtype="PCM_16", length=12800):
    """One pair ``clean/a.wav``, ``noisy/a.wav`` whose headers say ``rate`` (the samples are 8 kHz speech)."""
    from test_cli_train import speech_like

    rng = np.random.default_rng(2)
    clean = speech_like(rng, seconds=max(length, 12800) / 8000)[:length]
    noisy = clean + 0.05 * rng.standard_normal(clean.size)
    for folder, signal in (("clean", clean_scale * clean), ("noisy", noisy_scale * noisy)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        soundfile.write(root / folder / "a.wav", signal, rate, subtype=subtype)
    return root / "clean", root / "noisy"


@pytest.mark.parametrize("rate, length, why", [(1, 50, "is outside 4000..384000 Hz"),
                                               (2000, 4000, "is outside 4000..384000 Hz"),
                                               (99991, 28064, "has no short ratio to 16000 Hz"),
                                               (1999999973, 28064, "is outside 4000..384000 Hz")])
def test_a_rate_enhance_refuses_is_refused_before_any_work(tmp_path, rate, length, why):
    """As enhance checks an input: the rate is refused in one line before anything is resampled (which took
    33 s at 99991 Hz and asked for 298 GiB at 1999999973 Hz), not scored (1 and 2000 Hz were)."""
    clean, noisy = _pair(tmp_path / "pairs", rate, length=length)
    result = run(["evaluate", "--clean", clean, "--noisy", noisy, "--json", tmp_path / "s.json"])
    assert_one_line_error(result, f"{noisy / 'a.wav'}: sample rate {rate} Hz {why}")
    assert not (tmp_path / "s.json").exists()


def test_a_file_shorter_than_a_frame_at_the_dictionarys_rate_is_refused_whatever_its_own_rate(tmp_path,
                                                                                             tiny_dictionary):
    """700 samples at 16 kHz are 350 at the 8 kHz dictionary's rate, under its 512-sample frame (where enhance
    measures it too): refused in one line before any work, as a file that short at 8 kHz is, not counted as the
    700 samples they are at their own rate."""
    clean, noisy = _pair(tmp_path / "pairs", 16000, length=700)
    result = run(["evaluate", "--clean", clean, "--noisy", noisy, "--dictionary", tiny_dictionary,
                  "--json", tmp_path / "s.json"])
    assert_one_line_error(result, f"{noisy / 'a.wav'}: audio shorter than one frame", "512 samples at 8000 Hz")
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("scales, whose", [((1.0, 1e30), "samples reach"),
                                           ((1e30, 1.0), "its clean reference's samples reach")])
def test_samples_far_beyond_full_scale_are_refused_before_any_work(tmp_path, scales, whose):
    clean, noisy = _pair(tmp_path / "pairs", 8000, *scales, subtype="FLOAT")
    result = run(["evaluate", "--clean", clean, "--noisy", noisy, "--json", tmp_path / "s.json"])
    assert_one_line_error(result, f"{noisy / 'a.wav'}: {whose}", "e+29, far beyond full scale (1.0)")
    assert not (tmp_path / "s.json").exists()


def test_samples_at_full_scales_limit_are_taken_and_beyond_it_refused():
    """As enhance checks an input: samples of exactly MAX_PEAK pass, the next float above it is refused."""
    from types import SimpleNamespace

    from sepsti.audio import MAX_PEAK
    from sepsti.commands.evaluate import _check_peaks
    from sepsti.core.errors import ParameterError

    signal = np.array([0.0, -MAX_PEAK, 0.5])
    _check_peaks(SimpleNamespace(noisy=signal, clean=signal, path="a.wav"))
    beyond = np.nextafter(MAX_PEAK, np.inf)
    with pytest.raises(ParameterError, match="a.wav: its clean reference's samples reach"):
        _check_peaks(SimpleNamespace(noisy=signal, clean=np.array([0.0, beyond]), path="a.wav"))


@pytest.mark.parametrize("command", ["enhance", "evaluate"])
def test_the_iterations_help_gives_the_enhancers_count(command, monkeypatch):
    """It said "(default: the enhancer's own)"; the number is the enhancer's constant, read when the help shows."""
    import sepsti.denoise

    text = " ".join(run([command, "--help"]).stdout.split())
    assert f"(default: {sepsti.denoise.EM_ITERATIONS}, the enhancer's own)" in text
    monkeypatch.setattr(sepsti.denoise, "EM_ITERATIONS", 37)
    assert "(default: 37, the enhancer's own)" in " ".join(run([command, "--help"]).stdout.split())


def test_the_commands_load_no_numpy_before_setting_their_blas_threads():
    """The enhancer's count is read only for the help: importing the enhancer loads NumPy."""
    import subprocess
    import sys

    script = "import sys, sepsti.commands.enhance, sepsti.commands.evaluate; print('numpy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


def test_an_empty_output_is_refused_as_such(tiny_corpus, tmp_path, monkeypatch):
    """``--json ''`` said "Error: .: output is a directory"."""
    monkeypatch.chdir(tmp_path)
    for option in ("--json", "--plot"):
        result = run(["evaluate", "--corpus", tiny_corpus, option, ""])
        assert_one_line_error(result, f"'{option}': an empty path; give a file name")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("iterations", ["100001", "2000000000", "99999999999999999999"])
@pytest.mark.parametrize("command, unit", [(["evaluate", "--corpus"], "mixture"),
                                           (["enhance", "-o", "out.wav"], "file")])
def test_iterations_are_bounded_and_documented_as_exact(tmp_path, iterations, command, unit):
    # (the input is never looked at: the option is refused first)
    result = run([*command, tmp_path / "nowhere", "--iterations", iterations])
    assert_one_line_error(result, "'--iterations'", "1<=x<=100000")
    text = " ".join(run([command[0], "--help"]).stdout.split())
    assert f"EM iterations per {unit}: exactly this many" in text and "[1<=x<=100000]" in text


def test_band_warnings_are_counted_by_file_and_kept_apart_by_reason():
    # a file's channels were counted as files, and another reason was merged into the first one's line
    import warnings as python_warnings

    from sepsti.commands.evaluate import _band_warnings_collapsed

    shown = []
    with python_warnings.catch_warnings():
        python_warnings.simplefilter("always")
        python_warnings.showwarning = lambda message, *args, **kwargs: shown.append(str(message))
        with _band_warnings_collapsed():
            for name in ("a.wav", "b.wav", "c.wav"):
                for channel in (1, 2):
                    python_warnings.warn(f"{name}: channel {channel}: high_band_level: the clean speech has "
                                         f"{channel}e-07 of its energy above 4000 Hz; undefined", RuntimeWarning)
            python_warnings.warn("d.wav: high_band_level: the speech estimate is silent; undefined", RuntimeWarning)
            python_warnings.warn("d.wav: bss_eval: the clean reference is silent", RuntimeWarning)
    assert shown == ["d.wav: bss_eval: the clean reference is silent",
                     "a.wav: channel 1: high_band_level: the clean speech has 1e-07 of its energy above 4000 Hz; "
                     "undefined; and in 2 more files",
                     "d.wav: high_band_level: the speech estimate is silent; undefined"]


def test_an_output_onto_a_clean_reference_is_refused_and_the_reference_kept(tmp_path, tiny_corpus, tiny_dictionary):
    """The clean files are inputs as much as the noisy ones: --json onto one, even with --overwrite, is refused before
    any work, for a corpus's clean file and for a pair's."""
    clean, noisy, names = make_pairs(tmp_path / "pairs", rates=(8000, 8000))
    corpus_clean = sorted((tiny_corpus / "clean").rglob("*.wav"))[0]
    pair_clean = clean / f"{names[1]}.wav"
    before = snapshot(tiny_corpus), snapshot(tmp_path)
    for source, target in ((["--corpus", tiny_corpus], corpus_clean),
                           (["--clean", clean, "--noisy", noisy], pair_clean)):
        assert_one_line_error(run(["evaluate", *source, "--dictionary", tiny_dictionary, "--json", target,
                                   "--overwrite"]), target.name, "also an input")
    assert (snapshot(tiny_corpus), snapshot(tmp_path)) == before


def test_names_give_each_pair_the_labels_written_in_it(tmp_path):
    """What --names reads, against labels written out by hand: the sentence group is the file, the noise lower-cased
    as a corpus's, a negative SNR an int; a name the pattern matches only the start of is refused."""
    from sepsti.core.errors import ParameterError
    from sepsti.recordings import find_recordings

    pattern = r"(?P<sentence>s\d)_(?P<noise>[A-Za-z]+)_(?P<snr>-?\d+)dB"
    for kind in ("clean", "noisy"):
        (tmp_path / kind).mkdir()
        for name in ("s1_White_-5dB", "s2_car_10dB"):
            soundfile.write(tmp_path / kind / f"{name}.wav", np.zeros(100), 8000)
    recordings = find_recordings(clean=tmp_path / "clean", noisy=tmp_path / "noisy", names=pattern)
    assert [recordings.label(pair) for pair in recordings.items] == [
        {"file": "s1", "name": "s1_White_-5dB", "noise": "white", "snr": -5},
        {"file": "s2", "name": "s2_car_10dB", "noise": "car", "snr": 10}]
    assert recordings.replicates == "sentences"
    for kind in ("clean", "noisy"):
        soundfile.write(tmp_path / kind / "s3_car_5dB_take2.wav", np.zeros(100), 8000)
    with pytest.raises(ParameterError, match=r"s3_car_5dB_take2\.wav: its name 's3_car_5dB_take2' does not match"):
        find_recordings(clean=tmp_path / "clean", noisy=tmp_path / "noisy", names=pattern)


def test_a_fractional_snr_read_from_a_name_is_refused_not_rounded(tmp_path):
    """An SNR group is an integer of dB: "2.5" is refused by name, not taken for 2 dB."""
    from sepsti.core.errors import ParameterError
    from sepsti.recordings import find_recordings

    for kind in ("clean", "noisy"):
        (tmp_path / kind).mkdir()
        soundfile.write(tmp_path / kind / "s1_2.5dB.wav", np.zeros(100), 8000)
    with pytest.raises(ParameterError, match=r"s1_2\.5dB\.wav: --names reads the SNR '2\.5', not an integer"):
        find_recordings(clean=tmp_path / "clean", noisy=tmp_path / "noisy", names=r"s\d_(?P<snr>[\d.]+)dB")


def test_names_without_a_sentence_group_leave_each_file_a_replicate(tmp_path):
    """Noise and SNR read from the names, no sentence: each pair is its own replicate, named by its file; a
    'name' group (the key the labels give a renamed pair) is refused as any other unknown group."""
    from sepsti.core.errors import ParameterError
    from sepsti.recordings import find_recordings

    for kind in ("clean", "noisy"):
        (tmp_path / kind).mkdir()
        soundfile.write(tmp_path / kind / "s1_car_5dB.wav", np.zeros(100), 8000)
    folders = {"clean": tmp_path / "clean", "noisy": tmp_path / "noisy"}
    recordings = find_recordings(**folders, names=r"s\d_(?P<noise>[a-z]+)_(?P<snr>\d+)dB")
    assert recordings.replicates == "files"
    assert [recordings.label(pair) for pair in recordings.items] == [{"file": "s1_car_5dB", "noise": "car", "snr": 5}]
    assert find_recordings(**folders).replicates == "files"
    with pytest.raises(ParameterError, match="unknown group 'name'"):
        find_recordings(**folders, names=r"(?P<name>s\d)_.*")


def test_groups_a_name_leaves_out_label_nothing_and_the_folders_name_the_summary(tmp_path):
    """Optional sentence and noise groups that a name leaves out: the file is the whole name, and no noise is given;
    the plot is titled by the noisy folder, the summary names the folders and a corpus as they were given."""
    from sepsti.recordings import find_recordings

    for kind in ("speech", "mixed", "x"):
        (tmp_path / kind).mkdir()
    for kind in ("speech", "mixed"):
        soundfile.write(tmp_path / kind / "take_5dB.wav", np.zeros(100), 8000)
    given = {"clean": tmp_path / "speech", "noisy": tmp_path / "x" / ".." / "mixed"}
    recordings = find_recordings(**given, names=r"(?:(?P<sentence>s\d)_)?(?:(?P<noise>[a-z]+)_)?take_(?P<snr>\d+)dB")
    assert [recordings.label(pair) for pair in recordings.items] == [{"file": "take_5dB", "snr": 5}]
    assert recordings.title == "mixed" and recordings.corpus == {key: str(path) for key, path in given.items()}
    corpus = make_corpus(tmp_path / "corpus", train=(), test=("sp21",), noises=("white",), snrs=(0,))
    as_given = tmp_path / "x" / ".." / "corpus"
    recordings = find_recordings(corpus=as_given)
    assert recordings.corpus == str(as_given) and recordings.title == Path(corpus).name


def test_a_noisy_folder_given_as_dot_titles_the_plot_by_its_own_name(tmp_path, monkeypatch):
    """``--noisy .`` or ``--noisy mixed/sub/..``: the title is the folder's name, not "" or ".."."""
    from sepsti.recordings import find_recordings

    for kind in ("speech", "mixed", "mixed/sub"):
        (tmp_path / kind).mkdir()
    for kind in ("speech", "mixed"):
        soundfile.write(tmp_path / kind / "take.wav", np.zeros(100), 8000)
    assert find_recordings(clean=tmp_path / "speech", noisy=tmp_path / "mixed" / "sub" / "..").title == "mixed"
    monkeypatch.chdir(tmp_path / "mixed")
    recordings = find_recordings(clean=tmp_path / "speech", noisy=".")
    assert recordings.title == "mixed" and recordings.corpus == {"clean": str(tmp_path / "speech"), "noisy": "."}


def test_each_dictionary_is_loaded_once_per_path(monkeypatch):
    """Recordings at 8 kHz share the narrowband dictionary and those at 16 kHz the wideband one: each file is read
    once, however many recordings use it."""
    import sepsti.dictionary
    from sepsti.dictionary import narrowband_dictionary_path, wideband_dictionary_path
    from sepsti.recordings import Dictionaries

    read = []
    load = sepsti.dictionary.load_dictionary
    monkeypatch.setattr(sepsti.dictionary, "load_dictionary", lambda path: read.append(path) or load(path))
    dictionaries = Dictionaries()
    for rate in (8000, 16000, 8000, 16000, 8000):
        assert dictionaries.for_rate(rate).sample_rate == min(rate, 16000)
    assert read == [narrowband_dictionary_path(), wideband_dictionary_path()]
    assert [entry["sample_rate"] for entry in dictionaries.describe()] == [8000, 16000]
