import numpy as np
import pytest

from _pinned import assert_pinned
from sepsti.core.errors import ParameterError
from sepsti.core.evidence.sti import LangevinSettings
from sepsti.core.models.poisson_nmf import PoissonNMF
from sepsti.core.parallel.blocks import (
    block_log_factorials,
    dense_part_update,
    init_state,
    initial_factors,
    part_update,
    run_block_chain,
    run_prior_chain,
)
from sepsti.core.parallel.distributed import run_distributed_block_chain
from sepsti.core.parallel.schedule import BlockSchedule
from sepsti.core.random import stream


@pytest.mark.parametrize("sampler", ["sgld", "psgld"])
@pytest.mark.parametrize("evaluate", ["before_update", "after_update"])
@pytest.mark.parametrize("temperature", [0.0, 0.6])
@pytest.mark.parametrize("shape", [(23, 19), (13, 29)])  # (13, 29): H's blocks are larger than W's
def test_block_kernel_matches_dense_reference(rng, sampler, evaluate, temperature, shape):
    _, _, X = PoissonNMF.sample(rng, shape, 3)
    schedule = BlockSchedule(X.shape, 4)
    W, H = initial_factors(X, 3, rng)
    fast = init_state(W, H, seed=1, chain=2, num_blocks=4)
    dense = init_state(W, H, seed=1, chain=2, num_blocks=4)
    for iteration in range(1, 10):
        part = schedule.part_index(iteration)
        settings = LangevinSettings(sampler=sampler, evaluate=evaluate)
        step = dict(step_size=1e-3, temperature=temperature, rate_W=1.0, rate_H=0.5)
        value = part_update(X, fast, schedule, part, settings, log_factorial_blocks=block_log_factorials(X, schedule),
                            **step)
        dense, expected = dense_part_update(X, dense, schedule, part, settings, **step)
        assert value == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(fast.W, dense.W, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fast.H, dense.H, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fast.v_W, dense.v_W, rtol=1e-10)
    np.testing.assert_allclose(fast.v_H, dense.v_H, rtol=1e-10)
    np.testing.assert_array_equal(fast.states_W, dense.states_W)


@pytest.mark.parametrize("temperature", [0.0, 0.6])
def test_first_psgld_part_starts_the_average_at_the_squared_mean_gradient(rng, temperature):
    _, _, X = PoissonNMF.sample(rng, (23, 19), 3)
    schedule = BlockSchedule(X.shape, 4)
    W, H = initial_factors(X, 3, rng)
    state = init_state(W, H, seed=1, chain=2, num_blocks=4)
    part = schedule.part_index(1)
    blocks = schedule.part_blocks(part)
    grad_W, grad_H = np.zeros_like(W), np.zeros_like(H)
    for rows, cols in blocks:
        ratio = X[rows, cols] / (W[rows] @ H[:, cols]) - 1.0
        grad_W[rows] = ratio @ H[:, cols].T
        grad_H[:, cols] = W[rows].T @ ratio
    n_s = schedule.part_size(part)
    part_update(X, state, schedule, part, LangevinSettings(sampler="psgld", evaluate="before_update"),
                log_factorial_blocks=block_log_factorials(X, schedule), step_size=1e-3, temperature=temperature,
                rate_W=1.0, rate_H=0.5)
    np.testing.assert_allclose(state.v_W, (temperature * grad_W / n_s) ** 2, rtol=1e-10)
    np.testing.assert_allclose(state.v_H, (temperature * grad_H / n_s) ** 2, rtol=1e-10)


def test_float32_chain_stays_float32_finite_and_nonnegative(rng):
    _, _, X = PoissonNMF.sample(rng, (40, 32), 4, rate_W=0.2, rate_H=0.2)
    X = X.astype(np.float32)
    W, H = initial_factors(X, 6, rng)
    state = init_state(W, H, seed=0, chain=0, num_blocks=4)
    result = run_block_chain(X, state, LangevinSettings(num_steps=200, num_keep=100, step_a=1e-3), temperature=1.0,
                             num_blocks=4, rate_W=1.0, rate_H=1.0)
    assert result.state.W.dtype == np.float32
    assert result.all_finite and result.min_kept >= 0
    assert np.all(np.isfinite(result.trace))


