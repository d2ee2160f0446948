"""What the recipes and the benchmarks share (``recipes/_common.py``): their command line, its checks, their results
files and the folders of files they make."""

import json
import os
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
    """NaN and infinities become null: a file of ``[Infinity]`` is not JSON."""
    args = _common.recipe_parser("toy", "a toy").parse_args(["--out", str(tmp_path)])
    _common.write_results(args, {"check": [np.inf, -np.inf, np.nan, 1.5]})
    assert _strict_json(tmp_path / "toy.json")["check"] == [None, None, None, 1.5]


def test_the_results_carry_the_runs_provenance(tmp_path):
    result = _recipe("parafac_large", "--quick", "--keep", 2, "--ranks", 3, "--evaluate", "before_update",
                     "--seed", 3, "--out", tmp_path / "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    results = _strict_json(tmp_path / "out" / "parafac_large.json")
    (decrease,) = results["largest_decrease_se"].values()
    assert len(decrease) == 1 and np.isfinite(decrease[0])
    provenance = results["provenance"]
    assert provenance["argv"] == ["--quick", "--keep", "2", "--ranks", "3", "--evaluate", "before_update",
                                  "--seed", "3", "--out", str(tmp_path / "out")]
    assert provenance["options"]["seed"] == 3 and provenance["options"]["ranks"] == [3]
    assert provenance["options"]["quick"] is True and provenance["options"]["overwrite"] is False
    for package in ("sepsti", "numpy", "numba"):
        assert isinstance(provenance[package], str) and provenance[package], package
    assert "source" in provenance


def test_the_options_recorded_are_those_of_the_command_line(tmp_path):
    args = _common.recipe_parser("toy", "a toy").parse_args(["--out", str(tmp_path), "--seed", "7"])
    _common.write_results(args, {"x": 1.0})
    assert _strict_json(tmp_path / "toy.json")["provenance"]["options"] == {
        "quick": False, "out": str(tmp_path), "seed": 7, "overwrite": False}


def test_the_files_written_are_named_on_stdout(tmp_path, capsys):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args = _common.recipe_parser("toy", "a toy", plot=True).parse_args(["--out", str(tmp_path)])
    _common.write_results(args, {"x": 1.0}, plt.figure())
    assert capsys.readouterr().out == f"wrote {tmp_path / 'toy.json'} and {tmp_path / 'toy.png'}\n"
    assert (tmp_path / "toy.png").read_bytes().startswith(b"\x89PNG")


def test_a_checkout_is_a_folder_holding_a_sepsti_package(tmp_path):
    import argparse

    (tmp_path / "sepsti").mkdir()
    with pytest.raises(argparse.ArgumentTypeError, match=r"not a checkout of sepsti \(no sepsti/__init__\.py there\)"):
        _common.checkout_folder(str(tmp_path))
    (tmp_path / "sepsti" / "__init__.py").write_text("")
    assert _common.checkout_folder(str(tmp_path)) == tmp_path


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
    result = _recipe("parafac_large", "--quick", "--keep", 2, "--ranks", 3, "--evaluate", "before_update", "--out", out,
                     "--overwrite", cwd=tmp_path)
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
    parser = _common.recipe_parser("toy", "a toy", output=lambda args: f"toy_{args.label}", output_help="toy_LABEL")
    parser.add_argument("--label", default="a")
    (tmp_path / "toy_b.json").write_text("{}\n")
    assert parser.parse_args(["--out", str(tmp_path)]).label == "a"
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", str(tmp_path), "--label", "b"])
    assert "DIR/toy_LABEL.json" in parser.format_help()


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
    ("sti_chain_starts", ["--steps", "150"], "--steps 150: the preset's burn-in is 150 iterations"),
    ("sti_chain_starts", ["--temperatures", "0,13"], "--temperatures 0,13: expected indices 1 to 16"),
    # seeds: each recipe's seeds, --seed plus what it adds, must lie below 2**32
    ("pltf_parafac_chib", ["--quick", "--seed", "4294967292"], "argument --seed: '4294967292': expected an integer "
                                                               "from 0 to 4294967291 (the recipe also uses seeds up to "
                                                               "--seed + 4)"),
    ("pltf_deconvolution", ["--quick", "--seed", "-1"], "argument --seed: '-1': expected an integer from 0 to "
                                                        "4294967295"),
    ("parafac_synthetic", ["--seed", "4294967295"], "--seed 4294967295: with --data-seeds 5, the last draw's seed "
                                                    "4294967299 is not below 2**32"),
    # the library's ParameterError
    ("parafac_synthetic", ["--quick", "--true-rank", "0"], "rank=0 must be an integer of at least 1"),
    # counts that were taken as their defaults (0) or as 1, or accepted
    ("parafac_large", ["--quick", "--keep", "0"], "argument --keep: '0': expected an integer of at least 1"),
    ("parafac_large", ["--quick", "--evaluate-every", "0"], "argument --evaluate-every: '0': expected an integer"),
    ("parafac_synthetic", ["--quick", "--data-seeds", "0"], "argument --data-seeds: '0': expected an integer"),
    ("pltf_parafac_chib", ["--quick", "--chib-runs", "1"], "argument --chib-runs: '1': expected an integer of at "
                                                           "least 2"),
    ("raman_nuts", ["--quick", "--workers", "0"], "argument --workers: '0': expected an integer of at least 1"),
    # a corpus that is not one, and a dictionary that is not one: refused before any folder is made
    ("train_mask_atoms", ["--corpus", "{tmp}/nowhere"], "{tmp}/nowhere: no such corpus folder"),
    ("train_mask_atoms", ["--corpus", "{tmp}/nowhere", "--dictionary", "{tmp}/a_file"], "dictionary {tmp}/a_file: "
                                                                                         "empty file, not a dictionary"),
    # a select-rank JSON to reuse: read before the dictionaries are trained (was read after them)
    ("sti_speech", ["--quick", "--corpus", "{tmp}", "--sti-json", "{tmp}/none.json"], "--sti-json {tmp}/none.json: "
                                                                                       "cannot read it"),
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


def _chib_stub(calls):
    """A Chib estimator whose run r estimates −100 − r², its first run carried by one sample."""
    import warnings

    def estimate(*args, replicate, seed, **settings):
        calls.append((seed, replicate))
        warnings.warn("Chib ordinate 'W' is carried by one sample", UserWarning)
        return SimpleNamespace(log_marginal_likelihood=-100.0 - replicate ** 2, stderr=0.01,
                               max_weight_fraction=np.array([0.2, 0.9 if replicate == 0 else 0.3]))

    return estimate


def test_chib_runs_give_the_spread_of_independent_runs_as_the_error(recwarn):
    """Each run its own replicate; their mean, sd / √n and each estimate; the warnings kept as the largest share."""
    calls = []
    result = _common.chib_runs(_chib_stub(calls), "X", num_runs=4, seed=11, num_samples=10)
    estimates = [-100.0, -101.0, -104.0, -109.0]
    assert calls == [(11, 0), (11, 1), (11, 2), (11, 3)]
    assert result["runs"] == estimates and result["value"] == pytest.approx(np.mean(estimates))
    assert result["stderr"] == pytest.approx(np.std(estimates, ddof=1) / 2)
    assert result["max_weight_fraction"] == 0.9 and not recwarn.list


def test_pltf_parafac_chib_reports_the_runs_spread(tmp_path, monkeypatch):
    """``--chib-runs`` runs per rank and data seed; the error of each rank is their spread, not a run's own."""
    import pltf_parafac_chib

    calls = []
    monkeypatch.setattr(pltf_parafac_chib, "chib_log_marginal_likelihood", _chib_stub(calls))
    _run_main(pltf_parafac_chib, monkeypatch, "--quick", "--chib-runs", 3, "--seed", 5, "--out", tmp_path)
    results = _strict_json(tmp_path / "pltf_parafac_chib.json")
    ranks = len(pltf_parafac_chib.RANKS)
    assert len(calls) == 3 * ranks * pltf_parafac_chib.NUM_DATA_SEEDS and results["settings"]["chib_runs"] == 3
    assert results["chib"] == [-101.0 - 2 / 3] * ranks
    assert results["chib_stderr"] == pytest.approx([np.std([0, 1, 4], ddof=1) / np.sqrt(3)] * ranks)
    assert results["data_seeds"]["5"]["chib_runs"] == [[-100.0, -101.0, -104.0]] * ranks
    assert (tmp_path / "pltf_parafac_chib.png").is_file()


def test_sti_gaussian_records_its_seed(tmp_path, monkeypatch):
    import sti_gaussian

    monkeypatch.setattr(sti_gaussian, "estimate", lambda model, settings, *, seed: (
        SimpleNamespace(log_marginal_likelihood=model.log_marginal_likelihood(), stderr=0.1), 0.0, 0.0))
    _run_main(sti_gaussian, monkeypatch, "--quick", "--seed", 11, "--out", tmp_path)
    assert _strict_json(tmp_path / "sti_gaussian.json")["settings"]["seed"] == 11


def test_sti_gaussian_draws_summarise_the_errors_against_the_exact_value(tmp_path, monkeypatch):
    """Scripted errors: draw k (seed 100 + k) errs by 0.1 (k + 1) at R_m = 2 and by -0.05 at R_m = 5, with a
    standard error of 0.1, and by the opposite with the long chains; the summaries below are worked by hand."""
    import sti_gaussian

    def estimate(model, settings, *, seed):
        k = seed - 100
        long = settings["chain"].num_steps == 3 * sti_gaussian.BUDGET["num_steps"]
        error = 0.0 if k < 0 else (0.1 * (k + 1) if model.rank == 2 else -0.05) * (-1 if long else 1)
        return SimpleNamespace(log_marginal_likelihood=model.log_marginal_likelihood() + error, stderr=0.1), 0.0, 0.0

    monkeypatch.setattr(sti_gaussian, "estimate", estimate)
    _run_main(sti_gaussian, monkeypatch, "--quick", "--draws", 4, "--out", tmp_path)
    draws = _strict_json(tmp_path / "sti_gaussian.json")["draws"]
    spread = np.std([0.1, 0.2, 0.3, 0.4], ddof=1) / 2  # the four errors' sd over sqrt(4)
    for label, sign in (("default", 1), ("long_chains", -1)):
        two, five = draws[label]
        assert two["rank"] == 2 and five["rank"] == 5
        assert two["mean_error"] == pytest.approx(sign * 0.25) and two["mean_error_stderr"] == pytest.approx(spread)
        assert two["rms_z"] == pytest.approx(np.sqrt((1 + 4 + 9 + 16) / 4)) and two["share_within_2se"] == 0.25
        assert five["mean_error"] == pytest.approx(sign * -0.05) and five["mean_error_stderr"] == pytest.approx(0.0)
        assert five["rms_z"] == pytest.approx(0.5) and five["share_within_2se"] == 1.0
        assert two["mean_stderr"] == five["mean_stderr"] == pytest.approx(0.1)


def _fake_speech_run(monkeypatch):
    """The corpus reader, the dictionaries, the enhancement, the scores and STI of ``sti_speech.py`` replaced by
    stand-ins; returns what they were called with (``corpora``, ``iterations``, ``sti``: STI's ranks)."""
    import sepsti.core.evidence.sti_nmf as sti_nmf
    import sepsti.corpora.noizeus as noizeus
    import sepsti.denoise as denoise
    import sepsti.metrics as metrics
    import sepsti.training as training

    calls = {"corpora": [], "iterations": [], "sti": []}

    def train_split(corpus):
        calls["corpora"].append(Path(corpus))
        return SimpleNamespace(matrix=lambda frames=None: (np.ones((4, 6)), None))

    def train_dictionary(X, rank, *, max_iter, seed):
        calls["iterations"].append(max_iter)
        return np.ones((4, rank)), None

    def select_rank_sti(X, ranks, **options):
        calls["sti"].append(ranks)
        return SimpleNamespace(log_marginal_likelihood=np.zeros(len(ranks)), stderr=np.ones(len(ranks)),
                               largest_decrease=np.zeros(len(ranks)), settings={"num_steps": options["num_steps"]})

    mixture = SimpleNamespace(utterance="sp21", snr=5, noise="car", clean=np.zeros(8), noisy=np.zeros(8))
    monkeypatch.setattr(training, "train_split", train_split)
    monkeypatch.setattr(noizeus, "mixtures", lambda corpus, split: [mixture])
    monkeypatch.setattr(denoise, "train_dictionary", train_dictionary)
    monkeypatch.setattr(denoise, "denoise", lambda noisy, W, **options: noisy)
    monkeypatch.setattr(metrics, "bss_eval", lambda clean, noisy, speech: {"sdr": 1.0, "sir": 2.0, "sar": 3.0})
    monkeypatch.setattr(sti_nmf, "select_rank_sti", select_rank_sti)
    return calls


def test_sti_speech_records_quick_and_the_dictionaries_em_iterations(tmp_path, monkeypatch):
    calls = _fake_speech_run(monkeypatch)
    _run_main(_load(RECIPES / "sti_speech.py", monkeypatch), monkeypatch, "--quick", "--ranks", "2,3", "--seed", 5,
              "--corpus", tmp_path, "--out", tmp_path / "out")
    results = _strict_json(tmp_path / "out" / "sti_speech.json")
    assert calls["iterations"] == [50, 50]
    assert (results["quick"], results["dictionary_em_iterations"], results["seed"]) == (True, 50, 5)
    assert results["settings"] == {"num_steps": 100}


def _select_rank_json(ranks):
    return {"ranks": ranks, "log_marginal_likelihood": [-3.0, -1.0], "stderr": [0.5, 0.5], "seconds": 9.0,
            "settings": {"preset": "reference"}, "per_temperature": {"largest_decrease_se": {"2": 0.0, "3": 1.0}}}


@pytest.mark.parametrize("document, message", [
    (None, "cannot read it"),
    ("{", "not JSON"),
    ({"ranks": [2, 3]}, r"not the JSON of a select-rank run \(no 'per_temperature'\)"),
    (_select_rank_json([2, 4]), r"ranks \[2, 4\] differ from --ranks \[2, 3\]"),
])
def test_a_select_rank_json_is_checked_before_the_dictionaries_are_trained(tmp_path, monkeypatch, document, message):
    """``sti_speech.py --sti-json``: a file missing, not JSON, without a run's keys or of other ranks (were found
    after every dictionary was trained and every file enhanced)."""
    calls = _fake_speech_run(monkeypatch)
    path = tmp_path / "sti.json"
    if document is not None:
        path.write_text(document if isinstance(document, str) else json.dumps(document))
    with pytest.raises(ParameterError, match=f"--sti-json {path}: {message}"):
        _run_main(_load(RECIPES / "sti_speech.py", monkeypatch), monkeypatch, "--quick", "--ranks", "2,3",
                  "--corpus", tmp_path, "--sti-json", path, "--out", tmp_path / "out")
    assert calls == {"corpora": [], "iterations": [], "sti": []} and not (tmp_path / "out").exists()


def test_a_select_rank_json_is_reused_and_the_corpus_comes_from_the_environment(tmp_path, monkeypatch):
    """No STI run; without ``--corpus``, ``$SEPSTI_NOIZEUS`` (it was ../shared/data/noizeus whatever the
    environment said)."""
    calls = _fake_speech_run(monkeypatch)
    (tmp_path / "corpus" / "clean").mkdir(parents=True)
    monkeypatch.setenv("SEPSTI_NOIZEUS", str(tmp_path / "corpus"))
    (tmp_path / "sti.json").write_text(json.dumps(_select_rank_json([2, 3])))
    _run_main(_load(RECIPES / "sti_speech.py", monkeypatch), monkeypatch, "--quick", "--ranks", "2,3",
              "--sti-json", tmp_path / "sti.json", "--out", tmp_path / "out")
    results = _strict_json(tmp_path / "out" / "sti_speech.json")
    assert calls["corpora"] == [(tmp_path / "corpus").resolve()] and calls["sti"] == []
    assert (results["selected_rank"], results["seconds_sti"], results["largest_decrease_se"]) == (3, 9.0, [0.0, 1.0])


SCRIPTS = sorted([*RECIPES.glob("[a-z]*.py"), *(RECIPES / "benchmarks").glob("[a-z]*.py")])


class _Parsed(Exception):
    """Raised in place of parsing: carries the parser."""


def _load(script, monkeypatch):
    """The module of ``script`` (a path below ``recipes/``), loaded under a name of its own: ``sti_speech`` is
    the name of a recipe and of a benchmark. The benchmarks' folder is importable meanwhile, for their shared
    modules."""
    import importlib.util

    monkeypatch.syspath_prepend(str(RECIPES / "benchmarks"))
    spec = importlib.util.spec_from_file_location(f"recipe_{script.parent.name}_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parser_of(script, monkeypatch):
    """The argument parser that ``script``'s ``main`` builds."""
    module = _load(script, monkeypatch)

    def parse_args(parser, args=None, namespace=None):
        raise _Parsed(parser)

    with monkeypatch.context() as patch, pytest.raises(_Parsed) as parsed:
        patch.setattr(_common._RecipeParser, "parse_args", parse_args)
        module.main()
    return parsed.value.args[0]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: script.relative_to(RECIPES).as_posix())
def test_the_help_names_the_program_its_outputs_and_every_option(script, monkeypatch):
    """Benchmarks were called ``recipes/<name>.py`` in their errors; the help never said what a recipe writes,
    and options had none."""
    parser = _parser_of(script, monkeypatch)
    assert parser.prog == f"recipes/{script.relative_to(RECIPES).as_posix()}"
    assert [action.option_strings for action in parser._actions if not action.help] == []
    assert parser.epilog.startswith("Writes DIR/") and ".json" in parser.epilog
    assert "replaced only with --overwrite." in " ".join(parser.format_help().split())


@pytest.mark.parametrize("script, runs", [
    # docs/enhance.md: the two runs into one --out wrote the same enhance_memory.json
    ("benchmarks/enhance_memory", {"enhance_memory_8000hz_1-10-60min": ["--minutes", "1,10,60"],
                                   "enhance_memory_44100hz_10-60min": ["--minutes", "10,60", "--rate", "44100"],
                                   "enhance_memory_16000hz_10min_hum50": ["--minutes", "10", "--rate", "16000",
                                                                          "--hum", "hum50"],
                                   "enhance_memory_8000hz_1-10min": ["--quick"]}),
    ("benchmarks/enhance_channels", {"enhance_channels_test": [],
                                     "enhance_channels_test_two_talkers": ["--second-talker"],
                                     "enhance_channels_test_two_talkers_crosstalk-15": ["--second-talker",
                                                                                        "--crosstalk", "-15"]}),
    ("raman_nuts", {"raman_nuts_stiff": [], "raman_nuts_weak": ["--regime", "weak"],
                    "raman_nuts_faint": ["--regime", "faint"],
                    "raman_nuts_faint_diagonal": ["--regime", "faint", "--metric", "diagonal"],
                    "raman_nuts_stiff_x3": ["--intensity", "3"]}),
    ("benchmarks/nuts_nmf_gpp", {"nuts_nmf_gpp_stiff-weak-faint": [], "nuts_nmf_gpp_faint": ["--regimes", "faint"],
                                 "nuts_nmf_gpp_weak_diagonal-auto": ["--regimes", "weak", "--metrics", "diagonal,auto"],
                                 "nuts_nmf_gpp_gradient": ["--gradient-only"]}),
])
def test_runs_that_the_docs_compare_have_results_of_their_own(tmp_path, monkeypatch, script, runs):
    (tmp_path / "wide").mkdir()
    (tmp_path / "wide" / "manifest.json").write_text("[]\n")
    parser = _parser_of(RECIPES / f"{script}.py", monkeypatch)
    data = ["--data", str(tmp_path / "wide")] if script.endswith("enhance_channels") else []
    for name, options in runs.items():
        assert parser.parse_args([*options, *data, "--out", str(tmp_path)])._results_name == name


def test_further_output_files_are_checked_when_parsing_and_written_whole(tmp_path):
    """``--json PATH`` (``nuts_nmf_gpp.py``, ``benchmarks/sti_speech.py``): an existing file is kept without
    ``--overwrite``; a missing folder is refused; the file is written through a temporary one."""
    parser = _common.recipe_parser("toy", "a toy")
    parser.add_output_file("--json", help="rows")
    (tmp_path / "rows.json").write_text("mine\n")
    for options in (["--json", str(tmp_path / "rows.json")], ["--json", str(tmp_path / "none" / "rows.json")]):
        with pytest.raises(SystemExit):
            parser.parse_args([*options, "--out", str(tmp_path)])
    args = parser.parse_args(["--json", str(tmp_path / "rows.json"), "--out", str(tmp_path), "--overwrite"])
    _common.write_json(args.json, [{"x": float("nan")}], overwrite=args.overwrite)
    assert json.loads((tmp_path / "rows.json").read_text()) == [{"x": None}]
    with pytest.raises(ParameterError, match="rows.json"):
        _common.write_json(tmp_path / "rows.json", [], overwrite=False)
    assert [path.name for path in tmp_path.iterdir()] == ["rows.json"]


@pytest.mark.parametrize("plot", [False, True])
def test_a_further_output_file_may_not_be_the_results_own(tmp_path, plot):
    """``--out d --json d/<name>.json`` (or the plot) is refused when parsing, not after the run."""
    parser = _common.recipe_parser("benchmarks/toy", "a toy", plot=plot)
    parser.add_output_file("--json", help="rows")
    for name in ["toy.json", "./toy.json"] + (["toy.png"] if plot else []):
        with pytest.raises(SystemExit):
            parser.parse_args(["--out", str(tmp_path), "--json", str(tmp_path / name), "--overwrite"])
    args = parser.parse_args(["--out", str(tmp_path), "--json", str(tmp_path / "rows.json")])
    assert args.json == tmp_path / "rows.json"


def _files(folder):
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())


