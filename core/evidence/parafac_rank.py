"""PARAFAC rank selection by the log marginal likelihood, estimated with STI.

Conventions: ``data`` is a dense ``(I, J, K)`` count array or a
:class:`core.sparse_tensor.SparseTensor`; the model is Poisson PARAFAC with
exponential priors (:class:`core.models.poisson_parafac.PoissonParafac`).
For each rank R, one tempered SGLD or pSGLD chain runs at each of the T + 1
temperatures of the STI grid (T counts intervals, as in :mod:`core.evidence.sti`)
and the thermodynamic integral gives log p(X | R) with a Monte-Carlo standard
error. The selected rank maximises the estimate.

Subsampling: with ``num_blocks`` = B the tensor is cut into B × B × B blocks
and iteration l uses part ``(l − 1) mod B²`` (cyclic order), the B blocks of a
part sharing no index in any mode, so the B factor-block updates are
independent (PARAFAC'18 §III); the sparse kernels process them in parallel
threads. Without ``num_blocks`` (dense data only), each iteration draws
``subset_size`` entries with replacement, as in the paper's synthetic
experiment, or uses all entries.

Estimates of E_t[log p(X | θ)]: with the block scheme (the default
``evaluate="auto"``) each chain scores its sample on all the data every
m-th kept iteration (m = ``evaluate_every``, default B), the Σ x̂ term from
factor column sums and the x log x̂ terms in one pass over the non-zeros.
The paper's per-iteration estimate on the part (eq. 7, ``before_update`` /
``after_update``) is both noisy and biased when parts are visited in cyclic
order (see :mod:`core.parallel.parafac_blocks`); with random entry subsets
``auto`` keeps ``before_update``, which is unbiased there.

Chain (R, i) draws from ``core.random.stream(seed, R, i)``, so the result does
not depend on the order or the process chains run in: with an MPI
communicator the chains are spread over the processes and the result is the
same for any number of processes. With ``distributed=True`` (compiled engine)
each Markov chain instead runs on all processes at once, its blocks spread
as in PARAFAC'18 Fig. 1 (:mod:`core.parallel.parafac_blocks`): each process
keeps its slab of the data and of A, for data too big for one process;
again the same result for any number of processes. With a checkpoint
folder, each finished chain's trace is saved and a rerun with the same
settings skips it.

References
----------
Nguyen, Şimşekli, Richard, Cemgil, IEEE SPL 2018, §III–V.
"""

import hashlib
import json
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from core.errors import ParameterError
from core.evidence.sti import power_posterior_chain, temperature_grid, thermodynamic_integral
from core.factorization.parafac_map import poisson_parafac_map
from core.io import atomic_path
from core.models.subsample import log_likelihood_estimate
from core.models.poisson_parafac import PoissonParafac
from core.parallel.parafac_blocks import run_parafac_block_chain
from core.parallel.tensor_blocks import build_block_index, owned_blocks, slab_index
from core.progress import progress_bar
from core.random import stream
from core.sparse_tensor import SparseTensor

__all__ = ["RankSelection", "select_parafac_rank", "part_schedule", "prior_trace", "full_data"]


class RankSelection(NamedTuple):
    """Log marginal likelihood per rank and the rank it selects.

    Attributes
    ----------
    ranks : ndarray of int
    log_marginal_likelihood : ndarray of float
        STI estimate of log p(X | R) per rank.
    stderr : ndarray of float
        Its Monte-Carlo standard error.
    selected_rank : int
        The rank with the largest estimate.
    results : list of core.evidence.sti.STIResult
        Per-temperature pieces of each rank's estimate.
    settings : dict
        The sampler settings used (JSON-serialisable).
    seconds : float
        Wall-clock time (chains loaded from a checkpoint cost nothing).
    """

    ranks: np.ndarray
    log_marginal_likelihood: np.ndarray
    stderr: np.ndarray
    selected_rank: int
    results: list
    settings: dict
    seconds: float


def part_schedule(index):
    """``subset_fn(rng, iteration)`` returning part ``(iteration − 1) mod B²`` of a block index."""
    parts = [index.part(p) for p in range(index.num_parts)]
    return lambda rng, iteration: parts[(iteration - 1) % len(parts)]


