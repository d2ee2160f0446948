import json
from unittest import mock

import pytest
from click.testing import CliRunner

from sepsti.cli import cli
from test_cli_train import assert_one_line_error, claimed_rate, make_corpus

TINY = ["--preset", "blocks", "--ranks", "2,3", "--temperatures", "2", "--samples", "12", "--keep", "6",
        "--blocks", "2", "--replicates", "2", "--no-progress"]


def _invoke(*args):
    return CliRunner().invoke(cli, ["select-rank", *map(str, args)])


@pytest.mark.noizeus
def test_json_plot_and_resume(noizeus_root, tmp_path):
    first = _invoke("--corpus", noizeus_root, *TINY, "--json", tmp_path / "a.json", "--plot", tmp_path / "a.png",
                    "--checkpoint", tmp_path / "ck")
    assert first.exit_code == 0, first.output
    doc = json.loads((tmp_path / "a.json").read_text())
    assert {"ranks", "log_marginal_likelihood", "stderr", "selected_rank", "seconds", "settings",
            "per_temperature"} <= set(doc)
    assert doc["ranks"] == [2, 3] and doc["selected_rank"] in (2, 3)
    chain = doc["settings"]["chain"]
    assert chain["num_steps"] == 12 and chain["num_blocks"] == 2 and chain["sampler"] == "psgld"  # options reach core
    assert doc["settings"]["num_replicates"] == 2 and len(doc["replicates"]["2"]) == 2
    assert (tmp_path / "a.png").stat().st_size > 0
    chains = sorted((tmp_path / "ck").glob("R*-t*-r*.npz"))
    assert len(chains) == 2 * 3 * 2
    chains[1].unlink()
    again = _invoke("--corpus", noizeus_root, *TINY, "--json", tmp_path / "b.json", "--checkpoint", tmp_path / "ck")
    assert again.exit_code == 0, again.output
    resumed = json.loads((tmp_path / "b.json").read_text())
    for key in doc:
        if key not in ("seconds", "timing"):
            assert resumed[key] == doc[key], key


def test_bad_input_is_one_line_and_status_2(tmp_path):
    result = _invoke("--corpus", tmp_path, *TINY, "--step-b", "0.3")
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "'--step-b': 0.3 is not in the range" in result.output
    missing = _invoke("--corpus", tmp_path / "nowhere", *TINY)
    assert missing.exit_code == 2 and missing.output.startswith("Error:")


def test_existing_output_needs_overwrite(tmp_path):
    (tmp_path / "out.json").write_text("{}")
    result = _invoke("--corpus", tmp_path, *TINY, "--json", tmp_path / "out.json")
    assert result.exit_code == 2 and "--overwrite" in result.output
    assert (tmp_path / "out.json").read_text() == "{}"


@pytest.mark.parametrize("option", ["--dispersion", "--prior-rate"])
@pytest.mark.parametrize("value", ["0", "-2", "inf", "nan", "lots", "RAYLEIGH", "MATCHED"])
def test_bad_dispersion_or_prior_rate_is_one_line_and_status_2(tmp_path, option, value):
    result = _invoke("--corpus", tmp_path, *TINY, option, value)
    assert result.exit_code == 2 and result.output.startswith(f"Error: {option}")


@pytest.mark.noizeus
def test_speech_model_divides_the_magnitudes_by_their_rayleigh_dispersion(noizeus_root, tmp_path):
    from sepsti.core.evidence.sti_nmf import rayleigh_dispersion
    from sepsti.training import train_split

    result = _invoke("--corpus", noizeus_root, *TINY, "--json", tmp_path / "a.json")
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "a.json").read_text())
    X = train_split(noizeus_root).matrix()[0].astype("float32")
    assert doc["settings"]["matrix"] == [257, 1661]
    assert doc["settings"]["model"]["dispersion"] == pytest.approx(rayleigh_dispersion(X), rel=1e-6)
    assert doc["settings"]["model"]["prior_rate"] == "matched"
    # int16-scale speech magnitudes are far more dispersed than Poisson counts
    assert doc["settings"]["model"]["dispersion"] > 100


