"""Poisson NMF evidence by thermodynamic integration from a Gaussian reference in log space.

Conventions
-----------
X is (n_rows, n_cols); W (n_rows, R), H (R, n_cols) carry Exp(lambda) priors.
The chains work on U = log W, V = log H, where the prior density includes
the Jacobian (p(u) = lambda exp(u - lambda e^u)).

The path runs from a normalised Gaussian q(U, V) to the posterior:
pi_b ∝ q^(1-b) (p(U, V) p(X | U, V))^b, b from 0 to 1, so that

    log p(X | R) = int_0^1 E_b[log p(U, V) + log p(X | U, V) - log q(U, V)] db,

with exact draws of q at b = 0. The prior-to-posterior path of the papers
(q = the prior) crosses from a scale of 1/lambda to the data's: at speech
scale (lambda = 4e-4, 10^9 counts) E_t[log p(X | theta)] falls by nine
orders of magnitude over t < 0.01 and no affordable chain or grid follows
it (``docs/rank_selection.md``). With q close to the posterior the
integrand varies by thousands of nats at most and a few temperatures do.

q is the Laplace approximation of the posterior at its log-space mode,
kept where it is cheap and exact: independent coordinates with the
tempered curvature of scaling each entry (its expected count) -- except
along each component's scale ridge e_k (U[:, k] + c, V[k, :] - c leaves
W H unchanged), where the likelihood is flat and the prior alone sets the
width. So q = N(m, D^-1 + sum_k a_k e_k e_k^T); its density, gradient and
draws cost O(parameters). Each chain is Metropolis-adjusted Langevin (MALA)
with q's covariance as its metric, its step adapted during burn-in towards
an acceptance of 0.57 and then fixed, so no discretisation bias remains.

Label switching: for b < 1, q holds the chain in one labelling of the
components, so the path measures the posterior mass of one of the R!
equivalent labellings; where they do not overlap (components clearly
distinct, as with many counts) log p(X | R) = that + log R!, which the
factory adds (:meth:`NMFReferenceChains.log_offset`). Where components
overlap (ranks above the data's, few counts) this overstates the evidence
by at most log R!.
"""

import hashlib
import math
from typing import NamedTuple

import numpy as np

from core.errors import ParameterError
from core.evidence.rank_selection import SHARED_KEY, ChainRecord
from core.random import stream

__all__ = ["LogSpaceReference", "NMFReferenceChains", "log_space_mode", "reference_at_mode"]

#: MALA's acceptance target during burn-in (Roberts & Rosenthal 1998).
TARGET_ACCEPTANCE = 0.57


class LogSpaceReference(NamedTuple):
    """N(m, D^-1 + sum_k a_k e_k e_k^T) on (U, V), e_k = (+1 on U[:, k], -1 on V[k, :]).

    Attributes
    ----------
    mean_U, mean_V : ndarray
        m.
    precision_U, precision_V : ndarray
        D, the conditional precision of each coordinate.
    ridge_precision : ndarray, shape (R,)
        Precision of each component's scale along e_k.
    """

    mean_U: np.ndarray
    mean_V: np.ndarray
    precision_U: np.ndarray
    precision_V: np.ndarray
    ridge_precision: np.ndarray

    @property
    def _ridge_norm(self):  # e_k^T D e_k
        return self.precision_U.sum(axis=0) + self.precision_V.sum(axis=1)

    def _projection(self, zU, zV):  # e_k^T D z
        return (self.precision_U * zU).sum(axis=0) - (self.precision_V * zV).sum(axis=1)

    def quadratic(self, zU, zV):
        """z^T S^-1 z (Sherman-Morrison per component: the ridges have disjoint supports)."""
        d = self._ridge_norm
        coefficient = 1.0 / d - self.ridge_precision / d ** 2
        p = self._projection(zU, zV)
        return float(np.sum(self.precision_U * zU ** 2) + np.sum(self.precision_V * zV ** 2)
                     - np.sum(coefficient * p ** 2))

    def log_density(self, U, V):
        d = self._ridge_norm
        size = self.precision_U.size + self.precision_V.size
        log_det = (-np.sum(np.log(self.precision_U)) - np.sum(np.log(self.precision_V))
                   + np.sum(np.log(d / self.ridge_precision)))
        return -0.5 * (size * np.log(2 * np.pi) + log_det) - 0.5 * self.quadratic(U - self.mean_U, V - self.mean_V)

    def grad_log_density(self, U, V):
        zU, zV = U - self.mean_U, V - self.mean_V
        d = self._ridge_norm
        coefficient = 1.0 / d - self.ridge_precision / d ** 2
        p = coefficient * self._projection(zU, zV)
        return -self.precision_U * (zU - p[None, :]), -self.precision_V * (zV + p[:, None])

    def times_covariance(self, gU, gV):
        """S g."""
        a = 1.0 / self.ridge_precision - 1.0 / self._ridge_norm
        e = a * (gU.sum(axis=0) - gV.sum(axis=1))
        return gU / self.precision_U + e[None, :], gV / self.precision_V - e[:, None]

    def noise(self, rng, scale=1.0):
        """scale S^(1/2) xi: D^(-1/2) xi with its D-projection on each ridge replaced by a ridge draw."""
        yU = rng.standard_normal(self.precision_U.shape) / np.sqrt(self.precision_U)
        yV = rng.standard_normal(self.precision_V.shape) / np.sqrt(self.precision_V)
        along = self._projection(yU, yV) / self._ridge_norm
        c = rng.standard_normal(self.ridge_precision.shape) / np.sqrt(self.ridge_precision)
        return scale * (yU + (c - along)[None, :]), scale * (yV - (c - along)[:, None])

    def sample(self, rng):
        zU, zV = self.noise(rng)
        return self.mean_U + zU, self.mean_V + zV