def prior_trace(model, rng, *, num_keep, subset_fn):
    """Log-likelihood estimates at ``num_keep`` independent prior draws: the exact t = 0 "chain".

    At t = 0 the power posterior is the prior, which can be sampled exactly,
    so no Markov chain (and none of its discretisation bias) is needed; each
    draw is scored on a subset from ``subset_fn`` like the other chains' samples.
    """
    trace = np.empty(int(num_keep))
    for iteration in range(1, int(num_keep) + 1):
        theta = model.sample_prior(rng)
        trace[iteration - 1] = log_likelihood_estimate(model, theta, subset_fn(rng, iteration))
    return trace


def full_data(rng, iteration):
    """``subset_fn`` selecting all entries."""
    return None


def _entry_schedule(num_entries, subset_size):
    return lambda rng, iteration: rng.integers(0, num_entries, size=subset_size)


def _per_temperature(value, name, num_temperatures, kind):
    """``value`` as a list with one entry per temperature (a scalar is repeated)."""
    values = np.atleast_1d(np.asarray(value, dtype=float))
    if values.ndim != 1 or values.size not in (1, num_temperatures):
        raise ParameterError(f"{name}={value!r}: expected a number or {num_temperatures} values, one per temperature")
    whole = kind is not int or np.all(values == np.round(values))
    if not (whole and np.all(np.isfinite(values)) and np.all(values > 0)):
        raise ParameterError(f"{name}={value!r}: expected positive {'integers' if kind is int else 'numbers'}")
    return [kind(v) for v in np.broadcast_to(values, (num_temperatures,))]


def _setting(values):
    """A per-temperature setting as recorded: one number when all are equal, else the list."""
    return values[0] if len(set(values)) == 1 else list(values)


def _fingerprint(data):
    digest = hashlib.sha256()
    if isinstance(data, SparseTensor):
        digest.update(np.ascontiguousarray(data.coords).tobytes())
        digest.update(np.ascontiguousarray(data.values).tobytes())
    else:
        digest.update(np.ascontiguousarray(data).tobytes())
    digest.update(repr(tuple(data.shape)).encode())
    return digest.hexdigest()[:16]


def _open_checkpoint(folder, settings):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "settings.json"
    if manifest.exists():
        saved = json.loads(manifest.read_text())
        if saved != settings:
            changed = sorted(k for k in set(saved) | set(settings) if saved.get(k) != settings.get(k))
            raise ParameterError(f"checkpoint={folder}: it holds a run with other settings ({', '.join(changed)}); "
                                 "use another folder or delete it")
    else:
        with atomic_path(manifest) as tmp:
            tmp.write_text(json.dumps(settings, indent=1, sort_keys=True))
    return folder


