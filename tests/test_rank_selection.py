"""The rank-selection engine: plan, seed rule, checkpoints, threads, interruption, replicate errors."""

import _thread
import itertools
import math
import threading
import time
import warnings

import numpy as np
import pytest

from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.evidence.rank_selection import (SHARED_KEY, ChainRecord, ChainSettings, Preset, TemperatureGrid,
                                                 balance, chain_plan, half_drift, resolve_settings, select_rank,
                                                 to_json)
from sepsti.core.random import stream

GRID = TemperatureGrid(4, "power", 3.0, "simpson")


class DriftingChains:
    """Chains whose kept values are mu(t) + a per-chain offset (a slow drift no chain sees) + white noise.

    E_t = mu(t) = -100 (1 - t)^2 - 50 R, so log p(X | R) = sum_i w_i mu(t_i) is known exactly
    for the grid's weights, and the within-chain errors miss the offsets.
    """

    collective = False

    def __init__(self, *, offset=5.0, noise=1.0, length=200, delay=0.0, trend=0.0, shared=0.0):
        self.offset, self.noise, self.length, self.delay, self.trend = offset, noise, length, delay, trend
        self.shared = shared  # sd of an offset shared by every temperature of one (rank, replicate)
        self.settings = {"model": {"name": "drift", "offset": offset, "noise": noise, "trend": trend,
                                   "shared": shared}, "chain": {"length": length}}
        self.data_digest = "none"
        self.runs = []

    @staticmethod
    def mean(rank, t):
        return -100.0 * (1.0 - t) ** 2 - 50.0 * rank

    def trace_length(self, task):
        return self.length

    def units(self, task):
        return self.length

    def cost(self, task):
        return float(task.rank)

    def prepare(self, tasks, *, seed, comm, threads):
        pass

    def run(self, task, *, seed, progress):
        rng = stream(seed, *task.key)
        for _ in range(10):
            time.sleep(self.delay)
            progress(self.length // 10)
        trace = (self.mean(task.rank, task.temperature) + self.offset * rng.standard_normal()
                 + self.noise * rng.standard_normal(self.length) + self.trend * np.linspace(-1, 1, self.length)
                 + self.shared * stream(seed, task.rank, SHARED_KEY, task.replicate).standard_normal())
        self.runs.append(task.key)
        return ChainRecord(trace, 0.0)


def exact(rank, grid=GRID):
    return float(grid.weights @ DriftingChains.mean(rank, grid.temperatures))


def test_shared_work_has_a_stream_of_its_own():
    # numpy reads an integer of 2**32 or more as several 32-bit words, so such a key would alias another
    # tuple (2**32, the shared key once, read as (0, 1): the noise of block r of chain (R, 0, 1))
    with pytest.raises(ParameterError, match=r"2\*\*32"):
        stream(0, 3, 2 ** 32, 2)
    first = {stream(0, 3, *keys).integers(0, 2 ** 63) for keys in itertools.chain(
        itertools.product(range(4), range(4)), itertools.product(range(4), range(4), range(8)))}
    assert stream(0, 3, SHARED_KEY, 2).integers(0, 2 ** 63) not in first


def test_plan_holds_every_rank_temperature_and_replicate():
    plan = chain_plan([4, 8], GRID, 3)
    assert len(plan) == 2 * 5 * 3 and len({task.key for task in plan}) == len(plan)
    assert plan[0].key == (4, 0, 0) and plan[-1].key == (8, 4, 2)
    assert plan[-1].temperature == 1.0
    # rank-major, then temperature, then replicate
    assert [task.key for task in plan[:4]] == [(4, 0, 0), (4, 0, 1), (4, 0, 2), (4, 1, 0)]


def test_balance_puts_longest_jobs_first_on_the_least_loaded_process():
    assert balance([5.0, 3.0, 3.0, 2.0, 1.0], 2) == [0, 1, 1, 0, 1]  # loads 7 and 7
    assert balance([1.0, 1.0, 1.0], 1) == [0, 0, 0]
    # equal costs: the lowest job first, each to the lowest of the least loaded processes
    assert balance([2.0, 2.0, 2.0, 2.0], 2) == [0, 1, 0, 1]
    assert balance([1.0, 2.0, 2.0], 3) == [2, 0, 1]


def test_a_chain_depends_on_its_own_key_only():
    # the same chain whatever the other candidates or the thread count: R = 2's estimates do not move
    both = select_rank(DriftingChains(), [1, 2], grid=GRID, num_replicates=3, seed=7, threads=2)
    alone = select_rank(DriftingChains(), [2], grid=GRID, num_replicates=3, seed=7, threads=1)
    np.testing.assert_array_equal(both.replicates[1], alone.replicates[0])
    other_seed = select_rank(DriftingChains(), [2], grid=GRID, num_replicates=3, seed=8)
    assert not np.array_equal(other_seed.replicates, alone.replicates)


class PreparedChains(DriftingChains):
    """Chains whose shared work (e.g. EM starts from stream(seed, R, SHARED_KEY, r)) records the seed it is given."""

    def prepare(self, tasks, *, seed, comm, threads):
        self.prepared_with = seed


@pytest.mark.parametrize("seed", [0, 7])
def test_the_seed_reaches_the_shared_work(seed):
    """The factory's prepare draws from the run's seed (seed 0 for every run passed before)."""
    factory = PreparedChains()
    select_rank(factory, [1], grid=GRID, num_replicates=2, seed=seed, threads=1)
    assert factory.prepared_with == seed


def log_abs_t_moments(dof):
    """Mean and sd of log|T| for T ~ Student t with ``dof`` degrees of freedom: T = Z / sqrt(chi2 / dof), and
    E log chi2 = digamma(dof / 2) + log 2, Var log chi2 = trigamma(dof / 2)."""
    from scipy import special

    mean = -(np.euler_gamma + math.log(2.0)) / 2 - (special.digamma(dof / 2) + math.log(2.0 / dof)) / 2
    return mean, math.sqrt(math.pi ** 2 / 8 + special.polygamma(1, dof / 2) / 4)


def assert_student_t(z, dofs):
    """z-scores against the truth follow a Student t with degrees of freedom in ``dofs`` (low, high).

    An rms bound has no sd under t_3 (its z^2 has no variance); log|z| has, so its mean is held to the
    t's own within 3 sd of a mean of len(z) -- an error bar half or 1.5 times the truth moves it by 0.69
    or 0.41, 6 and 3.7 sd at 120 draws -- and the share within t_3's 95 % quantile, which every t with
    more degrees of freedom exceeds, to at least 95 % less 3 binomial sd.
    """
    from scipy import stats

    (high, sd), (low, _) = log_abs_t_moments(dofs[0]), log_abs_t_moments(dofs[1])
    margin = 3.0 * sd / math.sqrt(len(z))
    assert low - margin < float(np.mean(np.log(np.abs(z)))) < high + margin, (np.mean(np.log(np.abs(z))), low, high)
    share = float(np.mean(np.abs(z) < stats.t.ppf(0.975, 3)))
    assert share >= 0.95 - 3.0 * math.sqrt(0.95 * 0.05 / len(z)), share


def test_standard_errors_come_from_the_replicates_spread():
    # each chain carries an offset of sd 5 that its own trace cannot reveal (within-chain errors
    # ~ 1/sqrt(200)); over 120 seeds the z-scores against the exact value are t-distributed with
    # 3-12 degrees of freedom, depending on how the quadrature weights spread over the temperatures.
    # With the chains' own errors alone the rms would be about 70.
    z = []
    for seed in range(120):
        result = select_rank(DriftingChains(), [1], grid=GRID, num_replicates=4, seed=seed, threads=1)
        z.append((result.log_marginal_likelihood[0] - exact(1)) / result.stderr[0])
    assert_student_t(z, (3, 12))


def test_an_error_shared_by_a_replicates_temperatures_is_in_the_standard_error():
    # one offset of sd 5 per (rank, replicate), the same at every temperature (as a shared start
    # gives): the per-temperature spreads, combined as if independent, would understate it by about
    # sqrt(sum w_i^2) / sum w_i; the replicates' own estimates show it. Each estimate is then the mean of
    # four normal replicates scaled by their spread: z ~ t_3 over 120 seeds.
    z = []
    for seed in range(120):
        result = select_rank(DriftingChains(offset=0.0, shared=5.0), [1], grid=GRID, num_replicates=4, seed=seed,
                             threads=1)
        z.append((result.log_marginal_likelihood[0] - exact(1)) / result.stderr[0])
    assert_student_t(z, (3, 3))


def test_the_quadrature_follows_the_grids_schedule():
    beta = TemperatureGrid(8, "beta", 2.0, "simpson")
    result = select_rank(DriftingChains(offset=0.0, noise=0.0), [1, 2], grid=beta, num_replicates=2, seed=0)
    np.testing.assert_allclose(result.log_marginal_likelihood, [exact(1, beta), exact(2, beta)], rtol=1e-12)
    # and the grid's weights integrate: the closed form ∫ −100 (1 − t)² − 50 R dt = −100/3 − 50 R,
    # within the rule's error on this grid (measured 0.031)
    np.testing.assert_allclose(result.log_marginal_likelihood, [-100 / 3 - 50, -100 / 3 - 100], atol=0.05)


def test_checkpoint_resumes_and_names_what_is_wrong(tmp_path):
    factory = DriftingChains()
    full = select_rank(factory, [1, 2], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)
    files = sorted(tmp_path.glob("R*-t*-r*.npz"))
    assert len(files) == 2 * 5 * 2 and (tmp_path / "settings.json").exists()
    for path in files[::3]:  # a run killed part-way
        path.unlink()
    again = DriftingChains()
    resumed = select_rank(again, [1, 2], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)
    assert len(again.runs) == len(files[::3])
    np.testing.assert_array_equal(resumed.log_marginal_likelihood, full.log_marginal_likelihood)
    np.testing.assert_array_equal(resumed.stderr, full.stderr)
    with pytest.raises(ParameterError, match="other data or settings.*seed"):
        select_rank(DriftingChains(), [1, 2], grid=GRID, num_replicates=2, seed=2, checkpoint=tmp_path)
    # another candidate and another replicate: the finished chains are reused, only the new ones run
    more = DriftingChains()
    wider = select_rank(more, [3, 1, 2], grid=GRID, num_replicates=3, seed=1, checkpoint=tmp_path)
    assert sorted(more.runs) == sorted({(3, i, r) for i in range(5) for r in range(3)}
                                       | {(rank, i, 2) for rank in (1, 2) for i in range(5)})
    np.testing.assert_array_equal(wider.replicates[1:, :2], full.replicates)
    for path in tmp_path.glob("R3-*.npz"):
        path.unlink()
    for path in tmp_path.glob("R*-t*-r2.npz"):
        path.unlink()
    # a chain file under another chain's name
    renamed = tmp_path / "R2-t1-r1.npz"
    original_renamed = renamed.read_bytes()
    renamed.write_bytes((tmp_path / "R2-t1-r0.npz").read_bytes())
    with pytest.raises(ParameterError, match="R2-t1-r1.npz: the chain of .R, i, r. = .2, 1, 0."):
        select_rank(DriftingChains(), [1, 2], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)
    renamed.write_bytes(original_renamed)

    target = files[1]
    original = target.read_bytes()
    target.write_bytes(original[: len(original) // 2])
    with pytest.raises(ParameterError, match=f"{target.name}: truncated or corrupt"):
        select_rank(DriftingChains(), [1, 2], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)
    target.write_text("not a chain\n")
    with pytest.raises(ParameterError, match=f"{target.name}: truncated or corrupt"):
        select_rank(DriftingChains(), [1, 2], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)
    target.write_bytes(b"")
    with pytest.raises(ParameterError, match=f"{target.name}: truncated or corrupt"):
        select_rank(DriftingChains(), [1, 2], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)
    # a trace shortened by hand, saved with the program's own fields
    target.write_bytes(original)
    with np.load(target) as data:
        fields = {name: data[name] for name in data.files}
    fields["trace"] = fields["trace"][:-5]
    np.savez(target, **fields)
    with pytest.raises(ParameterError, match=f"{target.name}: the chain's trace was altered"):
        select_rank(DriftingChains(), [1, 2], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)


@pytest.mark.usefixtures("sigint_as_at_a_terminal")
def test_ctrl_c_stops_threaded_chains_promptly_and_keeps_finished_ones(tmp_path):
    factory = DriftingChains(delay=0.05)  # 0.5 s per chain, 40 chains on 2 threads: 10 s in all
    threading.Timer(1.2, _thread.interrupt_main).start()
    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        select_rank(factory, [1, 2], grid=GRID, num_replicates=4, seed=0, threads=2, checkpoint=tmp_path)
    assert time.perf_counter() - started < 2.5
    saved = sorted(tmp_path.glob("R*-t*-r*.npz"))
    assert 2 <= len(saved) == len(factory.runs) < 40
    resumed = DriftingChains()
    select_rank(resumed, [1, 2], grid=GRID, num_replicates=4, seed=0, threads=2, checkpoint=tmp_path)
    assert len(resumed.runs) == 40 - len(saved)


def test_settings_objects_validate_and_record_themselves():
    with pytest.raises(ParameterError, match="schedule"):
        TemperatureGrid(4, "linear")
    with pytest.raises(ParameterError, match="sampler"):
        ChainSettings(sampler="hmc")
    with pytest.raises(ParameterError, match="not both"):
        ChainSettings(num_blocks=4, subset_size=10)
    with pytest.raises(ParameterError, match="step_b"):
        ChainSettings(step_b=0.3)
    chain = ChainSettings(num_steps=[10, 20, 30], num_keep=5)
    with pytest.raises(ParameterError, match="one per temperature"):
        chain.check_grid(TemperatureGrid(3))
    assert chain.steps_at(2) == 30 and chain.as_dict()["num_steps"] == [10, 20, 30]
    assert TemperatureGrid(5, "uniform", 7.0, "trapezoid").as_dict()["power"] == 1.0


@pytest.mark.parametrize("num_steps, num_keep, exact_prior, shortest", [
    ((10, 30, 30), 20, True, None),  # t = 0 takes independent draws: its chain length is not a chain's
    ((10, 30, 30), 20, False, 10),
    ((10, 30, 15), 15, True, None),
    ((10, 30, 15), 16, True, 15),
    ((10, 15, 30), 16, True, 15),
])
def test_with_exact_prior_draws_the_keep_check_leaves_out_the_first_temperature_only(num_steps, num_keep,
                                                                                    exact_prior, shortest):
    """num_keep must fit every chain's length, bar t = 0's under exact_prior (the last temperature left out, t = 0
    left out without exact_prior, or num_keep one above the shortest, passed before)."""
    chain = ChainSettings(num_steps=num_steps, num_keep=num_keep, exact_prior=exact_prior)
    if shortest is None:
        chain.check_grid(TemperatureGrid(2))
    else:
        with pytest.raises(ParameterError, match=rf"^num_keep={num_keep} must lie in \[1, num_steps={shortest}\]$"):
            chain.check_grid(TemperatureGrid(2))


@pytest.mark.parametrize("overrides, message", [
    (dict(num_steps=(100,) * 6), r"^num_steps=\[100, 100, 100, 100, 100, 100\]: expected one value or 5, one per "
                                 "temperature$"),
    (dict(step_a=(1e-7,) * 4), r"^step_a=\[1e-07, 1e-07, 1e-07, 1e-07\]: expected one value or 5, one per "
                               "temperature$"),
    (dict(step_a=(1e-7,) * 6), r"^step_a=.*: expected one value or 5, one per temperature$"),
    (dict(num_intervals=3, num_steps=(100,) * 5), r"^num_steps=.*: expected one value or 4, one per temperature$"),
])
def test_per_temperature_settings_must_match_the_grid_run(overrides, message):
    """One value per temperature of the grid the settings resolve to: not more (six values for five temperatures,
    or any number of step sizes, passed before)."""
    presets = {"small": Preset(GRID, ChainSettings(num_steps=100, num_keep=50), 2)}
    with pytest.raises(ParameterError, match=message):
        resolve_settings(presets, "small", **overrides)
    grid, chain, _ = resolve_settings(presets, "small", num_intervals=2, num_steps=(100, 60, 80),
                                      step_a=(1e-7, 2e-7, 3e-7))
    assert grid.num_intervals == 2 and chain.steps_at(1) == 60 and chain.step_a_at(2) == 3e-7


def test_a_grid_or_chain_given_whole_replaces_the_presets_and_single_settings_apply_on_top():
    """``grid=`` and ``chain=`` replace the preset's parts, ``num_replicates`` its count, single fields override
    what was given (either part left as the preset's passed every test but one that needs the NOIZEUS corpus)."""
    presets = {"small": Preset(GRID, ChainSettings(num_steps=100, num_keep=50), 2)}
    grid, chain = TemperatureGrid(3, "uniform", 1.0, "trapezoid"), ChainSettings(num_steps=40, num_keep=20)
    assert resolve_settings(presets, "small", grid=grid, chain=chain, num_replicates=5) == Preset(grid, chain, 5)
    resolved = resolve_settings(presets, "small", grid=grid, chain=chain, num_intervals=6, num_keep=10)
    assert resolved == Preset(TemperatureGrid(6, "uniform", 1.0, "trapezoid"),
                              ChainSettings(num_steps=40, num_keep=10), 2)
    assert resolve_settings(presets, "small") == presets["small"]


def test_chains_still_climbing_are_flagged():
    # every chain climbs by 4 (in E_t units) over its kept iterations: the halves differ by 2 against a
    # white noise of 1 per iteration; stationary chains give a drift within a few standard errors
    from sepsti.core.errors import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="still drifting"):
        climbing = select_rank(DriftingChains(trend=2.0), [1], grid=GRID, num_replicates=4, seed=0, threads=1)
    assert climbing.drift[0] > 10
    steady = select_rank(DriftingChains(), [1, 2], grid=GRID, num_replicates=4, seed=0, threads=1)
    assert np.all(np.abs(steady.drift) < 3)


def test_a_manifest_that_is_not_an_object_is_named(tmp_path):
    (tmp_path / "settings.json").write_text("[]")
    with pytest.raises(ParameterError, match="settings.json: unreadable checkpoint manifest .a JSON list"):
        select_rank(DriftingChains(), [1], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)


def test_a_checkpoint_of_the_former_layout_is_named_as_such(tmp_path):
    import json

    select_rank(DriftingChains(), [1], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)
    manifest = tmp_path / "settings.json"
    saved = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**saved, "ranks": [1], "num_replicates": 2}))  # as it was written before
    with pytest.raises(ParameterError, match="checkpoint of an earlier version"):
        select_rank(DriftingChains(), [1], grid=GRID, num_replicates=2, seed=1, checkpoint=tmp_path)