def test_a_wideband_corpus_is_modelled_at_16_khz_on_the_frames_asked_for(tmp_path):
    """The matrix `train` learns a 16 kHz dictionary on; --frames keeps that many, spread evenly."""
    import numpy as np

    from sepsti.core.evidence.sti_nmf import rayleigh_dispersion
    from sepsti.training import train_split
    from test_cli_train import _wideband_corpus

    corpus = _wideband_corpus(tmp_path / "wide", np.random.default_rng(3))
    split = train_split(corpus)
    whole, utterances = split.matrix()
    assert whole.shape[0] == 513 and utterances == ["13-1-0000", "15-1-0000", "17-1-0000"]
    part, _ = split.matrix(frames=20)
    columns = np.linspace(0, whole.shape[1] - 1, 20).round().astype(int)
    np.testing.assert_array_equal(part, whole[:, columns])
    assert split.matrix(frames=10 ** 6)[0].shape == whole.shape
    # 16 of 153 frames: k 152 / 15 rounded to the nearest frame, not down (40.53 -> 41; truncation passed before,
    # 20 of 153 falling on whole frames)
    assert whole.shape[1] == 153
    np.testing.assert_array_equal(split.matrix(frames=16)[0], whole[:, [0, 10, 20, 30, 41, 51, 61, 71, 81, 91, 101,
                                                                          111, 122, 132, 142, 152]])
    assert split.matrix(frames=1)[0].shape == (513, 1)
    # no frames at all, or a count that is not a whole number, is refused before any file is read (0 gave an empty
    # matrix before)
    from sepsti.core.errors import ParameterError

    for frames, context in ((0, 0), (2.5, 0), (True, 0), (10, -1)):
        with pytest.raises(ParameterError, match="frames=|context="), \
                mock.patch.object(type(split), "load", side_effect=AssertionError("a file was read")):
            split.matrix(frames=frames, context=context)
    result = _invoke("--corpus", corpus, "--frames", 20, *TINY, "--json", tmp_path / "a.json")
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["settings"]["matrix"] == [513, 20]
    assert doc["settings"]["model"]["dispersion"] == pytest.approx(rayleigh_dispersion(part.astype("float32")),
                                                                   rel=1e-6)


def test_speech_model_selection_does_not_change_with_the_audio_scale(tmp_path):
    import numpy as np
    import soundfile

    from test_cli_train import make_corpus

    corpus = make_corpus(tmp_path / "corpus")
    quieter = tmp_path / "quieter"
    for wav in corpus.rglob("*.wav"):
        y, rate = soundfile.read(wav)
        target = quieter / wav.relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(target, 0.1 * y, rate, subtype="FLOAT")
    docs = []
    for root in (corpus, quieter):
        result = _invoke("--corpus", root, "--ranks", "1,2", "--samples", "40", "--keep", "20", "--temperatures",
                         "4", "--replicates", "2", "--no-progress", "--json", tmp_path / f"{root.name}.json")
        assert result.exit_code == 0, result.output
        docs.append(json.loads((tmp_path / f"{root.name}.json").read_text()))
    np.testing.assert_allclose(docs[0]["log_marginal_likelihood"], docs[1]["log_marginal_likelihood"], rtol=1e-7)
    assert docs[0]["selected_rank"] == docs[1]["selected_rank"]
    # the JSON names the modelled matrix (bins, frames) and keeps each of the two replicates' estimates
    from sepsti.training import train_split

    assert docs[0]["settings"]["matrix"] == list(train_split(corpus).matrix()[0].shape)
    assert [len(docs[0]["replicates"][str(rank)]) for rank in (1, 2)] == [2, 2]
    assert docs[1]["settings"]["model"]["dispersion"] == pytest.approx(0.1 * docs[0]["settings"]["model"]["dispersion"],
                                                                       rel=1e-5)


