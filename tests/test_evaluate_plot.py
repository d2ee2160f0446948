"""``sepsti evaluate --plot``: where the legend goes, intervals drawn only where there are some, the image formats
the help names; and the ``max_reduction_db`` of ``--max-reduction 0``."""

import json

import numpy as np
import pytest
import soundfile
from scipy import stats

from test_cli_train import run, speech_like


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot closes, kept open to be looked at."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    return figures


def _rows(rng, files):
    """Result rows of improving enhancement; ``files`` maps each file to its SNRs (None: a pair without one)."""
    rows = []
    for name, snrs in files.items():
        for snr in snrs:
            level = 5.0 if snr is None else float(snr)
            before = {"sdr": level + rng.normal(), "sir": level + rng.normal(), "sar": np.inf,
                      "stoi": 0.7 + 0.01 * level + 0.01 * rng.normal(), "pesq": 1.5 + 0.05 * level + 0.1 * rng.normal()}
            after = {"sdr": before["sdr"] + 6 + rng.normal(), "sir": before["sir"] + 12 + rng.normal(),
                     "sar": 12 + rng.normal(), "stoi": before["stoi"] + 0.04, "pesq": before["pesq"] + 0.5}
            rows.append({"file": name, **({} if snr is None else {"noise": "car", "snr": snr}),
                         "input": before, "enhanced": after})
    return rows


@pytest.mark.parametrize("files", [{f"p{i}": [None] for i in range(6)},
                                   {"sp21": [0, 5, 10], "sp22": [0, 5, 10]}])
def test_the_legend_covers_no_panel(files, drawn, tmp_path, rng):
    """In the pairs' scatter the files that gain sit top left, where the legend was: it now lies under the panels."""
    from sepsti.commands.evaluate import _plot, summarize

    rows = _rows(rng, files)
    _plot(summarize(rows), rows, tmp_path / "p.png", "t", "files")
    (figure,) = drawn
    renderer = figure.canvas.get_renderer()
    legends = [*figure.legends, *(axis.get_legend() for axis in figure.axes if axis.get_legend() is not None)]
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= figure.bbox.x1  # inside the image
        for axis in figure.axes:
            assert not box.overlaps(axis.get_window_extent(renderer))
    assert figure.get_suptitle() == "t; 95 % intervals over the files"  # the replicates it is given


def _bars(axis):
    """The SNRs at which ``axis`` draws an interval."""
    from matplotlib.container import ErrorbarContainer

    return [[segment[0][0] for segment in container.lines[2][0].get_segments()]  # its vertical bars
            for container in axis.containers if isinstance(container, ErrorbarContainer)]


def test_no_interval_is_drawn_or_claimed_with_one_sentence(drawn, tmp_path, rng):
    """One sentence at three SNRs has no interval: no bars (they were drawn zero long), and legend and title say so."""
    from sepsti.commands.evaluate import _plot, summarize

    rows = _rows(rng, {"sp21": [0, 5, 10]})
    summary = summarize(rows)
    assert all(entry["interval"]["sdr"] is None for entry in summary["by_snr"])
    _plot(summary, rows, tmp_path / "p.png", "t", "sentences")
    (figure,) = drawn
    assert all(_bars(axis) == [] for axis in figure.axes)
    labels = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    assert labels == ["input", "enhanced"]
    assert figure.get_suptitle() == "t; no 95 % interval (fewer than two sentences with both scores)"


def test_no_interval_is_claimed_when_no_snr_has_two_sentences(drawn, tmp_path, rng):
    """One sentence at 0 dB, another at 5 dB: the summary over both has an interval, but no panel draws one, and the
    title says there is none."""
    from sepsti.commands.evaluate import _plot, summarize

    rows = _rows(rng, {"sp21": [0], "sp22": [5]})
    summary = summarize(rows)
    assert summary["overall"]["interval"]["sdr"] is not None
    _plot(summary, rows, tmp_path / "p.png", "t", "sentences")
    (figure,) = drawn
    assert all(_bars(axis) == [] for axis in figure.axes)
    assert figure.get_suptitle() == "t; no 95 % interval (fewer than two sentences with both scores)"


