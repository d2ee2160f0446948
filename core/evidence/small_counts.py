"""Log marginal likelihood of Poisson NMF on small counts: W integrated out exactly, H by importance sampling.

With X ~ Poisson(W H), W and H with Exp(rate) entries, the rows of X are independent given H, and each
row's w integrates out in closed form once its counts are split among the components
(x_ij = sum_r a_rj, a_rj ~ Poisson(w_r h_rj)):

    p(x_i | H) = rate^R sum_a prod_r Gamma(A_r + 1) / (rate + c_r)^(A_r + 1) prod_j h_rj^a_rj / a_rj!

(A_r = sum_j a_rj, c_r = sum_j h_rj; the sum over every split a of the row's counts). What remains is an
integral over the R x J entries of H, here by importance sampling in log H from a Student-t fitted to
random-walk Metropolis draws and mixed over the R! labellings of the components, so that it covers every
mode of a posterior that is the same in each labelling. Its standard error is the spread of independent
batches. A reference where no closed form exists: at R = min(I, J) with J small, where many W Q, Q^-1 H
keep the fit and annealing from the prior runs low (docs/rank_selection.md); at R = 1 it agrees with
:func:`sepsti.core.evidence.rank_one.rank_one_log_evidence`.
"""

import itertools
import math
from typing import NamedTuple

import numpy as np

from sepsti.core.checks import integer_at_least, positive_number
from sepsti.core.errors import ParameterError
from sepsti.core.models.poisson_nmf import validate_nonnegative_matrix
from sepsti.core.random import stream

__all__ = ["SmallCountsEvidence", "small_counts_log_evidence", "row_log_likelihood"]

#: The most splits of one row's counts among the components that are summed over.
MAX_SPLITS = 200_000
#: The most entries of H integrated by importance sampling.
MAX_ENTRIES = 9
_DEGREES_OF_FREEDOM = 4
_WIDENING = 2.0        # the proposal's covariance: this times the draws'
_CHAINS, _STEPS = 32, 1500  # random-walk Metropolis per stage: the first shapes the second, which fits the t
_BATCH_TERMS = 4_000_000    # samples times splits evaluated at once


class SmallCountsEvidence(NamedTuple):
    """``log p(X | R)`` and the standard error of the importance sampler (the spread of its batches)."""

    log_evidence: float
    stderr: float
    batches: np.ndarray


def small_counts_log_evidence(X, rank, rate, *, num_samples=200_000, num_batches=10, seed=0):
    """log p(X | R) of Poisson NMF with Exp(``rate``) priors on W and H, for small counts and few columns.

    Parameters
    ----------
    X : array_like, shape (I, J)
        Counts (non-negative integers).
    rank : int
        R, at least 1; R x J at most :data:`MAX_ENTRIES`.
    rate : float
        Rate of the exponential priors on both factors.
    num_samples : int
        Importance samples in all, split evenly among the batches.
    num_batches : int
        Independent batches, at least 2: the standard error is their spread over their number's root.
    seed : int
        Seed of the pilot chains and the samples.

    Returns
    -------
    SmallCountsEvidence
        The pooled estimate, its standard error and each batch's estimate.

    Raises
    ------
    ParameterError
        Counts that are not integers, too many entries of H, or a row with more than :data:`MAX_SPLITS` splits.
    """
    from scipy.special import logsumexp

    X = validate_nonnegative_matrix(X).astype(np.float64)
    if not np.all(X == np.round(X)):
        raise ParameterError("X: expected integer counts (each row's counts are split among the components)")
    rank = integer_at_least("rank", rank, 1)
    rate = positive_number("rate", rate)
    num_batches = integer_at_least("num_batches", num_batches, 2)
    num_samples = integer_at_least("num_samples", num_samples, num_batches)
    target = _LogTarget(_within_reach(X, rank), rank, X.shape[1], rate)
    rng = stream(seed, 0)
    proposal = _LabelMixedT(_pilot_draws(target, rng), rank, X.shape[1])
    per_batch = num_samples // num_batches
    batches = []
    for _ in range(num_batches):
        z = proposal.draw(per_batch, rng)
        batches.append(logsumexp(target(z) - proposal.log_density(z)) - np.log(per_batch))
    batches = np.array(batches)
    return SmallCountsEvidence(float(logsumexp(batches) - np.log(num_batches)),
                               float(batches.std(ddof=1) / np.sqrt(num_batches)), batches)