def log_space_mode(X, rank, rng, *, prior_rate, iterations):
    """The mode of the posterior of (log W, log H): MAP-EM with the Jacobian's pseudo-count of one per entry.

    Starts from W, H ~ U(0.5, 1.5) sqrt(mean(X) / R) drawn from ``rng``; the
    pseudo-counts keep every entry positive.
    """
    level = np.sqrt(max(float(X.mean()), np.finfo(np.float64).tiny) / rank)
    W = level * rng.uniform(0.5, 1.5, size=(X.shape[0], rank))
    H = level * rng.uniform(0.5, 1.5, size=(rank, X.shape[1]))
    for _ in range(int(iterations)):
        W = (W * ((X / (W @ H)) @ H.T) + 1.0) / (H.sum(axis=1)[None, :] + prior_rate)
        H = (H * (W.T @ (X / (W @ H))) + 1.0) / (W.sum(axis=0)[:, None] + prior_rate)
    return W, H


def reference_at_mode(W, H, prior_rate):
    """q at a mode (W, H): each entry's expected count as its precision, the prior's curvature on each ridge."""
    return LogSpaceReference(np.log(W), np.log(H), W * (H.sum(axis=1)[None, :] + prior_rate),
                             H * (W.sum(axis=0)[:, None] + prior_rate), prior_rate * (W.sum(axis=0) + H.sum(axis=1)))


class _Density:
    """log p(U, V) + log p(X | U, V) and its gradient, in float64 with BLAS-shaped products."""

    def __init__(self, X, prior_rate):
        from scipy.special import gammaln

        self.X = X
        self.prior_rate = prior_rate
        self.log_factorial = float(gammaln(X + 1.0).sum())

    def __call__(self, U, V):
        W, H = np.exp(U), np.exp(V)
        WH = W @ H
        ratio = self.X / WH - 1.0
        log_likelihood = float(np.sum(self.X * np.log(WH)) - WH.sum()) - self.log_factorial
        log_prior = float((U.size + V.size) * np.log(self.prior_rate) + U.sum() + V.sum()
                          - self.prior_rate * (W.sum() + H.sum()))
        return (log_likelihood + log_prior, W * (ratio @ H.T) + 1.0 - self.prior_rate * W,
                H * (W.T @ ratio) + 1.0 - self.prior_rate * H)