def test_the_curves_are_the_input_and_enhanced_means_per_snr(drawn, tmp_path, rng):
    from sepsti.commands.evaluate import _plot, summarize

    rows = _rows(rng, {"sp21": [0, 5, 10], "sp22": [0, 5, 10]})
    _plot(summarize(rows), rows, tmp_path / "p.png", "t", "sentences")
    (figure,) = drawn
    for axis, metric in zip(figure.axes, ("sdr", "sir", "sar", "stoi", "pesq")):
        curves = {line.get_label(): line for line in axis.lines}
        for key, label in (("input", "input"), ("enhanced", "enhanced")):
            means = [np.mean([row[key][metric] for row in rows if row["snr"] == snr]) for snr in (0, 5, 10)]
            np.testing.assert_array_equal(curves[label].get_xdata(), [0, 5, 10])
            np.testing.assert_allclose(curves[label].get_ydata(), means, rtol=1e-12, err_msg=f"{metric} {key}")


def test_intervals_are_drawn_where_there_are_some(drawn, tmp_path, rng):
    """Two sentences at 0 and 5 dB, one of them also at 10 dB: bars at 0 and 5 dB only, in the title's words."""
    from sepsti.commands.evaluate import _plot, summarize

    rows = _rows(rng, {"sp21": [0, 5, 10], "sp22": [0, 5]})
    _plot(summarize(rows), rows, tmp_path / "p.png", "t", "sentences")
    (figure,) = drawn
    # SDR, SIR, SAR (no gain: the input's is infinite), STOI, PESQ
    assert [_bars(axis) for axis in figure.axes] == [[[0, 5]], [[0, 5]], [], [[0, 5]], [[0, 5]]]
    labels = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    assert labels == ["input", "enhanced", "95 % interval of the gain"]
    assert figure.get_suptitle() == "t; 95 % intervals over the sentences"


def test_the_intervals_are_drawn_on_the_enhanced_curve(drawn, tmp_path, rng):
    """Each SNR's bar is the interval of the gain, as long as it is, centred on the enhanced mean (not on the gain)."""
    from matplotlib.container import ErrorbarContainer

    from sepsti.commands.evaluate import _plot, summarize

    rows = _rows(rng, {"sp21": [0, 5], "sp22": [0, 5], "sp23": [0, 5]})
    summary = summarize(rows)
    _plot(summary, rows, tmp_path / "p.png", "t", "sentences")
    (figure,) = drawn
    (container,) = [item for item in figure.axes[0].containers if isinstance(item, ErrorbarContainer)]
    segments = container.lines[2][0].get_segments()
    for segment, entry in zip(segments, summary["by_snr"]):
        (x, low), (_, high) = segment
        low, high = sorted((low, high))
        enhanced = np.mean([row["enhanced"]["sdr"] for row in rows if row["snr"] == entry["snr"]])
        interval = entry["interval"]["sdr"]
        assert x == entry["snr"] and (low + high) / 2 == pytest.approx(enhanced, rel=1e-12)
        assert high - low == pytest.approx(interval[1] - interval[0], rel=1e-12)
    assert len(segments) == 2


def test_the_pairs_panels_give_the_mean_gain_and_its_interval_over_the_files(drawn, tmp_path, rng):
    from sepsti.commands.evaluate import _plot, summarize

    rows = _rows(rng, {f"p{i}": [None] for i in range(5)})
    _plot(summarize(rows), rows, tmp_path / "p.png", "t", "files")
    (figure,) = drawn
    gains = [row["enhanced"]["sdr"] - row["input"]["sdr"] for row in rows]
    low, high = stats.ttest_1samp(gains, 0.0).confidence_interval(0.95)
    assert figure.axes[0].get_title() == f"SDR: mean gain {np.mean(gains):+.2f} [{low:+.2f}, {high:+.2f}]"


def test_no_reduction_is_written_as_zero_and_every_image_format_the_help_names_is_written(tmp_path, rng):
    from sepsti.commands import PLOT_EXTENSIONS

    help_text = " ".join(run(["evaluate", "--help"]).stdout.split())
    assert f"({', '.join(PLOT_EXTENSIONS)})" in help_text and ".jpg" in PLOT_EXTENSIONS
    clean = speech_like(rng, seconds=1.0, rate=8000)
    for kind, y in (("clean", clean), ("noisy", clean + 0.01 * rng.standard_normal(clean.size))):
        (tmp_path / kind).mkdir()
        soundfile.write(tmp_path / kind / "p.wav", y, 8000, subtype="FLOAT")
    result = run(["evaluate", "--clean", tmp_path / "clean", "--noisy", tmp_path / "noisy", "--max-reduction", "0",
                  "--json", tmp_path / "s.json", "--plot", tmp_path / "s.jpeg"])
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "s.json").read_text()
    assert '"max_reduction_db": 0.0' in text and "-0.0" not in text
    assert json.loads(text)["summary"]["settings"]["max_reduction_db"] == 0.0
    assert (tmp_path / "s.jpeg").read_bytes()[:3] == b"\xff\xd8\xff"  # a JPEG