class DivergingChains(DriftingChains):
    """Chains of the ranks in ``diverged`` come back with a NaN in their traces."""

    def __init__(self, diverged):
        super().__init__()
        self.diverged = set(diverged)

    def run(self, task, *, seed, progress):
        record = super().run(task, seed=seed, progress=progress)
        if task.rank in self.diverged and task.index == 2:
            record.trace[7] = np.nan
        return record


def test_a_rank_whose_chains_diverged_is_named_and_passed_over():
    from sepsti.core.errors import ConvergenceWarning

    # the truth prefers R = 1 (-50 R); its chains diverge: the selection is among the others, and says so
    with pytest.warns(ConvergenceWarning, match=r"not finite for R=1 \(nan\)"):
        result = select_rank(DivergingChains([1]), [1, 2, 3], grid=GRID, num_replicates=2, seed=1)
    assert np.isnan(result.log_marginal_likelihood[0]) and result.selected_rank == 2
    # no tempering check without expectations (largest_decrease refuses NaN): NaN for R = 1, the others checked
    assert np.isnan(result.largest_decrease[0]) and np.all(np.isfinite(result.largest_decrease[1:]))
    with pytest.raises(ParameterError, match="no rank has a finite estimate"):
        select_rank(DivergingChains([1, 2]), [1, 2], grid=GRID, num_replicates=2, seed=1)