@pytest.mark.parametrize("sampler, rate_W", [("sgld", 5e38), ("psgld", 5e8)])
def test_a_float32_step_past_the_float32_range_is_flagged_not_finite(sampler, rate_W):
    """A pSGLD step whose float64 value overflows only when stored in a float32 factor is flagged, as in SGLD; it
    was reported finite before."""
    X = stream(3).poisson(2.0, (8, 6)).astype(np.float32)
    W = np.full((8, 2), 0.5, np.float32)
    W[:, 1] = 3e38
    H = np.full((2, 6), 0.5, np.float32)
    # temperature 0, one step of a^b = 1: W moves by -rate_W (SGLD) or by -rate_W / sigma = -5e38 (pSGLD, whose
    # average stays 0: G = 1 / sigma); the noise, sqrt(2) or sqrt(2 / sigma) = 1.4e15, is negligible. |0.5 - 5e38|
    # is past float32's 3.4e38, |3e38 - 5e38| not: every run of entries ends in a finite one.
    settings = LangevinSettings(sampler=sampler, num_steps=1, num_keep=1, step_a=1.0, sigma=1e-30,
                                evaluate="before_update")
    result = run_block_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=2), settings, temperature=0.0,
                             num_blocks=2, rate_W=rate_W, rate_H=1.0, threads=1)
    assert np.isinf(result.state.W[:, 0]).all() and np.isfinite(result.state.W[:, 1]).all()
    assert np.isfinite(result.trace).all()  # scored before the step
    assert not result.all_finite and np.isnan(result.min_kept)


@pytest.mark.parametrize("sampler", ["sgld", "psgld"])
def test_smallest_kept_entry_is_over_both_factors(rng, sampler):
    """min_kept is the smallest entry of W and of H, whichever holds it; W's alone passed before."""
    X = rng.poisson(3.0, (12, 10)).astype(float)
    W, H = initial_factors(X, 2, rng)
    settings = LangevinSettings(sampler=sampler, num_steps=3, num_keep=1, step_a=1e-4)
    for scale in (100.0, 0.01):  # the same products, the smallest entry in H, then in W
        result = run_block_chain(X, init_state(W * scale, H / scale, seed=3, chain=0, num_blocks=2), settings,
                                 temperature=0.5, num_blocks=2, rate_W=1.0, rate_H=1.0, threads=1)
        assert (result.state.H.min() < result.state.W.min()) == (scale > 1)
        assert result.min_kept == min(result.state.W.min(), result.state.H.min())

def test_same_seed_same_trace(rng):
    _, _, X = PoissonNMF.sample(rng, (20, 16), 2)
    W, H = initial_factors(X, 2, rng)
    settings = LangevinSettings(num_steps=40, num_keep=20, step_a=1e-3)
    traces = [run_block_chain(X, init_state(W, H, seed=5, chain=1, num_blocks=4), settings, temperature=0.5,
                              num_blocks=4, rate_W=1.0, rate_H=1.0).trace
              for _ in range(2)]
    np.testing.assert_array_equal(traces[0], traces[1])


def test_exact_prior_chain_draws_exponentials_and_scores_them_on_the_kept_parts(rng):
    from sepsti.core.models.poisson_nmf import NMFTheta
    from sepsti.core.models.subsample import log_likelihood_estimate

    _, _, X = PoissonNMF.sample(rng, (40, 36), 3)
    W, H = initial_factors(X, 5, rng)
    schedule = BlockSchedule(X.shape, 4)
    result = run_prior_chain(X, init_state(W, H, seed=2, chain=0, num_blocks=4), num_steps=11, num_keep=3,
                             num_blocks=4, rate_W=2.0, rate_H=0.5)
    model = PoissonNMF(X, 5, rate_W=2.0, rate_H=0.5)
    # the last draw is the final state, scored on the part of iteration 11
    expected = log_likelihood_estimate(model, NMFTheta(result.state.W, result.state.H),
                                       schedule.part_blocks(schedule.part_index(11)))
    assert result.trace[-1] == pytest.approx(expected, rel=1e-12)
    # Exponential(rate) entries: mean 1/rate within 4 standard errors (sd = mean)
    for values, rate in ((result.state.W, 2.0), (result.state.H, 0.5)):
        assert abs(values.mean() - 1 / rate) < 4 / rate / np.sqrt(values.size)
    again = run_prior_chain(X, init_state(W, H, seed=2, chain=0, num_blocks=4), num_steps=11, num_keep=3,
                            num_blocks=4, rate_W=2.0, rate_H=0.5)
    np.testing.assert_array_equal(again.trace, result.trace)