def _write(folders):
    """Write the files a run claimed (folder → relative paths)."""
    for folder, files in folders.items():
        for name in files:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text("ours\n")


def test_folders_a_run_writes_are_kept_for_runs_of_the_same_settings(tmp_path):
    """Claimed, written, claimed again with the same settings: nothing removed, the record the same."""
    folders = {tmp_path / "a": ["x.wav", "sub/y.wav"], tmp_path / "b": ["x.wav"]}
    _common.claim_folders(folders, {"seed": 0}, overwrite=False)
    _write(folders)
    _common.claim_folders(folders, {"seed": 0}, overwrite=False)
    assert _files(tmp_path / "a") == [_common.FOLDER_RECORD, "sub/y.wav", "x.wav"]
    record = json.loads((tmp_path / "a" / _common.FOLDER_RECORD).read_text())
    assert record == {"settings": {"seed": 0}, "files": ["sub/y.wav", "x.wav"]}


def test_folders_of_other_settings_are_replaced_only_with_overwrite(tmp_path):
    """Refused, naming what differs, with every folder as it was; with ``overwrite`` the files the record lists
    go (and the subfolders they leave empty), nothing else."""
    folders = {tmp_path / "a": ["x.wav", "sub/y.wav"], tmp_path / "b": ["x.wav"]}
    _common.claim_folders(folders, {"seed": 0, "seconds": 8.0}, overwrite=False)
    _write(folders)
    (tmp_path / "b" / ".hidden").write_text("theirs\n")
    with pytest.raises(ParameterError, match=r"a: holds the files of a run with other settings \(seed 0 there, 3 "
                                             r"now\); pass --overwrite to replace them, or choose another --out"):
        _common.claim_folders({folder: ["z.wav"] for folder in folders}, {"seed": 3, "seconds": 8.0},
                              overwrite=False)
    assert _files(tmp_path / "a") == [_common.FOLDER_RECORD, "sub/y.wav", "x.wav"]
    _common.claim_folders({folder: ["z.wav"] for folder in folders}, {"seed": 3, "seconds": 8.0}, overwrite=True)
    assert _files(tmp_path / "a") == [_common.FOLDER_RECORD] and not (tmp_path / "a" / "sub").exists()
    assert _files(tmp_path / "b") == [".hidden", _common.FOLDER_RECORD]
    assert json.loads((tmp_path / "b" / _common.FOLDER_RECORD).read_text())["settings"]["seed"] == 3