def _interrupt_after_the_first_chain(tmp_path, launcher, *extra):
    """Run select-rank on a small corpus, send SIGINT once a chain is saved; (seconds to stop, status,
    stderr, chains kept)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from test_cli_train import make_corpus

    corpus = make_corpus(tmp_path / "corpus")
    checkpoint = tmp_path / "ck"
    command = [*launcher, sys.executable, "-m", "sepsti", "select-rank", "--corpus", str(corpus), "--ranks",
               "2,3,4", "--preset", "blocks", "--samples", "4000", "--keep", "10", "--blocks", "2",
               "--checkpoint", str(checkpoint), *extra]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while not list(checkpoint.glob("R*-t*-r*.npz")) and time.monotonic() < deadline:
        if process.poll() is not None:  # ended before a chain was saved: say how, not after two minutes
            _, stderr = process.communicate()
            pytest.fail(f"select-rank ended with status {process.returncode} before saving a chain:\n{stderr}")
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    _, stderr = process.communicate(timeout=60)
    return time.monotonic() - sent, process.returncode, stderr, len(list(checkpoint.glob("R*-t*-r*.npz")))


@pytest.mark.usefixtures("sigint_as_at_a_terminal")
def test_ctrl_c_stops_within_two_seconds_keeps_finished_chains_and_exits_130(tmp_path):
    stopped, status, stderr, kept = _interrupt_after_the_first_chain(tmp_path, [], "--threads", "2")
    assert stopped < 2.0, stopped
    assert status == 130, stderr
    assert stderr.strip().splitlines()[-1] == "Interrupted." and "Traceback" not in stderr
    assert 1 <= kept < 3 * 11 * 4


def test_plot_format_follows_its_extension(tmp_path, tiny_corpus):
    result = _invoke("--corpus", tmp_path, *TINY, "--plot", tmp_path / "p.txt")
    assert result.exit_code == 2 and "--plot" in result.output and ".png" in result.output
    result = _invoke("--corpus", tiny_corpus, *TINY, "--plot", tmp_path / "P.PDF")  # an extension in capitals
    assert result.exit_code == 0, result.output
    assert (tmp_path / "P.PDF").read_bytes().startswith(b"%PDF-")
    # the formats evaluate's --plot writes (a .jpg was refused here and written there)
    result = _invoke("--corpus", tiny_corpus, *TINY, "--plot", tmp_path / "p.jpg")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "p.jpg").read_bytes().startswith(b"\xff\xd8\xff")


def test_option_errors_name_the_option(tmp_path):
    result = _invoke("--corpus", tmp_path, "--ranks", "0,a")
    assert result.exit_code == 2 and "--ranks '0,a'" in result.output and result.output.count("\n") == 1
    blocks = _invoke("--corpus", tmp_path, "--blocks", "4")
    assert blocks.exit_code == 2 and blocks.output.startswith("Error: --blocks 4: MALA chains (the reference preset)")
    mala = _invoke("--corpus", tmp_path, "--preset", "blocks", "--sampler", "mala")
    assert mala.exit_code == 2 and mala.output.startswith("Error: --sampler mala: the reference path's")
    ignored = _invoke("--corpus", tmp_path, "--step-a", "1e-3", "--alpha", "0.5")  # MALA uses neither
    assert ignored.exit_code == 2 and ignored.output.count("\n") == 1, ignored.output
    assert "--step-a, --alpha: not used" in ignored.output
    both = _invoke("--corpus", tmp_path, "--preset", "blocks", "--sampler", "mala", "--blocks", "4")
    assert both.exit_code == 2 and both.output.startswith("Error: --sampler mala: the reference path's")


@pytest.mark.mpi
def test_a_run_resumed_under_mpiexec_gives_the_first_runs_result(tmp_path):
    # every process must split the chains still to run alike: from one reading of the checkpoint
    import os
    import subprocess
    import sys
    from pathlib import Path

    from test_cli_train import make_corpus

    corpus, checkpoint = make_corpus(tmp_path / "corpus"), tmp_path / "ck"
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}

    def run(name):
        command = [mpiexec, "-n", "2", sys.executable, "-m", "sepsti", "select-rank", "--corpus", str(corpus),
                   "--ranks", "2,3", "--preset", "blocks", "--samples", "60", "--keep", "10", "--blocks", "2",
                   "--checkpoint", str(checkpoint), "--json", str(tmp_path / name)]
        completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert completed.returncode == 0, completed.stderr
        return json.loads((tmp_path / name).read_text())

    first = run("first.json")
    saved = sorted(checkpoint.glob("R*-t*-r*.npz"))
    for chain in saved[::3]:  # a third of the chains to run again, dealt out anew
        chain.unlink()
    resumed = run("resumed.json")
    assert len(saved) > 6
    for key in ("log_marginal_likelihood", "stderr", "replicates"):
        assert resumed[key] == first[key], key


@pytest.mark.mpi
@pytest.mark.usefixtures("sigint_as_at_a_terminal")
def test_ctrl_c_under_mpiexec_stops_at_once_and_exits_130(tmp_path):
    import sys
    from pathlib import Path

    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    stopped, status, stderr, kept = _interrupt_after_the_first_chain(tmp_path, [mpiexec, "-n", "2"])
    assert stopped < 2.0
    assert status == 130, stderr
    assert "Interrupted." in stderr and "Traceback" not in stderr
    assert 1 <= kept < 3 * 11 * 4


# --------------------------------------------------------------------------------------------
# options named as typed, bounded, checked before any work


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("select_rank") / "corpus")


@pytest.mark.parametrize("args, fragments", [
    (["--samples", "99999999999999"], ["'--samples'", "1<=x<=10000000"]),
    (["--samples", "10000001"], ["'--samples'", "1<=x<=10000000"]),
    (["--keep", "10000001"], ["'--keep'", "1<=x<=10000000"]),
    (["--temperatures", "10001"], ["'--temperatures'", "2<=x<=10000"]),
    # one interval: Simpson's rule on a power or beta grid weighs t = 0 by 0, so the estimate was E_1 alone
    (["--temperatures", "1"], ["'--temperatures'", "2<=x<=10000"]),
    (["--replicates", "1001"], ["'--replicates'", "1<=x<=1000"]),
    # none: refused by the option, not later as the library's frames=0, num_blocks=0 or threads=0 (passed before)
    (["--frames", "0"], ["'--frames'", "x>=1"]),
    (["--blocks", "0"], ["'--blocks'", "x>=1"]),
    (["--threads", "0"], ["'--threads'", "x>=1"]),
])
def test_counts_are_bounded(tmp_path, args, fragments):
    # (the folder is never looked at: the option is refused first)
    assert_one_line_error(_invoke("--corpus", tmp_path / "nowhere", *args), *fragments)


@pytest.mark.parametrize("option, value, bound", [("--step-b", "0.5", "0.5<x<=1.0"), ("--sigma", "0", "x>0.0"),
                                                  ("--power", "0.5", "x>=1.0")])
def test_numbers_outside_their_ranges_are_refused_by_the_option(tmp_path, option, value, bound):
    """b in (0.5, 1], sigma > 0 and c >= 1, as the help gives them (refused later as the library's step_b=0.5,
    sigma=0.0 or power=0.5 passed before)."""
    assert_one_line_error(_invoke("--corpus", tmp_path / "nowhere", option, value), f"'{option}'", bound)


#: What the library calls its settings: never in a message about an option.
_FIELD_NAMES = ("num_", "step_a", "step_b", "power=", "temperatures=", "sigma=", "alpha=", "evaluate=",
                "dispersion=", "stream keys", "File exists")


@pytest.mark.parametrize("args, fragments", [
    (["--keep", "30", "--samples", "20"], ["--keep 30 exceeds --samples 20"]),
    (["--samples", "100"], ["--keep 2000 (the blocks preset's) exceeds --samples 100"]),
    (["--step-a", "nan"], ["'--step-a'", "not a finite number"]),
    (["--step-a", "inf"], ["'--step-a'", "not a finite number"]),
    (["--step-b", "nan"], ["'--step-b'", "not a finite number"]),
    (["--alpha", "nan"], ["'--alpha'", "not a finite number"]),
    (["--sigma", "inf"], ["'--sigma'", "not a finite number"]),
    (["--power", "inf"], ["'--power'", "not a finite number"]),
    (["--power", "1e300"], ["--power 1e+300: the power schedule's 11 temperatures are not distinct"]),
    (["--ranks", "99999999999999999"], ["--ranks 99999999999999999: above the 257 frequency bins"]),
    (["--ranks", "2,258"], ["--ranks 258: above the 257 frequency bins"]),
    (["--ranks", "1,,2"], ["--ranks '1,,2': empty item"]),
    (["--ranks", "2,"], ["--ranks '2,': empty item"]),
    (["--ranks", "0,2"], ["--ranks '0,2': expected distinct positive integers"]),
    (["--ranks", "2,3,2"], ["--ranks '2,3,2': expected distinct positive integers"]),
    (["--blocks", "100", "--frames", "50"], ["--blocks 100: the 257 x 50 matrix cuts into at most 50 x 50 blocks"]),
    (["--frames", "1"], ["--blocks 8 (the blocks preset's): the 257 x 1 matrix cuts into at most 1 x 1 blocks"]),
    (["--preset", "reference", "--sampler", "psgld"], ["--sampler psgld: block-parallel chains, not the reference"]),
    (["--preset", "reference", "--sampler", "sgld", "--blocks", "2"], ["--sampler sgld: block-parallel chains"]),
    (["--dispersion", "1e-30"], ["--dispersion 1e-30: the 257 x ", "more than 2**53 counts", "give --dispersion "]),
    (["--dispersion", "1e308"], ["--dispersion 1e+308: the 257 x ", "rounds to zero in float32"]),
    # settings the chains or the grid do not use: refused, not ignored
    (["--preset", "paper", "--alpha", "0.5", "--sigma", "3"],
     ["--alpha, --sigma: not used by SGLD chains (the paper preset's)", "--sampler psgld"]),
    (["--sampler", "sgld", "--sigma", "3"], ["--sigma: not used by SGLD chains: "]),
    (["--preset", "paper", "--power", "3"], ["--power 3: not used by the uniform schedule (the paper preset's)"]),
    (["--schedule", "uniform", "--power", "3"], ["--power 3: not used by the uniform schedule, t_i = i/T"]),
    (["--schedule", "beta", "--power", "600", "--temperatures", "2"],
     ["--power 600: the beta schedule's quadrature weights are not finite", "lower --power"]),
    (["--schedule", "beta", "--power", "600"], ["--power 600: the beta schedule's 11 temperatures are not distinct",
                                                "(t_7 = t_8 = 1)"]),
    (["--keep", "1", "--replicates", "1"], ["--keep 1 with --replicates 1: ", "no standard error"]),
    (["--preset", "paper", "--keep", "1"], ["--keep 1 with --replicates 1 (the paper preset's)"]),
])
def test_messages_name_the_options_as_typed(tiny_corpus, monkeypatch, args, fragments):
    import sepsti.core.evidence.sti_nmf

    monkeypatch.setattr(sepsti.core.evidence.sti_nmf, "select_rank_sti", None)  # never reached
    result = _invoke("--corpus", tiny_corpus, "--preset", "blocks", *args)
    assert_one_line_error(result, *fragments)
    assert not any(name in result.stderr for name in _FIELD_NAMES), result.stderr


def _stop_at_the_engine(monkeypatch, sampled):
    """``sampled`` in place of select_rank_sti, and no kernel compilation on the way (its line on a cold numba
    cache, 'compiled the sampling kernels in 21 s', made a second stderr line in whichever test came first)."""
    import sepsti.core.evidence.sti_nmf

    monkeypatch.setattr(sepsti.core.evidence.sti_nmf, "warm_up", lambda dtypes: None)
    monkeypatch.setattr(sepsti.core.evidence.sti_nmf, "select_rank_sti", sampled)


@pytest.mark.parametrize("args, reached", [
    (["--preset", "blocks", "--ranks", "2,257"], "ranks [2, 257], 257 x "),  # a rank of every frequency bin
    (["--preset", "blocks", "--frames", "50", "--blocks", "50"], "257 x 50, 50 blocks,"),
    (["--preset", "blocks", "--samples", "20", "--keep", "20"], "20 samples, 20 kept, 4 replicates"),
    (["--preset", "blocks", "--keep", "1", "--replicates", "2"], "10000 samples, 1 kept, 2 replicates"),
    (["--preset", "paper"], "1250 samples, 500 kept, 1 replicates"),  # one chain, but 500 values, per temperature
    (["--preset", "blocks", "--power", "3"], "a power schedule of c = 3.0,"),
    (["--preset", "blocks", "--evaluate", "after-update"], "scored after_update"),
])
def test_settings_at_their_bounds_are_taken(tiny_corpus, monkeypatch, args, reached):
    from sepsti.core.errors import ParameterError

    def sampled(X, ranks, *, grid, chain, num_replicates, **options):
        raise ParameterError(f"reached: ranks {ranks}, {X.shape[0]} x {X.shape[1]}, {chain.num_blocks} blocks, "
                             f"{chain.num_steps} samples, {chain.num_keep} kept, {num_replicates} replicates, "
                             f"a {grid.schedule} schedule of c = {grid.power}, scored {chain.evaluate}")

    _stop_at_the_engine(monkeypatch, sampled)
    assert_one_line_error(_invoke("--corpus", tiny_corpus, *args), "reached: ", reached)


@pytest.mark.parametrize("options, seed", [([], 0), (["--seed", "7"], 7)])
def test_the_seed_reaches_the_engine(tiny_corpus, monkeypatch, options, seed):
    from sepsti.core.errors import ParameterError

    def sampled(X, ranks, **settings):
        raise ParameterError(f"sampling with seed {settings['seed']!r}")

    _stop_at_the_engine(monkeypatch, sampled)
    assert_one_line_error(_invoke("--corpus", tiny_corpus, *TINY, *options), f"sampling with seed {seed}")


def _handed_to_the_engine(monkeypatch, *args):
    """The arguments select-rank hands select_rank_sti, the run stopped there."""
    from sepsti.core.errors import ParameterError

    given = {}

    def sampled(X, ranks, **options):
        given.update(options, X=X)
        raise ParameterError("reached")

    _stop_at_the_engine(monkeypatch, sampled)
    assert_one_line_error(_invoke(*args), "reached")
    return given


@pytest.mark.parametrize("args, expected", [
    ([], dict(exact_prior=True, dtype="float32", threads=None, progress=True)),
    (["--no-exact-prior"], dict(exact_prior=False)),  # the reference preset's is on
    (["--preset", "blocks", "--alpha", "0", "--sigma", "0.25"], dict(alpha=0.0, sigma=0.25)),
    (["--preset", "blocks", "--init", "em"], dict(init="em", init_iterations=100)),
    (["--dtype", "float64"], dict(dtype="float64")),
    (["--threads", "3"], dict(threads=3)),
    (["--quiet"], dict(progress=False)),
])
def test_options_reach_the_engine(tiny_corpus, monkeypatch, args, expected):
    """Each option as given, a zero or an off switch included (--no-exact-prior and --alpha 0 were dropped as not
    given, --dtype, --threads and --quiet ignored, --init taken as the iterations of the start, passed before)."""
    given = _handed_to_the_engine(monkeypatch, "--corpus", tiny_corpus, *args)
    seen = {**given["chain"].as_dict(), "dtype": given["X"].dtype.name, "threads": given["threads"],
            "progress": given["progress"]}
    assert {name: seen[name] for name in expected} == expected


@pytest.mark.parametrize("args, expected", [
    ([], dict(num_replicates=4, prior_rate="matched", dispersion="rayleigh")),
    (["--replicates", "3", "--prior-rate", "2.5", "--dispersion", "4"],
     dict(num_replicates=3, prior_rate=2.5, dispersion=4.0)),
])
def test_the_speech_model_and_replicates_reach_the_engine(tiny_corpus, monkeypatch, args, expected):
    """The matrix `train` learns on and the model's two rules, without the NOIZEUS corpus (--replicates or
    --prior-rate not passed on, or the matrix transposed, were caught only where the corpus is, passed before)."""
    import numpy as np

    from sepsti.training import train_split

    given = _handed_to_the_engine(monkeypatch, "--corpus", tiny_corpus, *args)
    assert {name: given[name] for name in expected} == expected
    X = train_split(tiny_corpus).matrix()[0]
    assert given["X"].shape == X.shape and given["X"].dtype.name == "float32"
    np.testing.assert_array_equal(given["X"], X.astype("float32"))


def test_a_json_and_a_plot_to_write_are_checked_each_as_itself(tiny_corpus, monkeypatch, tmp_path):
    """--json r.json --plot r.png reach the engine (the two swapped in the output checks, the JSON then refused as
    a plot format, was caught only where the NOIZEUS corpus is, passed before)."""
    given = _handed_to_the_engine(monkeypatch, "--corpus", tiny_corpus, "--json", tmp_path / "r.json",
                                  "--plot", tmp_path / "r.png")
    assert given["X"].size and not list(tmp_path.iterdir())


@pytest.mark.parametrize("args", [["--preset", "paper", "--alpha", "0.99", "--sigma", "1e-5"],
                                  ["--preset", "paper", "--power", "1"], ["--step-a", "1e-7", "--sigma", "0.1"]])
def test_an_unused_option_at_the_presets_own_value_is_taken(tiny_corpus, monkeypatch, args):
    """docs/rank_selection.md: an option the chains or the grid do not use is refused when given a value other than
    the preset's, for SGLD's --alpha/--sigma and the uniform --power as for the reference path's MALA chains (the
    paper preset's own --sigma or --power refused passed before)."""
    given = _handed_to_the_engine(monkeypatch, "--corpus", tiny_corpus, *args)
    assert given["chain"].sampler == ("sgld" if "paper" in args else "mala")