def test_block_chain_scores_iteration_k_on_part_k_minus_1_mod_p(rng):
    """Iteration k updates and scores part (k - 1) mod P, written out against the final state's estimate on that
    part; parts taken one iteration ahead passed every check but the pinned traces before."""
    from sepsti.core.models.poisson_nmf import NMFTheta
    from sepsti.core.models.subsample import log_likelihood_estimate

    _, _, X = PoissonNMF.sample(rng, (20, 16), 2)
    W, H = initial_factors(X, 2, rng)
    schedule = BlockSchedule(X.shape, 4)
    model = PoissonNMF(X, 2)
    for num_steps in (1, 2, 7):
        settings = LangevinSettings(num_steps=num_steps, num_keep=1, step_a=1e-3, evaluate="after_update")
        result = run_block_chain(X, init_state(W, H, seed=5, chain=1, num_blocks=4), settings, temperature=0.5,
                                 num_blocks=4, rate_W=1.0, rate_H=1.0, threads=1)
        part = schedule.part_blocks((num_steps - 1) % schedule.num_parts)
        expected = log_likelihood_estimate(model, NMFTheta(result.state.W, result.state.H), part)
        assert result.trace[-1] == pytest.approx(expected, rel=1e-12)


def _splitmix64_uniforms(counter, n):
    """n uniforms on (0, 1] from a splitmix64 counter: 53 high bits of each output, plus 1, over 2^53."""
    mask = 2 ** 64 - 1
    out = []
    for _ in range(n):
        counter = (counter + 0x9E3779B97F4A7C15) & mask
        z = ((counter ^ (counter >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        out.append(((z >> 11) + 1) / 2.0 ** 53)
    return np.array(out)


def test_prior_chain_draws_each_group_from_its_own_stream():
    """Row group g of W is -log(u) / rate_W over the uniforms of stream states_W[g], row by row, and column group g
    of H the same from states_H[g] (splitmix64 written out); W drawn from H's streams passed all but the pinned
    traces before."""
    X = stream(6).poisson(2.0, (7, 9)).astype(float)
    W, H = initial_factors(X, 2, stream(7))
    state = init_state(W, H, seed=8, chain=1, num_blocks=3)
    starts_W, starts_H = state.states_W[:, 0].copy(), state.states_H[:, 0].copy()
    run_prior_chain(X, state, num_steps=1, num_keep=1, num_blocks=3, rate_W=2.0, rate_H=0.5)
    row_edges, col_edges = BlockSchedule(X.shape, 3).edges
    for g in range(3):
        rows, cols = slice(row_edges[g], row_edges[g + 1]), slice(col_edges[g], col_edges[g + 1])
        u = _splitmix64_uniforms(int(starts_W[g]), 2 * (rows.stop - rows.start)).reshape(-1, 2)
        np.testing.assert_allclose(state.W[rows], -np.log(u) / 2.0, rtol=1e-15)
        u = _splitmix64_uniforms(int(starts_H[g]), 2 * (cols.stop - cols.start)).reshape(-1, 2)
        np.testing.assert_allclose(state.H[:, cols].T, -np.log(u) / 0.5, rtol=1e-15)

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_minimum_of_nonnegative_entries_by_their_bit_patterns(rng, dtype):
    from sepsti.core.parallel._nmf_kernels import _finite_minimum

    x = (np.abs(rng.standard_normal(1001)) * 1e3).astype(dtype)
    x[17] = 3e-30  # tiny values order correctly too
    assert _finite_minimum(x) == x.min()
    x[-1] = 1e-31  # the last entry is read too
    assert _finite_minimum(x) == x[-1]
    x[400] = 0.0
    assert _finite_minimum(x) == 0.0


def test_short_chains_reproduce_their_pinned_traces():
    # A change in the compiled kernels' arithmetic, argument plumbing or noise streams shows here even
    # where it stays within the dense reference's tolerance (rounding of other builds aside, _pinned).
    _, _, X = PoissonNMF.sample(stream(11), (21, 17), 3)
    W, H = initial_factors(X, 4, stream(12))
    pinned = {
        "sgld": (np.float64, "after_update",
                 ["-0x1.3b61eb51bfbb2p+9", "-0x1.336876925d404p+9", "-0x1.417e79168a493p+9",
                  "-0x1.3eed7fb3a2e0cp+9", "-0x1.30bc6e0d7631dp+9", "-0x1.402cd80725e32p+9"],
                 [63.86311605081805, 2467.1881543953464, 62.644495815627224, 2075.4183588692295,
                  -84.0, -3570.0, -68.0, -2346.0]),
        "psgld": (np.float32, "before_update",
                  ["-0x1.e3077ff90bd94p+12", "-0x1.42e075bb9ad32p+11", "-0x1.3bea843a445c6p+12",
                   "-0x1.fc61dbdd9bb28p+11", "-0x1.8e0d72b3fe69ap+12", "-0x1.40004049235c6p+12"],
                  [217.45925063826144, 6037.968973184004, 92.51683577336371, 2698.9433876741678,
                   2.672106582671404, 119.99249912425876, 4.228159140795469, 134.74302602745593]),
    }
    for sampler, (dtype, evaluate, trace, sums) in pinned.items():
        state = init_state(W.astype(dtype), H.astype(dtype), seed=3, chain=(4, 1), num_blocks=3)
        settings = LangevinSettings(sampler=sampler, num_steps=30, num_keep=6, step_a=1e-3, evaluate=evaluate)
        result = run_block_chain(X.astype(dtype), state, settings, temperature=0.7, num_blocks=3, rate_W=1.0,
                                 rate_H=0.5)
        assert_pinned(result.trace, result.state, trace, sums, "03383bbe9e1e16c6", sampler)
    prior = run_prior_chain(X, init_state(W, H, seed=3, chain=(0, 1), num_blocks=3), num_steps=9, num_keep=4,
                            num_blocks=3, rate_W=2.0, rate_H=0.5)
    assert_pinned(prior.trace, prior.state,
                  ["-0x1.a630ee13c60bap+10", "-0x1.9c977f1e17319p+10", "-0x1.232866ea14114p+10",
                   "-0x1.24249bc769fc5p+10"],
                  [42.71870452567967, 1761.1205294111369, 98.21954687444439, 2997.8166891552273,
                   -84.0, -3570.0, -68.0, -2346.0], "d25082a6d8573df8", "prior")


def test_blocks_of_a_part_in_threads_give_the_serial_chain(rng, monkeypatch):
    from sepsti.core.parallel import blocks

    _, _, X = PoissonNMF.sample(rng, (21, 17), 3)
    W, H = initial_factors(X, 4, rng)
    kwargs = dict(temperature=0.7, num_blocks=3, rate_W=1.0, rate_H=0.5, threads=2)
    for sampler in ("sgld", "psgld"):
        settings = LangevinSettings(sampler=sampler, num_steps=30, num_keep=6, step_a=1e-3)
        serial = run_block_chain(X, init_state(W, H, seed=3, chain=1, num_blocks=3), settings, **kwargs)
        monkeypatch.setattr(blocks, "PARALLEL_THRESHOLD", 0)  # every part in a prange
        threaded = run_block_chain(X, init_state(W, H, seed=3, chain=1, num_blocks=3), settings, **kwargs)
        monkeypatch.undo()
        np.testing.assert_array_equal(threaded.trace, serial.trace)
        for got, want in zip(threaded.state, serial.state):
            np.testing.assert_array_equal(got, want)
        assert threaded.min_kept == serial.min_kept


@pytest.mark.parametrize("setting", [dict(subset_size=10), dict(step_floor=0.1), dict(step_scale="curvature"),
                                     dict(integrator="lm"), dict(control_variate="likelihood"),
                                     dict(evaluate="full")])
def test_block_chain_refuses_by_name_what_it_does_not_implement(rng, setting):
    _, _, X = PoissonNMF.sample(rng, (12, 10), 2)
    W, H = initial_factors(X, 2, rng)
    settings = LangevinSettings(num_steps=4, num_keep=2, step_a=1e-3, **setting)
    name = next(iter(setting))
    with pytest.raises(ParameterError, match=name):
        run_block_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=2), settings, temperature=1.0, num_blocks=2)
    schedule = BlockSchedule(X.shape, 2)
    with pytest.raises(ParameterError, match=name):
        part_update(X, init_state(W, H, seed=0, chain=0, num_blocks=2), schedule, 0, settings, step_size=1e-3,
                    temperature=1.0, rate_W=1.0, rate_H=1.0, log_factorial_blocks=block_log_factorials(X, schedule))
    with pytest.raises(ParameterError, match=name):
        dense_part_update(X, init_state(W, H, seed=0, chain=0, num_blocks=2), schedule, 0, settings, step_size=1e-3,
                          temperature=1.0, rate_W=1.0, rate_H=1.0)
    with pytest.raises(ParameterError, match=name):  # refused before any message is sent
        run_distributed_block_chain(X, W, H, _OneProcess(), settings, seed=0, chain=0, temperature=1.0, num_blocks=2)


class _OneProcess:
    """A communicator of one process that fails on any message."""

    def Get_size(self):
        return 1

    def Get_rank(self):
        return 0

    def __getattr__(self, name):
        raise AssertionError(f"communicated ({name}) before checking the settings")


def _in_larger_buffer(array, rows):
    """The first ``rows`` rows of ``array`` as a view into a larger buffer (a kernel writing past them stays inside)."""
    return np.concatenate([array, array])[:rows]


_MISFITS = {  # what the state is made to hold, and the start of the message
    "streams_W for fewer blocks": ("state.states_W has shape", lambda s: s._replace(
        states_W=_in_larger_buffer(s.states_W, 2))),
    "streams_H for fewer blocks": ("state.states_H has shape", lambda s: s._replace(
        states_H=_in_larger_buffer(s.states_H, 3))),
    "W with fewer rows": ("state.W has shape", lambda s: s._replace(W=_in_larger_buffer(s.W, 30))),
    "H of lower rank": ("state.H has shape", lambda s: s._replace(H=np.asfortranarray(s.H[:2]))),
    "v_W with fewer rows": ("state.v_W has shape", lambda s: s._replace(v_W=_in_larger_buffer(s.v_W, 30))),
    "W float32, H float64": ("state.H has shape .* and dtype float64", lambda s: s._replace(
        W=s.W.astype(np.float32))),
    "rank 0": (r"state.W has shape \(40, 0\)", lambda s: s._replace(  # accepted before
        W=s.W[:, :0].copy(), H=s.H[:0].copy(order="F"), v_W=s.v_W[:, :0].copy(), v_H=s.v_H[:0].copy(order="F"))),
}


@pytest.mark.parametrize("misfit", list(_MISFITS))
def test_state_that_does_not_fit_the_data_or_the_blocks_is_refused_by_name(rng, misfit):
    # the compiled kernels check no bounds: a state made for fewer blocks, or factors of other shapes,
    # would be read and written past their ends
    X = rng.poisson(3.0, (40, 32)).astype(float)
    W, H = initial_factors(X, 3, rng)
    schedule = BlockSchedule(X.shape, 4)
    settings = LangevinSettings(sampler="psgld", num_steps=4, num_keep=2, step_a=1e-3)
    runs = [lambda state: run_block_chain(X, state, settings, temperature=1.0, num_blocks=4, threads=1),
            lambda state: run_prior_chain(X, state, num_steps=2, num_keep=1, num_blocks=4),
            lambda state: part_update(X, state, schedule, 1, settings, step_size=1e-3, temperature=1.0, rate_W=1.0,
                                      rate_H=1.0, log_factorial_blocks=block_log_factorials(X, schedule), threads=1)]
    message, misfit = _MISFITS[misfit]
    for run in runs:
        with pytest.raises(ParameterError, match=f"^{message}"):
            run(misfit(init_state(W, H, seed=0, chain=1, num_blocks=4)))


def test_part_update_refuses_a_schedule_or_log_factorials_of_other_data(rng):
    X = rng.poisson(3.0, (40, 32)).astype(float)
    state = init_state(*initial_factors(X, 3, rng), seed=0, chain=1, num_blocks=4)
    schedule = BlockSchedule(X.shape, 4)
    kwargs = dict(step_size=1e-3, temperature=1.0, rate_W=1.0, rate_H=1.0, threads=1)
    for other in ((20, 16), (40, 64)):  # the same rows, other columns: one dimension alone compared passed before
        with pytest.raises(ParameterError, match=rf"^schedule is for shape \({other[0]}, {other[1]}\)"):
            part_update(X, state, BlockSchedule(other, 4), 0, LangevinSettings(), **kwargs,
                        log_factorial_blocks=block_log_factorials(X, schedule))
    with pytest.raises(ParameterError, match="log_factorial_blocks"):
        part_update(X, state, schedule, 0, LangevinSettings(), **kwargs,
                    log_factorial_blocks=block_log_factorials(X, BlockSchedule(X.shape, 2)))


@pytest.mark.parametrize("temperature", [-0.5, np.nan, 1.5])
def test_temperature_outside_0_1_is_refused(rng, temperature):
    # t < 0 and NaN used to run the prior-only chain silently
    X = rng.poisson(3.0, (12, 10)).astype(float)
    W, H = initial_factors(X, 2, rng)
    settings = LangevinSettings(num_steps=4, num_keep=2, step_a=1e-3)
    schedule = BlockSchedule(X.shape, 2)
    with pytest.raises(ParameterError, match="temperature"):
        run_block_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=2), settings, temperature=temperature,
                        num_blocks=2)
    with pytest.raises(ParameterError, match="temperature"):
        part_update(X, init_state(W, H, seed=0, chain=0, num_blocks=2), schedule, 0, settings, step_size=1e-3,
                    temperature=temperature, rate_W=1.0, rate_H=1.0,
                    log_factorial_blocks=block_log_factorials(X, schedule))
    with pytest.raises(ParameterError, match="temperature"):  # refused before any message is sent
        run_distributed_block_chain(X, W, H, _OneProcess(), settings, seed=0, chain=0, temperature=temperature,
                                    num_blocks=2)


