from dataclasses import replace

import numpy as np
import pytest

from _pinned import assert_pinned
from sepsti.core.errors import ParameterError
from sepsti.core.evidence.sti import LangevinSettings
from sepsti.core.models.poisson_parafac import ParafacFactors, PoissonParafac
from sepsti.core.parallel.noise import standard_normal
from sepsti.core.parallel.parafac_blocks import (init_block_state, parafac_part_update, run_parafac_block_chain,
                                          slab_log_likelihoods)
from sepsti.core.parallel.tensor_blocks import build_block_index
from sepsti.core.random import stream
from sepsti.core.samplers.psgld import update_average
from sepsti.core.sparse_tensor import from_dense
from sepsti.corpora.tensors import simulate_dense

RANK = 3


def _settings(**fields):
    """Chain settings, pSGLD scored before each update unless ``fields`` say otherwise."""
    return LangevinSettings(**{"sampler": "psgld", "evaluate": "before_update", **fields})


@pytest.fixture
def setup():
    X, _ = simulate_dense((7, 8, 9), 2, prior_rate=0.7, rng=stream(1))
    sparse = from_dense(X)
    model = PoissonParafac(sparse, RANK, prior_rate=(0.7, 0.5, 0.9))
    return model, build_block_index(sparse, 3), model.sample_prior(stream(2))


def _reference_update(model, state, part, *, eps, t, sampler, alpha, sigma):
    """The update of sepsti.core.samplers.(p)sgld with the model's gradient and the blocks' own noise streams."""
    theta = [f.copy() for f in state.position]
    v = [f.copy() for f in state.v]
    streams = [s.copy() for s in state.streams]
    logl, grad = model.log_likelihood_and_grad(ParafacFactors(*theta), part)
    n_s = part.num_entries
    scale = model.n_data / n_s
    for mode in range(3):
        for b in range(part.keys.shape[0]):
            key = part.keys[b, mode]
            lo, hi = part.ranges[b, mode]
            z, streams[mode][key] = standard_normal(streams[mode][key], (hi - lo, RANK))
            g = grad[mode][lo:hi]
            drift = -model.prior_rates[mode] + t * scale * g
            if sampler == "psgld":
                v[mode][lo:hi] = update_average(v[mode][lo:hi], t * g / n_s, alpha)
                G = 1.0 / (sigma + np.sqrt(v[mode][lo:hi]))
                theta[mode][lo:hi] = np.abs(theta[mode][lo:hi] + eps * G * drift + np.sqrt(2 * eps * G) * z)
            else:
                theta[mode][lo:hi] = np.abs(theta[mode][lo:hi] + eps * drift + np.sqrt(2 * eps) * z)
    return scale * logl, theta, v, streams