def test_the_smallest_dispersion_suggested_is_taken(tiny_corpus, monkeypatch):
    from sepsti.core.errors import ParameterError

    result = _invoke("--corpus", tiny_corpus, *TINY, "--dispersion", "1e-30")
    suggested = result.stderr.split("give --dispersion ")[1].split()[0]

    def sampled(X, ranks, **options):
        raise ParameterError(f"sampling with dispersion {options['dispersion']}")

    _stop_at_the_engine(monkeypatch, sampled)
    assert_one_line_error(_invoke("--corpus", tiny_corpus, *TINY, "--dispersion", suggested),
                          f"sampling with dispersion {float(suggested)}")


def test_the_smallest_dispersion_itself_is_taken(tiny_corpus, monkeypatch):
    """sum(X) / 2**53 divides X into 2**53 counts, not more: taken (refused as too small passed before)."""
    from sepsti.core.evidence.sti_nmf import smallest_dispersion
    from sepsti.training import train_split

    least = smallest_dispersion(train_split(tiny_corpus).matrix()[0].astype("float32"))
    given = _handed_to_the_engine(monkeypatch, "--corpus", tiny_corpus, *TINY, "--dispersion", repr(least))
    assert given["dispersion"] == least


@pytest.mark.parametrize("options, said", [([], True), (["--progress"], True), (["--no-progress"], False)])
def test_a_slow_compilation_is_reported_unless_progress_is_off(tiny_corpus, monkeypatch, options, said):
    import itertools
    import time

    from sepsti.core.errors import ParameterError

    def sampled(X, ranks, **settings):
        raise ParameterError("reached")

    ticks = itertools.count(0.0, 3.0)  # every reading of the clock 3 s after the last
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks))
    _stop_at_the_engine(monkeypatch, sampled)
    result = _invoke("--corpus", tiny_corpus, "--preset", "blocks", *options)
    assert result.stderr.endswith("Error: reached\n"), result.stderr
    assert ("compiled the sampling kernels in 3 s" in result.stderr) == said, result.stderr