def test_distributed_chain_refuses_a_start_that_does_not_fit_the_data(rng):
    X = rng.poisson(3.0, (12, 10)).astype(float)
    W, H = initial_factors(X, 2, rng)
    settings = LangevinSettings(num_steps=4, num_keep=2, step_a=1e-3)
    for start, name in (((np.vstack([W, W]), H), "W"), ((W, np.hstack([H, H])), "H")):
        with pytest.raises(ParameterError, match=f"^{name} has shape"):  # refused before any message is sent
            run_distributed_block_chain(X, *start, _OneProcess(), settings, seed=0, chain=0, temperature=1.0,
                                        num_blocks=2)


@pytest.mark.parametrize("field, layout", [("v_H", np.ascontiguousarray), ("W", np.asfortranarray),
                                           ("v_W", np.asfortranarray)])
def test_factors_and_averages_in_another_layout_give_the_same_chain(rng, field, layout):
    # the kernels take W, H.T, v_W and v_H.T C-contiguous; an array laid out otherwise is copied and each copy
    # written back on its own (a C-ordered v_H next to a column-major H was never stored)
    X = rng.poisson(3.0, (20, 16)).astype(float)
    W, H = initial_factors(X, 2, rng)
    settings = LangevinSettings(sampler="psgld", num_steps=60, num_keep=5, step_a=1e-4, sigma=0.1)
    kwargs = dict(temperature=1.0, num_blocks=4, threads=1)
    expected = run_block_chain(X, init_state(W, H, seed=1, chain=(1, 2, 3), num_blocks=4), settings, **kwargs)
    state = init_state(W, H, seed=1, chain=(1, 2, 3), num_blocks=4)
    state = state._replace(**{field: layout(getattr(state, field))})
    result = run_block_chain(X, state, settings, **kwargs)
    np.testing.assert_array_equal(result.trace, expected.trace)
    for got, want in zip(result.state, expected.state):
        np.testing.assert_array_equal(got, want)
    assert result.state is state and result.min_kept == expected.min_kept


