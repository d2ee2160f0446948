"""PARAFAC rank selection by STI: the Poisson PARAFAC chain factory of :mod:`sepsti.core.evidence.rank_selection`.

Conventions: ``data`` is a dense ``(I, J, K)`` count array or a
:class:`sepsti.core.sparse_tensor.SparseTensor`; the model is Poisson PARAFAC with
exponential priors (:class:`sepsti.core.models.poisson_parafac.PoissonParafac`).
Chain (R, i, r) starts from a prior draw of ``stream(seed, R, i, r)`` (or that
draw improved by MAP sweeps). The compiled engine's chains take the noise of
block b of factor mode m (0, 1, 2 for A, B, C) from
``stream(seed, R, i, r, 1 + m B + b)``
(:func:`sepsti.core.parallel.parafac_blocks.init_block_state`); the generic
engine's draw their subsets and noise from ``stream(seed, R, i, r)`` itself.

Subsampling: with ``num_blocks`` = B the tensor is cut into B × B × B blocks
and iteration l uses part ``(l − 1) mod B²`` (cyclic order), the B blocks of a
part sharing no index in any mode, so the B factor-block updates are
independent (PARAFAC'18 §III); the sparse kernels process them in parallel
threads. Without ``num_blocks`` (dense data only), each iteration draws
``subset_size`` entries with replacement, as in the paper's synthetic
experiment, or uses all entries.

Estimates of E_t[log p(X | θ)]: ``evaluate="full"`` scores the sample on all
the data every m-th kept iteration (m = B with blocks), the Σ x̂ term from
factor column sums and the x log x̂ terms in one pass over the non-zeros.
The paper's per-iteration estimate on the part (eq. 7, ``before_update`` /
``after_update``) is both noisy and biased when parts are visited in cyclic
order (see :mod:`sepsti.core.parallel.parafac_blocks`); it is unbiased for random
entry subsets.

With ``distributed=True`` (compiled engine) each Markov chain runs on all MPI
processes at once, its blocks spread as in PARAFAC'18 Fig. 1
(:mod:`sepsti.core.parallel.parafac_blocks`), for data too big for one process; the
result is the same for any number of processes.

References
----------
Nguyen, Şimşekli, Richard, Cemgil, IEEE SPL 2018, §III–V.
"""

import threading
from dataclasses import replace

import numpy as np

from sepsti.core.checks import distinct_ranks
from sepsti.core.errors import ParameterError
from sepsti.core.evidence.rank_selection import (ChainRecord, ChainSettings, Preset, TemperatureGrid, data_digest,
                                                 resolve_settings, select_rank)
from sepsti.core.evidence.reference_path import REFERENCE_PRESET
from sepsti.core.evidence.sti import power_posterior_chain
from sepsti.core.models.subsample import log_likelihood_estimate
from sepsti.core.random import stream
from sepsti.core.sparse_tensor import SparseTensor

__all__ = ["PRESETS", "ParafacChains", "full_data", "part_schedule", "prior_trace", "select_parafac_rank"]

#: Named settings of :func:`select_parafac_rank`. With the (p)SGLD presets the data decide between blocks
#: and entry subsets: give ``num_blocks`` or ``subset_size``, else every iteration uses all the data.
PRESETS = {
    "reference": REFERENCE_PRESET,
    "blocks": Preset(TemperatureGrid(10, "power", 5.0, "simpson"),
                     ChainSettings(sampler="psgld", num_steps=3000, num_keep=500, step_a=1e-8, step_b=0.51,
                                   sigma=1e-5, num_blocks=None, evaluate="full", init="prior",
                                   init_iterations=0, exact_prior=True),
                     4),
    "paper": Preset(TemperatureGrid(5, "uniform", 1.0, "trapezoid"),
                    ChainSettings(sampler="psgld", num_steps=3000, num_keep=500, step_a=1e-8, step_b=0.51,
                                  sigma=1e-5, num_blocks=None, evaluate="before_update", init="prior",
                                  init_iterations=0, exact_prior=True),
                    1),
}


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


def _fingerprint(data):
    """The data digest of a dense tensor or of a sparse one's coordinates and values."""
    arrays = [data.coords, data.values] if isinstance(data, SparseTensor) else [data]
    return data_digest(arrays + [np.asarray(data.shape)])