def test_unusable_sample_rate_of_a_training_file_is_refused_by_name(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", train=("sp01", "sp02", "sp03"), test=(), noises=(), snrs=())
    claimed_rate(1_999_999_999)(corpus / "clean" / "sp02.wav")
    assert_one_line_error(_invoke("--corpus", corpus, *TINY),
                          f"{corpus / 'clean' / 'sp02.wav'}: sample rate 1999999999 Hz is outside 4000..384000 Hz")


def test_names_with_a_line_break_are_quoted_on_one_line(tmp_path):
    json_path = tmp_path / "new\nfolder" / "r.json"
    assert_one_line_error(_invoke("--corpus", tmp_path, *TINY, "--json", json_path),
                          f"{str(json_path)!r}: output folder {str(json_path.parent)!r} does not exist")


def test_checkpoint_is_a_new_or_empty_folder_or_a_checkpoint(tiny_corpus, tmp_path):
    audio = tmp_path / "base.wav"
    audio.write_bytes(b"RIFF")
    assert_one_line_error(_invoke("--corpus", tiny_corpus, *TINY, "--checkpoint", audio),
                          f"--checkpoint {audio}: not a folder")
    assert audio.read_bytes() == b"RIFF"
    # a corrupt settings.json was reported as missing
    for name, files, why in (("notes", {"notes.txt": "mine"}, "a folder that holds other files than a select-rank "
                                                              "checkpoint (no settings.json of one)"),
                             ("config", {"settings.json": '{"my": "config"}'}, "its settings.json is not a "
                                                                               "select-rank checkpoint's"),
                             ("grid", {"settings.json": '{"grid": {"num_intervals": 2}}'}, "its settings.json is not"),
                             ("cut", {"settings.json": '{"grid": {"num_int'}, "its settings.json is unreadable "
                                                                             "(Unterminated string")):
        folder = tmp_path / name
        folder.mkdir()
        for file, text in files.items():
            (folder / file).write_text(text)
        result = _invoke("--corpus", tiny_corpus, *TINY, "--checkpoint", folder)
        assert_one_line_error(result, f"--checkpoint {folder}: {why}")
        assert {path.name: path.read_text() for path in folder.iterdir()} == files  # nothing written into it
    # an empty folder becomes a checkpoint, which a rerun resumes
    (tmp_path / "ck").mkdir()
    first = _invoke("--corpus", tiny_corpus, *TINY, "--checkpoint", tmp_path / "ck", "--json", tmp_path / "a.json")
    assert first.exit_code == 0, first.output
    assert len(list((tmp_path / "ck").glob("R*-t*-r*.npz"))) == 2 * 3 * 2
    again = _invoke("--corpus", tiny_corpus, *TINY, "--checkpoint", tmp_path / "ck", "--json", tmp_path / "b.json")
    assert again.exit_code == 0, again.output
    a, b = (json.loads((tmp_path / name).read_text()) for name in ("a.json", "b.json"))
    assert a["log_marginal_likelihood"] == b["log_marginal_likelihood"] and a["replicates"] == b["replicates"]


def test_json_and_plot_are_reported_as_written(tiny_corpus, tmp_path):
    (tmp_path / "link").symlink_to(tiny_corpus)
    result = _invoke("--corpus", tmp_path / "link", *TINY, "--json", tmp_path / "r.json", "--plot", tmp_path / "r.png")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == [f"wrote {tmp_path / 'r.json'}", f"wrote {tmp_path / 'r.png'}"]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["settings"]["corpus"] == str(tmp_path / "link")  # as given
    assert doc["settings"]["preset"] == "blocks"  # as the README lists the JSON's settings (left out passed before)
    marked = [line.split()[0] for line in result.stdout.splitlines() if line.endswith(" *")]
    assert marked == [str(doc["selected_rank"])], result.stdout


def test_overwrite_replaces_the_json_and_the_plot(tiny_corpus, tmp_path):
    """Files there are replaced with --overwrite (the writers refused them after the run, passed before)."""
    for name in ("r.json", "r.png"):
        (tmp_path / name).write_text("old\n")
    result = _invoke("--corpus", tiny_corpus, *TINY, "--json", tmp_path / "r.json", "--plot", tmp_path / "r.png",
                     "--overwrite")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.json").read_text())["ranks"] == [2, 3]
    assert (tmp_path / "r.png").read_bytes().startswith(b"\x89PNG")


def test_the_table_gives_each_ranks_estimate_and_error_and_names_the_selection(tiny_corpus, tmp_path):
    """Rows as in the JSON, under the header's columns, and the selected rank after them, whichever rank comes first
    (estimates and errors in each other's columns, or the first rank as the selection, passed before)."""
    for ranks in ("2,3", "3,2"):  # a chain depends on its own key only: one selection, not first in one order
        result = _invoke("--corpus", tiny_corpus, *TINY, "--ranks", ranks, "--json", tmp_path / f"{ranks}.json")
        assert result.exit_code == 0, result.output
        doc = json.loads((tmp_path / f"{ranks}.json").read_text())
        header, *rows, selected = result.stdout.splitlines()[:4]
        assert header.split()[:4] == ["rank", "log", "p(X|R)", "stderr"]
        for row, rank, value, stderr in zip(rows, doc["ranks"], doc["log_marginal_likelihood"], doc["stderr"]):
            assert row.split()[:3] == [str(rank), f"{value:.1f}", f"{stderr:.1f}"], result.stdout
        assert selected.startswith(f"selected rank: {doc['selected_rank']}  ("), result.stdout


def test_json_and_plot_on_one_file_are_refused_however_it_is_spelt(tmp_path):
    (tmp_path / "d").mkdir()
    result = _invoke("--corpus", tmp_path / "nowhere", *TINY, "--json", tmp_path / "d" / "r.png", "--plot",
                     tmp_path / "d" / ".." / "d" / "r.png")
    assert_one_line_error(result, f"--json and --plot are the same file {tmp_path / 'd' / 'r.png'}")


def test_json_or_plot_in_the_checkpoint_is_refused_before_any_work(tmp_path):
    # the JSON was lost after the whole run ("output is a directory"; inside it, "created by another program"),
    # and with --overwrite it replaced the checkpoint's own settings.json
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "settings.json").write_text("{}")
    for option, path, folder in (("--json", "ck", "ck"), ("--plot", "ck.png", "ck.png"),
                                 ("--json", "new/r.json", "new"), ("--json", "old/settings.json", "old")):
        result = _invoke("--corpus", tmp_path / "nowhere", *TINY, option, tmp_path / path, "--checkpoint",
                         tmp_path / folder, "--overwrite")
        assert_one_line_error(result, f"{option} {tmp_path / path}: inside --checkpoint {tmp_path / folder}")
        assert not (tmp_path / path).exists() or (tmp_path / path).read_text() == "{}"