def test_integer_counts_start_from_float64_factors_and_give_the_float_chain(rng):
    X = rng.poisson(3.0, (20, 16))
    W, H = initial_factors(X, 2, stream(4))
    assert W.dtype == H.dtype == np.float64
    np.testing.assert_array_equal(W, initial_factors(X.astype(float), 2, stream(4))[0])  # not cut to integers
    settings = LangevinSettings(num_steps=30, num_keep=10, step_a=1e-3)
    kwargs = dict(temperature=1.0, num_blocks=4, threads=1)
    counts = run_block_chain(X, init_state(W, H, seed=1, chain=2, num_blocks=4), settings, **kwargs)
    floats = run_block_chain(X.astype(float), init_state(W, H, seed=1, chain=2, num_blocks=4), settings, **kwargs)
    np.testing.assert_array_equal(counts.trace, floats.trace)
    np.testing.assert_array_equal(counts.state.W, floats.state.W)


def test_prior_chain_reports_the_smallest_entry_over_every_kept_draw(rng):
    # draw j of the prior chain is the final state of a chain keeping j draws (the burn-in draws nothing)
    X = rng.poisson(3.0, (12, 10)).astype(float)
    W, H = initial_factors(X, 2, rng)
    kwargs = dict(num_blocks=2, rate_W=2.0, rate_H=0.5)
    lows = [min(result.state.W.min(), result.state.H.min())
            for result in (run_prior_chain(X, init_state(W, H, seed=3, chain=0, num_blocks=2), num_steps=j,
                                           num_keep=j, **kwargs) for j in (1, 2, 3))]
    result = run_prior_chain(X, init_state(W, H, seed=3, chain=0, num_blocks=2), num_steps=7, num_keep=3, **kwargs)
    assert lows[-1] > min(lows)  # the last draw alone would not do
    assert result.all_finite and result.min_kept == min(lows)



