"""Several NUTS chains in parallel, each warmed up with a metric chosen from what the warm-up measures.

Conventions: the target is ``logdensity_and_grad_fn(position) -> (logdensity,
gradient)`` over flat positions of shape ``(dim,)``; draws are returned as
``(num_chains, num_draws, dim)`` (ArviZ's order). Chain c draws every random
number from its own stream ``sepsti.core.random.stream(seed, c)``, which travels with
the chain between phases, and BLAS runs one thread in every executor, so the
draws do not depend on how many chains run at once, nor on processes versus
threads. A chain that raises, or Ctrl-C, stops every chain at its next
transition.

The warm-up runs in phases; all chains finish a phase before the next starts,
so that a choice made from all of them applies to all of them:

1. *explore* (``metric="auto"`` or a ``"precision"`` metric): a share of the
   warm-up with a windowed diagonal metric (Stan's windows), from the start
   to the typical set, keeping its positions;
2. *pilots* (``"auto"`` only): every candidate of :mod:`sepsti.core.samplers.metric`
   runs a short dual averaging then a few measured draws on every chain; of the
   candidates whose pilots did not diverge, the cheapest kind whose smallest ESS per
   gradient is within ``margin`` (2x) of the best is chosen, with its scale moves if
   they are within it too (:func:`sepsti.core.samplers.metric.choose_metric`);
3. *final*: the rest of the warm-up with the chosen metric (diagonal and
   dense re-estimated in windows, ``precision`` fixed at the state reached),
   the step size by dual averaging, the scale-move proposals by Robbins–Monro;
4. *check*: the last share of the warm-up runs the sampling kernel as it
   will be (step size, metric and moves fixed) and counts divergences. If
   any chain diverged there, or in its adaptation with the final metric at a
   step no larger than the adapted one, or the chosen candidate's pilot
   draws did, the target acceptance statistic δ is raised to the next of
   ``NUTSSettings.raised_targets`` on every chain, the step size re-adapted
   by dual averaging from where it was and the check repeated, until one
   passes or the targets run out; where a lower target diverged, the first
   one that passes is raised once more as a margin;
5. *sampling* with everything fixed, then the diagnostics, with a
   :class:`sepsti.core.errors.ConvergenceWarning` when the draws diverged, R̂
   exceeds 1.01, the bulk ESS is below 100 per chain or trees stopped at the
   depth cap.

References
----------
Hoffman & Gelman, "The No-U-Turn Sampler", JMLR 15 (2014); Stan Reference
Manual, "HMC algorithm parameters" (windowed adaptation); Vehtari et al.,
"Rank-normalization, folding, and localization" (2021) for the diagnostics.
"""

import os
import threading
import time
import warnings
from typing import Any, NamedTuple, Optional

import numpy as np

from sepsti.core.checks import integer_at_least, number_within, real_array
from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.blas import single_threaded_blas
from sepsti.core.random import stream, validate_seed
from sepsti.core.samplers import group_move, nuts
from sepsti.core.samplers.driver import run_chain
from sepsti.core.samplers.hmc import HMCState, init
from sepsti.core.samplers.mass_matrix import warmup_schedule, welford_covariance, welford_variance
from sepsti.core.samplers.metric import (AutoMetricSettings, MetricChoice, TargetStructure, candidate_metrics,
                                  choose_metric, pilot_result, split_name, validate_metric)
from sepsti.core.samplers.warmup import window_adaptation

__all__ = ["NUTSSettings", "TransitionInfo", "ChainInfo", "SampleDiagnostics", "NUTSResult", "sample_nuts",
           "summarize"]


class NUTSSettings(NamedTuple):
    """Structural NUTS options shared by every phase.

    Attributes
    ----------
    max_tree_depth : int
    target : float
        Target acceptance statistic δ of dual averaging.
    divergence_threshold : float
        Δ_max of the energy error.
    raised_targets : tuple of float
        The targets tried in turn, each followed by a re-adaptation of the step
        size, while the warm-up's check transitions at the adapted step diverge.
    check_fraction : float
        Share of the warm-up run as the check (and, after each raise, both the
        re-adaptation and the new check); 0 turns the check off.
    """

    max_tree_depth: int = 10
    target: float = 0.8
    divergence_threshold: float = 1000.0
    raised_targets: tuple = (0.9, 0.95)
    check_fraction: float = 0.1