def row_log_likelihood(x, H, rate):
    """log p(x | H) of one row of counts, its w (Exp(``rate``) entries) integrated out.

    Parameters
    ----------
    x : array_like of int, shape (J,)
    H : ndarray, shape (N, R, J) or (R, J)
        Positive activations (N of them).
    rate : float

    Returns
    -------
    ndarray, shape (N,), or a float for one H
    """
    x = validate_nonnegative_matrix(np.atleast_2d(x), name="x")
    if x.shape[0] != 1 or not np.all(x == np.round(x)):
        raise ParameterError(f"x: expected one row of integer counts, got shape {x.shape}")
    rate = positive_number("rate", rate)
    H = np.asarray(H, dtype=np.float64)
    single = H.ndim == 2
    H = H[None] if single else H
    if H.ndim != 3 or H.shape[2] != x.shape[1] or not np.all(H > 0):
        raise ParameterError(f"H: expected positive activations of shape (N, R, {x.shape[1]}) or (R, {x.shape[1]}), "
                             f"got shape {H.shape}")
    value = _Splits(x.astype(np.int64), H.shape[1])(np.log(H), np.log(rate + H.sum(axis=2)), rate)
    return float(value[0]) if single else value


def _within_reach(X, rank):
    """The rows' :class:`_Splits`, unless H has more than :data:`MAX_ENTRIES` entries to sample or a row more than
    :data:`MAX_SPLITS` splits."""
    if rank * X.shape[1] > MAX_ENTRIES:
        raise ParameterError(f"rank {rank} x {X.shape[1]} columns: H has more than {MAX_ENTRIES} entries to "
                             "integrate by importance sampling")
    return _Splits(X.astype(np.int64), rank)