def test_prior_chain_smallest_entry_is_over_both_factors(rng):
    """The prior chain's min_kept is the smallest entry of W and of H, whichever holds it; W's alone passed
    before."""
    X = rng.poisson(3.0, (12, 10)).astype(float)
    W, H = initial_factors(X, 2, rng)
    for rate_W, rate_H in ((100.0, 0.01), (0.01, 100.0)):  # means 0.01 and 100: the smallest entry in W, then in H
        result = run_prior_chain(X, init_state(W, H, seed=3, chain=0, num_blocks=2), num_steps=1, num_keep=1,
                                 num_blocks=2, rate_W=rate_W, rate_H=rate_H)
        assert (result.state.H.min() < result.state.W.min()) == (rate_H > rate_W)
        assert result.min_kept == min(result.state.W.min(), result.state.H.min())

@pytest.mark.parametrize("bad", ["negative", "nan", "rate"])
def test_counts_that_are_not_counts_or_rates_that_are_not_positive_are_refused(rng, bad):
    # negative or NaN counts ran to a NaN trace, a rate of 0 or below to a chain without a prior
    X = rng.poisson(3.0, (12, 10)).astype(float)
    W, H = initial_factors(X, 2, rng)
    rates = {"rate_W": -1.0, "rate_H": 1.0} if bad == "rate" else {"rate_W": 1.0, "rate_H": 1.0}
    if bad != "rate":
        X[3, 4] = -1.0 if bad == "negative" else np.nan
    settings = LangevinSettings(num_steps=4, num_keep=2, step_a=1e-3)
    message = "rate_W" if bad == "rate" else "X must hold"
    with pytest.raises(ParameterError, match=message):
        run_block_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=2), settings, temperature=1.0, num_blocks=2,
                        **rates)
    with pytest.raises(ParameterError, match=message):
        run_prior_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=2), num_steps=2, num_keep=1, num_blocks=2,
                        **rates)


