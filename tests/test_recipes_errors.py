"""Bad input to the benchmarks (``recipes/benchmarks/*.py``): one line naming the program, exit status 2, nothing
written; option values are refused when parsing, before any work."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"


@pytest.mark.parametrize("name, options, message", [
    # a ParameterError of the library (was a traceback)
    ("em_vs_sklearn", ["--corpus", "{tmp}/nowhere"], "{tmp}/nowhere: no such corpus folder"),
    # numbers and lists (were bare int() and float() after parsing, or accepted)
    ("em_vs_sklearn", ["--iterations", "-1"], "argument --iterations: '-1': expected an integer of at least 1"),
    ("enhance_short_pieces", ["--lengths", "abc"], "argument --lengths: 'abc': expected positive numbers separated "
                                                   "by commas"),
    ("enhance_memory", ["--minutes", "x"], "argument --minutes: 'x': expected positive numbers separated by commas"),
    ("enhance_channels", ["--data", "{tmp}/wide", "--snr", "x"], "argument --snr: 'x': expected integers separated "
                                                                 "by commas"),
    ("sti_speech", ["--ranks", "32,x"], "argument --ranks: '32,x': expected ranks (integers of at least 1)"),
    ("enhance_near_silence", ["--data", "{tmp}/wide", "--gap", "-1"], "argument --gap: '-1': expected a positive "
                                                                      "number"),
    ("enhance_startup", ["--repeats", "-1"], "argument --repeats: '-1': expected an integer of at least 1"),
    ("enhance_startup", ["--repeats", "0"], "argument --repeats: '0': expected an integer of at least 1"),
    ("parafac_scaling", ["--rank", "0"], "argument --rank: '0': expected an integer of at least 1"),
    ("nuts_nmf_gpp", ["--regimes", "foo"], "argument --regimes: 'foo': expected some of stiff, weak, faint"),
    ("nuts_nmf_gpp", ["--warmup", "5"], "argument --warmup: '5': expected an integer of at least 20"),
    ("sti_vs_nested_sampling", ["--seed", "-5"], "argument --seed: '-5': expected an integer from 0 to 4294967287"),
    ("enhance_wideband", ["--data", "{tmp}/wide", "--files", "-1"], "argument --files: '-1': expected an integer of "
                                                                    "at least 1"),
    ("enhance_wideband", ["--data", "{tmp}/wide", "--seconds", "0"], "argument --seconds: '0': expected a positive "
                                                                     "number"),
    ("enhance_wideband", ["--data", "{tmp}/wide", "--noise", "white,hiss"], "argument --noise: 'white,hiss': "
                                                                            "expected some of white, pink"),
    ("enhance_wideband", ["--data", "{tmp}/a_file"], "argument --data: '{tmp}/a_file': no wideband corpus"),
    ("mix_pairs", ["--speech", "{tmp}/speech", "--files", "-1"], "argument --files: '-1': expected an integer of "
                                                                 "at least 1"),
    ("mix_pairs", ["--speech", "{tmp}/speech", "--seconds", "0"], "argument --seconds: '0': expected a positive "
                                                                  "number"),
    ("enhance_hum", ["--jobs", "-1"], "argument --jobs: '-1': expected an integer of at least 0"),
    ("enhance_vs_peers", ["--methods", "sepsti,rnnnoise"], "argument --methods: 'sepsti,rnnnoise': expected some of "
                                                           "sepsti, "),
    ("unseen_noise_corpus", ["--wideband", "{tmp}/speech"], "argument --wideband: '{tmp}/speech': no wideband "
                                                            "corpus"),
    # a missing checkout (was found after the mixtures were written)
    ("enhance_wideband", ["--data", "{tmp}/wide", "--sepsti", "{tmp}/speech"], "argument --sepsti: '{tmp}/speech': "
                                                                               "not a checkout of sepsti"),
    ("enhance_noise_switch", ["--data", "{tmp}/wide", "--sepsti", "{tmp}/speech"], "argument --sepsti: "
                                                                                   "'{tmp}/speech': not a checkout"),
    ("enhance_memory", ["--sepsti", "{tmp}/speech"], "argument --sepsti: '{tmp}/speech': not a checkout"),
    # an option that does not apply
    ("enhance_channels", ["--data", "{tmp}/wide", "--crosstalk", "-15"], "--crosstalk: only with --second-talker"),
    # --json: checked as the results are, before the work (was replaced at the end)
    ("nuts_nmf_gpp", ["--json", "{tmp}/a_file"], "--json {tmp}/a_file: output exists; pass --overwrite"),
    ("sti_speech", ["--json", "{tmp}/a_file"], "--json {tmp}/a_file: output exists; pass --overwrite"),
    ("sti_speech", ["--json", "{tmp}/nowhere/selection.json"], "--json {tmp}/nowhere/selection.json: output folder "),
    # --out, which three of them did not take
    ("sti_vs_nested_sampling", ["--out", "{tmp}/a_file"], "--out {tmp}/a_file: not a folder"),
])
def test_bad_input_is_refused_in_one_line_before_any_work(tmp_path, name, options, message):
    (tmp_path / "a_file").write_text("mine\n")
    (tmp_path / "speech").mkdir()
    (tmp_path / "wide").mkdir()
    (tmp_path / "wide" / "manifest.json").write_text("[]\n")
    before = sorted(tmp_path.rglob("*"))
    options = [option.format(tmp=tmp_path) for option in options]
    if "--out" not in options:
        options += ["--out", str(tmp_path / "out")]
    result = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), *options], cwd=tmp_path,
                            capture_output=True, text=True, timeout=90)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and not result.stdout
    assert result.stderr.splitlines()[-1].startswith(
        f"recipes/benchmarks/{name}.py: error: {message.format(tmp=tmp_path)}"), result.stderr
    assert sorted(tmp_path.rglob("*")) == before and (tmp_path / "a_file").read_text() == "mine\n"


def _not_installed(monkeypatch, *packages):
    """The ``packages`` (import names) as without the ``bench`` extra, which CI does not install: not found, and an
    import of one fails."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name in packages else find_spec(name, *args))
    for package in packages:
        monkeypatch.setitem(sys.modules, package, None)