class TransitionInfo(NamedTuple):
    """One NUTS transition, followed by scale moves when the metric has them.

    ``energy`` is the Hamiltonian of the NUTS draw (before any scale moves);
    ``is_depth_capped`` says the tree made ``max_tree_depth`` doublings without a
    U-turn or a divergence, so the cap cut it short.
    """

    acceptance_rate: float
    is_divergent: bool
    step_size: float
    tree_depth: int
    num_integration_steps: int
    num_move_evaluations: int
    energy: float
    is_depth_capped: bool


class ChainInfo(NamedTuple):
    """What one chain did.

    ``seconds`` are the chain's own wall time in its worker (warm-up, sampling),
    ``cpu_seconds`` the CPU time of the thread that ran it: what the wall time
    would be with a core to itself, whatever else the machine runs;
    ``target`` is the δ the step size was adapted to (above
    ``NUTSSettings.target`` when the warm-up's check diverged); ``info`` holds
    the sampling transitions, each field of shape (num_draws,);
    ``num_depth_capped`` counts those cut short by the tree-depth cap.
    """

    step_size: float
    target: float
    inverse_mass_matrix: np.ndarray
    num_divergent: int
    num_warmup_divergent: int
    num_gradients: int
    num_warmup_gradients: int
    mean_tree_depth: float
    warmup_seconds: float
    sampling_seconds: float
    warmup_cpu_seconds: float
    sampling_cpu_seconds: float
    move_acceptance: Optional[np.ndarray]
    info: TransitionInfo
    num_depth_capped: int


class SampleDiagnostics(NamedTuple):
    """Diagnostics over all chains: bulk and tail ESS, split-R̂ (rank), divergences, trees cut by the depth cap.

    ``worst`` names the quantity with the smallest bulk ESS: ``theta[i]``,
    ``logdensity`` or ``summary[j]``; ``worst_rhat`` the one with the largest R̂;
    ``num_depth_capped`` counts the draws whose tree stopped at ``max_tree_depth``.
    """

    min_bulk_ess: float
    median_bulk_ess: float
    min_tail_ess: float
    max_rhat: float
    worst: str
    logdensity_ess: float
    num_divergent: int
    worst_rhat: str
    num_depth_capped: int = 0


class NUTSResult(NamedTuple):
    """Draws of all chains with the choice of metric and the diagnostics.

    Attributes
    ----------
    draws : ndarray, shape (num_chains, num_draws, dim)
    logdensity : ndarray, shape (num_chains, num_draws)
    summaries : ndarray, shape (num_chains, num_draws, k), or None
    chains : tuple of ChainInfo
    metric : MetricChoice
    diagnostics : SampleDiagnostics
    warmup_seconds, sampling_seconds : float
        Wall time of the whole warm-up (pilots included) and of the sampling phase.
    """

    draws: np.ndarray
    logdensity: np.ndarray
    summaries: Optional[np.ndarray]
    chains: tuple
    metric: MetricChoice
    diagnostics: SampleDiagnostics
    warmup_seconds: float
    sampling_seconds: float

    def to_inference_data(self):
        """The draws as ArviZ ``InferenceData`` (``theta``, ``summary`` and per-draw sample stats).

        The sample stats have ArviZ's names, ``energy`` among them (for ``arviz.bfmi`` and energy plots).
        """
        from sepsti.core.samplers.diagnostics import to_inference_data

        posterior = {"theta": self.draws}
        if self.summaries is not None:
            posterior["summary"] = self.summaries
        stats = {"lp": self.logdensity,
                 "diverging": np.stack([c.info.is_divergent for c in self.chains]),
                 "tree_depth": np.stack([c.info.tree_depth for c in self.chains]),
                 "n_steps": np.stack([c.info.num_integration_steps for c in self.chains]),
                 "step_size": np.stack([c.info.step_size for c in self.chains]),
                 "acceptance_rate": np.stack([c.info.acceptance_rate for c in self.chains]),
                 "energy": np.stack([c.info.energy for c in self.chains])}
        return to_inference_data(posterior, sample_stats=stats)


class _Problem(NamedTuple):
    logdensity_and_grad_fn: Any
    structure: TargetStructure
    settings: NUTSSettings
    auto: AutoMetricSettings
    stop: Any = None  # an event every transition checks: set, the chains raise _Stopped


class _Stopped(Exception):
    """A chain stopped because another one raised or the run was interrupted."""


class _Chain(NamedTuple):
    index: int
    rng: np.random.Generator
    state: HMCState
    step_size: float
    inverse_mass_matrix: Optional[np.ndarray]
    log_move_std: Optional[np.ndarray]
    move_iteration: int
    explore_positions: Optional[np.ndarray]
    num_warmup_gradients: int
    num_warmup_divergent: int
    num_adapted_divergent: int  # of the latest adaptation: see _divergent_at_adapted_step
    warmup_seconds: float
    warmup_cpu_seconds: float