def test_chain_scales_each_part_by_its_own_number_of_entries(rng):
    """Every part scaled as part 0 passed before: groups of 8 rows (3, 3, 2) and 7 columns (3, 2, 2) give parts of
    9 + 6 + 4 = 19, 6 + 6 + 6 = 18 and 6 + 9 + 4 = 19 entries."""
    from sepsti.core.parallel.blocks import block_layout
    from sepsti.core.samplers.step_size import step_sizes

    X = rng.poisson(3.0, (8, 7)).astype(float)
    schedule = BlockSchedule(X.shape, 3)
    np.testing.assert_array_equal(block_layout(X, schedule).part_sizes, [19.0, 18.0, 19.0])
    W, H = initial_factors(X, 2, rng)
    settings = LangevinSettings(num_steps=6, num_keep=6, step_a=1e-3)
    result = run_block_chain(X, init_state(W, H, seed=4, chain=1, num_blocks=3), settings, temperature=0.6,
                             num_blocks=3, rate_W=1.0, rate_H=0.5, threads=1)
    dense = init_state(W, H, seed=4, chain=1, num_blocks=3)
    steps = step_sizes(1e-3, settings.step_b, num_steps=6, num_decay_steps=1)
    for iteration, step in enumerate(steps, start=1):
        dense, expected = dense_part_update(X, dense, schedule, schedule.part_index(iteration), settings,
                                            step_size=step, temperature=0.6, rate_W=1.0, rate_H=0.5)
        assert result.trace[iteration - 1] == pytest.approx(expected, rel=1e-12)