def test_help_says_what_the_grid_options_do():
    text = " ".join(_invoke("--help").output.split())
    assert "--temperatures INTEGER RANGE T, intervals of the temperature grid (T + 1 temperatures), at least 2" in text
    assert "[2<=x<=10000]" in text
    # on the presets' Simpson grids t = 0 weighs 0: the option cannot move the estimate there
    assert "t = 0 weighs 0: the choice then changes E_0 and the tempering check only, not the estimate" in text


@pytest.mark.parametrize("option, noun", [("--json", "file"), ("--plot", "file"), ("--checkpoint", "folder")])
def test_an_empty_output_is_refused_as_such(tmp_path, monkeypatch, option, noun):
    # '' named the working folder: a checkpoint there, or "output is a directory" after the run
    monkeypatch.chdir(tmp_path)
    result = _invoke("--corpus", tmp_path / "nowhere", *TINY, option, "")
    assert_one_line_error(result, f"'{option}': an empty path; give a {noun} name")
    assert list(tmp_path.iterdir()) == []


def test_outputs_never_replace_the_corpus_they_read(tmp_path, rng):
    """--json onto a training file, or --plot through a link to one, replaced it with --overwrite (the corpus
    was unreadable after); a wideband corpus's manifest likewise."""
    from test_cli_train import _wideband_corpus

    corpus = make_corpus(tmp_path / "corpus")
    (corpus / "clean" / "link.png").symlink_to("sp03.wav")
    before = {path: path.read_bytes() for path in (corpus / "clean").iterdir()}
    for option, path in (("--json", corpus / "clean" / "sp01.wav"), ("--plot", corpus / "clean" / "link.png")):
        result = _invoke("--corpus", corpus, *TINY, option, path, "--overwrite")
        assert_one_line_error(result, f"{path}: output is also an input")
    assert {path: path.read_bytes() for path in (corpus / "clean").iterdir()} == before
    wide = _wideband_corpus(tmp_path / "wide", rng)
    with pytest.warns(UserWarning, match="wideband manifest"):
        result = _invoke("--corpus", wide, *TINY, "--json", wide / "manifest.json", "--overwrite")
    assert_one_line_error(result, "manifest.json: output is also an input")


