"""Cost of one block-parallel iteration on a sparse Facebook-sized tensor, against non-zeros and B.

For tensors of shape 42390 × 39986 × 1506 drawn from Poisson PARAFAC with
about ``nnz`` non-zeros, and B × B × B blocks, this times per part (one
iteration of the block-parallel scheme):

* ``kernel``: the sparse log-likelihood and gradient of the part (numba, one
  thread), and ``threads``: the same with the part's B blocks in parallel
  numba threads;
* ``numpy``: the same quantities by a straightforward vectorised NumPy
  computation over the part's non-zeros (gather, ``np.add.at`` scatter) and
  column sums: the peer, checked to agree with the kernel;
* ``iteration``: a whole pSGLD iteration (gradient, preconditioner, noise,
  mirroring, and the log-likelihood estimate) with the generic samplers of
  :mod:`sepsti.core.samplers`, and ``compiled``: the same with the one-pass numba part
  update of :mod:`sepsti.core.parallel.parafac_blocks` (the default engine for sparse data),
  also per entry-update: every iteration moves all (I + J + K) R factor entries;
* ``full``: the full-data log-likelihood that STI's chains record every B-th
  kept iteration (``evaluate="full"``: Σ x̂ from column sums, one pass over the
  non-zeros per slab of A-blocks), against the NumPy peer ``numpy_full``
  (chunked gathers over all non-zeros), and its cost per iteration at m = B
  relative to the compiled iteration.

Also reported: the simulator's time and peak traced memory, and the time to
build the block index.

Both chains use parafac_large's step (1 % of the prior scale per iteration).
Medians over all B² parts for the kernels; the compiled chain is timed over
max(8, B²) iterations, the generic one over 8.

Run: ``python recipes/benchmarks/parafac_scaling.py [--quick] [--out DIR] [--rank R] [--clock wall|cpu]``.
"""

import sys
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import positive_int, recipe_parser, run_recipe, write_results  # noqa: E402

from sepsti.core.evidence.parafac_rank import part_schedule  # noqa: E402
from sepsti.core.evidence.sti import LangevinSettings, power_posterior_chain  # noqa: E402
from sepsti.core.models.poisson_parafac import ParafacFactors, PoissonParafac  # noqa: E402
from sepsti.core.parallel.parafac_blocks import run_parafac_block_chain, slab_log_likelihoods  # noqa: E402
from sepsti.core.parallel.tensor_blocks import build_block_index  # noqa: E402
from sepsti.core.random import stream  # noqa: E402
from sepsti.corpora.tensors import FACEBOOK_SHAPE, prior_rate_for_count, simulate_sparse  # noqa: E402

NAME = "parafac_scaling"


def numpy_part(theta, part):
    """Peer: log-likelihood and gradient of a part with plain NumPy (no numba)."""
    A, B, C = theta
    grads = [np.zeros_like(A), np.zeros_like(B), np.zeros_like(C)]
    total = 0.0
    for (start, stop, ranges) in zip(part.starts, part.stops, part.ranges):
        (i0, i1), (j0, j1), (k0, k1) = ranges
        sa, sb, sc = A[i0:i1].sum(0), B[j0:j1].sum(0), C[k0:k1].sum(0)
        coords, x = part.coords[start:stop], part.values[start:stop]
        a, b, c = A[coords[:, 0]], B[coords[:, 1]], C[coords[:, 2]]
        xhat = np.einsum("nr,nr,nr->n", a, b, c)
        from scipy.special import gammaln

        total += float(np.sum(x * np.log(xhat) - gammaln(x + 1.0)) - np.sum(sa * sb * sc))
        w = (x / xhat)[:, None]
        np.add.at(grads[0], coords[:, 0], w * b * c)
        np.add.at(grads[1], coords[:, 1], w * a * c)
        np.add.at(grads[2], coords[:, 2], w * a * b)
        grads[0][i0:i1] -= sb * sc
        grads[1][j0:j1] -= sa * sc
        grads[2][k0:k1] -= sa * sb
    return total, ParafacFactors(*grads)