class _Moves:
    """Scale moves after a NUTS transition; their proposal scales adapt while ``is_adapting``."""

    def __init__(self, problem, chain, *, is_adapting):
        structure = problem.structure
        self.kernel = group_move.build_kernel(structure.transform_fn, problem.logdensity_and_grad_fn,
                                              num_groups=structure.num_groups,
                                              num_moves=problem.auto.num_move_sweeps)
        self.log_std = (np.full(structure.num_groups, np.log(0.05)) if chain.log_move_std is None
                        else chain.log_move_std.copy())
        self.iteration = chain.move_iteration
        self.is_adapting = is_adapting
        self.acceptance = []

    def __call__(self, rng, state):
        state, info = self.kernel(rng, state, self.log_std)
        self.acceptance.append(info.acceptance_rate)
        if self.is_adapting:
            self.iteration += 1
            self.log_std = group_move.adapt_log_proposal_std(self.log_std, info.acceptance_rate, self.iteration)
        return state, info.num_evaluations


def _transition_kernel(problem, max_tree_depth, moves):
    nuts_kernel = nuts.build_kernel(problem.logdensity_and_grad_fn, max_tree_depth=max_tree_depth,
                                    divergence_threshold=problem.settings.divergence_threshold)

    def kernel(rng, state, step_size, inverse_mass_matrix):
        if problem.stop.is_set():
            raise _Stopped
        state, info = nuts_kernel(rng, state, step_size, inverse_mass_matrix)
        evaluations = 0
        if moves is not None:
            state, evaluations = moves(rng, state)
        is_depth_capped = info.tree_depth == max_tree_depth and not (info.is_turning or info.is_divergent)
        return state, TransitionInfo(info.acceptance_rate, info.is_divergent, info.step_size, info.tree_depth,
                                     info.num_integration_steps, evaluations, info.energy, is_depth_capped)

    return kernel


def _work(info, dense_cost, is_dense):
    leaves = np.sum(info.num_integration_steps)
    return float(leaves * (1.0 + (dense_cost if is_dense else 0.0)) + np.sum(info.num_move_evaluations))


def _inverse_precision(problem, position):
    try:
        covariance = np.linalg.inv(problem.structure.precision_fn(position))
    except np.linalg.LinAlgError:
        raise ParameterError("precision_fn returned a singular matrix; it must be positive definite") from None
    return 0.5 * (covariance + covariance.T)


def _metric_from_positions(positions, kind):
    init_fn, update, final = welford_covariance() if kind == "dense" else welford_variance()
    state = init_fn(positions.shape[1])
    for x in positions:
        state = update(state, x)
    return final(state)


def _warmup(problem, chain, kind, moves, num_steps, inverse_mass_matrix, *, adapt, keep_positions=False,
            max_tree_depth=None, target=None, initial_step_size=None):
    """``num_steps`` of window adaptation for one metric kind; returns the chain and the WarmupResult."""
    kernel = _transition_kernel(problem, max_tree_depth or problem.settings.max_tree_depth, moves)
    start, cpu_start = time.perf_counter(), time.thread_time()
    warm = window_adaptation(kernel, chain.state, chain.rng, problem.logdensity_and_grad_fn, num_steps=num_steps,
                             target=problem.settings.target if target is None else target, adapt_mass_matrix=adapt,
                             metric="diagonal" if kind == "diagonal" else "dense",
                             inverse_mass_matrix=inverse_mass_matrix, keep_positions=keep_positions,
                             initial_step_size=initial_step_size)
    chain = chain._replace(
        state=warm.state, step_size=warm.step_size, inverse_mass_matrix=warm.inverse_mass_matrix,
        log_move_std=None if moves is None else moves.log_std, move_iteration=0 if moves is None else moves.iteration,
        num_warmup_gradients=chain.num_warmup_gradients + int(_work(warm.info, 0.0, False)),
        num_warmup_divergent=chain.num_warmup_divergent + int(np.sum(warm.info.is_divergent)),
        num_adapted_divergent=_divergent_at_adapted_step(warm, num_steps, adapt),
        warmup_seconds=chain.warmup_seconds + time.perf_counter() - start,
        warmup_cpu_seconds=chain.warmup_cpu_seconds + time.thread_time() - cpu_start)
    return chain, warm


