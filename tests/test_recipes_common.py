"""What the paper recipes share (``recipes/_common.py``): their command line, its checks and their results files."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
sys.path.insert(0, str(RECIPES))

import _common  # noqa: E402

from sepsti.core.errors import ParameterError  # noqa: E402


def _recipe(name, *options, cwd, timeout=120):
    """Run ``recipes/<name>.py`` with ``options`` in ``cwd``."""
    return subprocess.run([sys.executable, str(RECIPES / f"{name}.py"), *map(str, options)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def _strict_json(path):
    """The JSON document at ``path``; NaN, Infinity and -Infinity (not JSON) are refused."""
    def refuse(constant):
        raise ValueError(f"{path}: {constant} is not JSON")

    return json.loads(Path(path).read_text(), parse_constant=refuse)


def test_infinite_results_are_written_as_null(tmp_path):
    """One kept iteration: no tempering check (inf) and zero MCSE; the file was ``[Infinity]``, not JSON.

    The file carries the run's provenance."""
    result = _recipe("parafac_large", "--quick", "--keep", 1, "--ranks", 3, "--evaluate", "before_update",
                     "--seed", 3, "--out", tmp_path / "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    results = _strict_json(tmp_path / "out" / "parafac_large.json")
    (decrease,) = results["largest_decrease_se"].values()
    assert decrease == [None]
    provenance = results["provenance"]
    assert provenance["argv"] == ["--quick", "--keep", "1", "--ranks", "3", "--evaluate", "before_update",
                                  "--seed", "3", "--out", str(tmp_path / "out")]
    assert provenance["options"]["seed"] == 3 and provenance["options"]["ranks"] == [3]
    assert provenance["options"]["quick"] is True and provenance["options"]["overwrite"] is False
    for package in ("sepsti", "numpy", "numba"):
        assert isinstance(provenance[package], str) and provenance[package], package
    assert "source" in provenance


def test_a_source_tree_outside_git_has_no_description(tmp_path, monkeypatch):
    monkeypatch.setattr(_common, "ROOT", tmp_path)
    args = _common.recipe_parser("toy", "a toy").parse_args(["--out", str(tmp_path / "out")])
    assert args._provenance["source"] is None and args._provenance["argv"] == ["--out", str(tmp_path / "out")]


def test_existing_results_are_kept_without_overwrite(tmp_path):
    """Refused in one line before any work (the file was replaced); a PNG alone counts too."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "pltf_deconvolution.json").write_text("mine\n")
    result = _recipe("pltf_deconvolution", "--quick", "--out", out, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr and not result.stdout
    assert result.stderr.splitlines()[-1] == (f"recipes/pltf_deconvolution.py: error: {out / 'pltf_deconvolution.json'}"
                                              f" exists: pass --overwrite to replace it, or choose another --out")
    assert (out / "pltf_deconvolution.json").read_text() == "mine\n"
    assert sorted(path.name for path in out.iterdir()) == ["pltf_deconvolution.json"]
    (out / "pltf_deconvolution.json").rename(out / "pltf_deconvolution.png")
    result = _recipe("pltf_deconvolution", "--quick", "--out", out, cwd=tmp_path)
    assert result.returncode == 2 and "pltf_deconvolution.png exists" in result.stderr


def test_overwrite_replaces_the_results(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "parafac_large.json").write_text("mine\n")
    result = _recipe("parafac_large", "--quick", "--keep", 1, "--ranks", 3, "--out", out, "--overwrite",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _strict_json(out / "parafac_large.json")["ranks"] == [3]
    assert (out / "parafac_large.png").stat().st_size > 0


def test_results_that_appear_during_the_run_are_not_replaced(tmp_path):
    args = _common.recipe_parser("toy", "a toy").parse_args(["--out", str(tmp_path)])
    (tmp_path / "toy.json").write_text("theirs\n")
    with pytest.raises(ParameterError, match="toy.json"):
        _common.write_results(args, {"x": 1.0})
    assert (tmp_path / "toy.json").read_text() == "theirs\n"


def test_the_results_name_may_depend_on_the_options(tmp_path):
    parser = _common.recipe_parser("toy", "a toy", output=lambda args: f"toy_{args.label}")
    parser.add_argument("--label", default="a")
    (tmp_path / "toy_b.json").write_text("{}\n")
    assert parser.parse_args(["--out", str(tmp_path)]).label == "a"
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", str(tmp_path), "--label", "b"])
    bare = _common.recipe_parser("toy", "a toy", output=False)
    assert not hasattr(bare.parse_args([]), "overwrite")


@pytest.mark.parametrize("name, options, message", [
    # --out: checked before the work (was a FileExistsError traceback after it)
    ("pltf_deconvolution", ["--quick", "--out", "{tmp}/a_file"], "--out {tmp}/a_file: not a folder"),
    ("pltf_deconvolution", ["--quick", "--out", "{tmp}/a_file/below"], "--out {tmp}/a_file/below: {tmp}/a_file is "
                                                                       "not a folder"),
    # list options (were bare int() and float() after parsing, some after the work)
    ("sti_nmf_synthetic", ["--true-ranks", "3,x"], "argument --true-ranks: '3,x': expected ranks"),
    ("sti_nmf_synthetic", ["--quick", "--true-ranks", "8", "--nuts-reference"],
     "--nuts-reference compares at the true ranks: --true-ranks must lie in 1..6 with --quick"),
    ("sti_speech", ["--ranks", "32,x"], "argument --ranks: '32,x': expected ranks"),
    ("parafac_large", ["--quick", "--lambdas", "-1"], "argument --lambdas: '-1': expected positive numbers"),
    ("parafac_large", ["--quick", "--lambdas", "0"], "argument --lambdas: '0': expected positive numbers"),
    ("parafac_large", ["--quick", "--ranks", "0,3"], "argument --ranks: '0,3': expected ranks"),
    ("raman_nuts", ["--quick", "--experiments", "3,1"], "--experiments 3,1: expected 1, 2 or 1,2"),
    ("raman_nuts", ["--quick", "--betas", "10,0"], "argument --betas: '10,0': expected positive numbers"),
    ("sti_validation", ["--quick", "--true-ranks", "32,abc"], "argument --true-ranks: '32,abc': expected ranks"),
    ("sti_validation", ["--quick", "--true-ranks", "1"], "--true-ranks: at least 2 with --quick"),
    # seeds: each recipe's seeds, --seed plus what it adds, must lie below 2**32
    ("pltf_parafac_chib", ["--quick", "--seed", "4294967292"], "argument --seed: '4294967292': expected an integer "
                                                               "from 0 to 4294967291 (the recipe also uses seeds up to "
                                                               "--seed + 4)"),
    ("pltf_deconvolution", ["--quick", "--seed", "-1"], "argument --seed: '-1': expected an integer from 0 to "
                                                        "4294967295"),
    ("parafac_synthetic", ["--seed", "4294967295"], "--seed 4294967295: with --data-seeds 5, the last draw's seed "
                                                    "4294967299 is not below 2**32"),
    # the library's ParameterError
    ("parafac_synthetic", ["--quick", "--true-rank", "0"], "rank=0 must be a positive integer"),
])
def test_bad_input_is_refused_in_one_line_before_any_work(tmp_path, name, options, message):
    (tmp_path / "a_file").write_text("")
    options = [option.format(tmp=tmp_path) for option in options]
    if "--out" not in options:
        options += ["--out", str(tmp_path / "out")]
    result = _recipe(name, *options, cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and not result.stdout
    assert result.stderr.splitlines()[-1].startswith(f"recipes/{name}.py: error: {message.format(tmp=tmp_path)}")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a_file"]  # no --out folder either


def _run_main(module, monkeypatch, *options):
    monkeypatch.setattr(sys, "argv", [f"recipes/{module.NAME}.py", *map(str, options)])
    module.main()


def test_sti_nmf_synthetic_records_the_settings_that_ran_and_the_seed(tmp_path, monkeypatch):
    """Each true R's selection settings (they said K = 5000, 5 blocks beside the reference preset's MALA)."""
    import sepsti.core.evidence.chib as chib
    import sti_nmf_synthetic

    def select(X, ranks, *, num_replicates, seed, **options):
        settings = {"ran": options, "num_replicates": num_replicates, "seed": seed, "total": float(X.sum())}
        return SimpleNamespace(log_marginal_likelihood=-np.arange(len(ranks), dtype=float),
                               stderr=np.ones(len(ranks)), replicates=np.zeros((len(ranks), num_replicates)),
                               settings=settings)

    monkeypatch.setattr(sti_nmf_synthetic, "select_rank_sti", select)
    monkeypatch.setattr(chib, "chib_poisson_nmf", lambda *a, **k: SimpleNamespace(
        log_marginal_likelihood=0.0, stderr=0.0, max_weight_fraction=np.zeros(1)))
    _run_main(sti_nmf_synthetic, monkeypatch, "--quick", "--true-ranks", "2,4", "--seed", 7, "--out", tmp_path)
    settings = _strict_json(tmp_path / "sti_nmf_synthetic.json")["settings"]
    assert [entry["ran"] for entry in settings["sti"]] == [{"prior_rate": 5.0, "progress": True,
                                                            "preset": "reference"}] * 2
    assert [entry["seed"] for entry in settings["sti"]] == [7, 7] and settings["sti"][0]["num_replicates"] == 3
    assert settings["sti"][0]["total"] != settings["sti"][1]["total"]  # each true R's own data
    assert settings["seed"] == 7 and settings["quick"] is True
    assert not {"num_steps", "num_keep", "num_blocks", "preset"} & set(settings)


def test_sti_gaussian_records_its_seed(tmp_path, monkeypatch):
    import sti_gaussian

    monkeypatch.setattr(sti_gaussian, "estimate", lambda model, settings, *, seed: (
        SimpleNamespace(log_marginal_likelihood=model.log_marginal_likelihood(), stderr=0.1), 0.0, 0.0))
    _run_main(sti_gaussian, monkeypatch, "--quick", "--seed", 11, "--out", tmp_path)
    assert _strict_json(tmp_path / "sti_gaussian.json")["settings"]["seed"] == 11


def test_sti_speech_records_quick_and_the_dictionaries_em_iterations(tmp_path, monkeypatch):
    import sepsti.core.evidence.sti_nmf as sti_nmf
    import sepsti.corpora.noizeus as noizeus
    import sepsti.denoise as denoise
    import sepsti.metrics as metrics
    import sepsti.training as training
    import sti_speech

    iterations = []

    def train_dictionary(X, rank, *, max_iter, seed):
        iterations.append(max_iter)
        return np.ones((4, rank)), None

    mixture = SimpleNamespace(utterance="sp21", snr=5, noise="car", clean=np.zeros(8), noisy=np.zeros(8))
    monkeypatch.setattr(training, "train_split", lambda corpus: SimpleNamespace(matrix=lambda: (np.ones((4, 6)),
                                                                                                None)))
    monkeypatch.setattr(noizeus, "mixtures", lambda corpus, split: [mixture])
    monkeypatch.setattr(denoise, "train_dictionary", train_dictionary)
    monkeypatch.setattr(denoise, "denoise", lambda noisy, W, **options: noisy)
    monkeypatch.setattr(metrics, "bss_eval", lambda clean, noisy, speech: {"sdr": 1.0, "sir": 2.0, "sar": 3.0})
    monkeypatch.setattr(sti_nmf, "select_rank_sti", lambda X, ranks, **options: SimpleNamespace(
        log_marginal_likelihood=np.zeros(len(ranks)), stderr=np.ones(len(ranks)),
        largest_decrease=np.zeros(len(ranks)), settings={"num_steps": options["num_steps"]}))
    _run_main(sti_speech, monkeypatch, "--quick", "--ranks", "2,3", "--seed", 5, "--corpus", tmp_path,
              "--out", tmp_path / "out")
    results = _strict_json(tmp_path / "out" / "sti_speech.json")
    assert iterations == [50, 50]
    assert (results["quick"], results["dictionary_em_iterations"], results["seed"]) == (True, 50, 5)
    assert results["settings"] == {"num_steps": 100}