@pytest.mark.parametrize("record", [True, False])
def test_folders_holding_files_the_recipe_did_not_write_are_refused(tmp_path, record):
    """A file the record does not list, or files and no record: refused even with ``overwrite``, the other
    folder untouched too."""
    _common.claim_folders({tmp_path / "a": ["x.wav"], tmp_path / "b": ["x.wav"]}, {"seed": 0}, overwrite=False)
    (tmp_path / "a" / "x.wav").write_text("ours\n")
    (tmp_path / "b" / "mine.wav").write_text("theirs\n")
    if not record:
        (tmp_path / "b" / _common.FOLDER_RECORD).unlink()
    message = "holds files its run did not write" if record else "holds files of no recorded run"
    with pytest.raises(ParameterError, match=f"b: {message} .*mine.wav"):
        _common.claim_folders({tmp_path / "a": ["y.wav"], tmp_path / "b": ["y.wav"]}, {"seed": 1}, overwrite=True)
    assert (tmp_path / "a" / "x.wav").read_text() == "ours\n" and (tmp_path / "b" / "mine.wav").exists()


def test_a_record_naming_files_outside_its_folder_removes_nothing(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "mine.txt").write_text("mine\n")
    (tmp_path / "a" / _common.FOLDER_RECORD).write_text(json.dumps({"settings": {}, "files": ["../mine.txt"]}))
    with pytest.raises(ParameterError, match="not a record of a run"):
        _common.claim_folders({tmp_path / "a": ["x.wav"]}, {"seed": 1}, overwrite=True)
    assert (tmp_path / "mine.txt").read_text() == "mine\n"