class NMFReferenceChains:
    """MALA chains on the path from :class:`LogSpaceReference` to the Poisson NMF posterior.

    A chain factory of :func:`core.evidence.rank_selection.select_rank`:
    ``prepare`` finds each (rank, replicate)'s log-space mode and q (from
    ``stream(seed, R, SHARED_KEY, r)``); chain (R, i, r) starts from a draw of
    q and samples pi_b at b = t_i; at b = 0 it takes exact draws of q. Its
    trace holds log p(U, V) + log p(X | U, V) - log q(U, V) of the kept
    iterations.

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
    chain : ChainSettings
        ``sampler="mala"``, ``num_steps``, ``num_keep``, ``init_iterations``
        (EM iterations of the mode), ``exact_prior`` (exact q draws at b = 0,
        ``prior_draws`` of them).
    prior_rate : float
    model_settings : dict
    """

    collective = False

    def __init__(self, X, chain, *, prior_rate, model_settings):
        if chain.sampler != "mala":
            raise ParameterError(f"sampler={chain.sampler!r}: the reference path runs 'mala' chains")
        if chain.num_blocks is not None or chain.subset_size is not None:
            raise ParameterError("the reference path uses full-data gradients: give num_blocks=None")
        self.X = np.asarray(X, dtype=np.float64)
        self.chain = chain
        self.prior_rate = float(prior_rate)
        self.density = _Density(self.X, self.prior_rate)
        self.settings = {"model": {"name": "poisson_nmf", "prior_rate": self.prior_rate, **model_settings},
                         "path": "log_space_reference", "chain": chain.as_dict(), "shape": list(X.shape)}
        digest = hashlib.sha256(str(X.shape).encode())
        digest.update(np.ascontiguousarray(self.X).tobytes())
        self.data_digest = digest.hexdigest()[:32]
        self._references = {}

    def log_offset(self, rank):
        """log R!: the path measures one of the R! labellings of the components."""
        return math.lgamma(rank + 1)

    def _is_exact(self, task):
        return self.chain.exact_prior and task.temperature == 0.0

    def trace_length(self, task):
        return int(self.chain.prior_draws or self.chain.num_keep) if self._is_exact(task) else int(self.chain.num_keep)

    def units(self, task):
        return self.trace_length(task) if self._is_exact(task) else self.chain.steps_at(task.index)

    def cost(self, task):
        return (task.rank + 4.0) * self.units(task)

    def prepare(self, tasks, *, seed, comm, threads):
        """The mode and q of every (rank, replicate) still to run (cheap beside the chains; every process)."""
        for rank, replicate in sorted({(task.rank, task.replicate) for task in tasks}):
            if (rank, replicate) not in self._references:
                W, H = log_space_mode(self.X, rank, stream(seed, rank, SHARED_KEY, replicate),
                                      prior_rate=self.prior_rate, iterations=max(self.chain.init_iterations, 1))
                self._references[rank, replicate] = reference_at_mode(W, H, self.prior_rate)

    def run(self, task, *, seed, progress):
        import time

        from core.parallel.blocks import single_threaded_blas

        started, cpu_started = time.perf_counter(), time.thread_time()
        q = self._references[task.rank, task.replicate]
        rng = stream(seed, *task.key)
        with single_threaded_blas():
            if self._is_exact(task):
                trace = np.empty(self.trace_length(task))
                for k in range(trace.size):
                    U, V = q.sample(rng)
                    trace[k] = self.density(U, V)[0] - q.log_density(U, V)
                progress(trace.size)
            else:
                trace = self._mala(q, task.temperature, rng, progress, self.chain.steps_at(task.index))
        finite = bool(np.all(np.isfinite(trace)))
        return ChainRecord(trace, time.perf_counter() - started, time.thread_time() - cpu_started, 0.0, np.nan,
                           finite)

    def _mala(self, q, b, rng, progress, num_steps, stride=25):
        keep = int(self.chain.num_keep)
        burn_in = num_steps - keep

        def target(U, V):
            value, gU, gV = self.density(U, V)
            log_q = q.log_density(U, V)
            qU, qV = q.grad_log_density(U, V)
            return (1 - b) * log_q + b * value, (1 - b) * qU + b * gU, (1 - b) * qV + b * gV, value - log_q

        U, V = q.sample(rng)
        current = target(U, V)
        step = 0.5
        trace = np.empty(keep)
        for k in range(num_steps):
            driftU, driftV = q.times_covariance(current[1], current[2])
            noiseU, noiseV = q.noise(rng, step)
            U2 = U + 0.5 * step ** 2 * driftU + noiseU
            V2 = V + 0.5 * step ** 2 * driftV + noiseV
            proposal = target(U2, V2)
            backU, backV = q.times_covariance(proposal[1], proposal[2])
            forward = q.quadratic(U2 - U - 0.5 * step ** 2 * driftU, V2 - V - 0.5 * step ** 2 * driftV)
            backward = q.quadratic(U - U2 - 0.5 * step ** 2 * backU, V - V2 - 0.5 * step ** 2 * backV)
            log_accept = proposal[0] - current[0] + 0.5 * (forward - backward) / step ** 2
            if not np.isfinite(log_accept):
                log_accept = -np.inf
            if np.log(rng.uniform()) < log_accept:
                U, V, current = U2, V2, proposal
            if k < burn_in:  # Robbins-Monro on log step, then fixed
                step *= np.exp(0.1 * (np.exp(min(log_accept, 0.0)) - TARGET_ACCEPTANCE))
            else:
                trace[k - burn_in] = current[3]
            if (k + 1) % stride == 0 or k + 1 == num_steps:
                progress(stride if (k + 1) % stride == 0 else num_steps % stride)
        return trace