class _Splits:
    """Every split of each row's counts among R components, and the rows' log-likelihood given H."""

    def __init__(self, X, rank):
        from scipy.special import gammaln

        splits = [self._of_row(x, rank) for x in X]  # (S_i, R, J) each
        self.starts = np.cumsum([0] + [len(part) for part in splits[:-1]])
        splits = np.concatenate(splits)
        totals = splits.sum(axis=2)  # A_r
        self.exponents = splits.reshape(len(splits), -1).astype(np.float64)  # of log h, (S, R * J)
        self.powers = totals + 1.0  # of 1 / (rate + c_r), (S, R)
        self.constant = gammaln(totals + 1.0).sum(axis=1) - gammaln(splits + 1.0).sum(axis=(1, 2))
        self.factors = len(X) * rank  # of rate

    @staticmethod
    def _of_row(x, rank):
        columns = [_compositions(int(count), rank) for count in x]  # (n_j, R) each
        count = math.prod(len(c) for c in columns)
        if count > MAX_SPLITS:
            raise ParameterError(f"a row's counts {x.tolist()} split {count} ways among {rank} components "
                                 f"(at most {MAX_SPLITS}): too many counts for the exact sum")
        grids = np.meshgrid(*[np.arange(len(c)) for c in columns], indexing="ij")
        return np.stack([c[g.ravel()] for c, g in zip(columns, grids)], axis=2)

    def __call__(self, log_h, log_denominators, rate):
        """sum_i log p(x_i | H) for log H of shape (N, R, J) and log(rate + c) of shape (N, R)."""
        step = max(1, _BATCH_TERMS // len(self.constant))
        values = np.empty(len(log_h))
        flat = log_h.reshape(len(log_h), -1)
        for start in range(0, len(log_h), step):
            part = slice(start, start + step)
            terms = flat[part] @ self.exponents.T - log_denominators[part] @ self.powers.T + self.constant
            peaks = np.maximum.reduceat(terms, self.starts, axis=1)  # each row's log-sum-exp over its splits
            terms -= np.repeat(peaks, np.diff(np.append(self.starts, terms.shape[1])), axis=1)
            values[part] = (np.log(np.add.reduceat(np.exp(terms), self.starts, axis=1)) + peaks).sum(axis=1)
        return values + self.factors * np.log(rate)


def _compositions(count, parts):
    """Every way to write ``count`` as ``parts`` non-negative integers, shape (n, parts)."""
    return np.array(list(_cuts(count, parts)))


def _cuts(count, parts):
    """Stars and bars: ``parts - 1`` bars among ``count + parts - 1`` places."""
    for bars in itertools.combinations(range(count + parts - 1), parts - 1):
        edges = (-1, *bars, count + parts - 1)
        yield tuple(edges[k + 1] - edges[k] - 1 for k in range(parts))


class _LogTarget:
    """log p(H) p(X | H) in u = log H (with the Jacobian), for u of shape (N, R * J)."""

    def __init__(self, splits, rank, columns, rate):
        self.splits, self.shape, self.rate = splits, (rank, columns), rate

    def __call__(self, u):
        log_h = u.reshape(len(u), *self.shape)
        h = np.exp(log_h)
        log_denominators = np.log(self.rate + h.sum(axis=2))
        total = self.splits(log_h, log_denominators, self.rate)
        return total + u.shape[1] * np.log(self.rate) - self.rate * h.reshape(len(u), -1).sum(axis=1) + u.sum(axis=1)


def _pilot_draws(target, rng):
    """Draws of log H from parallel random-walk Metropolis chains: an isotropic stage, then one shaped by it."""
    dimension = target.shape[0] * target.shape[1]
    u = -np.log(target.rate) + 0.1 * rng.standard_normal((_CHAINS, dimension))
    log_p = target(u)
    factor = np.eye(dimension) * 0.5
    for stage in range(2):
        if stage:  # moves shaped by the first stage's draws
            factor = np.linalg.cholesky(np.cov(draws.T) + 1e-9 * np.eye(dimension)) * 2.38 / np.sqrt(dimension)
        scale, kept = np.ones(_CHAINS), []
        for step in range(_STEPS):
            proposal = u + scale[:, None] * (rng.standard_normal(u.shape) @ factor.T)
            log_q = target(proposal)
            accept = np.log(rng.random(_CHAINS)) < log_q - log_p
            u[accept], log_p[accept] = proposal[accept], log_q[accept]
            if step < _STEPS // 2:
                scale *= np.exp(0.05 * (accept - 0.25))  # towards a quarter of the moves accepted
            else:
                kept.append(_canonical(u.copy(), target.shape))
        draws = np.concatenate(kept)
    return draws


def _canonical(u, shape):
    """Each draw's components in order of their total activation (one labelling of the R! alike)."""
    log_h = u.reshape(len(u), *shape)
    order = np.argsort(np.exp(log_h).sum(axis=2), axis=1)
    return np.take_along_axis(log_h, order[:, :, None], axis=1).reshape(len(u), -1)


class _LabelMixedT:
    """A multivariate Student-t fitted to draws in one labelling, mixed evenly over the R! labellings."""

    def __init__(self, draws, rank, columns):
        from scipy.special import gammaln

        self.shape, self.mean = (rank, columns), draws.mean(axis=0)
        self.factor = np.linalg.cholesky(_WIDENING * np.cov(draws.T) + 1e-9 * np.eye(draws.shape[1]))
        self.labellings = [np.array(p) for p in itertools.permutations(range(rank))]
        d, nu = draws.shape[1], _DEGREES_OF_FREEDOM
        self.constant = (gammaln((nu + d) / 2) - gammaln(nu / 2) - d / 2 * np.log(nu * np.pi)
                         - np.log(np.diag(self.factor)).sum())

    def _relabel(self, z, labelling):
        return z.reshape(len(z), *self.shape)[:, labelling].reshape(z.shape)

    def draw(self, count, rng):
        nu = _DEGREES_OF_FREEDOM
        z = self.mean + (rng.standard_normal((count, len(self.mean))) @ self.factor.T
                         / np.sqrt(rng.chisquare(nu, (count, 1)) / nu))
        which = rng.integers(len(self.labellings), size=count)
        for k, labelling in enumerate(self.labellings):
            z[which == k] = self._relabel(z[which == k], labelling)
        return z

    def log_density(self, z):
        from scipy.linalg import solve_triangular
        from scipy.special import logsumexp

        nu, d = _DEGREES_OF_FREEDOM, len(self.mean)
        parts = []
        for labelling in self.labellings:  # every relabelling of z, each the t's density once
            centred = self._relabel(z, labelling) - self.mean
            distance = (solve_triangular(self.factor, centred.T, lower=True) ** 2).sum(axis=0)
            parts.append(self.constant - (nu + d) / 2 * np.log1p(distance / nu))
        return logsumexp(np.array(parts), axis=0) - np.log(len(self.labellings))