def test_a_link_to_a_folder_is_refused_and_nothing_behind_it_removed(tmp_path):
    """A folder linked in below a claimed one (``corpus/clean -> NOIZEUS/clean``): refused on the first run and with
    ``overwrite``, the files behind it kept."""
    theirs = tmp_path / "NOIZEUS" / "clean"
    theirs.mkdir(parents=True)
    (theirs / "sp01.wav").write_text("theirs\n")
    corpus = tmp_path / "results" / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "clean").symlink_to(theirs)
    with pytest.raises(ParameterError, match=r"corpus: holds a link to a folder \(clean\); remove the link"):
        _common.claim_folders({corpus: ["clean/sp01.wav"]}, {"seed": 0}, overwrite=False)
    (corpus / "clean").unlink()
    _common.claim_folders({corpus: ["clean/sp01.wav"]}, {"seed": 0}, overwrite=False)
    (corpus / "clean").symlink_to(theirs)
    with pytest.raises(ParameterError, match=r"corpus: holds a link to a folder \(clean\)"):
        _common.claim_folders({corpus: ["clean/sp02.wav"]}, {"seed": 1}, overwrite=True)
    assert (theirs / "sp01.wav").read_text() == "theirs\n"


def test_a_listed_link_leading_outside_its_folder_is_refused(tmp_path):
    """A listed file that is a link out of the folder: neither removed nor written through."""
    (tmp_path / "mine.wav").write_text("mine\n")
    _common.claim_folders({tmp_path / "a": ["x.wav"]}, {"seed": 0}, overwrite=False)
    (tmp_path / "a" / "x.wav").symlink_to(tmp_path / "mine.wav")
    for seed, overwrite in ((0, False), (1, True)):
        with pytest.raises(ParameterError, match=r"a: x.wav leads outside it \(a link\)"):
            _common.claim_folders({tmp_path / "a": ["x.wav"]}, {"seed": seed}, overwrite=overwrite)
    assert (tmp_path / "mine.wav").read_text() == "mine\n"