class QuietChains(DriftingChains):
    """Chains that report no progress until they are done (compiled PARAFAC chains, exact draws)."""

    def run(self, task, *, seed, progress):
        time.sleep(0.5)
        return super().run(task, seed=seed, progress=lambda count: None)


@pytest.mark.usefixtures("sigint_as_at_a_terminal")
def test_ctrl_c_keeps_the_chains_that_report_no_progress_once_they_are_done(tmp_path):
    factory = QuietChains()
    threading.Timer(0.2, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        select_rank(factory, [1, 2], grid=GRID, num_replicates=4, seed=0, threads=2, checkpoint=tmp_path)
    saved = sorted(tmp_path.glob("R*-t*-r*.npz"))
    assert len(saved) == len(factory.runs) == 2  # the two running when Ctrl-C came, finished and kept


class BlasChains(DriftingChains):
    """Chains that limit BLAS to one thread while they run, as the reference path's do."""

    def run(self, task, *, seed, progress):
        from sepsti.core.blas import single_threaded_blas

        with single_threaded_blas():
            time.sleep(0.01)
            return super().run(task, seed=seed, progress=progress)


def test_threaded_chains_leave_blas_as_they_found_it(blas_threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")

    import scipy.linalg  # noqa: F401 -- SciPy's BLAS loaded before the count, as the chains' modules load it

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        for _ in range(3):
            select_rank(BlasChains(), [1, 2], grid=GRID, num_replicates=4, seed=0, threads=2)
            assert blas_threads() == before


class ScriptedChains(DriftingChains):
    """Noise-free chains of replicates r = 0, 1: levels[i] + spread (-1)^r, raised by jumps[r] half-way through.

    Without jumps each trace is constant and a temperature's standard error is the replicates' spread, sd / sqrt 2 =
    spread, so the tempering check is max_i (levels[i] - levels[i+1]) / (spread sqrt 2); with jumps c +- s at
    every temperature the halves differ by c with standard error s, and the drift check is c sum(w) / (s |w|).
    """

    def __init__(self, levels, *, spread=0.0, jumps=(0.0, 0.0)):
        super().__init__()
        self.levels, self.spread, self.jumps = np.asarray(levels, dtype=float), spread, jumps
        self.settings = {"model": {"name": "scripted", "levels": self.levels.tolist(), "spread": spread,
                                   "jumps": list(jumps)}, "chain": {"length": self.length}}

    def run(self, task, *, seed, progress):
        second_half = np.arange(self.length) >= self.length // 2
        trace = (self.levels[task.index] + self.spread * (-1.0) ** task.replicate
                 + self.jumps[task.replicate] * second_half)
        return ChainRecord(trace, 0.0)


@pytest.mark.parametrize("z", [3.3, -3.3, 2.0, -2.0])
def test_drift_warns_beyond_three_standard_errors_only(z):
    """The drift statistic is c sum(w) / (s |w|) for jumps c +- s; a ConvergenceWarning comes above 3 in magnitude."""
    weights = GRID.weights
    s = 0.1
    c = z * s * np.linalg.norm(weights) / weights.sum()
    factory = ScriptedChains(DriftingChains.mean(1, GRID.temperatures), jumps=(c + s, c - s))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = select_rank(factory, [1], grid=GRID, num_replicates=2, seed=0, threads=1)
    assert result.drift[0] == pytest.approx(z, rel=1e-9)
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(messages) == (abs(z) > 3) and all("still drifting" in m for m in messages)


class TwoSidedChains(ScriptedChains):
    """Four replicates started on either side of the target: 0 and 2 rise half-way by c +- s, 1 and 3 fall by c +- s."""

    grouped = True

    def run(self, task, *, seed, progress):
        second_half = np.arange(self.length) >= self.length // 2
        jump = self.jumps[0] * (-1.0) ** task.replicate + self.jumps[1] * (1.0 if task.replicate < 2 else -1.0)
        return ChainRecord(self.levels[task.index] + jump * second_half, 0.0)

    def start_groups(self, num_replicates):
        return [replicate % 2 if self.grouped else 0 for replicate in range(num_replicates)]


@pytest.mark.parametrize("grouped", [True, False])
def test_drift_is_checked_within_each_group_of_replicates_started_alike(grouped):
    """Replicates drifting up and down by as much cancel in their mean: only within each start group is the drift
    seen (c sum(w) / (s |w|) = 5 in each), where all four together give 0."""
    weights = GRID.weights
    s = 0.1
    c = 5 * s * np.linalg.norm(weights) / weights.sum()
    factory = TwoSidedChains(DriftingChains.mean(1, GRID.temperatures), jumps=(c, s))
    factory.grouped = grouped
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = select_rank(factory, [1], grid=GRID, num_replicates=4, seed=0, threads=1)
    assert abs(result.drift[0]) == (pytest.approx(5.0, rel=1e-9) if grouped else pytest.approx(0.0, abs=1e-9))
    messages = [str(w.message) for w in caught
                if issubclass(w.category, ConvergenceWarning) and "drifting" in str(w.message)]
    assert len(messages) == grouped


@pytest.mark.parametrize("z", [3.3, 2.0])
def test_tempering_check_warns_beyond_three_joint_standard_errors_only(z):
    """E_t falling by z joint standard errors between two temperatures is reported as z; above 3 it warns."""
    spread = 0.1
    levels = DriftingChains.mean(1, GRID.temperatures)
    levels[3] = levels[2] - z * spread * np.sqrt(2.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = select_rank(ScriptedChains(levels, spread=spread), [1], grid=GRID, num_replicates=2, seed=0,
                             threads=1)
    assert result.largest_decrease[0] == pytest.approx(z, rel=1e-9) and result.drift[0] == 0.0
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert [m for m in messages if "stuck" in m] == [  # constant traces are, rightly, named as stuck
        "STI chains stuck: every kept iteration refused its move for R=1 (10 of 10 chains); the estimates are not "
        "log marginal likelihoods (a chain started where every proposal is refused; run longer chains)"]
    messages = [m for m in messages if "stuck" not in m]
    assert len(messages) == (z > 3) and all("did not reach their power posteriors" in m for m in messages)


def test_each_replicates_estimate_is_in_the_result_and_in_the_json():
    """Every replicate's estimate, in the result and its JSON, is sum_i w_i mu(t_i) for noise-free chains."""
    result = select_rank(DriftingChains(offset=0.0, noise=0.0), [1, 2, 3], grid=GRID, num_replicates=3, seed=0)
    document = to_json(result)
    for position, rank in enumerate([1, 2, 3]):
        assert document["log_marginal_likelihood"][position] == pytest.approx(exact(rank), rel=1e-12)
        np.testing.assert_allclose(result.replicates[position], exact(rank), rtol=1e-12)
        np.testing.assert_allclose(document["replicates"][str(rank)], exact(rank), rtol=1e-12)


# --------------------------------------------------------------------------------------------
# checked before a checkpoint is written or a chain runs


@pytest.mark.parametrize("seed, message", [(2 ** 32, r"seed=4294967296 must lie in \[0, 2\*\*32\)"),
                                           (-1, "seed=-1 must be an integer of at least 0"),
                                           (1.5, "seed=1.5 must be an integer of at least 0")])
def test_a_bad_seed_is_refused_before_a_checkpoint_is_written(tmp_path, seed, message):
    factory = DriftingChains()
    with pytest.raises(ParameterError, match=message):
        select_rank(factory, [1], grid=GRID, num_replicates=2, seed=seed, checkpoint=tmp_path / "ck")
    assert not (tmp_path / "ck").exists() and factory.runs == []


def test_a_checkpoint_that_is_not_a_folder_is_named(tmp_path):
    """A file there met a bare FileExistsError from mkdir, a file on the way NotADirectoryError."""
    (tmp_path / "notes.txt").write_text("mine\n")
    cases = [(tmp_path / "notes.txt", "notes.txt: checkpoint is not a folder; give a new or empty folder$"),
             (tmp_path / "notes.txt" / "ck", r"ck: cannot create the checkpoint folder \(Not a directory\)$")]
    for checkpoint, message in cases:
        factory = DriftingChains()
        with pytest.raises(ParameterError, match=message):
            select_rank(factory, [1], grid=GRID, num_replicates=2, checkpoint=checkpoint)
        assert factory.runs == []
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("threads", [0, -1, 2.5, "2", True])
def test_a_thread_count_must_be_a_positive_integer(threads):
    factory = DriftingChains()
    with pytest.raises(ParameterError, match=f"^threads={threads!r} must be an integer of at least 1$"):
        select_rank(factory, [1], grid=GRID, num_replicates=2, threads=threads)
    assert factory.runs == []


def test_a_grid_whose_weights_are_not_finite_is_refused_before_any_chain(tmp_path):
    factory = DriftingChains()
    with pytest.raises(ParameterError, match="power=600.0: the beta schedule's quadrature weights are not finite"):
        select_rank(factory, [1], grid=TemperatureGrid(2, "beta", 600.0, "simpson"), num_replicates=2,
                    checkpoint=tmp_path / "ck")
    assert not (tmp_path / "ck").exists() and factory.runs == []


def test_single_kept_values_need_several_replicates():
    # one value of one chain per temperature: no standard error to estimate (it was reported as exactly 0)
    factory = DriftingChains(length=1)
    with pytest.raises(ParameterError, match="num_replicates=1 with chains that keep a single value"):
        select_rank(factory, [1, 2], grid=GRID, num_replicates=1)
    assert factory.runs == []
    # several replicates: their spread gives it
    result = select_rank(DriftingChains(length=1), [1, 2], grid=GRID, num_replicates=3, seed=2)
    assert np.all(np.isfinite(result.stderr)) and np.all(result.stderr > 0)
    assert np.all(np.isfinite(result.largest_decrease))


@pytest.mark.parametrize("settings", [dict(alpha=None), dict(sigma="a"), dict(sigma=np.inf), dict(alpha=True)])
def test_psgld_settings_must_be_numbers(settings):
    """None and 'a' met bare TypeErrors from the comparisons."""
    with pytest.raises(ParameterError, match=r"expected alpha in \[0, 1\], a finite sigma > 0"):
        ChainSettings(**settings)


@pytest.mark.parametrize("dispersion", [None, np.array([1.0, 2.0]), True])
def test_a_dispersion_must_be_rayleigh_or_a_number(dispersion):
    from sepsti.core.evidence.sti_nmf import select_rank_sti

    with pytest.raises(ParameterError, match=r"^dispersion=.*: expected 'rayleigh' or a positive number$"):
        select_rank_sti(np.ones((8, 6)), [1], dispersion=dispersion)



@pytest.mark.parametrize("options, match", [
    (dict(num_replicates=True, num_blocks=2), r"^num_replicates=True must be an integer"),
    (dict(num_blocks=True), r"^num_blocks=True must be a positive integer")])
def test_counts_given_as_booleans_are_refused(options, match):
    """True was taken as 1."""
    from sepsti.core.evidence.sti_nmf import select_rank_sti

    with pytest.raises(ParameterError, match=match):
        select_rank_sti(np.ones((8, 6)), [1], preset="blocks", **options)


def test_the_standard_error_is_at_least_the_spread_of_the_replicates_estimates_over_root_n():
    """Four noise-free replicates at levels[i] +- s, the sign the same at every temperature: their estimates are
    exact +- s (the weights sum to 1), whose sample sd s sqrt(4/3) over sqrt(4) is s / sqrt(3); the per-temperature
    errors, s / sqrt(3) each, combine to s |w| / sqrt(3), less. So the standard error is s / sqrt(3) exactly."""
    s = 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # constant traces are named as stuck
        result = select_rank(ScriptedChains(DriftingChains.mean(1, GRID.temperatures), spread=s,
                                           jumps=(0.0,) * 4), [1], grid=GRID,
                             num_replicates=4, seed=0, threads=1)
    np.testing.assert_allclose(result.replicates[0], exact(1) + s * np.array([1, -1, 1, -1]), rtol=1e-12)
    assert result.log_marginal_likelihood[0] == pytest.approx(exact(1), rel=1e-12)
    assert result.stderr[0] == pytest.approx(s / np.sqrt(3.0), rel=1e-12)


def test_halves_of_an_odd_trace_are_its_first_and_last_halves_and_one_replicate_uses_its_own_errors():
    """Hand-computed halves checks on GRID (weights w, sum 1).

    Two replicates of 5 values 0, 0, 10, c +- s, c +- s at every temperature: the halves are the first two
    values and the last two (the middle one left out), which differ by c +- s: c over its standard error s
    (the two changes' sd s sqrt 2 over sqrt 2), c / (s |w|) in all. One replicate of 0, 1, c, c + 1: the
    halves differ by c, each half's MCSE is sd / sqrt 2 = 1/2 (two values, integrated time 1), so the
    change's error is sqrt(1/2) and the check c / (sqrt(1/2) |w|).
    """
    c, s = 1.0, 0.5
    size = GRID.num_intervals + 1
    norm = np.linalg.norm(GRID.weights)
    odd = [np.array([[0.0, 0.0, 10.0, c + s, c + s], [0.0, 0.0, 10.0, c - s, c - s]])] * size
    assert half_drift(odd, GRID) == pytest.approx(c / (s * norm), rel=1e-12)
    single = [np.array([[0.0, 1.0, c, c + 1.0]])] * size
    assert half_drift(single, GRID) == pytest.approx(c / (np.sqrt(0.5) * norm), rel=1e-12)


class KeptMinimumChains(DriftingChains):
    """Chains reporting the smallest factor entry they kept: (i - 2)^2 + r + 1, unknown (NaN) for chain (R, 0, 0)."""

    def run(self, task, *, seed, progress):
        record = super().run(task, seed=seed, progress=progress)
        kept = np.nan if task.index == task.replicate == 0 else (task.index - 2) ** 2 + task.replicate + 1.0
        return record._replace(min_kept=kept)


def test_min_kept_is_the_smallest_entry_any_chain_kept():
    result = select_rank(KeptMinimumChains(), [1, 2], grid=GRID, num_replicates=3, seed=0, threads=1)
    assert result.min_kept == 1.0  # chain (R, 2, 0)


def test_the_selected_rank_is_that_of_the_largest_estimate_in_the_order_the_ranks_were_given():
    """E_t = -100 (1 - t)^2 - 50 R: R = 1 lies 50 nats above R = 2, far beyond the chains' noise, wherever it is
    listed."""
    result = select_rank(DriftingChains(), [3, 1, 2], grid=GRID, num_replicates=2, seed=0, threads=1)
    assert int(np.argmax(result.log_marginal_likelihood)) == 1
    assert result.selected_rank == 1 and to_json(result)["selected_rank"] == 1


class TwoGroupChains(ScriptedChains):
    """Replicates 0, 1 (group 0) jump half-way by jumps[0] +- s, replicates 2, 3 (group 1) by jumps[1] +- s."""

    step = 0.1

    def run(self, task, *, seed, progress):
        second_half = np.arange(self.length) >= self.length // 2
        jump = self.jumps[task.replicate // 2] + self.step * (-1.0) ** task.replicate
        return ChainRecord(self.levels[task.index] + jump * second_half, 0.0)

    def start_groups(self, num_replicates):
        return [replicate // 2 for replicate in range(num_replicates)]


def test_the_drift_is_the_groups_largest_in_size_whatever_its_sign():
    """Group 0 drifts by +2 standard errors, group 1 by -5 (c sum(w) / (s |w|) each): the drift is -5, not +2."""
    weights = GRID.weights
    unit = TwoGroupChains.step * np.linalg.norm(weights) / weights.sum()
    factory = TwoGroupChains(DriftingChains.mean(1, GRID.temperatures), jumps=(2.0 * unit, -5.0 * unit))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = select_rank(factory, [1], grid=GRID, num_replicates=4, seed=0, threads=1)
    assert result.drift[0] == pytest.approx(-5.0, rel=1e-9)
    assert any("still drifting" in str(w.message) and "R=1 (-5 se)" in str(w.message) for w in caught)


def test_a_change_between_halves_without_spread_is_infinitely_many_standard_errors():
    """Two replicates that both jump by c half-way: the change has standard error 0, so c of them is +-inf, not 0."""
    size = GRID.num_intervals + 1
    for c, expected in ((1.5, np.inf), (-1.5, -np.inf), (0.0, 0.0)):
        traces = [np.array([[0.0, 0.0, c, c], [0.0, 0.0, c, c]])] * size
        assert half_drift(traces, GRID) == expected


@pytest.mark.parametrize("check, name", [("half_drift", "still drifting"),
                                         ("largest_decrease", "did not reach their power posteriors")])
def test_a_check_of_exactly_three_standard_errors_is_not_flagged(monkeypatch, check, name):
    """The drift may reach ±3 standard errors and E_t fall by 3 joint ones: only beyond that does a warning come."""
    import sepsti.core.evidence.rank_selection as engine

    for value, flagged in ((3.0, False), (np.nextafter(3.0, 4.0), True)):
        monkeypatch.setattr(engine, check, lambda *args, value=value, **kwargs: value)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            select_rank(DriftingChains(), [1], grid=GRID, num_replicates=2, seed=0, threads=1)
        assert any(name in str(w.message) for w in caught) == flagged, (value, [str(w.message) for w in caught])


class TimedChains(DriftingChains):
    """Chain (R, i, r) takes R wall seconds and 10 R CPU-seconds, a quarter of its wall time in kernels; chain
    (2, 3, 1) alone does not stay finite."""

    def run(self, task, *, seed, progress):
        record = super().run(task, seed=seed, progress=progress)
        return record._replace(seconds=float(task.rank), cpu_seconds=10.0 * task.rank, kernel_seconds=0.25 * task.rank,
                               all_finite=task.key != (2, 3, 1))


def test_timing_is_summed_per_rank_and_the_kernel_share_is_of_the_chains_wall_time():
    """Ten chains per rank (5 temperatures, 2 replicates): 10 R wall and 100 R CPU-seconds, 25 % in kernels."""
    result = select_rank(TimedChains(), [1, 2], grid=GRID, num_replicates=2, seed=0, threads=1)
    assert result.timing["chain_seconds_per_rank"] == [10.0, 20.0]
    assert result.timing["chain_cpu_seconds_per_rank"] == [100.0, 200.0]
    assert result.timing["kernel_share"] == pytest.approx(0.25, rel=1e-12)
    assert to_json(result)["timing"]["kernel_share"] == pytest.approx(0.25, rel=1e-12)
    # one chain of forty that did not stay finite makes the whole run's all_finite False
    assert result.all_finite is False and to_json(result)["all_finite"] is False
    assert select_rank(TimedChains(), [1], grid=GRID, num_replicates=2, seed=0, threads=1).all_finite is True


class PerRankChains(ScriptedChains):
    """Noise-free replicates 0, 1 at levels[R][i] +- spreads[R]: E_t's standard error is spreads[R] at every
    temperature, and so is that of the estimate (the replicates' estimates are exact +- spreads[R])."""

    def __init__(self, levels, spreads):
        super().__init__(levels[1])
        self.by_rank, self.spreads = levels, spreads

    def run(self, task, *, seed, progress):
        level = self.by_rank[task.rank][task.index] + self.spreads[task.rank] * (-1.0) ** task.replicate
        return ChainRecord(np.full(self.length, level), 0.0)


def test_the_json_holds_each_ranks_own_errors_and_checks():
    """R = 1 falls by 2 joint standard errors between t_2 and t_3 (spread 0.1); R = 2 rises throughout (spread 0.2)."""
    low = DriftingChains.mean(1, GRID.temperatures)
    low[3] = low[2] - 2.0 * 0.1 * np.sqrt(2.0)
    factory = PerRankChains({1: low, 2: DriftingChains.mean(2, GRID.temperatures)}, {1: 0.1, 2: 0.2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # constant traces are named as stuck
        document = to_json(select_rank(factory, [1, 2], grid=GRID, num_replicates=2, seed=0, threads=1))
    np.testing.assert_allclose(document["stderr"], [0.1, 0.2], rtol=1e-12)
    pieces = document["per_temperature"]
    assert pieces["stderr"] == {"1": pytest.approx([0.1] * 5, rel=1e-12), "2": pytest.approx([0.2] * 5, rel=1e-12)}
    np.testing.assert_allclose(pieces["mean_log_likelihood"]["1"], low, rtol=1e-12)
    assert pieces["largest_decrease_se"]["1"] == pytest.approx(2.0, rel=1e-9) and pieces["largest_decrease_se"]["2"] < 0
    assert document["drift_se"] == {"1": 0.0, "2": 0.0}