def numpy_full(theta, tensor, chunk=262_144):
    """Peer: the full log-likelihood with plain NumPy, Σ x̂ from column sums, non-zeros in chunks."""
    from scipy.special import gammaln

    A, B, C = theta
    total = -float(np.sum(A.sum(0) * B.sum(0) * C.sum(0)))
    for start in range(0, tensor.nnz, chunk):
        coords, x = tensor.coords[start:start + chunk], tensor.values[start:start + chunk]
        xhat = np.einsum("nr,nr,nr->n", A[coords[:, 0]], B[coords[:, 1]], C[coords[:, 2]])
        total += float(np.sum(x * np.log(xhat) - gammaln(x + 1.0)))
    return total


CLOCK = time.perf_counter


def median_time(fn, repeats):
    times = []
    for r in range(repeats):
        start = CLOCK()
        fn(r)
        times.append(CLOCK() - start)
    return float(np.median(times))


def main():
    parser = recipe_parser(f"benchmarks/{NAME}", __doc__.splitlines()[0], plot=True)
    parser.add_argument("--rank", type=positive_int, default=11, help="model rank R (default 11)")
    parser.add_argument("--parts", type=positive_int, default=24, help="parts timed per setting (default 24)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time, or this process's CPU time (steadier on a shared machine; "
                             "the threads column then sums its threads)")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.perf_counter if args.clock == "wall" else time.process_time
    sizes = (100_000, 1_000_000) if args.quick else (100_000, 300_000, 1_000_000, 3_000_000)
    blocks = (4, 12) if args.quick else (1, 4, 8, 12, 16, 24)
    rows = []
    for nnz in sizes:
        rate = prior_rate_for_count(FACEBOOK_SHAPE, 5, nnz)
        tracemalloc.start()
        start = time.perf_counter()
        X, _ = simulate_sparse(FACEBOOK_SHAPE, 5, prior_rate=rate, rng=stream(args.seed, nnz))
        simulate_seconds = time.perf_counter() - start
        simulate_peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
        tracemalloc.stop()
        model = PoissonParafac(X, args.rank, prior_rate=rate)
        theta = model.sample_prior(stream(args.seed, 1))
        print(f"nnz={X.nnz}: simulated in {simulate_seconds:.2f} s, peak {simulate_peak:.0f} MiB", flush=True)
        for num_blocks in blocks:
            start = time.perf_counter()
            index = build_block_index(X, num_blocks)
            index_seconds = time.perf_counter() - start
            parts = [index.part(p) for p in range(index.num_parts)][:args.parts]
            threaded = PoissonParafac(X, args.rank, prior_rate=rate, parallel=True)
            model.log_likelihood_and_grad(theta, parts[0])  # compile / load the kernels
            threaded.log_likelihood_and_grad(theta, parts[0])
            kernel = median_time(lambda r: model.log_likelihood_and_grad(theta, parts[r % len(parts)]), len(parts))
            kernel_threads = median_time(lambda r: threaded.log_likelihood_and_grad(theta, parts[r % len(parts)]),
                                         len(parts))
            peer_repeats = min(len(parts), 6)
            peer = median_time(lambda r: numpy_part(theta, parts[r % len(parts)]), peer_repeats)
            ours, peer_result = model.log_likelihood_and_grad(theta, parts[0]), numpy_part(theta, parts[0])
            agree = bool(np.isclose(ours[0], peer_result[0], rtol=1e-9)
                         and all(np.allclose(a, b, rtol=1e-8, atol=1e-10) for a, b in zip(ours[1], peer_result[1])))
            subset_fn = part_schedule(index)
            steps = 8
            # a step of 1 % of the prior scale per iteration, as in parafac_large (keeps the chain in range)
            step_a = (0.01 / (rate * float(np.prod(X.shape, dtype=np.float64)))) ** (1 / 0.51)
            start = CLOCK()
            power_posterior_chain(model, theta, stream(args.seed, 2), temperature=1.0, subset_fn=subset_fn,
                                  chain=LangevinSettings(num_steps=steps, num_keep=steps, sampler="psgld",
                                                         step_a=step_a))
            iteration = (CLOCK() - start) / steps
            chain = dict(prior_rates=model.prior_rates, seed=args.seed, chain=(1, 1), temperature=1.0)
            compiled_steps = max(steps, num_blocks ** 2)
            settings = LangevinSettings(num_steps=compiled_steps, num_keep=compiled_steps, sampler="psgld",
                                        step_a=step_a, evaluate="before_update")
            run_parafac_block_chain(index, theta, replace(settings, num_steps=1, num_keep=1), **chain)  # compile / load
            start = CLOCK()
            run_parafac_block_chain(index, theta, settings, **chain)
            compiled = (CLOCK() - start) / compiled_steps
            full = median_time(lambda r: float(np.sum(slab_log_likelihoods(index, theta))), 5)
            full_peer = median_time(lambda r: numpy_full(theta, X), 3)
            full_agree = bool(np.isclose(np.sum(slab_log_likelihoods(index, theta)), numpy_full(theta, X), rtol=1e-9))
            entry_updates = sum(f.size for f in theta)
            row = dict(nnz=X.nnz, num_blocks=num_blocks, part_nnz=int(np.mean([p.nnz for p in parts])),
                       kernel_ms=kernel * 1e3, threads_ms=kernel_threads * 1e3, numpy_ms=peer * 1e3,
                       speedup=peer / kernel, agree=agree,
                       iteration_ms=iteration * 1e3, compiled_ms=compiled * 1e3,
                       compiled_ns_per_entry=compiled * 1e9 / entry_updates, full_ms=full * 1e3,
                       full_numpy_ms=full_peer * 1e3, full_agree=full_agree,
                       full_overhead=full / (num_blocks * compiled), index_seconds=index_seconds,
                       simulate_seconds=simulate_seconds, simulate_peak_mib=simulate_peak)
            rows.append(row)
            print(f"  B={num_blocks:2d} part nnz={row['part_nnz']:8d}  kernel {row['kernel_ms']:8.2f} ms  "
                  f"threads {row['threads_ms']:8.2f} ms  "
                  f"numpy {row['numpy_ms']:8.2f} ms  ratio {row['speedup']:5.1f}x  agree={agree}  "
                  f"pSGLD iteration {row['iteration_ms']:8.1f} ms (compiled {row['compiled_ms']:7.2f} ms = "
                  f"{row['compiled_ns_per_entry']:4.1f} ns per entry-update)  "
                  f"full log-likelihood {row['full_ms']:7.2f} ms (numpy {row['full_numpy_ms']:7.2f} ms, "
                  f"ratio {full_peer / full:4.1f}x, agree={full_agree}; at m = B per kept iteration: "
                  f"+{100 * row['full_overhead']:.0f} %)  index {index_seconds:.2f} s", flush=True)
    write_results(args, {"shape": FACEBOOK_SHAPE, "rank": args.rank, "clock": args.clock, "rows": rows},
                  figure(rows))


def figure(rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for nnz in sorted({r["nnz"] for r in rows}):
        sel = [r for r in rows if r["nnz"] == nnz]
        b = [r["num_blocks"] for r in sel]
        axes[0].plot(b, [r["kernel_ms"] for r in sel], "o-", label=f"kernel, nnz={nnz:.2g}")
        axes[0].plot(b, [r["numpy_ms"] for r in sel], "x--", label=f"numpy, nnz={nnz:.2g}")
        axes[1].plot(b, [r["iteration_ms"] for r in sel], "o-", label=f"generic, nnz={nnz:.2g}")
        axes[1].plot(b, [r["compiled_ms"] for r in sel], "x--", label=f"compiled, nnz={nnz:.2g}")
    for ax, title in zip(axes, ("log-likelihood + gradient per part", "whole pSGLD iteration")):
        ax.set_xlabel("B")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    run_recipe(main, f"benchmarks/{NAME}")