@pytest.mark.parametrize("listed", [".git/config", "sub/.hidden", ".", "", "./x.wav", "sub/", "a//x.wav", 3, "x\0.wav"])
def test_a_record_listing_what_is_not_a_plain_file_path_removes_nothing(tmp_path, listed):
    """Hidden files, the folder itself, paths that are not written plainly: not a record; nothing removed."""
    folder = tmp_path / "a"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "config").write_text("theirs\n")
    (folder / "x.wav").write_text("ours\n")
    (folder / _common.FOLDER_RECORD).write_text(json.dumps({"settings": {"seed": 0}, "files": ["x.wav", listed]}))
    with pytest.raises(ParameterError, match="not a record of a run .*is not a plain relative path of a file"):
        _common.claim_folders({folder: ["x.wav"]}, {"seed": 1}, overwrite=True)
    assert _files(folder) == [".git/config", _common.FOLDER_RECORD, "x.wav"]


def test_a_record_listing_a_folder_removes_nothing(tmp_path):
    folder = tmp_path / "a"
    (folder / "sub").mkdir(parents=True)
    for name in ("x.wav", "sub/y.wav"):
        (folder / name).write_text("ours\n")
    (folder / _common.FOLDER_RECORD).write_text(json.dumps({"settings": {"seed": 0},
                                                            "files": ["x.wav", "sub/y.wav", "sub"]}))
    with pytest.raises(ParameterError, match=r"lists sub, which is not a file; remove the folder"):
        _common.claim_folders({folder: ["x.wav"]}, {"seed": 1}, overwrite=True)
    assert _files(folder) == [_common.FOLDER_RECORD, "sub/y.wav", "x.wav"]


def test_an_out_folder_that_can_be_written_but_not_entered_is_refused(tmp_path, monkeypatch, capsys):
    """A folder of mode -w- (no x): nothing can be created in it (``os.access`` as a user who is not root sees it)."""
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: access(path, mode) and not (
        Path(path) == tmp_path / "out" and mode & os.X_OK))
    (tmp_path / "out").mkdir()
    parser = _common.recipe_parser("toy", "a toy")
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", str(tmp_path / "out" / "below")])
    assert capsys.readouterr().err.splitlines()[-1] == (f"recipes/toy.py: error: --out {tmp_path / 'out' / 'below'}: "
                                                        f"cannot write into {tmp_path / 'out'}")
    assert parser.parse_args(["--out", str(tmp_path / "below")]).out == tmp_path / "below"


def test_the_deepest_emptied_folders_go_first(tmp_path):
    """With ``overwrite``, ``sub/deeper/y.wav`` leaves ``sub/deeper`` empty and then ``sub``: both go."""
    folder = tmp_path / "a"
    _common.claim_folders({folder: ["x.wav", "sub/deeper/y.wav"]}, {"seed": 0}, overwrite=False)
    _write({folder: ["x.wav", "sub/deeper/y.wav"]})
    _common.claim_folders({folder: ["x.wav"]}, {"seed": 1}, overwrite=True)
    assert sorted(path.name for path in folder.iterdir()) == [_common.FOLDER_RECORD]


def test_a_run_of_the_same_settings_writing_other_files_needs_overwrite(tmp_path):
    folder = tmp_path / "a"
    _common.claim_folders({folder: ["x.wav"]}, {"seed": 0}, overwrite=False)
    _write({folder: ["x.wav"]})
    with pytest.raises(ParameterError, match=r"a: holds the files of a run with other settings \(other files\); "
                                             r"pass --overwrite"):
        _common.claim_folders({folder: ["y.wav"]}, {"seed": 0}, overwrite=False)
    assert _files(folder) == [_common.FOLDER_RECORD, "x.wav"]