def _divergent_at_adapted_step(warm, num_steps, adapt):
    """Divergences with the final metric at a step no larger than the adapted one.

    Dual averaging tries steps above and below the value it settles on; a
    transition that diverged with the metric sampling will use, at a step the
    sampling will not exceed, is a divergence the sampling can meet as well.
    """
    first = 0
    if adapt:
        _, is_window_end = warmup_schedule(num_steps)
        ends = np.flatnonzero(is_window_end)
        first = int(ends[-1]) + 1 if len(ends) else 0
    info = warm.info
    return int(np.sum(info.is_divergent[first:] & (info.step_size[first:] <= warm.step_size)))


def _phase_explore(problem, chain, num_steps):
    chain, warm = _warmup(problem, chain, "diagonal", None, num_steps, None, adapt=True, keep_positions=True,
                          max_tree_depth=min(problem.auto.explore_max_tree_depth, problem.settings.max_tree_depth))
    # The second half has left the start behind: its positions estimate a dense covariance.
    return chain._replace(explore_positions=warm.positions[num_steps // 2:])


def _initial_inverse_mass(problem, chain, kind):
    if kind == "precision":
        return _inverse_precision(problem, chain.state.position)
    if chain.explore_positions is None:
        return chain.inverse_mass_matrix if kind == "diagonal" else None
    # Diagonal and dense from the same draws, so that a pilot compares the metrics, not two estimates.
    return _metric_from_positions(chain.explore_positions, kind)


def _quantities(problem, positions, logdensity):
    columns = [positions, logdensity[:, None]]
    if problem.structure.summary_fn is not None:
        columns.append(np.array([problem.structure.summary_fn(x) for x in positions]).reshape(len(positions), -1))
    return np.concatenate(columns, axis=1)


def _phase_pilots(problem, chain, candidates):
    """Every candidate from the same state: dual averaging, then measured draws. Returns one chain per candidate."""
    auto = problem.auto
    chains, measured = [], []
    for metric in candidates:
        kind, has_moves = split_name(metric)
        moves = _Moves(problem, chain, is_adapting=True) if has_moves else None
        inverse_mass = _initial_inverse_mass(problem, chain, kind)
        pilot, warm = _warmup(problem, chain, kind, moves, auto.num_pilot_adapt, inverse_mass, adapt=False)
        kernel = _transition_kernel(problem, problem.settings.max_tree_depth, moves)
        start, cpu_start = time.perf_counter(), time.thread_time()
        result = run_chain(lambda r, s, i: kernel(r, s, pilot.step_size, pilot.inverse_mass_matrix), pilot.state,
                           pilot.rng, num_steps=auto.num_pilot_draws, transform=lambda s: (s.position, s.logdensity))
        positions, logdensity = result.samples
        info = result.info
        pilot = pilot._replace(
            state=result.state, log_move_std=None if moves is None else moves.log_std,
            move_iteration=0 if moves is None else moves.iteration,
            num_warmup_gradients=pilot.num_warmup_gradients + int(_work(info, 0.0, False)),
            num_warmup_divergent=pilot.num_warmup_divergent + int(np.sum(info.is_divergent)),
            warmup_seconds=pilot.warmup_seconds + time.perf_counter() - start,
            warmup_cpu_seconds=pilot.warmup_cpu_seconds + time.thread_time() - cpu_start)
        measured.append((_quantities(problem, positions, logdensity),
                         _work(info, auto.dense_cost, kind != "diagonal"), pilot.step_size,
                         float(np.mean(info.tree_depth)), int(np.sum(info.is_divergent))))
        chains.append(pilot)
    # The pilots ran one after another from one state: each candidate's chain carries the time and the
    # gradients (and divergences) of all of them.
    spent = {field: sum(getattr(c, field) - getattr(chain, field) for c in chains)
             for field in ("warmup_seconds", "warmup_cpu_seconds", "num_warmup_gradients", "num_warmup_divergent")}
    chains = [c._replace(**{field: getattr(chain, field) + total for field, total in spent.items()}) for c in chains]
    return chains, measured


def _phase_final(problem, chain, metric, num_steps, *, is_chosen_by_pilot):
    kind, has_moves = split_name(metric)
    moves = _Moves(problem, chain, is_adapting=True) if has_moves else None
    if is_chosen_by_pilot:
        inverse_mass = chain.inverse_mass_matrix
    else:
        inverse_mass = _initial_inverse_mass(problem, chain, kind)
    chain, _ = _warmup(problem, chain, kind, moves, num_steps, inverse_mass, adapt=kind != "precision")
    return chain._replace(explore_positions=None)


def _run_fixed(problem, chain, metric, num_steps):
    """``num_steps`` transitions with the chain's step size, metric and move scales fixed."""
    _, has_moves = split_name(metric)
    moves = _Moves(problem, chain, is_adapting=False) if has_moves else None
    kernel = _transition_kernel(problem, problem.settings.max_tree_depth, moves)
    start, cpu_start = time.perf_counter(), time.thread_time()
    result = run_chain(lambda r, s, i: kernel(r, s, chain.step_size, chain.inverse_mass_matrix), chain.state,
                       chain.rng, num_steps=num_steps, transform=lambda s: (s.position, s.logdensity))
    return result, moves, time.perf_counter() - start, time.thread_time() - cpu_start


def _phase_check(problem, chain, metric, num_steps):
    """The sampling kernel as it will run, counted as warm-up; returns the chain and its divergences."""
    result, _, seconds, cpu_seconds = _run_fixed(problem, chain, metric, num_steps)
    chain = chain._replace(
        state=result.state, num_warmup_gradients=chain.num_warmup_gradients + int(_work(result.info, 0.0, False)),
        num_warmup_divergent=chain.num_warmup_divergent + int(result.num_divergent),
        warmup_seconds=chain.warmup_seconds + seconds, warmup_cpu_seconds=chain.warmup_cpu_seconds + cpu_seconds)
    return chain, int(result.num_divergent)


def _phase_readapt(problem, chain, metric, num_steps, target):
    """Dual averaging towards ``target`` from the chain's step size, the metric fixed."""
    kind, has_moves = split_name(metric)
    moves = _Moves(problem, chain, is_adapting=True) if has_moves else None
    chain, _ = _warmup(problem, chain, kind, moves, num_steps, chain.inverse_mass_matrix, adapt=False, target=target,
                       initial_step_size=chain.step_size)
    return chain


def _phase_sample(problem, chain, metric, num_draws, target):
    result, moves, seconds, cpu_seconds = _run_fixed(problem, chain, metric, num_draws)
    positions, logdensity = result.samples
    summaries = None
    if problem.structure.summary_fn is not None:
        summaries = np.array([problem.structure.summary_fn(x) for x in positions]).reshape(num_draws, -1)
    info = ChainInfo(chain.step_size, target, chain.inverse_mass_matrix, int(result.num_divergent),
                     chain.num_warmup_divergent, int(_work(result.info, 0.0, False)), chain.num_warmup_gradients,
                     float(np.mean(result.info.tree_depth)), chain.warmup_seconds, seconds, chain.warmup_cpu_seconds,
                     cpu_seconds, None if moves is None else np.mean(moves.acceptance, axis=0), result.info,
                     int(np.sum(result.info.is_depth_capped)))
    return positions, logdensity, summaries, info


_WORKER_PROBLEM = {}


def _init_worker(problem):
    _WORKER_PROBLEM["problem"] = problem


def _call_in_worker(function, chain, args, kwargs):
    return function(_WORKER_PROBLEM["problem"], chain, *args, **kwargs)


class _Runner:
    """Runs one phase over all chains: in this process, in threads or in worker processes.

    A context manager: leaving it by an exception (a chain's, or Ctrl-C's KeyboardInterrupt) sets the
    stop event, which every chain checks at each transition, cancels the phases not started and waits
    for the workers to stop.
    """

    def __init__(self, problem, *, num_workers, executor):
        self.pool = None
        if num_workers > 1 and executor == "process":
            from sepsti.core.processes import openmp_started

            if openmp_started():
                warnings.warn("numba's OpenMP layer has run in this process, and forked workers could not run its "
                              "parallel kernels: the chains run in threads", RuntimeWarning, stacklevel=3)
                executor = "thread"
        if num_workers > 1 and executor == "process":
            from sepsti.core.processes import process_pool, start_context

            # the chains are the parallelism: each worker has one BLAS thread, and fork shares the target
            # (often a model holding compiled code) without pickling it
            self.problem = problem._replace(stop=start_context().Event())
            self.pool = process_pool(num_workers, _init_worker, (self.problem,))
            self.is_process = True
        else:
            self.problem = problem._replace(stop=threading.Event())
            if num_workers > 1:
                from concurrent.futures import ThreadPoolExecutor

                self.pool = ThreadPoolExecutor(num_workers)
                self.is_process = False

    def __enter__(self):
        return self

    def map(self, function, chains, *args, **kwargs):
        if self.pool is None:
            return [function(self.problem, chain, *args, **kwargs) for chain in chains]
        from sepsti.core.processes import results

        if self.is_process:
            futures = [self.pool.submit(_call_in_worker, function, chain, args, kwargs) for chain in chains]
        else:
            futures = [self.pool.submit(function, self.problem, chain, *args, **kwargs) for chain in chains]
        return results(futures)

    def __exit__(self, exc_type, exc_value, traceback):
        if exc_type is not None:
            self.problem.stop.set()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        return False


def summarize(draws, logdensity, summaries=None, *, num_divergent=0, num_depth_capped=0):
    """:class:`SampleDiagnostics` of draws of shape (num_chains, num_draws, dim) and their log densities."""
    from sepsti.core.samplers.diagnostics import effective_sample_size, split_rhat

    columns = [draws, logdensity[:, :, None]]
    labels = [f"theta[{i}]" for i in range(draws.shape[2])] + ["logdensity"]
    if summaries is not None:
        columns.append(summaries)
        labels += [f"summary[{j}]" for j in range(summaries.shape[2])]
    everything = np.concatenate(columns, axis=2)
    bulk = effective_sample_size(everything)
    tail = effective_sample_size(everything, method="tail")
    rhat = split_rhat(everything) if draws.shape[0] > 1 else np.full(bulk.shape, np.nan)
    worst = int(np.argmin(bulk))
    has_rhat = draws.shape[0] > 1 and bool(np.any(np.isfinite(rhat)))  # a constant quantity's R-hat is NaN
    return SampleDiagnostics(float(bulk.min()), float(np.median(bulk[:draws.shape[2]])), float(tail.min()),
                             float(np.nanmax(rhat)) if has_rhat else float("nan"), labels[worst],
                             float(bulk[draws.shape[2]]), int(num_divergent),
                             labels[int(np.nanargmax(rhat))] if has_rhat else "", int(num_depth_capped))


def _warn_if_unreliable(diagnostics, num_chains, num_draws, max_tree_depth):
    """One :class:`ConvergenceWarning` line naming each problem of the draws (Vehtari et al.'s thresholds)."""
    total = num_chains * num_draws
    problems = []
    if diagnostics.num_divergent:
        problems.append(f"{diagnostics.num_divergent} of {total} draws diverged after warm-up")
    if diagnostics.max_rhat > 1.01:  # NaN with one chain
        problems.append(f"max split-R-hat {diagnostics.max_rhat:.4f} ({diagnostics.worst_rhat}) above 1.01")
    if not diagnostics.min_bulk_ess >= 100 * num_chains:
        problems.append(f"min bulk ESS {diagnostics.min_bulk_ess:.3g} ({diagnostics.worst}) below 100 per chain "
                        f"({100 * num_chains} in all)")
    if diagnostics.num_depth_capped:
        problems.append(f"{diagnostics.num_depth_capped} of {total} trees stopped at max_tree_depth={max_tree_depth}")
    if problems:
        warnings.warn(f"sample_nuts: {'; '.join(problems)}", ConvergenceWarning, stacklevel=3)


def _check_step_size(runner, chains, choice, settings, num_steps, num_chains):
    """Check the adapted step on every chain; raise δ and re-adapt while it diverged.

    The evidence at each target: divergences in the check transitions, those
    of the adaptation at or below the adapted step (see
    :func:`_divergent_at_adapted_step`) and, at the first target, those of the
    chosen candidate's measured pilot draws.
    """
    if num_steps == 0:
        return chains, choice._replace(target=settings.target)
    target, checks, raised = settings.target, [], list(settings.raised_targets)
    chosen_pilot_divergent = sum(p.num_divergent for p in choice.pilots if p.metric == choice.metric)
    pilot_divergent = chosen_pilot_divergent
    margin = False
    while True:
        adapted = sum(chain.num_adapted_divergent for chain in chains)
        outcomes = runner.map(_phase_check, chains, choice.metric, num_steps)
        chains = [chain for chain, _ in outcomes]
        checked = sum(count for _, count in outcomes)
        checks.append((target, adapted, checked, num_steps * num_chains))
        passed = adapted + checked + pilot_divergent == 0
        if not raised or (passed and (len(checks) == 1 or margin)):
            break
        # a check of a few hundred transitions bounds the divergence rate at about one in a hundred, not one in
        # thousands: where a lower target diverged, the first one that passes gets one more raise as a margin
        margin = passed
        target, pilot_divergent = raised.pop(0), 0
        chains = runner.map(_phase_readapt, chains, choice.metric, num_steps, target)
    steps = "; ".join(f"delta {t:g}: {a} divergences at or below the adapted step in its adaptation, {n} of {total} "
                      f"check transitions" for t, a, n, total in checks)
    if chosen_pilot_divergent:
        steps = f"{chosen_pilot_divergent} divergences in the chosen pilot; " + steps
    if len(checks) > 1:
        steps += (f" (target raised to {target:g}, the step size re-adapted after each raise"
                  f"{', the last as a margin' if margin else ''})")
    return chains, choice._replace(reason=f"{choice.reason}; {steps}", target=target, checks=tuple(checks))


def sample_nuts(logdensity_and_grad_fn, x0, *, num_warmup, num_draws, num_chains=2, metric="auto", seed=0,
                structure=None, settings=None, auto=None, num_workers=None, executor="process"):
    """Run ``num_chains`` NUTS chains (in parallel), each with warm-up, and pool them.

    Parameters
    ----------
    logdensity_and_grad_fn : callable
        ``position -> (logdensity, gradient)``; with ``executor="process"`` on
        a platform without fork it must be picklable.
    x0 : array_like, shape (dim,) or (num_chains, dim)
        Starting position(s).
    num_warmup, num_draws : int
        Warm-up iterations, the first check of the step size included (the
        pilots of ``"auto"`` and any re-adaptation after a divergent check
        come on top), and kept draws per chain.
    num_chains : int
    metric : str
        ``"auto"`` (chosen from pilot runs, see :mod:`sepsti.core.samplers.metric`) or
        a fixed ``"diagonal"``, ``"dense"``, ``"precision"``, each optionally
        with ``"+moves"``. ``"auto"`` judges the pilots by their ESS pooled over
        chains; with one chain it sees one short run per candidate, which can
        miss a direction that candidate leaves still (docs/nuts.md has such a
        case), so give it two chains or more.
    seed : int
        Chain c uses ``sepsti.core.random.stream(seed, c)``.
    structure : TargetStructure, optional
        Precision function, scale group and summaries of the target.
    settings : NUTSSettings, optional
    auto : AutoMetricSettings, optional
    num_workers : int, optional
        Chains run at once; default ``min(num_chains, os.cpu_count())``. The
        draws do not depend on it.
    executor : {"process", "thread"}
        Threads suit a target that releases the GIL for most of its time.
        Once numba's OpenMP layer has run in this process, ``"process"`` runs
        threads, with a warning (:mod:`sepsti.core.processes`).
        Either way, and with one worker, BLAS runs one thread per chain, so
        the draws do not depend on the executor.

    Returns
    -------
    NUTSResult

    Raises
    ------
    ParameterError
        On bad counts or settings, an unknown metric or one the structure
        cannot supply, a start with a non-finite log density, or a target
        whose log density is not a scalar or whose gradient has not the
        position's shape there.

    Warns
    -----
    ConvergenceWarning
        When draws diverged after the warm-up, the largest split-R̂ exceeds
        1.01, the smallest bulk ESS is below 100 per chain or trees stopped at
        ``max_tree_depth`` (one line naming each).
    """
    structure = TargetStructure() if structure is None else structure
    settings = NUTSSettings() if settings is None else settings
    auto = AutoMetricSettings() if auto is None else auto
    validate_metric(metric, structure)
    for name, value, low in (("num_warmup", num_warmup, 20), ("num_draws", num_draws, 4),
                             ("num_chains", num_chains, 1), ("max_tree_depth", settings.max_tree_depth, 1),
                             ("num_pilot_adapt", auto.num_pilot_adapt, 1),
                             ("num_pilot_draws", auto.num_pilot_draws, 4),
                             ("explore_max_tree_depth", auto.explore_max_tree_depth, 1),
                             ("num_move_sweeps", auto.num_move_sweeps, 1)):
        integer_at_least(name, value, low)
    # a margin below 1 keeps no candidate, and a negative dense_cost makes a dense pilot's work negative
    for name, value, low in (("margin", auto.margin, 1.0), ("dense_cost", auto.dense_cost, 0.0),
                             ("min_dense_draws_per_dim", auto.min_dense_draws_per_dim, 0.0)):
        number_within(name, value, low, np.inf)
    seed = validate_seed(seed)
    if not (np.isfinite(settings.divergence_threshold) and settings.divergence_threshold > 0):
        raise ParameterError(f"divergence_threshold={settings.divergence_threshold}: expected a positive number "
                             "(the energy error beyond which a transition diverges)")
    if executor not in ("process", "thread"):
        raise ParameterError(f"executor={executor!r}: expected 'process' or 'thread'")
    if not 0.0 < auto.explore_fraction < 1.0:
        raise ParameterError(f"explore_fraction={auto.explore_fraction} must lie in (0, 1)")
    largest_check = 0.5 * (1.0 - auto.explore_fraction)
    if not 0.0 <= settings.check_fraction <= largest_check:
        raise ParameterError(f"check_fraction={settings.check_fraction} must lie in [0, {largest_check:g}] "
                             "(half of what the exploration leaves)")
    if not isinstance(settings.raised_targets, (tuple, list)):  # a number met a bare TypeError
        raise ParameterError(f"raised_targets={settings.raised_targets!r}: expected a tuple of targets")
    targets = (settings.target,) + tuple(settings.raised_targets)
    if not all(0.0 < t < 1.0 for t in targets) or any(a >= b for a, b in zip(targets, targets[1:])):
        raise ParameterError(f"target={settings.target} and raised_targets={settings.raised_targets} must rise "
                             "within (0, 1)")
    x0 = real_array("x0", x0)
    if x0.ndim not in (1, 2) or x0.shape[-1] < 1:
        raise ParameterError(f"x0 has shape {x0.shape}: expected (dim,) or ({num_chains}, dim)")
    starts = np.broadcast_to(x0, (num_chains, x0.shape[-1])) if x0.ndim == 1 else x0
    if starts.shape[0] != num_chains:
        raise ParameterError(f"x0 has shape {x0.shape}: expected (dim,) or ({num_chains}, dim)")
    num_workers = (min(num_chains, os.cpu_count() or 1) if num_workers is None
                   else integer_at_least("num_workers", num_workers, 1))  # 1.5 was taken as 1, "x" a ValueError
    problem = _Problem(logdensity_and_grad_fn, structure, settings, auto)
    kind, _ = split_name(metric)
    num_explore = int(round(auto.explore_fraction * num_warmup)) if metric == "auto" or kind == "precision" else 0
    num_check = int(round(settings.check_fraction * num_warmup))
    num_final = num_warmup - num_explore - num_check
    if num_final < 1:
        raise ParameterError(f"num_warmup={num_warmup} with explore_fraction={auto.explore_fraction} and "
                             f"check_fraction={settings.check_fraction} leaves {num_final} steps for the final "
                             f"warm-up phase ({num_explore} explore, {num_check} check): it needs at least 1")
    # one BLAS thread, as in the process workers: a sum's rounding depends on the threads it is split over
    with single_threaded_blas(), _Runner(problem, num_workers=num_workers, executor=executor) as runner:
        chains = [_Chain(c, stream(seed, c), init(starts[c], logdensity_and_grad_fn), 0.0, None, None, 0, None, 0, 0,
                         0, 0.0, 0.0) for c in range(num_chains)]
        start = time.perf_counter()
        if num_explore:
            chains = runner.map(_phase_explore, chains, num_explore)
        if metric == "auto":
            dim = starts.shape[1]
            candidates, skipped = candidate_metrics(structure, dim=dim,
                                                    num_explore_draws=num_explore - num_explore // 2,
                                                    settings=auto)
            outcomes = runner.map(_phase_pilots, chains, candidates)
            pilots = []
            for i, name in enumerate(candidates):
                quantities = np.stack([measured[i][0] for _, measured in outcomes])
                labels = ([f"theta[{j}]" for j in range(dim)] + ["logdensity"]
                          + [f"summary[{j}]" for j in range(quantities.shape[2] - dim - 1)])
                pilots.append(pilot_result(name, quantities, labels, sum(m[i][1] for _, m in outcomes),
                                           [m[i][2] for _, m in outcomes], [m[i][3] for _, m in outcomes],
                                           sum(m[i][4] for _, m in outcomes)))
            chosen, reason = choose_metric(pilots, margin=auto.margin)
            chains = [pilot_chains[candidates.index(chosen)] for pilot_chains, _ in outcomes]
            choice = MetricChoice(chosen, reason, tuple(pilots), tuple(skipped))
        else:
            choice = MetricChoice(metric, "fixed by the caller", (), ())
        chains = runner.map(_phase_final, chains, choice.metric, num_final, is_chosen_by_pilot=metric == "auto")
        chains, choice = _check_step_size(runner, chains, choice, settings, num_check, num_chains)
        warmup_seconds = time.perf_counter() - start
        start = time.perf_counter()
        results = runner.map(_phase_sample, chains, choice.metric, num_draws, choice.target)
        sampling_seconds = time.perf_counter() - start
    draws = np.stack([r[0] for r in results])
    logdensity = np.stack([r[1] for r in results])
    summaries = None if results[0][2] is None else np.stack([r[2] for r in results])
    infos = tuple(r[3] for r in results)
    diagnostics = summarize(draws, logdensity, summaries, num_divergent=sum(c.num_divergent for c in infos),
                            num_depth_capped=sum(c.num_depth_capped for c in infos))
    _warn_if_unreliable(diagnostics, num_chains, num_draws, settings.max_tree_depth)
    return NUTSResult(draws, logdensity, summaries, infos, choice, diagnostics, warmup_seconds, sampling_seconds)