@pytest.mark.parametrize("sampler", ["sgld", "psgld"])
@pytest.mark.parametrize("parallel", [False, True])
def test_part_update_equals_the_reference_update(setup, sampler, parallel):
    model, index, theta = setup
    state = init_block_state(theta, seed=5, chain=(3, 1), num_blocks=3)
    for leaf, value in zip(state.v, (0.01, 0.02, 0.03)):
        leaf[...] = value
    expected = _reference_update(model, state, index.part(4), eps=1e-3, t=0.7, sampler=sampler, alpha=0.99,
                                 sigma=1e-5)
    value = parafac_part_update(index, state, 4, _settings(sampler=sampler), step_size=1e-3, temperature=0.7,
                                prior_rates=model.prior_rates, parallel=parallel)
    assert value == pytest.approx(expected[0], rel=1e-12)
    for got, want in zip(state.position, expected[1]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    if sampler == "psgld":
        for got, want in zip(state.v, expected[2]):
            np.testing.assert_allclose(got, want, rtol=1e-12)
    for got, want in zip(state.streams, expected[3]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("parallel", [False, True])
def test_first_psgld_part_starts_the_average_at_the_squared_mean_gradient(setup, parallel):
    model, index, theta = setup
    state = init_block_state(theta, seed=5, chain=(3, 1), num_blocks=3)
    part = index.part(4)
    _, grad = model.log_likelihood_and_grad(theta, part)
    expected = _reference_update(model, state, part, eps=1e-3, t=0.7, sampler="psgld", alpha=0.99, sigma=1e-5)
    parafac_part_update(index, state, 4, _settings(), step_size=1e-3, temperature=0.7, prior_rates=model.prior_rates,
                        parallel=parallel)
    for got, want, g in zip(state.v, expected[2], grad):
        np.testing.assert_allclose(got, (0.7 * g / part.num_entries) ** 2, rtol=1e-12)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    for got, want in zip(state.position, expected[1]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_after_update_scores_the_new_position(setup):
    model, index, theta = setup
    state = init_block_state(theta, seed=0, chain=(1, 1), num_blocks=3)
    value = parafac_part_update(index, state, 2, _settings(evaluate="after_update"), step_size=1e-3, temperature=1.0,
                                prior_rates=model.prior_rates)
    part = index.part(2)
    expected = model.n_data / part.num_entries * model.log_likelihood(state.position, part)
    assert value == pytest.approx(expected, rel=1e-12)


def test_a_part_update_under_full_evaluation_scores_the_position_before_it(setup):
    """The chain scores 'full' itself; a part update scores the position it started from (the updated one passed
    before)."""
    model, index, theta = setup
    state = init_block_state(theta, seed=0, chain=(1, 1), num_blocks=3)
    value = parafac_part_update(index, state, 2, _settings(evaluate="full"), step_size=1e-3, temperature=1.0,
                                prior_rates=model.prior_rates)
    part = index.part(2)
    assert not np.array_equal(state.position[0], theta[0])
    expected = model.n_data / part.num_entries * model.log_likelihood(theta, part)
    assert value == pytest.approx(expected, rel=1e-12)


def test_a_tensor_of_more_entries_than_int32_holds_is_scaled_by_all_of_them():
    """1300^3 entries (over 2^31): a count of entries in 32 bits wrapped and passed before."""
    from sepsti.core.sparse_tensor import SparseTensor

    shape = (1300, 1300, 1300)
    tensor = SparseTensor(np.array([[0, 0, 0], [5, 700, 1299], [1299, 3, 650]]), np.array([2.0, 1.0, 4.0]), shape)
    model = PoissonParafac(tensor, 2, prior_rate=1.0)
    index = build_block_index(tensor, 2)
    theta = model.sample_prior(stream(5))
    state = init_block_state(theta, seed=0, chain=(1, 1), num_blocks=2)
    value = parafac_part_update(index, state, 1, _settings(), step_size=1e-9, temperature=1.0,
                                prior_rates=model.prior_rates)
    part = index.part(1)
    assert value == pytest.approx(1300 ** 3 / part.num_entries * model.log_likelihood(theta, part), rel=1e-12)


def test_a_float32_start_gives_the_chain_of_its_float64_values(setup):
    """A start in float32 was refused as not float64."""
    model, index, theta = setup
    single = tuple(f.astype(np.float32) for f in theta)
    kwargs = dict(prior_rates=model.prior_rates, seed=3, chain=(2, 4), temperature=0.5)
    settings = _settings(num_steps=12, num_keep=4)
    trace, state = run_parafac_block_chain(index, single, settings, **kwargs)
    expected_trace, expected = run_parafac_block_chain(index, tuple(f.astype(np.float64) for f in single), settings,
                                                       **kwargs)
    np.testing.assert_array_equal(trace, expected_trace)
    for got, want in zip(state.position, expected.position):
        np.testing.assert_array_equal(got, want)


def test_chain_is_reproducible_and_stays_nonnegative(setup):
    model, index, theta = setup
    kwargs = dict(prior_rates=model.prior_rates, seed=3, chain=(2, 4), temperature=0.5)
    settings = _settings(num_steps=30, num_keep=10)
    trace_a, state_a = run_parafac_block_chain(index, theta, settings, **kwargs)
    trace_b, state_b = run_parafac_block_chain(index, theta, settings, **kwargs, parallel=True)
    np.testing.assert_array_equal(trace_a, trace_b)
    assert trace_a.shape == (10,) and np.all(np.isfinite(trace_a))
    assert all(np.all(f >= 0) for f in state_a.position)
    assert all(np.array_equal(f, theta_f) is False for f, theta_f in zip(state_a.position, theta))


def test_slab_log_likelihoods_sum_to_the_full_log_likelihood(setup):
    model, index, theta = setup
    slabs = slab_log_likelihoods(index, theta)
    assert slabs.shape == (3,)
    assert np.sum(slabs) == pytest.approx(model.log_likelihood(theta), rel=1e-12)
    np.testing.assert_array_equal(slab_log_likelihoods(index, theta, 1, 3), slabs[1:])


def test_full_evaluation_scores_the_chain_states_on_all_data(setup):
    # evaluate="full": every m-th kept iteration counted back from the last, on all the data; the
    # sample path is that of the part-evaluating chain (scoring draws no noise)
    model, index, theta = setup
    kwargs = dict(prior_rates=model.prior_rates, seed=3, chain=(2, 4), temperature=0.7)
    parts, by_parts = run_parafac_block_chain(index, theta, _settings(num_steps=53, num_keep=20, step_a=1e-3),
                                              **kwargs)
    full = _settings(num_steps=53, num_keep=20, step_a=1e-3, evaluate="full", evaluate_every=3)
    long, state = run_parafac_block_chain(index, theta, full, **kwargs)
    # same burn-in (33): the first 50 iterations agree, so the shorter chain's trace is the longer one's head
    short, state_50 = run_parafac_block_chain(index, theta, replace(full, num_steps=50, num_keep=17), **kwargs)
    assert long.shape == (7,) and short.shape == (6,)  # iterations 35, 38, ..., 53
    np.testing.assert_array_equal(long[:-1], short)
    assert long[-1] == pytest.approx(model.log_likelihood(state.position), rel=1e-12)
    assert short[-1] == pytest.approx(model.log_likelihood(state_50.position), rel=1e-12)
    for got, want in zip(state.position, by_parts.position):
        np.testing.assert_array_equal(got, want)


def test_cyclic_part_estimates_are_biased_full_evaluation_is_not():
    # Same sample paths scored two ways over 12 seeds. The part estimate of iteration l scores the part
    # the chain fitted B² − 1 iterations ago, so it falls below the full log-likelihood of the same
    # samples by much more than its Monte-Carlo error; the full evaluation's standard errors match the
    # spread of its estimates over seeds (variance ratio within the chi-square(11) 0.1 %–99.9 % range).
    from scipy.stats import chi2

    from sepsti.core.evidence.sti import chain_summary

    X, _ = simulate_dense((30, 25, 20), 2, prior_rate=1.5, rng=stream(7))
    sparse = from_dense(X)
    model = PoissonParafac(sparse, 2, prior_rate=1.5)
    index = build_block_index(sparse, 3)
    rows = []
    for seed in range(12):
        # step_a: parafac_large's rule, a fixed step of 1 % of the prior scale after the burn-in
        kwargs = dict(prior_rates=model.prior_rates, seed=seed, chain=(2, 1), temperature=1.0)
        settings = _settings(num_steps=2000, num_keep=1000, step_a=3.5e-10)
        theta = model.sample_prior(stream(seed, 99))
        part_trace, _ = run_parafac_block_chain(index, theta, settings, **kwargs)
        full_trace, _ = run_parafac_block_chain(index, theta, replace(settings, evaluate="full"), **kwargs)
        rows.append(chain_summary(part_trace)[:2] + chain_summary(full_trace)[:2])
    part_mean, part_se, full_mean, full_se = np.array(rows).T
    gap = part_mean - full_mean
    assert gap.mean() < -5 * gap.std(ddof=1) / np.sqrt(gap.size)
    assert gap.mean() < -2 * np.sqrt(np.mean(part_se ** 2))  # larger than one chain's own error bar, too
    ratio = full_mean.var(ddof=1) / np.mean(full_se ** 2)
    assert chi2.ppf(0.001, 11) / 11 < ratio < chi2.ppf(0.999, 11) / 11


def test_zero_temperature_ignores_the_data(setup):
    # at t = 0 the drift is the prior's alone: two different data sets give the same chain
    model, index, theta = setup
    other = build_block_index(from_dense(np.zeros((7, 8, 9)) + (np.arange(9) % 2)), 3)
    kwargs = dict(prior_rates=model.prior_rates, seed=1, chain=(1, 0), temperature=0.0)
    _, a = run_parafac_block_chain(index, theta, _settings(num_steps=5, num_keep=5), **kwargs)
    _, b = run_parafac_block_chain(other, theta, _settings(num_steps=5, num_keep=5), **kwargs)
    for x, y in zip(a.position, b.position):
        np.testing.assert_array_equal(x, y)


def test_compiled_chain_needs_the_block_index_of_a_sparse_tensor(setup):
    model, _, theta = setup
    with pytest.raises(ParameterError, match="SparseTensor"):
        run_parafac_block_chain(build_block_index(np.zeros((7, 8, 9)), 3), theta, _settings(num_steps=4, num_keep=2),
                                prior_rates=model.prior_rates, seed=0, chain=(1, 1), temperature=1.0)


@pytest.mark.parametrize("setting", [dict(subset_size=10), dict(step_floor=0.1), dict(step_scale="curvature"),
                                     dict(integrator="lm"), dict(control_variate="likelihood"),
                                     dict(zero_variance=True)])
def test_block_chain_refuses_by_name_what_it_does_not_implement(setup, setting):
    model, index, theta = setup
    name = next(iter(setting))
    settings = _settings(num_steps=4, num_keep=2, **setting)
    with pytest.raises(ParameterError, match=name):
        run_parafac_block_chain(index, theta, settings, prior_rates=model.prior_rates, seed=0, chain=(1, 1),
                                temperature=1.0)
    with pytest.raises(ParameterError, match=name):
        parafac_part_update(index, init_block_state(theta, seed=0, chain=(1, 1), num_blocks=3), 0, settings,
                            step_size=1e-3, temperature=1.0, prior_rates=model.prior_rates)


def test_factor_block_noise_is_the_shared_stream_including_its_tail_draws():
    # With no drift and a unit noise scale the SGLD update of a zero block is |z|: the fused pass must
    # draw exactly sepsti.core.parallel.noise's numbers (15 000 draws reach the ziggurat's slow path ~180 times)
    from sepsti.core.parallel._parafac_kernels import _update_factor_block
    from sepsti.core.parallel.kernel_arguments import EVALUATE_BEFORE_UPDATE, PartStep, StepConstants
    from sepsti.core.parallel.noise import seed_states

    states = seed_states(4, 2, range(3))
    F = np.zeros((5001, 3))  # an odd split: a buffered half-draw crosses the two calls
    v = np.zeros_like(F)
    grad = np.zeros_like(F)
    constants = StepConstants(0.0, np.zeros(3), False, 0.99, 1e-5, EVALUATE_BEFORE_UPDATE)
    part_step = PartStep(0.5, 1.0, 1.0)  # step 1/2: unit noise scale
    _update_factor_block(F, v, grad, states, 1, 0, 2500, np.zeros(3), 0.0, constants, part_step)
    _update_factor_block(F, v, grad, states, 1, 2500, 5001, np.zeros(3), 0.0, constants, part_step)
    expected, state = standard_normal(seed_states(4, 2, range(3))[1], F.size)
    np.testing.assert_array_equal(F.ravel(), np.abs(expected))
    np.testing.assert_array_equal(states[1], state)



def test_a_psgld_average_at_zero_is_set_and_follows_the_running_average():
    """Only a negative pSGLD average is unset: one at exactly 0 (after a zero mean gradient) moves to
    (1 - alpha) mean^2 and preconditions the step with it; an average of 0 taken as unset passed before."""
    from sepsti.core.parallel._kernels import langevin_entry
    from sepsti.core.parallel.kernel_arguments import EVALUATE_BEFORE_UPDATE, StepConstants

    constants = StepConstants(1.0, np.ones(3), True, 0.9, 1e-5, EVALUATE_BEFORE_UPDATE)
    # x = 1, drift g = 0.5, z = -0.3, mean 2, step 0.01, noise scale 0.2
    x, v = langevin_entry(1.0, 0.5, -0.3, 2.0, 0.0, 0.01, 0.2, constants)
    assert v == pytest.approx(0.1 * 2.0 ** 2, rel=1e-14)
    G = 1 / (1e-5 + np.sqrt(0.4))
    assert x == pytest.approx(abs(1.0 + 0.01 * G * 0.5 - 0.2 * np.sqrt(G) * 0.3), rel=1e-14)
    _, unset = langevin_entry(1.0, 0.5, -0.3, 2.0, -1.0, 0.01, 0.2, constants)
    assert unset == 4.0  # a negative average starts at the first mean^2

class _ThreadComm:
    """In-process stand-in for an MPI communicator, one thread per process: Isend/Irecv, allgather."""

    def __init__(self, size, rank, shared):
        self.size, self.rank, self.shared = size, rank, shared
        self.sent = 0

    def Get_size(self):
        return self.size

    def Get_rank(self):
        return self.rank

    def allgather(self, value):
        barrier, slots, _ = self.shared
        slots[self.rank] = value
        barrier.wait()
        gathered = list(slots)
        barrier.wait()
        return gathered

    def _mailbox(self, dest, source, tag):
        import queue

        return self.shared[2].setdefault((dest, source, tag), queue.Queue())

    def Isend(self, buffer, dest, tag):
        self._mailbox(dest, self.rank, tag).put(np.array(buffer, copy=True))
        self.sent += 1
        return _Done()

    def Irecv(self, buffer, source, tag):
        return _Receive(self._mailbox(self.rank, source, tag), buffer)


class _Done:
    def Wait(self):
        pass


class _Receive:
    def __init__(self, mailbox, buffer):
        self.mailbox, self.buffer = mailbox, buffer

    def Wait(self):
        self.buffer[...] = self.mailbox.get(timeout=60)


def _run_on_threads(size, fn):
    import threading

    shared = (threading.Barrier(size), [None] * size, {})
    results, errors = [None] * size, []

    def target(rank):
        try:
            results[rank] = fn(_ThreadComm(size, rank, shared))
        except BaseException as error:  # noqa: BLE001 -- re-raised in the test thread
            errors.append(error)
            shared[0].abort()

    threads = [threading.Thread(target=target, args=(rank,)) for rank in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("num_processes, sampler, evaluate", [(2, "psgld", "before_update"),
                                                              (3, "sgld", "after_update"), (2, "psgld", "full"),
                                                              (3, "psgld", "full")])
def test_distributed_chain_gives_the_one_process_samples(num_processes, sampler, evaluate):
    # B = 5 over 2 or 3 processes (unequal shares); 2 B^2 + 13 steps wrap both part counters and end at u = 2,
    # where a process's copies of the B-blocks numbered as its A-blocks are stale (at 2 B^2 + 3 steps, u = 0, a
    # final state assembled from those copies passed before)
    X, _ = simulate_dense((9, 10, 11), 2, prior_rate=0.7, rng=stream(7))
    model = PoissonParafac(from_dense(X), RANK, prior_rate=0.7)
    index = build_block_index(from_dense(X), 5)
    theta = model.sample_prior(stream(8))
    kwargs = dict(prior_rates=model.prior_rates, seed=2, chain=(3, 2), temperature=0.8)
    settings = _settings(num_steps=63, num_keep=20, sampler=sampler, evaluate=evaluate, evaluate_every=3, step_a=1e-3)
    expected_trace, expected = run_parafac_block_chain(index, theta, settings, **kwargs)
    results = _run_on_threads(num_processes, lambda comm: (
        *run_parafac_block_chain(index, theta, settings, comm=comm, **kwargs), comm.sent))
    for trace, state, sent in results:
        # a C-block every iteration and a B-block at v = B - 1 (iterations 5, 10, ..., 60): a run of
        # two processes each computing the whole chain alone sent none and passed before
        assert sent == 63 + 12
        np.testing.assert_array_equal(trace, expected_trace)
        for field in ("position", "v", "streams", "gradient"):
            for got, want in zip(getattr(state, field), getattr(expected, field)):
                np.testing.assert_array_equal(got, want)


def test_short_chains_reproduce_their_pinned_traces():
    # Mode sizes divisible by B, where every rule for cutting a mode into B groups agrees: the pinned
    # values check the compiled part update's arithmetic, plumbing and noise streams (rounding of
    # other builds aside, _pinned).
    X, _ = simulate_dense((6, 9, 12), 2, prior_rate=0.7, rng=stream(21))
    model = PoissonParafac(from_dense(X), 3, prior_rate=(0.7, 0.5, 0.9))
    index = build_block_index(from_dense(X), 3)
    theta = model.sample_prior(stream(22))
    pinned = {
        "psgld": ("before_update",
                  ["-0x1.afb6b48fbd827p+11", "-0x1.4ff022b844a5ap+11", "-0x1.23f87dfb15cb0p+12",
                   "-0x1.5a94ce4d59258p+11", "-0x1.a46fd06e164adp+10"],
                  [56.908141442589454, 415.9232123060259, 45.21740184895405, 615.947289775988,
                   24.354464414635096, 490.8800519563522, 28.001532634842743, 232.26861630133251,
                   11.40354220640344, 167.894183965688, 15.014870053742566, 338.07882087253677]),
        "sgld": ("after_update",
                 ["-0x1.ef9a3c37f28d3p+10", "-0x1.bdaa58128d266p+10", "-0x1.000bda65b0765p+11",
                  "-0x1.e60502228f5c1p+10", "-0x1.a2a11e9ba745ap+10"],
                 [19.09338782866485, 195.49029087145746, 55.27861673816972, 784.421851325148,
                  41.0252333308195, 887.4660584615499, -18.0, -171.0, -27.0, -378.0, -36.0, -666.0]),
    }
    for sampler, (evaluate, trace, sums) in pinned.items():
        settings = _settings(num_steps=23, num_keep=5, sampler=sampler, evaluate=evaluate, step_a=2e-5)
        values, state = run_parafac_block_chain(index, theta, settings, prior_rates=model.prior_rates, seed=3,
                                                chain=(3, 1), temperature=0.7)
        assert_pinned(values, (*state.position, *state.v, *state.streams), trace, sums, "c61bbdbe7c6dcbc4", sampler)


def _grown(factor, rows):
    """``factor`` with ``rows`` more rows."""
    return np.vstack([factor, factor[:rows]])


@pytest.mark.parametrize("misfit, message", [
    (lambda theta: (_grown(theta[0], 1), theta[1], theta[2]), r"theta\[0\] has shape \(8, 3\)"),
    (lambda theta: (theta[0], np.hstack([theta[1], theta[1]]), theta[2]), r"theta\[1\] has shape \(8, 6\)"),
    (lambda theta: theta[:2], "theta has 2 factors"),
    (lambda theta: tuple(f[:, :0] for f in theta), r"theta\[0\] has shape \(7, 0\)")],
    ids=["more rows", "other rank", "two factors", "rank 0"])
def test_start_that_does_not_fit_the_tensor_is_refused_by_name(setup, misfit, message):
    # the compiled update reads and writes rows by the index's ranges and the rank by the first factor's
    model, index, theta = setup
    with pytest.raises(ParameterError, match=message):
        run_parafac_block_chain(index, misfit(theta), _settings(num_steps=4, num_keep=2),
                                prior_rates=model.prior_rates, seed=0, chain=(1, 1), temperature=1.0)


def _streams_for_two_blocks(state):
    # the streams of a 2-block state as views into larger buffers: a kernel writing past them stays inside
    return state._replace(streams=tuple(np.concatenate([s, s])[:2] for s in state.streams))


@pytest.mark.parametrize("misfit, message", [
    (lambda state: state._replace(position=(_grown(state.position[0], 2), *state.position[1:])),
     r"state.position\[0\] has shape \(9, 3\)"),
    (lambda state: state._replace(position=tuple(f.astype(np.float32) for f in state.position)),
     r"state.position\[0\] has shape \(7, 3\) and dtype float32"),
    (lambda state: state._replace(v=(state.v[0], state.v[1], _grown(state.v[2], 1))), r"state.v\[2\]"),
    (lambda state: state._replace(gradient=None), "state.gradient has 0 factors"),
    (_streams_for_two_blocks, r"state.streams has shapes \[\(2, 2\), \(2, 2\), \(2, 2\)\]")],
    ids=["more rows", "float32", "v of more rows", "no gradient", "streams for fewer blocks"])
def test_part_update_refuses_a_state_that_does_not_fit_the_index(setup, misfit, message):
    model, index, theta = setup
    state = misfit(init_block_state(theta, seed=0, chain=(1, 1), num_blocks=3))
    with pytest.raises(ParameterError, match=message):
        parafac_part_update(index, state, 4, _settings(), step_size=1e-3, temperature=1.0,
                            prior_rates=model.prior_rates)


def test_part_update_needs_the_block_index_of_a_sparse_tensor(setup):
    model, _, theta = setup
    with pytest.raises(ParameterError, match="SparseTensor"):
        parafac_part_update(build_block_index(np.zeros((7, 8, 9)), 3),
                            init_block_state(theta, seed=0, chain=(1, 1), num_blocks=3), 0, _settings(),
                            step_size=1e-3, temperature=1.0, prior_rates=model.prior_rates)


@pytest.mark.parametrize("setting", [dict(temperature=-0.5), dict(temperature=np.nan), dict(temperature=1.5),
                                     dict(prior_rates=(0.7, 0.5))], ids=["t<0", "t=NaN", "t>1", "two rates"])
def test_temperature_outside_0_1_or_a_rate_missing_is_refused(setup, setting):
    # t < 0 ran the prior-only chain and NaN gave a NaN trace; a missing rate was read past the array's end
    model, index, theta = setup
    kwargs = {"temperature": 0.5, "prior_rates": model.prior_rates, **setting}
    name = next(iter(setting))
    with pytest.raises(ParameterError, match=name):
        run_parafac_block_chain(index, theta, _settings(num_steps=4, num_keep=2), seed=0, chain=(1, 1), **kwargs)
    with pytest.raises(ParameterError, match=name):
        parafac_part_update(index, init_block_state(theta, seed=0, chain=(1, 1), num_blocks=3), 0, _settings(),
                            step_size=1e-3, **kwargs)