def test_the_number_types_take_their_bounds_and_refuse_what_lies_beyond():
    import argparse

    assert (_common.positive_int("1"), _common.non_negative_int("0")) == (1, 0)
    assert (_common.positive_float("1e-300"), _common.non_negative_float("0")) == (1e-300, 0.0)
    assert _common.integer_list("-5,0,5") == [-5, 0, 5] and _common.positive_list("0.5,2") == [0.5, 2.0]
    for convert, text, expected in ((_common.positive_int, "0", "an integer of at least 1"),
                                    (_common.non_negative_int, "-1", "an integer of at least 0"),
                                    (_common.positive_float, "0", "a positive number"),
                                    (_common.positive_float, "inf", "a positive number"),
                                    (_common.non_negative_float, "nan", "a number of at least 0"),
                                    (_common.non_negative_float, "-1e-300", "a number of at least 0"),
                                    (_common.positive_list, "1,inf", "positive numbers separated by commas"),
                                    (_common.count_list, "2,0", "positive integers separated by commas")):
        with pytest.raises(argparse.ArgumentTypeError, match=rf"^'{text}': expected {expected}$"):
            convert(text)


def test_a_choice_list_takes_each_choice_once_and_none_only_when_allowed():
    import argparse

    methods = _common.choice_list(["ours", "wiener", "mmse"])
    assert methods("mmse, ours") == ["mmse", "ours"]
    for text in ("ours,ours", "", "ours,other"):
        with pytest.raises(argparse.ArgumentTypeError, match=rf"^'{text}': expected some of ours, wiener, mmse"):
            methods(text)
    assert _common.choice_list(["ours", "wiener"], empty=True)("") == []


def test_a_lead_is_written_with_its_interval_when_it_has_one():
    cell = {"mean": 0.5, "low": 0.125, "high": 0.875, "wins": 3, "pairs": 4}
    assert _common.lead_text(cell, 2) == "+0.50 [+0.12, +0.88] 3/4"
    assert _common.lead_text({**cell, "low": float("nan"), "high": float("nan")}, 1) == "+0.5 3/4"
    assert _common.lead_text(None, 2) == "–"