def test_quiet_is_kept_for_the_scripts_that_use_it(tmp_path):
    """--quiet, as select-rank spelt --no-progress before, is hidden from the help but still taken."""
    assert "--quiet" not in _invoke("--help").output
    result = _invoke("--corpus", tmp_path / "nowhere", "--quiet")
    assert "No such option" not in result.output and "no such corpus folder" in result.output


def test_the_plot_draws_two_standard_errors_in_rank_order_and_marks_the_selected_rank(tmp_path, monkeypatch):
    """Ranks given out of order are drawn in order, each with its own ±2 s.e., and the line stands at the selection."""
    import types

    import matplotlib.axes
    import numpy as np

    from sepsti.commands.select_rank import _write_plot

    drawn = {}
    errorbar, axvline = matplotlib.axes.Axes.errorbar, matplotlib.axes.Axes.axvline

    def record_errorbar(self, x, y, yerr=None, **options):
        drawn.update(x=list(x), y=list(y), yerr=list(yerr))
        return errorbar(self, x, y, yerr=yerr, **options)

    def record_axvline(self, x=0, **options):
        drawn["line"] = x
        return axvline(self, x, **options)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", record_errorbar)
    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", record_axvline)
    selection = types.SimpleNamespace(ranks=[4, 1, 2], log_marginal_likelihood=np.array([-20.0, -30.0, -10.0]),
                                      stderr=np.array([0.5, 1.5, 1.0]), selected_rank=2)
    _write_plot(tmp_path / "p.png", selection, overwrite=False)
    assert drawn == {"x": [1, 2, 4], "y": [-30.0, -10.0, -20.0], "yerr": [3.0, 2.0, 1.0], "line": 2}
    assert (tmp_path / "p.png").stat().st_size > 0
