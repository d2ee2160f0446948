import numpy as np
import pytest

from core.errors import ConvergenceWarning, ParameterError
from core.evidence.sti_nmf import balance, chain_cost, chain_plan, pearson_dispersion, select_rank_sti
from core.models.poisson_nmf import PoissonNMF
from core.parallel.blocks import init_state, initial_factors, run_block_chain

SMALL = dict(num_intervals=2, num_steps=30, num_keep=10, num_blocks=3, step_a=1e-4, prior_rate=0.5)


@pytest.fixture
def X(rng):
    return PoissonNMF.sample(rng, (24, 21), 2, rate_W=0.5, rate_H=0.5)[2]


def test_chain_ids_do_not_depend_on_anything_but_rank_and_temperature_order():
    plan = chain_plan([4, 8], [0.0, 0.5, 1.0])
    assert [task.chain for task in plan] == list(range(6))
    assert plan[4].rank == 8 and plan[4].index == 1


def test_checkpoint_resume_gives_the_same_result(X, tmp_path):
    full = select_rank_sti(X, [1, 2], **SMALL)
    select_rank_sti(X, [1, 2], checkpoint=tmp_path, **SMALL)
    files = sorted(tmp_path.glob("chain-*.npz"))
    assert len(files) == 6
    for path in files[::2]:  # a run killed half-way
        path.unlink()
    resumed = select_rank_sti(X, [1, 2], checkpoint=tmp_path, **SMALL)
    assert [r.log_evidence for r in resumed.results] == [r.log_evidence for r in full.results]
    assert resumed.selected_rank == full.selected_rank
    with pytest.raises(ParameterError, match="other data or settings"):
        select_rank_sti(X, [1, 2], checkpoint=tmp_path, **{**SMALL, "step_a": 2e-4})


def test_validation(X):
    with pytest.raises(ParameterError, match="ranks"):
        select_rank_sti(X, [2, 2], **SMALL)
    with pytest.raises(ParameterError, match="keep=40"):
        select_rank_sti(X, [2], **{**SMALL, "num_keep": 40})


def test_every_kept_sample_finite_and_nonnegative_at_rank_512(rng):
    # speech-like magnitudes on the int16 scale: heavy-tailed, many small entries
    X = (rng.gamma(0.3, 2e4, size=(257, 160)) * (rng.uniform(size=(257, 160)) > 0.05))
    for sampler in ("sgld", "psgld"):
        W, H = initial_factors(X, 512, rng)
        result = run_block_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=8), temperature=1.0, num_steps=24,
                                 num_keep=16, num_blocks=8, sampler=sampler, step_a=5e-7, step_b=0.51,
                                 rate_W=4e-4, rate_H=4e-4)
        assert result.all_finite, sampler
        assert result.min_kept >= 0.0
        assert np.all(np.isfinite(result.trace))


def test_worker_threads_do_not_change_the_result(X):
    one = select_rank_sti(X, [1, 2], threads=1, **SMALL)
    two = select_rank_sti(X, [1, 2], threads=2, **SMALL)
    for a, b in zip(one.results, two.results):
        np.testing.assert_array_equal(a.mean_log_likelihood, b.mean_log_likelihood)
    assert one.min_kept == two.min_kept


def test_balance_puts_longest_jobs_first_on_the_least_loaded_process():
    assert balance([5.0, 3.0, 3.0, 2.0, 1.0], 2) == [0, 1, 1, 0, 1]  # loads 7 and 7
    assert balance([1.0, 1.0, 1.0], 1) == [0, 0, 0]
    # the speech plan on two processes: loads within one cheap chain of each other
    plan = chain_plan([32, 64, 128, 256, 512], np.linspace(0, 1, 6))
    costs = [chain_cost(task) for task in plan]
    owners = balance(costs, 2)
    loads = [sum(c for c, o in zip(costs, owners) if o == p) for p in range(2)]
    assert abs(loads[0] - loads[1]) <= min(costs)


def test_frozen_chains_are_reported_as_not_equilibrated(X):
    # with steps ~1e-7 every chain stays at its own random start, so E_t[log p] follows the
    # starts, not t: the expectations fall between some neighbouring temperatures by far more
    # than their (tiny) standard errors
    settings = {**SMALL, "num_intervals": 4, "step_a": 1e-14, "init": "random"}
    with pytest.warns(ConvergenceWarning, match="did not reach their power posteriors"):
        select_rank_sti(X, [1, 2], **settings)


def test_pearson_dispersion_of_poisson_data_is_about_one(rng):
    # counts drawn from the model itself: sum((x - fit)^2 / fit) / N is about (N - p) / N, with a
    # relative spread of about sqrt(2 / N) for Pearson's statistic
    W = rng.gamma(2.0, 5.0, size=(60, 2))
    H = rng.gamma(2.0, 5.0, size=(2, 80))
    X = rng.poisson(W @ H).astype(np.float64)
    dispersion = pearson_dispersion(X, 2, prior_rate=1e-3, iterations=300)
    expected = 1.0 - 2 * (60 + 80) / X.size
    assert abs(dispersion - expected) < 4 * np.sqrt(2.0 / X.size) + 0.02
    # the same counts scaled by 2: Pearson's statistic doubles
    assert pearson_dispersion(2.0 * X, 2, prior_rate=1e-3, iterations=300) == pytest.approx(2 * dispersion, rel=0.05)


@pytest.mark.filterwarnings("ignore::core.errors.ConvergenceWarning")
def test_dispersion_models_the_scaled_data(X):
    # quasi-Poisson: the estimates are those of X / dispersion, and "auto" uses Pearson's statistic
    # at the largest rank's chain start
    scaled = select_rank_sti(X, [1, 2], dispersion=2.0, **SMALL)
    direct = select_rank_sti(X / 2.0, [1, 2], **SMALL)
    assert [r.log_evidence for r in scaled.results] == [r.log_evidence for r in direct.results]
    assert scaled.settings["dispersion"] == 2.0 and direct.settings["dispersion"] == 1.0
    auto = select_rank_sti(X, [1, 2], dispersion="auto", **SMALL)
    assert auto.settings["dispersion"] == pearson_dispersion(X, 2, seed=0, prior_rate=SMALL["prior_rate"])
    for bad in (0.0, -1.0, np.inf, np.nan, "lots"):
        with pytest.raises(ParameterError, match="dispersion"):
            select_rank_sti(X, [1, 2], dispersion=bad, **SMALL)