def test_packages_are_looked_up_by_their_import_names(tmp_path, monkeypatch):
    (tmp_path / "my_tool.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    _common.require_packages({"the timed peer": "my-tool"}, "bench")  # installed: imported as my_tool
    why = r"^no-such-tool \(for a, b\) not installed: pip install -e '\.\[bench\]'$"
    with pytest.raises(ParameterError, match=why):
        _common.require_packages({"a": "no-such-tool", "b": "no-such-tool", "c": "my-tool"}, "bench")


def test_the_default_corpus_is_a_folder_with_a_clean_split(tmp_path, monkeypatch):
    monkeypatch.setattr(_common, "ROOT", tmp_path / "checkout")
    (tmp_path / "corpus").mkdir()
    monkeypatch.setenv("SEPSTI_NOIZEUS", str(tmp_path / "corpus"))
    assert _common.default_corpus() is None
    (tmp_path / "corpus" / "clean").mkdir()
    assert _common.default_corpus() == tmp_path / "corpus"


def test_sti_vs_nested_sampling_writes_its_results(tmp_path, monkeypatch):
    """It took neither ``--out`` nor ``--overwrite`` and wrote nothing but its table (dynesty stood in for: the
    run needs only its interface)."""
    import sys

    import sepsti.core.evidence.sti as sti

    class Sampler:
        def __init__(self, log_likelihood, prior_transform, rank, **options):
            self.results = SimpleNamespace(logz=[-7.0], logzerr=[0.3], ncall=[40, 60])

        def run_nested(self, **options):
            pass

    monkeypatch.setitem(sys.modules, "dynesty", SimpleNamespace(NestedSampler=Sampler, __version__="0"))
    monkeypatch.setattr(sti, "stochastic_thermodynamic_integration", lambda model, prior, *, seed, **options: (
        SimpleNamespace(log_marginal_likelihood=model.log_marginal_likelihood() + 0.5, stderr=0.25)))
    module = _load(RECIPES / "benchmarks" / "sti_vs_nested_sampling.py", monkeypatch)
    _run_main(module, monkeypatch, "--quick", "--seed", 4, "--out", tmp_path)
    results = _strict_json(tmp_path / "sti_vs_nested_sampling.json")
    assert [row["rank"] for row in results["results"]] == [1, 4, 8] and results["seed"] == 4
    assert all(row["sti"] - row["exact"] == pytest.approx(0.5) and row["dynesty_calls"] == 100
               for row in results["results"])
    assert results["provenance"]["options"]["quick"] is True


def test_the_speech_rank_selection_benchmark_writes_its_results_and_the_selection(tmp_path, monkeypatch):
    """``DIR/sti_speech.json`` and ``--json``'s select-rank document (it wrote only the latter, in place); the
    corpus from ``$SEPSTI_NOIZEUS`` (it was ../shared/data/noizeus whatever the environment said)."""
    import sepsti.core.evidence.rank_selection as rank_selection

    calls = _fake_speech_run(monkeypatch)
    (tmp_path / "corpus" / "clean").mkdir(parents=True)
    monkeypatch.setenv("SEPSTI_NOIZEUS", str(tmp_path / "corpus"))
    timing = {"chain_seconds_per_rank": [1.0, 2.0], "chain_cpu_seconds_per_rank": [1.0, 2.0], "start_seconds": 0.5,
              "kernel_share": 0.9}
    selection = SimpleNamespace(log_marginal_likelihood=[-3.0, -1.0], stderr=[0.5, 0.5], selected_rank=3,
                                all_finite=True, min_kept=0.1, timing=timing,
                                settings={"chain": {"num_steps": 250, "num_keep": 100, "num_blocks": 1},
                                          "num_replicates": 1, "grid": {"num_intervals": 5}})
    monkeypatch.setattr("sepsti.core.evidence.sti_nmf.select_rank_sti", lambda X, ranks, **options: selection)
    monkeypatch.setattr("sepsti.core.evidence.sti_nmf.warm_up", lambda dtypes: None)
    monkeypatch.setattr(rank_selection, "to_json", lambda selection, **labels: {"ranks": [2, 3], **labels})
    module = _load(RECIPES / "benchmarks" / "sti_speech.py", monkeypatch)
    _run_main(module, monkeypatch, "--quick", "--ranks", "2,3", "--out", tmp_path / "out", "--json",
              tmp_path / "selection.json")
    results = _strict_json(tmp_path / "out" / "sti_speech.json")
    assert calls["corpora"] == [(tmp_path / "corpus").resolve()]
    assert (results["ranks"], results["quick"], results["preset"]) == ([2, 3], True, "reference")
    assert _strict_json(tmp_path / "selection.json") == {key: value for key, value in results.items()
                                                          if key != "provenance"}


def test_the_nuts_benchmark_writes_its_results(tmp_path, monkeypatch):
    """``--out`` was accepted and nothing written there; ``--json`` wrote the rows in place."""
    module = _load(RECIPES / "benchmarks" / "nuts_nmf_gpp.py", monkeypatch)
    record = {"chosen_metric": "diagonal", "min_ess": 50.0, "median_ess": 80.0, "min_tail_ess": 40.0, "worst": "H[0]",
              "ess_per_second": 1.0, "ess_per_second_with_warmup": 0.5, "ess_per_cpu_second": 1.0,
              "ess_per_cpu_second_with_warmup": 0.5, "max_rhat": 1.0, "worst_rhat": "H[0]", "divergences": 0,
              "warmup_divergences": 0, "gradient_evaluations": 1000, "warmup_gradient_evaluations": 900,
              "mean_tree_depth": 3.0, "step_size": [0.1, 0.2], "sampling_seconds": 1.0, "warmup_seconds": 1.0,
              "mean_draw_log_posterior": -10.0, "mean_draw_log_posterior_mcse": 0.1, "target": 0.8,
              "step_checks": 1, "pilots": []}
    monkeypatch.setattr(module, "gradient_rates", lambda seed, quick: {"wall": {"ours": 2.0}})
    monkeypatch.setattr(module, "leaf_cost", lambda seed: {"diagonal": {"leaf_us": 3.0}})
    monkeypatch.setattr(module, "simulate_raman", lambda *args, **options: None)
    monkeypatch.setattr(module, "run_one", lambda data, beta, *, metric, num_chains, **options: (
        {**record, "metric": metric, "num_chains": num_chains}, None, None))
    _run_main(module, monkeypatch, "--gradient-only", "--out", tmp_path)
    assert _strict_json(tmp_path / "nuts_nmf_gpp_gradient.json")["gradient_rates"] == {"wall": {"ours": 2.0}}
    _run_main(module, monkeypatch, "--quick", "--regimes", "weak", "--metrics", "auto,diagonal", "--out", tmp_path,
              "--json", tmp_path / "rows.json")
    results = _strict_json(tmp_path / "nuts_nmf_gpp_weak_auto-diagonal.json")
    assert [(row["regime"], row["metric"]) for row in results["runs"]] == [("weak", "auto"), ("weak", "diagonal")]
    assert results["leaf_cost"] == {"diagonal": {"leaf_us": 3.0}} and results["settings"]["num_warmup"] == 150
    assert _strict_json(tmp_path / "rows.json") == results["runs"]


def test_chib_quick_compares_nothing_it_cannot(tmp_path, monkeypatch, capsys):
    """``--quick`` times 3 ranks, not the paper's 10, and its memory problem is too small for block Gibbs's RSS to
    grow: no speed-up against the paper's 835 s, no RSS ratio (they were 835 s / the 3 ranks' time and 0/0 = 0)."""
    import concurrent.futures

    module = _load(RECIPES / "benchmarks" / "chib_nmf.py", monkeypatch)
    for key in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # the benchmark sets them
        monkeypatch.setenv(key, os.environ.get(key, "1"))
    monkeypatch.setattr(module, "ProcessPoolExecutor", concurrent.futures.ThreadPoolExecutor)
    monkeypatch.setattr(module, "chib_for_rank", lambda task: (task[1], -100.0 * task[1], 0.5, 1.0, 0.1, [0.1], ["W"]))
    monkeypatch.setattr(module, "memory_problem", lambda frames, seed, path: ((1025, frames), 1000))
    monkeypatch.setattr(module, "measure_memory", lambda path, sampler: {
        "peak_rss_growth_mb": 0.0, "tracemalloc_peak_mb": 2.0 if sampler == "sada" else 4.0, "seconds_per_sweep": 0.1})
    _run_main(module, monkeypatch, "--quick", "--out", tmp_path)
    results = _strict_json(tmp_path / "chib_nmf.json")
    assert results["ranks"] == [1, 2, 3] and results["speedup"] is None and results["sada_over_block_rss"] is None
    assert results["chib_run_stderr"] == [0.5] * 3 and "chib_stderr" not in results  # one run's own: no error bar
    assert results["sada_over_block_numpy"] == 0.5
    printed = capsys.readouterr().out
    assert "no ratio" in printed and "not compared" in printed and "x;" not in printed


def _fake_noizeus(monkeypatch, utterances, noises, snrs, seconds=2.0):
    """NOIZEUS's reader returning mixtures of noise-like 'speech' (8 kHz), the enhancer and the scores stand-ins."""
    import sepsti.corpora.noizeus as noizeus
    import sepsti.denoise
    import sepsti.dictionary
    import sepsti.features
    import sepsti.metrics
    import sepsti.noise_model

    rng = np.random.default_rng(0)
    n = int(seconds * 8000)
    every = [SimpleNamespace(utterance=utterance, noise=noise, snr=snr, clean=rng.standard_normal(n),
                             noise_signal=0.1 * rng.standard_normal(n), sample_rate=8000)
             for utterance in utterances for noise in noises for snr in snrs]
    for mixture in every:
        mixture.noisy = mixture.clean + mixture.noise_signal

    def mixtures(index, split="test", noises=None, snrs=None):
        return [m for m in every if (noises is None or m.noise in noises) and (snrs is None or m.snr in snrs)]

    monkeypatch.setattr(noizeus, "corpus_index", lambda corpus: corpus)
    monkeypatch.setattr(noizeus, "mixtures", mixtures)
    monkeypatch.setattr(sepsti.denoise, "denoise", lambda noisy, W, **options: 0.5 * noisy)
    monkeypatch.setattr(sepsti.noise_model, "learn_noise", lambda frames, rank, seed: None)
    monkeypatch.setattr(sepsti.dictionary, "load_dictionary", lambda path: SimpleNamespace(
        W=np.ones((257, 2)), sample_rate=8000, framing=sepsti.features.NARROWBAND, rank=2, mask_atoms=None,
        band_gains=None))
    for name, score in (("bss_eval", lambda clean, noisy, estimate: {"sdr": float(np.std(estimate))}),
                        ("stoi", lambda clean, estimate, rate: 0.5), ("pesq", lambda clean, estimate, rate: 2.0)):
        monkeypatch.setattr(sepsti.metrics, name, score)


def test_quick_cuts_fewer_short_pieces(tmp_path, monkeypatch):
    """``enhance_short_pieces.py --quick``: the first two lengths of the first two sentences (it ran them all)."""
    _fake_noizeus(monkeypatch, ["sp21", "sp22", "sp23"], ["car"], [0, 5])
    module = _load(RECIPES / "benchmarks" / "enhance_short_pieces.py", monkeypatch)
    for quick, out in (([], tmp_path / "full"), (["--quick"], tmp_path / "quick")):
        _run_main(module, monkeypatch, *quick, "--corpus", tmp_path, "--lengths", "0.5,1,1.5", "--out", out)
    full, quick = (_strict_json(tmp_path / run / "enhance_short_pieces.json") for run in ("full", "quick"))
    assert len(full["results"]) == 3 * 2 * 4 and {row["seconds"] for row in full["summary"]} == {0.5, 1.0, 1.5, None}
    assert {row["id"] for row in quick["results"]} == {"sp21", "sp22"} and len(quick["results"]) == 2 * 2 * 3
    assert [row["seconds"] for row in quick["summary"]] == [0.5, 1.0, None]


def test_short_pieces_of_wideband_speech(tmp_path, monkeypatch):
    """``enhance_short_pieces.py --wideband``: pieces of each length cut around the speech of the test
    utterances, at 16 kHz and (another rate taken) at 48 kHz, car noise at 16 kHz only, every SNR at its level,
    each enhanced at its own rate; the summary per rate and length, under a name of its own."""
    import sepsti.commands.evaluate as evaluate
    import sepsti.corpora.wideband as wideband
    import sepsti.metrics

    rng = np.random.default_rng(1)

    def utterance(rate):  # 0.5 s of silence, 2 s of 'speech', 0.5 s of silence
        return np.concatenate([np.zeros(rate // 2), rng.standard_normal(2 * rate), np.zeros(rate // 2)])

    signals = ([(f"{i}-1-0000", utterance(16000), 16000) for i in range(8)]  # enough talkers for the babble
               + [("LJ001-0001", utterance(22050), 22050)])
    monkeypatch.setattr(wideband, "clean_signals", lambda folder, split: signals if split == "test" else [])
    calls = []

    def enhanced(noisy, rate, dictionary, **options):
        calls.append(rate)
        return 0.5 * noisy

    monkeypatch.setattr(evaluate, "enhance_signal", enhanced)
    monkeypatch.setattr(sepsti.metrics, "bss_eval", lambda clean, noisy, estimate: {"sdr": 0.0})
    monkeypatch.setattr(sepsti.metrics, "stoi", lambda clean, estimate, rate: 0.5)
    (tmp_path / "wide").mkdir()
    (tmp_path / "wide" / "manifest.json").write_text("[]")
    module = _load(RECIPES / "benchmarks" / "enhance_short_pieces.py", monkeypatch)
    pieces = list(module.wideband_pieces(tmp_path / "wide", [0.5, 1.0], False, True, 0))
    rates = [16000] * 2 * 4 * 2 * 4 + [48000] * 3 * 2 * 4  # quick: two utterances at 16 kHz, one at 48 kHz
    assert [piece[6] for piece in pieces] == rates
    for name, noise, snr, length, clean, noisy, rate in pieces:
        assert len(clean) == len(noisy) == int(length * rate) and (noise != "car" or rate == 16000)
        assert np.all(clean != 0)  # cut around the speech, none of the silence
        ratio = 10 * np.log10(np.sum(clean ** 2) / np.sum((noisy - clean) ** 2))
        assert ratio == pytest.approx(snr, abs=1e-9)
    assert {(p[0], p[6]) for p in pieces} == {("0-1-0000", 16000), ("1-1-0000", 16000), ("LJ001-0001", 48000)}
    _run_main(module, monkeypatch, "--wideband", tmp_path / "wide", "--quick", "--lengths", "0.5,1", "--out",
              tmp_path / "out")
    results = _strict_json(tmp_path / "out" / "enhance_short_pieces_wideband.json")
    assert calls == rates and [row["rate"] for row in results["results"]] == rates
    assert [(row["rate"], row["seconds"], row["n"]) for row in results["summary"]] == [
        (16000, 0.5, 32), (16000, 1.0, 32), (48000, 0.5, 12), (48000, 1.0, 12)]


def test_quick_makes_a_shorter_recording_of_fewer_noise_changes(tmp_path, monkeypatch):
    """``enhance_noise_change.py --quick``: three sentences, two cases (it ran all of them)."""
    _fake_noizeus(monkeypatch, ["sp21", "sp22", "sp23", "sp24"], ["car", "babble", "train", "street"], [0])
    module = _load(RECIPES / "benchmarks" / "enhance_noise_change.py", monkeypatch)
    for quick, out in (([], tmp_path / "full"), (["--quick"], tmp_path / "quick")):
        _run_main(module, monkeypatch, *quick, "--corpus", tmp_path, "--out", out)
    full, quick = (_strict_json(tmp_path / run / "enhance_noise_change.json")["results"] for run in ("full", "quick"))
    assert (len(full), full[0]["seconds"]) == (len(module.CASES), 8.0)
    assert (len(quick), quick[0]["seconds"]) == (2, 6.0)


@pytest.mark.parametrize("draws", ["QUICK_FULL_RANK_DRAWS", "FULL_RANK_DRAWS"])
def test_the_full_rank_draws_are_within_the_exact_references_reach(draws):
    """Every matrix of the validation's full-rank cases at the default seed has few enough entries of H and
    splits of each row's counts for ``small_counts_log_evidence`` (a draw beyond them would end the run in its
    last cases)."""
    import sti_validation
    from sepsti.core.evidence.small_counts import _within_reach

    for seed, rank, rate, X in sti_validation.full_rank_data(0, getattr(sti_validation, draws)):
        assert rank == min(X.shape)
        _within_reach(X, rank)  # refuses too many entries of H or a row of too many splits