def test_the_startup_benchmark_without_noisereduce_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    """It ended in a ModuleNotFoundError traceback (exit 1) after sepsti had been timed."""
    import importlib

    _not_installed(monkeypatch, "noisereduce")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    startup = importlib.import_module("enhance_startup")
    monkeypatch.setattr(startup, "make_input", None)  # never reached
    monkeypatch.setattr(startup, "timed", None)
    with pytest.raises(SystemExit) as stopped:
        startup.run_recipe(lambda: startup.main(["--quick", "--out", str(tmp_path / "out")]),
                           "benchmarks/enhance_startup")
    assert stopped.value.code == 2
    assert capsys.readouterr().err == ("recipes/benchmarks/enhance_startup.py: error: noisereduce (for the timed "
                                       "peer) not installed: pip install -e '.[bench]'\n")
    assert not (tmp_path / "out").exists()


def test_the_prior_rate_of_the_chib_recipe_is_named_and_checked_when_parsing(tmp_path):
    """A bad value was refused by the model as "prior_rate of factor 0 must be finite and positive"."""
    script = BENCHMARKS.parent / "pltf_parafac_chib.py"
    result = subprocess.run([sys.executable, str(script), "--prior-rate", "-1", "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=90)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == ("recipes/pltf_parafac_chib.py: error: argument --prior-rate: '-1': "
                                              "expected a positive number")
    text = " ".join(subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                                   timeout=90).stdout.split())
    assert "--prior-rate B rate b of the Gamma(1, b) priors" in text and "(default 10^(-1/3) = 0.4642" in text
    assert not (tmp_path / "out").exists()