def select_parafac_rank(data, ranks, *, prior_rate=1.0, sampler="psgld", num_intervals=5, schedule="uniform",
                        power=5.0, num_steps=3000, num_keep=500, num_blocks=None, subset_size=None,
                        step_a=1e-8, step_b=0.51, alpha=0.99, sigma=1e-5, evaluate="auto",
                        evaluate_every=None, rule="trapezoid", exact_prior=True, prior_draws=None, init="prior",
                        map_iter=50,
                        parallel=False, engine="auto", seed=0, checkpoint=None, progress=True, comm=None,
                        distributed=False):
    """Estimate log p(X | R) for each rank by STI and select the best rank.

    Parameters
    ----------
    data : ndarray, shape (I, J, K), or SparseTensor
        Non-negative counts.
    ranks : iterable of int
        Ranks R to compare.
    prior_rate : float or sequence of 3 floats
        λ of the exponential priors on A, B, C.
    sampler : {"psgld", "sgld"}
    num_intervals : int
        T, the number of temperature intervals (T + 1 chains per rank).
    schedule, power : see :func:`core.evidence.sti.temperature_grid`
    num_steps : int or sequence of int
        Iterations per chain (L in PARAFAC'18 §V-A, K in §V-B), or one value
        per temperature of the grid (t = 0 first; that one is used only
        without ``exact_prior``): the chains near t = 1, where the power
        posterior is narrowest, are the slowest to reach it.
    num_keep : int
        Last iterations kept for the expectations.
    num_blocks : int, optional
        B of the block-parallel scheme (required for sparse data).
    subset_size : int, optional
        N_s for random entry subsets of dense data (default: all entries).
    step_a : float or sequence of float
        a of the step size (a/l)^b during burn-in, then fixed; or one value per
        temperature (e.g. to keep the final step with per-temperature lengths).
    step_b : float
    alpha, sigma : float
        pSGLD settings (PARAFAC'18 eq. 9). v averages the squared gradient
        per tensor entry, so σ must be small beside those averages: for a
        large sparse tensor they are ~nnz/N times those of a dense one, and a
        σ of 1e−5 would dominate √v and freeze the chains; scale σ by nnz/N
        there (as ``recipes/parafac_large.py`` does).
    evaluate : {"auto", "full", "before_update", "after_update"}
        What each chain records (see
        :func:`core.evidence.sti.power_posterior_chain`). ``after_update`` is
        PARAFAC'18 eq. 7 verbatim but biased upwards, since the new sample has
        just moved towards that subsample; ``before_update`` scores the
        previous sample on the same subsample, unbiased for random subsets
        but not for block parts in cyclic order; ``full`` scores the sample on
        all the data every ``evaluate_every`` kept iterations (and the t = 0
        prior draws on all the data too). ``auto``: ``full`` with
        ``num_blocks``, else ``before_update``.
    evaluate_every : int, optional
        m for ``evaluate="full"`` (default: B with the block scheme, else 1).
        The full log-likelihood moves slowly along a chain (integrated time
        ≈ 30–80 iterations on the Facebook-shaped tensor), so m = B loses
        little, and costs one pass over the non-zeros per B iterations.
    rule : {"trapezoid", "simpson"}
        Quadrature over the grid (:func:`core.evidence.sti.integration_weights`).
    exact_prior : bool
        At t = 0 use independent prior draws (:func:`prior_trace`) instead of
        a chain.
    prior_draws : int, optional
        Their number (default ``num_keep``). Independent draws have no
        autocorrelation, and the log-likelihood's spread under the prior is
        large (3–19·10⁴ on the Facebook-shaped tensor), so they are worth
        more than the chains' thinned full evaluations.
    init : {"prior", "map"}
        Start of each chain: a prior draw, or that draw improved by
        ``map_iter`` multiplicative MAP updates (:mod:`core.factorization.parafac_map`).
        MAP starts put some entries near zero, where pSGLD's first steps are
        erratic; prior starts are the default.
    map_iter : int
        MAP sweeps for ``init="map"``.
    parallel : bool
        Process the blocks of a part in parallel threads (see
        :class:`core.models.poisson_parafac.PoissonParafac`).
    engine : {"auto", "compiled", "generic"}
        ``compiled``: one numba pass per part does the gradient, the (p)SGLD
        update with per-factor-block noise streams and the log-likelihood
        (:mod:`core.parallel.parafac_blocks`; sparse data with ``num_blocks``
        only). ``generic``: the shared samplers of :mod:`core.samplers` driven
        by :func:`core.evidence.sti.power_posterior_chain`. ``auto`` picks
        ``compiled`` where it applies. Same update rule, different noise streams.
    seed : int
    checkpoint : str or Path, optional
        Folder where finished chains are saved and from which they are reloaded.
    progress : bool
        Progress bar over the chains on stderr (process 0 only).
    comm : MPI communicator, optional
        E.g. from :mod:`core.parallel.mpi`. The (rank, temperature) chains are
        spread over its processes and gathered on all of them; every process
        returns the same result, identical to a one-process run.
    distributed : bool
        With ``comm``: run each Markov chain on all processes, its blocks
        spread over them (PARAFAC'18 Fig. 1) instead of spreading whole
        chains; the exact t = 0 traces are still spread. Needs the compiled
        engine. Same result as a one-process run.

    Returns
    -------
    RankSelection

    Raises
    ------
    ParameterError
        On invalid settings, or a checkpoint folder holding another run.
    """
    started = time.perf_counter()
    ranks = np.asarray(sorted(set(int(r) for r in ranks)), dtype=np.int64)
    if ranks.size == 0 or ranks.min() < 1:
        raise ParameterError(f"ranks={ranks.tolist()} must be a non-empty list of positive integers")
    if engine not in ("auto", "compiled", "generic"):
        raise ParameterError(f"engine={engine!r}: expected 'auto', 'compiled' or 'generic'")
    if init not in ("map", "prior"):
        raise ParameterError(f"init={init!r}: expected 'map' or 'prior'")
    if sampler not in ("psgld", "sgld"):
        raise ParameterError(f"sampler={sampler!r}: expected 'psgld' or 'sgld'")
    temperatures = temperature_grid(num_intervals, schedule=schedule, power=power)
    steps_per_t = _per_temperature(num_steps, "num_steps", temperatures.size, int)
    step_a_per_t = _per_temperature(step_a, "step_a", temperatures.size, float)
    run_steps = steps_per_t[1:] if exact_prior else steps_per_t
    if not 1 <= int(num_keep) <= min(run_steps):
        raise ParameterError(f"num_keep={num_keep} must lie in [1, num_steps={min(run_steps)}]")
    if evaluate not in ("auto", "full", "before_update", "after_update"):
        raise ParameterError(f"evaluate={evaluate!r}: expected 'auto', 'full', 'before_update' or 'after_update'")
    if evaluate == "auto":
        evaluate = "full" if num_blocks is not None else "before_update"
    if evaluate_every is None:
        evaluate_every = int(num_blocks) if evaluate == "full" and num_blocks is not None else 1
    if int(evaluate_every) != evaluate_every or evaluate_every < 1:
        raise ParameterError(f"evaluate_every={evaluate_every} must be a positive integer")
    evaluate_every = int(evaluate_every) if evaluate == "full" else 1
    prior_draws = int(num_keep) if prior_draws is None else prior_draws
    if int(prior_draws) != prior_draws or prior_draws < 1:
        raise ParameterError(f"prior_draws={prior_draws} must be a positive integer")
    probe = PoissonParafac(data, int(ranks[0]), prior_rate=prior_rate)  # validates data and rates
    data = probe.data
    if probe.is_sparse and num_blocks is None:
        raise ParameterError("num_blocks is required for a SparseTensor (the block-parallel scheme); e.g. 12")
    if num_blocks is not None and subset_size is not None:
        raise ParameterError("give num_blocks (block parts) or subset_size (random entries), not both")
    if subset_size is not None and not 1 <= int(subset_size) <= probe.n_data:
        raise ParameterError(f"subset_size={subset_size} must lie in 1..{probe.n_data}")
    if engine == "compiled" and not (probe.is_sparse and num_blocks is not None):
        raise ParameterError("engine='compiled' needs a SparseTensor and num_blocks")
    compiled = engine != "generic" and probe.is_sparse and num_blocks is not None
    if distributed and not compiled:
        raise ParameterError("distributed=True needs the compiled engine: a SparseTensor and num_blocks")
    index = None
    if num_blocks is not None:
        index = build_block_index(data, int(num_blocks))
        subset_fn = part_schedule(index)
    elif subset_size is not None:
        subset_fn = _entry_schedule(probe.n_data, int(subset_size))
    else:
        subset_fn = full_data
    settings = dict(prior_rate=np.broadcast_to(np.asarray(prior_rate, float), (3,)).tolist(), sampler=sampler,
                    num_intervals=int(num_intervals), schedule=schedule, power=float(power),
                    temperatures=temperatures.tolist(), num_steps=_setting(steps_per_t), num_keep=int(num_keep),
                    num_blocks=None if num_blocks is None else int(num_blocks),
                    subset_size=None if subset_size is None else int(subset_size), step_a=_setting(step_a_per_t),
                    step_b=float(step_b), alpha=float(alpha), sigma=float(sigma), evaluate=evaluate,
                    evaluate_every=evaluate_every, rule=rule,
                    exact_prior=bool(exact_prior), prior_draws=int(prior_draws) if exact_prior else 0, init=init,
                    engine="compiled" if compiled else "generic",
                    map_iter=int(map_iter) if init == "map" else 0,
                    seed=int(seed), shape=list(probe.shape), data=_fingerprint(data))
    # every process checks the manifest; concurrent first writes are atomic and identical
    folder = _open_checkpoint(checkpoint, settings) if checkpoint is not None else None

    # Chain n of the list (Markov chains in rank-major order, then the cheap exact
    # t = 0 traces) runs on process n mod P; its stream depends on (seed, R, i)
    # only, so any P gives the same traces.
    # With distributed=True every process takes part in every Markov chain and only
    # the exact prior traces are dealt out.
    process, num_processes = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())
    chains = [(int(rank), i) for rank in ranks for i in range(temperatures.size)]
    cheap = [(rank, i) for rank, i in chains if exact_prior and temperatures[i] == 0.0]
    chains = [c for c in chains if c not in cheap] + cheap
    collective = distributed and comm is not None and num_processes > 1
    if collective:
        mine = [c for c in chains if c not in cheap] + cheap[process::num_processes]
        # this process's data slab only; the chains' kernels see no other block
        lo, hi = owned_blocks(index.num_blocks, process, num_processes)
        index = slab_index(index, lo, hi)
    else:
        mine = chains[process::num_processes]
    traces = {}
    models = {}
    with progress_bar(len(mine), desc="STI chains", enabled=progress and process == 0, unit="chain") as bar:
        for rank, i in mine:
            t = float(temperatures[i])
            if rank not in models:
                models = {rank: PoissonParafac(data, rank, prior_rate=prior_rate, parallel=parallel)}
            model = models[rank]
            path = None if folder is None else folder / f"rank{rank}_t{i}.npy"
            if path is not None and path.exists():
                traces[rank, i] = np.load(path)
            elif t == 0.0 and exact_prior:
                traces[rank, i] = prior_trace(model, stream(seed, rank, i), num_keep=int(prior_draws),
                                              subset_fn=full_data if evaluate == "full" else subset_fn)
            else:
                rng = stream(seed, rank, i)
                start = model.sample_prior(rng)
                if init == "map":
                    start = poisson_parafac_map(model, start, max_iter=map_iter, record=False).theta
                if compiled:
                    trace, _ = run_parafac_block_chain(
                        index, start, prior_rates=model.prior_rates, seed=seed, chain=(rank, i), temperature=t,
                        num_steps=steps_per_t[i], num_keep=int(num_keep), sampler=sampler, step_a=step_a_per_t[i],
                        step_b=step_b, alpha=alpha, sigma=sigma, evaluate=evaluate,
                        evaluate_every=evaluate_every, parallel=parallel, comm=comm if collective else None)
                else:
                    trace, _ = power_posterior_chain(
                        model, start, rng, temperature=t, num_steps=steps_per_t[i], num_keep=int(num_keep),
                        subset_fn=subset_fn, sampler=sampler, step_a=step_a_per_t[i], step_b=step_b, alpha=alpha,
                        sigma=sigma, evaluate=evaluate, evaluate_every=evaluate_every)
                traces[rank, i] = trace
            writer = not collective or (rank, i) in cheap or process == 0
            if path is not None and writer and not path.exists():
                with atomic_path(path) as tmp:
                    with open(tmp, "wb") as handle:
                        np.save(handle, traces[rank, i])
            bar.set_postfix(R=rank, t=f"{t:.3g}")
            bar.update()
    if comm is not None:
        for part in comm.allgather(traces):
            traces.update(part)

    grid_power = float(power) if schedule == "power" else 1.0
    results = [thermodynamic_integral(temperatures, [traces[rank, i] for i in range(temperatures.size)],
                                      rule=rule, power=grid_power) for rank in ranks]
    estimates = np.array([r.log_evidence for r in results])
    stderr = np.array([r.stderr for r in results])
    return RankSelection(ranks, estimates, stderr, int(ranks[int(np.argmax(estimates))]), results, settings,
                         time.perf_counter() - started)