class ParafacChains:
    """Tempered (p)SGLD chains of Poisson PARAFAC for :func:`sepsti.core.evidence.rank_selection.select_rank`.

    Parameters
    ----------
    data : ndarray or SparseTensor
    chain : ChainSettings
    prior_rate : float or sequence of 3 floats
    engine : {"auto", "compiled", "generic"}
        ``compiled``: one numba pass per part does the gradient, the (p)SGLD
        update and the log-likelihood (sparse data with blocks only);
        ``generic``: the shared samplers driven by
        :func:`sepsti.core.evidence.sti.power_posterior_chain`. Same update rule,
        different noise streams.
    parallel : bool
        Process the blocks of a part in parallel threads.
    comm : MPI communicator, optional
        With ``distributed``: the chains' blocks are spread over its processes.
    distributed : bool
    """

    def __init__(self, data, chain, *, prior_rate, engine="auto", parallel=False, comm=None, distributed=False):
        from sepsti.core.models.poisson_parafac import PoissonParafac
        from sepsti.core.parallel.tensor_blocks import build_block_index, owned_blocks, slab_index

        if engine not in ("auto", "compiled", "generic"):
            raise ParameterError(f"engine={engine!r}: expected 'auto', 'compiled' or 'generic'")
        if chain.init not in ("map", "prior"):
            raise ParameterError(f"init={chain.init!r}: expected 'map' or 'prior'")
        probe = PoissonParafac(data, 1, prior_rate=prior_rate)  # validates data and rates
        self.data = probe.data
        if probe.is_sparse and chain.num_blocks is None:
            raise ParameterError("num_blocks is required for a SparseTensor (the block-parallel scheme); e.g. 12")
        if chain.subset_size is not None and not chain.subset_size <= probe.n_data:
            raise ParameterError(f"subset_size={chain.subset_size} must lie in 1..{probe.n_data}")
        if engine == "compiled" and not (probe.is_sparse and chain.num_blocks is not None):
            raise ParameterError("engine='compiled' needs a SparseTensor and num_blocks")
        self.compiled = engine != "generic" and probe.is_sparse and chain.num_blocks is not None
        if distributed and not self.compiled:
            raise ParameterError("distributed=True needs the compiled engine: a SparseTensor and num_blocks")
        self.chain = chain
        self.prior_rate = prior_rate
        self.parallel = bool(parallel)
        self.index = None
        if chain.num_blocks is not None:
            self.index = build_block_index(self.data, int(chain.num_blocks))
            self.subset_fn = part_schedule(self.index)
        elif chain.subset_size is not None:
            self.subset_fn = _entry_schedule(probe.n_data, int(chain.subset_size))
        else:
            self.subset_fn = full_data
        self.collective = bool(distributed and comm is not None and comm.Get_size() > 1)
        self.comm = comm if self.collective else None
        if self.collective:
            # this process's data slab only; the chains' kernels see no other block
            lo, hi = owned_blocks(self.index.num_blocks, comm.Get_rank(), comm.Get_size())
            self.index = slab_index(self.index, lo, hi)
        self.settings = {"model": {"name": "poisson_parafac",
                                   "prior_rate": np.broadcast_to(np.asarray(prior_rate, float), (3,)).tolist()},
                         "chain": chain.as_dict(), "engine": "compiled" if self.compiled else "generic",
                         "shape": list(probe.shape)}
        self.data_digest = _fingerprint(self.data)
        self._models = {}
        self._lock = threading.Lock()

    def _model(self, rank):
        from sepsti.core.models.poisson_parafac import PoissonParafac

        with self._lock:
            if rank not in self._models:
                self._models = {rank: PoissonParafac(self.data, rank, prior_rate=self.prior_rate,
                                                     parallel=self.parallel)}
            return self._models[rank]

    def _is_prior_draw(self, task):
        return self.chain.exact_prior and task.temperature == 0.0

    def trace_length(self, task):
        if self._is_prior_draw(task):
            return int(self.chain.prior_draws or self.chain.num_keep)
        if self.chain.evaluate == "full":
            return -(-int(self.chain.num_keep) // int(self.chain.evaluate_every))
        return int(self.chain.num_keep)

    def units(self, task):
        return 1

    def cost(self, task):
        if self._is_prior_draw(task):
            return 0.05 * task.rank * self.trace_length(task)
        return float(task.rank * self.chain.steps_at(task.index))

    def prepare(self, tasks, *, seed, comm, threads):
        """Compile the block kernels and the model's (or load them from numba's cache) with one step of a chain
        and one log-likelihood, on process 0 first; nothing else is shared between chains."""
        if not self.compiled or not tasks:
            return
        from sepsti.core.parallel.mpi import root_first
        from sepsti.core.parallel.parafac_blocks import run_parafac_block_chain

        chain, rank = self.chain, min(task.rank for task in tasks)
        model = self._model(rank)
        start = model.sample_prior(np.random.default_rng(0))  # discarded with the step: no chain's stream

        def compile_kernels():
            one_step = replace(chain, num_steps=1, num_keep=1).at(0)
            run_parafac_block_chain(self.index, start, one_step, prior_rates=model.prior_rates, seed=seed,
                                    chain=(rank, 0, 0), temperature=1.0, parallel=self.parallel)
            model.log_likelihood(start, self.index.part(0))  # the model's kernel: prior draws, MAP starts

        root_first(comm, compile_kernels)

    def run(self, task, *, seed, progress):
        import time

        from sepsti.core.factorization.parafac_map import poisson_parafac_map
        from sepsti.core.parallel.parafac_blocks import run_parafac_block_chain

        chain = self.chain
        model = self._model(task.rank)
        rng = stream(seed, *task.key)
        started, cpu_started = time.perf_counter(), time.thread_time()
        if self._is_prior_draw(task):
            subset_fn = full_data if chain.evaluate == "full" else self.subset_fn
            trace = prior_trace(model, rng, num_keep=self.trace_length(task), subset_fn=subset_fn)
        else:
            start = model.sample_prior(rng)
            if chain.init == "map":
                start = poisson_parafac_map(model, start, max_iter=chain.init_iterations, record=False).theta
            settings = chain.at(task.index)
            if self.compiled:
                trace, _ = run_parafac_block_chain(self.index, start, settings, prior_rates=model.prior_rates,
                                                   seed=seed, chain=task.key, temperature=task.temperature,
                                                   parallel=self.parallel, comm=self.comm)
            else:
                trace, _ = power_posterior_chain(model, start, rng, temperature=task.temperature, chain=settings,
                                                 subset_fn=self.subset_fn)
        seconds = time.perf_counter() - started
        trace = np.asarray(trace, dtype=np.float64)
        return ChainRecord(trace, seconds, time.thread_time() - cpu_started, seconds if self.compiled else 0.0,
                           np.nan, bool(np.all(np.isfinite(trace))))


def select_parafac_rank(data, ranks, *, preset="reference", grid=None, chain=None, num_replicates=None, prior_rate=1.0,
                        engine="auto", parallel=False, distributed=False, seed=0, checkpoint=None, comm=None,
                        threads=1, progress=False, **overrides):
    """Estimate log p(X | R) of Poisson PARAFAC for each rank by STI and select the largest.

    Parameters
    ----------
    data : ndarray, shape (I, J, K), or SparseTensor
        Non-negative counts, I, J, K >= 1.
    ranks : iterable of int
    preset : {"reference", "blocks", "paper"}
        Settings from :data:`PRESETS` (``reference``, the default: the path from a log-space
        Gaussian reference with full-data MALA, :mod:`sepsti.core.evidence.reference_path`; ``blocks``:
        (p)SGLD chains from the prior, block-parallel on sparse tensors); ``grid``, ``chain``, ``num_replicates`` and
        ``**overrides`` (single fields such as ``num_blocks=12``) replace its parts.
        With ``evaluate="full"`` and blocks, ``evaluate_every`` defaults to B.
    grid : TemperatureGrid, optional
    chain : ChainSettings, optional
        Per-temperature ``num_steps``/``step_a`` let the chains near t = 1,
        where the power posterior is narrowest, run longer. pSGLD's σ must be
        small beside the squared-gradient averages, which for a large sparse
        tensor are ~nnz/N times those of a dense one: scale σ by nnz/N there
        (``recipes/parafac_large.py``).
    num_replicates : int, optional
    prior_rate : float or sequence of 3 floats
        λ of the exponential priors on A, B, C.
    engine, parallel, distributed
        See :class:`ParafacChains`.
    seed, checkpoint, comm, threads, progress
        See :func:`sepsti.core.evidence.rank_selection.select_rank` (``threads`` defaults to 1:
        ``parallel`` uses the cores inside each chain instead).

    Returns
    -------
    sepsti.core.evidence.rank_selection.RankSelection
    """
    ranks = sorted(distinct_ranks(ranks))
    shape = tuple(data.shape) if isinstance(data, SparseTensor) else np.shape(data)
    if 0 in shape:
        raise ParameterError(f"data has shape {shape}: expected at least one entry along every axis")
    if (chain is None and "evaluate_every" not in overrides and overrides.get("num_blocks") is not None
            and overrides.get("evaluate", PRESETS[preset].chain.evaluate if preset in PRESETS else None) == "full"):
        overrides["evaluate_every"] = overrides["num_blocks"]
    grid, chain, num_replicates = resolve_settings(PRESETS, preset, grid=grid, chain=chain,
                                                   num_replicates=num_replicates, **overrides)
    if not chain.exact_prior:
        chain = replace(chain, prior_draws=None)
    if chain.sampler == "mala":
        from sepsti.core.evidence.reference_path import ParafacLogDensity, ReferencePathChains

        density = ParafacLogDensity(data, prior_rate)
        factory = ReferencePathChains(density, chain, data_digest=_fingerprint(density.model.data),
                                      settings={"prior_rate": list(density.rates),
                                                "shape": list(density.model.shape)})
    else:
        factory = ParafacChains(data, chain, prior_rate=prior_rate, engine=engine, parallel=parallel, comm=comm,
                                distributed=distributed)
    return select_rank(factory, ranks, grid=grid, num_replicates=num_replicates, seed=seed, checkpoint=checkpoint,
                       comm=comm, threads=threads, progress=progress)