def test_an_entry_that_overflows_at_the_last_update_makes_the_chain_not_finite(rng):
    """Scored before the update, the trace stays finite: the chain was reported finite before."""
    X = rng.poisson(3.0, (6, 6)).astype(float)
    W, H = initial_factors(X, 2, rng)
    # a step of 1e300 against a rate of 1e10 moves the entries by -1e310: infinite, mirrored to +inf
    settings = LangevinSettings(num_steps=1, num_keep=1, step_a=1e300, step_b=1.0, evaluate="before_update")
    result = run_block_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=2), settings, temperature=1.0,
                             num_blocks=2, rate_W=1e10, rate_H=1.0, threads=1)
    assert np.all(np.isfinite(result.trace)) and np.isinf(result.state.W).any()
    assert not result.all_finite and np.isnan(result.min_kept)


@pytest.mark.parametrize("num_keep", [0, 4])
def test_prior_chain_refuses_more_draws_kept_than_drawn(rng, num_keep):
    X = rng.poisson(3.0, (6, 6)).astype(float)
    W, H = initial_factors(X, 2, rng)
    with pytest.raises(ParameterError, match=rf"^num_keep={num_keep} must lie in \[1, num_steps=3\]$"):
        run_prior_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=2), num_steps=3, num_keep=num_keep,
                        num_blocks=2)


class _TwoProcesses(_OneProcess):
    """Process 0 of a communicator of two that fails on any message."""

    def Get_size(self):
        return 2


def test_distributed_chain_refuses_blocks_the_processes_do_not_share_evenly(rng):
    """B = 3 over 2 processes left row group 2 to no process."""
    X = rng.poisson(3.0, (12, 10)).astype(float)
    W, H = initial_factors(X, 2, rng)
    settings = LangevinSettings(num_steps=4, num_keep=2, step_a=1e-3)
    with pytest.raises(ParameterError, match=r"^num_blocks=3 must be a multiple of the 2 processes$"):
        run_distributed_block_chain(X, W, H, _TwoProcesses(), settings, seed=0, chain=0, temperature=1.0,
                                    num_blocks=3)



def test_progress_counts_every_iteration_and_cpu_seconds_are_the_threads(rng, monkeypatch):
    """Strides of 25 iterations reported one short, and wall time reported as CPU time, passed before."""
    import time

    X = rng.poisson(3.0, (12, 10)).astype(float)
    W, H = initial_factors(X, 2, rng)
    clock = iter([1.0, 3.5])
    monkeypatch.setattr(time, "thread_time", lambda: next(clock))  # the chain's start and end, nothing else
    done = []
    result = run_block_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=2),
                             LangevinSettings(num_steps=60, num_keep=10, step_a=1e-3), temperature=1.0, num_blocks=2,
                             rate_W=1.0, rate_H=1.0, progress=done.append, threads=1)
    assert done == [25, 25, 10] and result.cpu_seconds == 2.5


class _Alone:
    """A communicator of one process: its reductions and gathers are of its own values."""

    def Get_size(self):
        return 1

    def Get_rank(self):
        return 0

    def reduce(self, value, root):
        return value

    def allreduce(self, value, op):
        return value

    def gather(self, value, root):
        return [value]


def test_distributed_chain_reports_its_threads_cpu_time(rng, monkeypatch):
    """Wall time reported as CPU time passed before."""
    import time

    pytest.importorskip("mpi4py")  # the reductions' operators
    X = rng.poisson(3.0, (12, 10)).astype(float)
    W, H = initial_factors(X, 2, rng)
    clock = iter([1.0, 3.5])
    monkeypatch.setattr(time, "thread_time", lambda: next(clock))  # the chain's start and end, nothing else
    result = run_distributed_block_chain(X, W, H, _Alone(), LangevinSettings(num_steps=6, num_keep=2, step_a=1e-3),
                                         seed=0, chain=0, temperature=1.0, num_blocks=2, rate_W=1.0, rate_H=1.0)
    assert result.cpu_seconds == 2.5


def test_data_that_are_not_numbers_are_refused_by_name(rng):
    """Complex data went on to the compiled kernels."""
    X = rng.poisson(3.0, (12, 10)).astype(complex)
    W, H = initial_factors(X.real, 2, rng)
    with pytest.raises(ParameterError, match=r"^X has shape \(12, 10\) and dtype complex128; expected a matrix of "
                                             "counts$"):
        run_block_chain(X, init_state(W, H, seed=0, chain=0, num_blocks=2), LangevinSettings(num_steps=2, num_keep=1),
                        temperature=1.0, num_blocks=2, threads=1)
