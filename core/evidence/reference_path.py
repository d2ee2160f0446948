"""Evidence of Poisson NMF and PARAFAC by thermodynamic integration from a Gaussian reference in log space.

Conventions
-----------
A model is a product of non-negative factors F_f of shape (n_f, R) with
Exp(lambda_f) priors: NMF's W and H transposed, PARAFAC's A, B, C. The
chains work on their logs, where the prior density includes the Jacobian
(p(u) = lambda exp(u - lambda e^u)).

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
place and width: the prior's exact mean and spread there, by quadrature,
not the mode's place and curvature (:func:`ridge_moments`). So q = N(m, D^-1 + sum_k a_k e_k e_k^T); its
density, gradient and draws cost O(parameters). Each chain is Metropolis-adjusted Langevin (MALA)
with q's covariance as its metric, its step adapted during burn-in towards
an acceptance of 0.57 and then fixed, so no discretisation bias remains.

Labellings: the posterior is the same in each of the R! labellings of the
components, and q sits in one. The path starts from q mixed over them
(:class:`LabelMixedReference`), so it measures the whole posterior, not the
part in q's labelling: exactly up to ``LABEL_MIXING_MAX_RANK``, however much
the labellings overlap; above it, over the labellings that leave q the same
(components with the same q, as those left at the prior), the others taken
to be apart, as they are where components are distinct (many counts). The
odd replicates' chains start from the pilot's end put in q's labelling.
At R = min(n_rows, n_cols) W -> WQ, H -> Q^-1 H keeps the fit for many Q
besides the scalings and q gives those directions the data's curvature; the
estimate there is checked against the exact value on small counts only
(:func:`sepsti.core.evidence.sti_nmf.validate_identifiable_ranks` warns).
"""

import math
import threading
import warnings

import numpy as np

from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.evidence.rank_selection import SHARED_KEY, ChainRecord, ChainSettings, Preset, TemperatureGrid
from sepsti.core.models.poisson_nmf import prior_rate_at, validate_prior_rate
from sepsti.core.random import stream

__all__ = ["LABELLINGS_APART_NATS", "LABEL_MIXING_MAX_RANK", "PILOT_LENGTH", "REFERENCE_PRESET",
           "LabelMixedReference", "LogSpaceReference", "NMFLogDensity", "ParafacLogDensity", "ReferencePathChains",
           "annealed_importance_bound", "ascend", "at_temperature", "check_reference_chain", "log_permanent",
           "log_space_mode", "mala_move", "mala_steps", "path_point", "reference_at_mode", "ridge_basis",
           "ridge_moments", "same_q_classes", "settled_state"]

#: MALA's acceptance target during burn-in (Roberts & Rosenthal 1998).
TARGET_ACCEPTANCE = 0.57

#: The reference-path preset of every model: b = I_(i/16)(2, 2) = 3u^2 - 2u^3 with Simpson's rule in u (the
#: integrand is steep near both ends), 300 MALA iterations keeping 150, the mode from 2000 SQUAREM-accelerated
#: EM sweeps, 150 exact draws of q at b = 0, four replicates.
REFERENCE_PRESET = Preset(TemperatureGrid(16, "beta", 2.0, "simpson"),
                          ChainSettings(sampler="mala", num_steps=300, num_keep=150, num_blocks=None,
                                        evaluate="full", init="mode", init_iterations=2000, exact_prior=True),
                          4)


#: The chain at b = 1 whose end starts the odd replicates' chains: this many times the longest chain.
PILOT_LENGTH = 4

#: Up to this rank q is mixed over all R! labellings of the components exactly (:class:`LabelMixedReference`;
#: the permanent's cost doubles with each rank); above it over those that leave q the same.
LABEL_MIXING_MAX_RANK = 10

#: Above LABEL_MIXING_MAX_RANK, components of different classes whose swap costs q fewer nats than this are
#: warned of: the labellings the mixture leaves out then overlap (measured gaps: 120 nats and more).
LABELLINGS_APART_NATS = 10.0

#: Chain settings the MALA chains of the reference path do not use (refused when changed, not ignored).
_UNUSED_BY_MALA = ("init", "step_a", "step_b", "alpha", "sigma", "evaluate", "evaluate_every")


def check_reference_chain(chain, *, option_name=None):
    """Raise ParameterError unless ``chain`` (ChainSettings) is one the reference path's MALA chains carry out.

    What they do not use (their step adapts, they start at the mode and score all the data) is refused when
    changed from the reference preset's, not ignored; named ``field=value``, or ``option_name(field)``
    (a command line's option).
    """
    if chain.sampler != "mala":
        raise ParameterError(f"sampler={chain.sampler!r}: the reference path runs 'mala' chains")
    if chain.num_blocks is not None or chain.subset_size is not None:
        raise ParameterError("the reference path uses full-data gradients: give num_blocks=None")
    unused = [f"{name}={getattr(chain, name)!r}" if option_name is None else option_name(name)
              for name in _UNUSED_BY_MALA if getattr(chain, name) != getattr(REFERENCE_PRESET.chain, name)]
    if unused:
        raise ParameterError(f"{', '.join(unused)}: not used by the reference path's MALA chains (they adapt "
                             "their own step, start at the mode and score all the data); leave them as the "
                             "reference preset has them")


class LogSpaceReference:
    """A Gaussian on the log-factors with each component's scale ridge: N(m, D^-1 + sum_r E_r A_r E_r^T).

    The factors are matrices F_f of shape (n_f, R) (for NMF: log W and log H
    transposed). Component r's ridge is {sum_f gamma_f 1_(f, r) : sum_f gamma_f = 0}
    (adding gamma_f to column r of factor f leaves the product unchanged);
    E_r = G_r K spans it, with G_r the indicator columns and K an orthonormal
    basis of sum(gamma) = 0. Off the ridges q has the conditional precisions D;
    along them the precision P_r (:func:`ridge_moments`). Hence A_r = P_r^-1 - M_r^-1 with
    M_r = E_r^T D E_r, and draws are y - E M^-1 E^T D y + E c with
    y ~ N(0, D^-1), c ~ N(0, P^-1). The small per-component matrices are
    computed once.

    Parameters
    ----------
    means : sequence of ndarray
        m, one (n_f, R) array per factor.
    precisions : sequence of ndarray
        D, same shapes.
    ridge_precision : ndarray, shape (R, F - 1, F - 1)
        P_r: the precision of each component's ridge coordinates in the basis K (:func:`ridge_basis`).
    """

    def __init__(self, means, precisions, ridge_precision):
        self.means = tuple(np.asarray(m, dtype=np.float64) for m in means)
        self.precisions = tuple(np.asarray(d, dtype=np.float64) for d in precisions)
        self.weighted_means = tuple(d * m for d, m in zip(self.precisions, self.means))
        self.ridge_precision = P = np.asarray(ridge_precision, dtype=np.float64)
        self.basis = ridge_basis(len(self.means))
        column_precision = np.stack([d.sum(axis=0) for d in self.precisions], axis=1)
        M = np.einsum("fa,rf,fb->rab", self.basis, column_precision, self.basis)
        self._M_inverse = np.linalg.inv(M)
        self._A = np.linalg.inv(P) - self._M_inverse
        # (A^-1 + M)^-1 for Woodbury, = M^-1 - M^-1 P M^-1 without inverting A, which rounds to 0 where the
        # prior's curvature dominates the data's (M ~ P)
        self._B = self._M_inverse - self._M_inverse @ P @ self._M_inverse
        self._ridge_root = np.linalg.cholesky(np.linalg.inv(P))
        size = sum(m.size for m in self.means)
        log_det = (-sum(np.sum(np.log(d)) for d in self.precisions)
                   + float(np.sum(np.linalg.slogdet(np.linalg.solve(P, M))[1])))
        self._log_norm = -0.5 * (size * np.log(2 * np.pi) + log_det)

    def _ridge(self, values):  # K^T (sum over each factor's rows): (R, F - 1)
        return np.stack([v.sum(axis=0) for v in values], axis=1) @ self.basis

    def _spread(self, coefficients):  # E c: per factor (n_f, R) arrays
        shifts = coefficients @ self.basis.T  # (R, F)
        return [shifts[:, f][None, :] for f in range(len(self.means))]

    def quadratic(self, deviations):
        """z^T S^-1 z = z^T D z - p^T B p with p = E^T D z (Woodbury per component)."""
        p = self._ridge([d * z for d, z in zip(self.precisions, deviations)])
        return float(sum(np.sum(d * z ** 2) for d, z in zip(self.precisions, deviations))
                     - np.einsum("ra,rab,rb->", p, self._B, p))

    def log_density(self, factors):
        return self._log_norm - 0.5 * self.quadratic([f - m for f, m in zip(factors, self.means)])

    def grad_log_density(self, factors):
        """-S^-1 z = -(D z - D E B p)."""
        weighted = [d * (f - m) for d, f, m in zip(self.precisions, factors, self.means)]
        back = self._spread(np.einsum("rab,rb->ra", self._B, self._ridge(weighted)))
        return [-(w - d * e) for w, d, e in zip(weighted, self.precisions, back)]

    def times_covariance(self, gradients):
        """S g = D^-1 g + E A E^T g."""
        back = self._spread(np.einsum("rab,rb->ra", self._A, self._ridge(gradients)))
        return [g / d + e for g, d, e in zip(gradients, self.precisions, back)]

    def costs(self, factors):
        """C, shape (R, R): component k's quadratic form at column j of every factor (so the form at the
        factors is the trace of C); and e, shape (F, R, R), the ridge's part of its gradient. BLAS-shaped:
        O(R^2) memory whatever the factors' length."""
        quadratic = 0.0
        sums = []
        for F, d, dm, m in zip(factors, self.precisions, self.weighted_means, self.means):
            quadratic = quadratic + d.T @ (F * F) - 2.0 * dm.T @ F + np.sum(dm * m, axis=0)[:, None]
            sums.append(d.T @ F - dm.sum(axis=0)[:, None])  # D z summed over rows, per (k, j)
        p = np.stack(sums, axis=-1) @ self.basis  # (k, j, F - 1)
        back = np.einsum("kab,kjb->kja", self._B, p)
        return quadratic - np.einsum("kja,kja->kj", p, back), np.moveaxis(back @ self.basis.T, -1, 0)

    def relabelled(self, factors):
        """``factors`` with their components put in the labelling where q is highest; kept as they are where
        none is higher (components with the same q, such as those left at the prior, tie)."""
        from scipy.optimize import linear_sum_assignment

        costs = self.costs(factors)[0]
        rows, columns = linear_sum_assignment(costs)
        kept = float(np.trace(costs))
        if costs[rows, columns].sum() >= kept - 1e-9 * abs(kept):
            return tuple(factors)
        return tuple(F[:, columns] for F in factors)

    def log_density_and_grad(self, factors):
        return self.log_density(factors), self.grad_log_density(factors)

    def noise(self, rng, scale=1.0):
        """scale S^(1/2) xi: D^(-1/2) xi with its ridge part (in the D metric) replaced by a ridge draw."""
        y = [rng.standard_normal(d.shape) / np.sqrt(d) for d in self.precisions]
        projection = self._ridge([d * v for d, v in zip(self.precisions, y)])
        along = np.einsum("rab,rb->ra", self._M_inverse, projection)
        ridge = np.einsum("rab,rb->ra", self._ridge_root, rng.standard_normal(along.shape))
        back = self._spread(ridge - along)
        return [scale * (v + e) for v, e in zip(y, back)]

    def sample(self, rng):
        return [m + z for m, z in zip(self.means, self.noise(rng))]


class LabelMixedReference:
    """q mixed over the R! labellings of the components: q_mix(theta) = (1/R!) sum_pi q(theta_pi).

    theta_pi puts column pi(k) of every factor in place k. The posterior is
    the same in every labelling, so the path from q_mix measures all of them:
    no log R! to add, and no cliff where a chain sits in another labelling
    than q's (where log q alone is far lower). Draws, covariance and the MALA
    metric stay q's (the integrand is the same in every labelling, so a draw
    of q is as good as one of q_mix for it).

    Up to ``LABEL_MIXING_MAX_RANK`` the sum is exact: q's quadratic form
    splits over the components, so with C[k, j] the form of component k at
    column j, log q(theta_pi) = log q's constant - sum_k C[k, pi(k)] / 2, and
    the sum over pi is a permanent (:func:`log_permanent`, O(2^R R^2)). Above
    it, the terms kept are those of the labellings that leave q as it is:
    permutations within each class of components with the same q
    (:func:`same_q_classes`; components left at the prior at ranks above the
    data's), sum_c log m_c! of them, the other labellings taken to be far
    apart, as they are where components are distinct; so log q_mix =
    log q + sum_c log m_c! - log R!.

    Parameters
    ----------
    reference : LogSpaceReference
    """

    def __init__(self, reference):
        self.reference = reference
        rank = reference.means[0].shape[1]
        self.exact = rank <= LABEL_MIXING_MAX_RANK
        #: above LABEL_MIXING_MAX_RANK: the sizes of the classes of components with the same q, and the least
        #: swap cost between classes (the labellings the mixture leaves out are apart by it)
        self.classes, self.least_apart = (None, None) if self.exact else same_q_classes(reference)
        self._log_norm = reference._log_norm - math.lgamma(rank + 1)
        self._shift = 0.0 if self.exact else sum(math.lgamma(m + 1) for m in self.classes) - math.lgamma(rank + 1)

    def quadratic(self, deviations):
        return self.reference.quadratic(deviations)

    def times_covariance(self, gradients):
        return self.reference.times_covariance(gradients)

    def noise(self, rng, scale=1.0):
        return self.reference.noise(rng, scale)

    def sample(self, rng):
        return self.reference.sample(rng)

    def log_density(self, factors):
        if not self.exact:
            return self.reference.log_density(factors) + self._shift
        return self._log_norm + log_permanent(-0.5 * self.reference.costs(factors)[0])[0]

    def log_density_and_grad(self, factors):
        """log q_mix and its gradient: sum over k of P(pi(k) = j) times component k's gradient at column j."""
        q = self.reference
        if not self.exact:
            return q.log_density(factors) + self._shift, q.grad_log_density(factors)
        costs, ridge = q.costs(factors)
        log_sum, share = log_permanent(-0.5 * costs)
        return self._log_norm + log_sum, [-(F * (d @ share) - dm @ share - d @ (share * e))
                                          for F, d, dm, e in zip(factors, q.precisions, q.weighted_means, ridge)]


def same_q_classes(reference, tolerance=1e-6):
    """The classes of components that q cannot tell apart, and how far apart the others are.

    Components k and k' are in one class when swapping them at q's mean
    lowers log q by less than ``tolerance`` nats (as between components left
    at the prior, whose q is the same); classes join through shared members.

    Returns
    -------
    sizes : list of int
        One per class, singletons included (they sum to R).
    least_apart : float
        The smallest swap cost between components of different classes (inf with one class).
    """
    costs = reference.costs(reference.means)[0]
    swap = 0.5 * (costs + costs.T - np.diag(costs)[:, None] - np.diag(costs)[None, :])
    label = list(range(costs.shape[0]))

    def root(k):
        while label[k] != k:
            k = label[k]
        return k

    for k, other in zip(*np.nonzero(swap < tolerance)):
        label[root(k)] = root(other)
    roots = np.array([root(k) for k in range(costs.shape[0])])
    apart = swap[roots[:, None] != roots[None, :]]
    return np.unique(roots, return_counts=True)[1].tolist(), float(apart.min(initial=np.inf))


def log_permanent(log_weights):
    """log sum over permutations pi of exp(sum_k L[k, pi(k)]), and P(pi(k) = j) under that law.

    Forward and backward sums over the subsets of columns taken by the first
    rows, every term positive and in log space (no cancellation, unlike Ryser's
    formula): O(2^R R^2), compiled (``_permanent``).

    Parameters
    ----------
    log_weights : ndarray, shape (R, R)
        L.

    Returns
    -------
    float, ndarray of shape (R, R)
    """
    from sepsti.core.evidence._permanent import log_permanent_kernel

    total, share = log_permanent_kernel(np.ascontiguousarray(log_weights, dtype=np.float64))
    return float(total), share


def ascend(step, objective, start, num_steps):
    """Maximise ``objective`` by the ascent map ``step`` (one EM sweep), accelerated by SQUAREM.

    Each cycle takes two steps, extrapolates along them (Varadhan & Roland
    2008, scheme S3, step length at least one) and takes a third step from
    there; the result is kept if it does not lower the objective, else the
    plain second step (EM is monotone, so every cycle ascends). Plain EM
    crawls across plateaus where a component is nearly empty: at speech scale
    it stays tens of thousands of nats below where this gets in the same number
    of sweeps, and no stopping rule on the gain tells a plateau from the mode
    (docs/rank_selection.md), so the count is fixed.

    Parameters
    ----------
    step : callable
        list of arrays -> list of arrays (in log space, so that any extrapolation is a valid point).
    objective : callable
        list of arrays -> float.
    start : list of ndarray
    num_steps : int
        Calls of ``step`` (rounded down to whole cycles of three).

    Returns
    -------
    list of ndarray
        The point reached.
    """
    x, value = start, objective(start)
    for _ in range(int(num_steps) // 3):
        x1 = step(x)
        x2 = step(x1)
        r = [b - a for a, b in zip(x, x1)]
        v = [c - 2 * b + a for a, b, c in zip(x, x1, x2)]
        alpha = min(-np.sqrt(sum(float(np.sum(e * e)) for e in r)
                             / max(sum(float(np.sum(e * e)) for e in v), np.finfo(np.float64).tiny)), -1.0)
        candidate = step([a - 2 * alpha * b + alpha ** 2 * c for a, b, c in zip(x, r, v)])
        candidate_value = objective(candidate)
        if np.isfinite(candidate_value) and candidate_value >= value:
            x, value = candidate, candidate_value
        else:
            x, value = x2, objective(x2)
    return x


def log_space_mode(X, rank, rng, *, prior_rate, iterations):
    """The mode of the posterior of (log W, log H): MAP-EM with the Jacobian's pseudo-count of one per entry.

    Starts from W, H ~ U(0.5, 1.5) sqrt(mean(X) / R) drawn from ``rng``; the
    pseudo-counts keep every entry positive; ``iterations`` EM sweeps accelerated
    by :func:`ascend`. Returns W (n_rows, R) and H (R, n_cols).
    """
    level = np.sqrt(max(float(X.mean()), np.finfo(np.float64).tiny) / rank)
    start = [np.log(level * rng.uniform(0.5, 1.5, size=(X.shape[0], rank))),
             np.log(level * rng.uniform(0.5, 1.5, size=(rank, X.shape[1])))]

    X = np.ascontiguousarray(X, dtype=np.float64)
    ratio, log_rate = np.empty_like(X), np.empty_like(X)  # reused: fresh data-sized arrays cost a pass each

    def data_ratio(W, H):  # X / (W H)
        return np.divide(X, np.matmul(W, H, out=ratio), out=ratio)

    def step(logs):
        W, H = np.exp(logs[0]), np.exp(logs[1])
        W = (W * (data_ratio(W, H) @ H.T) + 1.0) / (H.sum(axis=1)[None, :] + prior_rate)
        H = (H * (W.T @ data_ratio(W, H)) + 1.0) / (W.sum(axis=0)[:, None] + prior_rate)
        return [np.log(W), np.log(H)]

    def objective(logs):  # log p(log W, log H | X) up to a constant
        W, H = np.exp(logs[0]), np.exp(logs[1])
        rate = np.matmul(W, H, out=ratio)
        return float(np.vdot(X, np.log(rate, out=log_rate)) - rate.sum() + logs[0].sum() + logs[1].sum()
                     - prior_rate * (W.sum() + H.sum()))

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        logs = ascend(step, objective, start, iterations)
    return np.exp(logs[0]), np.exp(logs[1])


def reference_at_mode(factors, exposures, prior_rates):
    """q at a mode: each entry's expected count plus prior curvature as its precision; along each ridge the
    prior's exact mean and spread (:func:`ridge_moments`).

    Parameters
    ----------
    factors : sequence of ndarray, each (n_f, R)
        The mode (positive entries).
    exposures : sequence of ndarray, each (n_f, R) or (R,)
        d(expected total count)/d(entry): for NMF the other factor's column sums.
    prior_rates : sequence of float
    """
    curvatures = np.stack([rate * F.sum(axis=0) for F, rate in zip(factors, prior_rates)], axis=1)
    means, precisions = ridge_moments([F.shape[0] for F in factors], curvatures)
    shifts = means @ ridge_basis(len(factors)).T  # (R, F): gamma of each component
    # moving along a ridge leaves the product, and each entry's expected count F * exposure, unchanged
    factors = [F * np.exp(shifts[:, f]) for f, F in enumerate(factors)]
    exposures = [np.asarray(e) * np.exp(-shifts[:, f]) for f, e in enumerate(exposures)]
    return LogSpaceReference(tuple(np.log(F) for F in factors),
                             tuple(F * (e + rate) for F, e, rate in zip(factors, exposures, prior_rates)),
                             precisions)


def ridge_basis(count):
    """K, shape (count, count - 1): an orthonormal basis of the shifts gamma with sum(gamma) = 0."""
    return np.linalg.qr(np.eye(count)[:, :-1] - 1.0 / count)[0]


def ridge_moments(sizes, curvatures, *, points=None):
    """The mean and precision of each component's ridge coordinates under the exact prior along it.

    Along the ridge the likelihood is flat, and with the other coordinates at the mode the log density of the
    shift gamma = K a is g(a) = sum_f n_f gamma_f - c_f (e^gamma_f - 1) (the Exp priors in log space, with
    their Jacobian): concave, flat between two exponential walls. Two things make the Laplace approximation
    at the mode a poor q there. EM barely moves along the ridges, so the mode it finds is not the ridge's:
    at speech scale (257 x 1661, lambda = 4e-4, rank 1, 2000 SQUAREM sweeps) g rises by 964 nats per unit at
    it, the ridge's peak 25 of its standard deviations away. And where the priors are weak and the row counts
    n_f nearly equal, the curvature at the peak, sum_f c_f e^gamma_f K_f K_f^T, is far flatter than the
    walls: on a 5 x 5 matrix at lambda = 4e-4 its variance is 13.5 times the exact one, q's draws fell where
    the posterior is 1e8 nats lower, and the chains started there refused every move. So the peak is found
    by Newton's method, and the mean and covariance by quadrature on a grid around it, along the axes of the
    curvature there out to where the density has fallen by e^-40 (times 1.5, widened until the density at
    its edges is negligible).

    Parameters
    ----------
    sizes : sequence of int
        n_f, the rows of each factor.
    curvatures : ndarray, shape (R, F)
        c_f = lambda_f times the column sums of factor f at the mode.
    points : int, optional
        Grid points per dimension (default 4001 for one ridge dimension, 301 for two, 61 for three).

    Returns
    -------
    means : ndarray, shape (R, F - 1)
        The mean of a (the shift's coordinates in the basis K of :func:`ridge_basis`).
    precisions : ndarray, shape (R, F - 1, F - 1)
        The inverse of its covariance.
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    curvatures = np.asarray(curvatures, dtype=np.float64)
    basis = ridge_basis(sizes.size)
    dimension = basis.shape[1]
    points = {1: 4001, 2: 301}.get(dimension, 61) if points is None else points
    means = np.empty((curvatures.shape[0], dimension))
    precisions = np.empty((curvatures.shape[0], dimension, dimension))
    for r, c in enumerate(curvatures):
        peak = _ridge_peak(sizes, c, basis)
        weights = c * np.exp(basis @ peak)
        root = np.linalg.cholesky(np.linalg.inv(basis.T @ (weights[:, None] * basis)))
        # along each axis of the curvature at the peak, 1.5 times where the density has fallen by e^-40 (the walls
        # can be far narrower than that curvature says: under a prior of 1e-8 a thousand times)
        reach = np.array([[_reach(sizes, c, basis, peak, sign * column) for column in root.T] for sign in (-1, 1)])
        for widening in (1.5, 3.0, 6.0):
            axes = [np.linspace(-widening * low, widening * high, points) for low, high in reach.T]
            z = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, dimension)
            coordinates = peak + z @ root.T
            density = np.exp(_ridge_log_density(sizes, c, basis, coordinates, peak))
            edge = np.any((z == [axis[0] for axis in axes]) | (z == [axis[-1] for axis in axes]), axis=1)
            if density[edge].max(initial=0.0) < 1e-12:
                break
        density /= density.sum()
        means[r] = density @ coordinates
        centred = coordinates - means[r]
        precisions[r] = np.linalg.inv((density[:, None] * centred).T @ centred)
    return means, precisions


def _ridge_log_density(sizes, c, basis, coordinates, peak):
    """g(a) - g(peak) at each row of ``coordinates`` (-inf where the walls overflow)."""
    shifts = coordinates @ basis.T
    at_peak = basis @ peak
    with np.errstate(over="ignore", invalid="ignore"):
        value = (shifts - at_peak) @ sizes - (np.exp(shifts) - np.exp(at_peak)) @ c
    return np.where(np.isnan(value), -np.inf, value)


def _reach(sizes, c, basis, peak, direction, fall=40.0):
    """The t > 0 at which g(peak + t direction) = g(peak) - fall (g is concave: doubling, then bisection)."""
    def below(t):
        return _ridge_log_density(sizes, c, basis, (peak + t * direction)[None, :], peak)[0] < -fall

    high = 1.0
    while not below(high) and high < 1e300:
        high *= 2.0
    low = 0.0
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (low, middle) if below(middle) else (middle, high)
    return high


def _ridge_peak(sizes, c, basis, iterations=100):
    """The maximum of the concave g by damped Newton steps from a = 0."""
    a = np.zeros(basis.shape[1])
    for _ in range(iterations):
        weights = c * np.exp(basis @ a)
        gradient = basis.T @ (sizes - weights)
        step = np.linalg.solve(basis.T @ (weights[:, None] * basis), gradient)
        while _ridge_log_density(sizes, c, basis, (a + step)[None, :], a)[0] < 0.0 and np.abs(step).max() > 1e-12:
            step = step / 2  # a full step past a wall
        a = a + step
        if np.abs(step).max() < 1e-10:
            break
    return a


def _log_prior(logs, factors, rates):
    """sum over factors of log Exp(F | rate) + log F (the Jacobian) and its gradient in log F."""
    value = 0.0
    gradients = []
    for u, F, rate in zip(logs, factors, rates):
        value += float(u.size * np.log(rate) + u.sum() - rate * F.sum())
        gradients.append(1.0 - rate * F)
    return value, gradients


class NMFLogDensity:
    """Poisson NMF in log space on the factors (W, H transposed), both (n, R).

    ``prior_rate`` is a number or ``"matched"``
    (:func:`sepsti.core.models.poisson_nmf.prior_rate_at`).
    """

    name = "poisson_nmf"

    def __init__(self, X, prior_rate):
        from scipy.special import gammaln

        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self._local = threading.local()
        self.prior_rate = validate_prior_rate(prior_rate)
        self.data_mean = float(self.X.mean())
        self.log_factorial = float(gammaln(self.X + 1.0).sum())

    def rates_at(self, rank):
        """The prior rates of W and H at ``rank``."""
        rate = prior_rate_at(self.prior_rate, self.data_mean, rank)
        return rate, rate

    def __call__(self, logs):
        """log p(theta) + log p(X | theta) and its gradient in the log-factors."""
        W, Ht = np.exp(logs[0]), np.exp(logs[1])
        value, gradients = _log_prior(logs, (W, Ht), self.rates_at(W.shape[1]))
        ratio, log_rate = self._workspace()
        np.matmul(W, Ht.T, out=ratio)
        value += float(np.vdot(self.X, np.log(ratio, out=log_rate)) - ratio.sum()) - self.log_factorial
        np.divide(self.X, ratio, out=ratio)
        ratio -= 1.0
        return value, [gradients[0] + W * (ratio @ Ht), gradients[1] + Ht * (ratio.T @ W)]

    def _workspace(self):
        """Two arrays of the data's shape, one pair per thread: a fresh pair per call costs as much as the
        pass itself at speech scale (the allocator hands the pages back to the system and faults them in again)."""
        buffers = getattr(self._local, "buffers", None)
        if buffers is None:
            buffers = self._local.buffers = (np.empty_like(self.X), np.empty_like(self.X))
        return buffers

    def mode(self, rank, rng, iterations):
        """The log-space mode (:func:`log_space_mode`) and the exposures of q."""
        W, H = log_space_mode(self.X, rank, rng, prior_rate=self.rates_at(rank)[0], iterations=iterations)
        factors = (W, H.T)
        return factors, (factors[1].sum(axis=0), factors[0].sum(axis=0))


class ParafacLogDensity:
    """Poisson PARAFAC in log space on the factors (A, B, C), dense or sparse data (full-data passes)."""

    name = "poisson_parafac"

    def __init__(self, data, prior_rate):
        from sepsti.core.models.poisson_parafac import PoissonParafac

        self.model = PoissonParafac(data, 1, prior_rate=prior_rate)
        self.rates = tuple(float(r) for r in self.model.prior_rates)

    def rates_at(self, rank):
        """The prior rates of A, B and C (the same at every rank)."""
        return self.rates

    def __call__(self, logs):
        from sepsti.core.models.poisson_parafac import ParafacFactors

        factors = ParafacFactors(*(np.exp(u) for u in logs))
        log_likelihood, grads = self.model.log_likelihood_and_grad(factors)
        value, gradients = _log_prior(logs, factors, self.rates)
        return value + log_likelihood, [g + F * dF for g, F, dF in zip(gradients, factors, grads)]

    def _exposures(self, factors):
        sums = [F.sum(axis=0) for F in factors]
        return [np.prod([sums[g] for g in range(3) if g != f], axis=0) for f in range(3)]

    def mode(self, rank, rng, iterations):
        """MAP-EM in log space (one pseudo-count per entry) from U(0.5, 1.5) (mean(X) / R)^(1/3), by :func:`ascend`."""
        from sepsti.core.models.poisson_parafac import ParafacFactors

        data = self.model.data
        total = float(data.values.sum()) if self.model.is_sparse else float(data.sum())
        level = np.cbrt(max(total / self.model.n_data, np.finfo(np.float64).tiny) / rank)
        start = [np.log(level * rng.uniform(0.5, 1.5, size=(n, rank))) for n in self.model.shape]

        def step(logs):
            factors = [np.exp(u) for u in logs]
            for f in range(3):
                _, grads = self.model.log_likelihood_and_grad(ParafacFactors(*factors))
                exposure = self._exposures(factors)[f]
                factors[f] = (factors[f] * (grads[f] + exposure) + 1.0) / (exposure + self.rates[f])
            return [np.log(F) for F in factors]

        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            factors = tuple(np.exp(u) for u in ascend(step, lambda logs: self(logs)[0], start, iterations))
        return factors, tuple(self._exposures(factors))


class ReferencePathChains:
    """MALA chains on the path from :class:`LogSpaceReference` to a factor model's posterior.

    A chain factory of :func:`sepsti.core.evidence.rank_selection.select_rank`:
    ``prepare`` finds each (rank, replicate)'s log-space mode and q (from
    ``stream(seed, R, SHARED_KEY, r)``); chain (R, i, r) samples pi_b at
    b = t_i, and at b = 0 takes exact draws of q. Its trace holds
    log p(theta) + log p(X | theta) - log q(theta) of the kept iterations.

    Where the chains start decides which way an unsettled one errs: from a
    draw of q (narrower than the posterior) its values are low, from the end
    of a chain at b = 1 high (it has spread further than pi_b for b < 1). So
    the even replicates start from q and the odd ones from the end of one
    chain per replicate at b = 1, ``PILOT_LENGTH`` times the longest chain
    (from ``stream(seed, R, SHARED_KEY, 2, r)``): the replicates' spread, the
    standard error, then holds what the chains have not settled, instead of
    hiding it.

    Parameters
    ----------
    density : NMFLogDensity or ParafacLogDensity
        log p(theta) + log p(X | theta) and its gradient in the log-factors, and ``mode``.
    chain : ChainSettings
        ``sampler="mala"``, ``num_steps``, ``num_keep``, ``init_iterations``
        (EM iterations of the mode), ``exact_prior`` (exact q draws at b = 0,
        ``prior_draws`` of them).
    settings : dict
        The model's settings (recorded).
    data_digest : str
    """

    collective = False

    def __init__(self, density, chain, *, settings, data_digest):
        check_reference_chain(chain)
        self.density = density
        self.chain = chain
        self.pilot_length = PILOT_LENGTH * int(np.max(chain.num_steps))
        self.settings = {"model": {"name": density.name, **settings}, "path": "log_space_reference",
                         "labellings": f"q mixed over all R! up to R = {LABEL_MIXING_MAX_RANK}, above it over "
                                       "those that leave q the same",
                         "chain": chain.as_dict(),
                         "starts": {"even_replicates": "a draw of q",
                                    "odd_replicates": f"the end of a {self.pilot_length}-iteration chain at b = 1"}}
        self.data_digest = data_digest
        self._references = {}

    def start_groups(self, num_replicates):
        """0 for the replicates started from q, 1 for those started from the end of a chain at b = 1."""
        return [replicate % 2 for replicate in range(num_replicates)]

    def _is_exact(self, task):
        return self.chain.exact_prior and task.temperature == 0.0

    def trace_length(self, task):
        return int(self.chain.prior_draws or self.chain.num_keep) if self._is_exact(task) else int(self.chain.num_keep)

    def units(self, task):
        return self.trace_length(task) if self._is_exact(task) else self.chain.steps_at(task.index)

    def cost(self, task):
        return (task.rank + 4.0) * self.units(task)

    def prepare(self, tasks, *, seed, comm, threads):
        """The mode and q of every (rank, replicate) still to run: spread over the processes (longest first),
        on this process's worker threads, then shared with every process."""
        from sepsti.core.evidence.rank_selection import balance
        from sepsti.core.blas import single_threaded_blas

        needed = sorted({(task.rank, task.replicate) for task in tasks} - set(self._references))
        process, size = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())
        work = [(rank + 4.0) * (1 + replicate % 2) for rank, replicate in needed]  # a pilot costs about a mode
        mine = [key for key, owner in zip(needed, balance(work, size)) if owner == process]

        def reference(key):
            rank, replicate = key
            with single_threaded_blas():
                factors, exposures = self.density.mode(rank, stream(seed, rank, SHARED_KEY, replicate),
                                                       max(self.chain.init_iterations, 3))
                q = reference_at_mode(factors, exposures, self.density.rates_at(rank))
                start = None
                if replicate % 2:
                    start = q.relabelled(settled_state(self.density, q, 1.0,
                                                       stream(seed, rank, SHARED_KEY, 2, replicate),
                                                       self.pilot_length))
            return key, (LabelMixedReference(q) if rank > 1 else q, start)

        if threads > 1 and len(mine) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(threads, len(mine))) as pool:
                found = dict(pool.map(reference, mine))
        else:
            found = dict(map(reference, mine))
        if comm is not None and size > 1:
            for part in comm.allgather(found):
                found.update(part)
        self._references.update(found)
        near = sorted({rank for (rank, _), (q, _) in found.items() if isinstance(q, LabelMixedReference)
                       and not q.exact and q.least_apart < LABELLINGS_APART_NATS})
        if near and process == 0:
            warnings.warn(f"R={', '.join(map(str, near))}: q has components that swap for under "
                          f"{LABELLINGS_APART_NATS:g} nats without being the same, so their labellings overlap "
                          f"in part and the estimate may be high by up to log 2 per such pair (exact up to R = "
                          f"{LABEL_MIXING_MAX_RANK})", ConvergenceWarning, stacklevel=2)

    def run(self, task, *, seed, progress):
        import time

        from sepsti.core.blas import single_threaded_blas

        started, cpu_started = time.perf_counter(), time.thread_time()
        q, start = self._references[task.rank, task.replicate]
        rng = stream(seed, *task.key)
        with single_threaded_blas():
            if self._is_exact(task):
                trace = np.empty(self.trace_length(task))
                for k in range(trace.size):
                    logs = q.sample(rng)
                    trace[k] = self.density(logs)[0] - q.log_density(logs)
            else:
                trace = self._mala(q, start, task.temperature, rng, progress, self.chain.steps_at(task.index))
        finite = bool(np.all(np.isfinite(trace)))
        return ChainRecord(trace, time.perf_counter() - started, time.thread_time() - cpu_started, 0.0, np.nan,
                           finite)

    def _mala(self, q, start, b, rng, progress, num_steps, stride=25):
        keep = int(self.chain.num_keep)
        burn_in = num_steps - keep
        logs = q.sample(rng) if start is None else list(start)
        trace = np.empty(keep)
        for k, _, current in mala_steps(self.density, q, b, logs, rng, num_steps, adapt_steps=burn_in):
            if k >= burn_in:
                trace[k - burn_in] = current[2]
            if (k + 1) % stride == 0 or k + 1 == num_steps:
                progress(stride if (k + 1) % stride == 0 else num_steps % stride)
        return trace


def mala_steps(density, q, b, logs, rng, num_steps, *, adapt_steps):
    """MALA on pi_b from ``logs``: yields (k, logs, current) after each of ``num_steps`` transitions; the step
    adapts over the first ``adapt_steps`` (Robbins-Monro on its log), then stays fixed."""
    current = path_point(density, q, b, logs)
    step = 0.5
    for k in range(num_steps):
        logs, current, log_accept = mala_move(density, q, b, logs, current, step, rng)
        if k < adapt_steps:
            step *= np.exp(0.1 * (np.exp(min(log_accept, 0.0)) - TARGET_ACCEPTANCE))
        yield k, logs, current


def settled_state(density, q, b, rng, num_steps):
    """The state of a MALA chain on pi_b after ``num_steps`` iterations from a draw of q (step adapted over
    the first half)."""
    logs = q.sample(rng)
    for _, logs, _ in mala_steps(density, q, b, logs, rng, num_steps, adapt_steps=num_steps // 2):
        pass
    return tuple(logs)


def path_point(density, q, b, logs):
    """(log pi_b, S times its gradient, the integrand log p + log L - log q, the terms) at ``logs``."""
    value, gradients = density(logs)
    return at_temperature((value, gradients, *q.log_density_and_grad(logs)), q, b)


def at_temperature(terms, q, b):
    """:func:`path_point` at another temperature from its ``terms`` (no density evaluation)."""
    value, gradients, log_q, q_gradients = terms
    drift = [(1 - b) * gq + b * g for gq, g in zip(q_gradients, gradients)]
    return (1 - b) * log_q + b * value, q.times_covariance(drift), value - log_q, terms


def mala_move(density, q, b, logs, current, step, rng):
    """One Metropolis-adjusted Langevin transition of pi_b with q's covariance as metric.

    ``current`` is :func:`path_point` at ``logs``; returns the new (logs, current) and log of the
    acceptance ratio.
    """
    def mean_move(at, scaled_drift):
        return [u + 0.5 * step ** 2 * m for u, m in zip(at, scaled_drift)]

    centre = mean_move(logs, current[1])
    proposal_logs = [c + z for c, z in zip(centre, q.noise(rng, step))]
    proposal = path_point(density, q, b, proposal_logs)
    back = mean_move(proposal_logs, proposal[1])
    forward = q.quadratic([p - c for p, c in zip(proposal_logs, centre)])
    backward = q.quadratic([u - c for u, c in zip(logs, back)])
    log_accept = proposal[0] - current[0] + 0.5 * (forward - backward) / step ** 2
    if not np.isfinite(log_accept):
        log_accept = -np.inf
    if np.log(rng.uniform()) < log_accept:
        return proposal_logs, proposal, log_accept
    return logs, current, log_accept


def annealed_importance_bound(density, rank, *, num_temperatures=3000, num_runs=3, moves=2, seed=0,
                              mode_iterations=None):
    """log p(X | R) by annealed importance sampling along the reference path: a check of the path's estimates.

    Each run draws from q (:func:`reference_at_mode`, the mode from
    ``stream(seed, R, SHARED_KEY, 0)`` as the chain factory finds it) and
    anneals to the posterior over b = (k / K)^2, ``moves`` MALA transitions
    per temperature (step adapted on the way), accumulating the log weight
    sum_k (b_k - b_(k-1)) (log p + log L - log q). Whatever the mixing,
    E[log w] <= log p(X | R) (Jensen: w is unbiased for p(X | R), every
    labelling of the components included), so ``lower_bound`` is a lower
    bound in expectation that no slow or stuck chain can push up; longer
    annealing tightens it.

    Parameters
    ----------
    density : NMFLogDensity or ParafacLogDensity
    rank : int
    num_temperatures, num_runs, moves, seed : int
    mode_iterations : int, optional
        EM sweeps of the mode (default: the preset's ``init_iterations``).

    Returns
    -------
    dict
        ``log_weights`` (one per run), ``lower_bound`` (their mean), ``stderr`` (of that mean),
        ``log_mean_weight`` (log of the mean weight, the AIS estimate).
    """
    from scipy.special import logsumexp

    mode_iterations = REFERENCE_PRESET.chain.init_iterations if mode_iterations is None else mode_iterations
    factors, exposures = density.mode(rank, stream(seed, rank, SHARED_KEY, 0), mode_iterations)
    q = reference_at_mode(factors, exposures, density.rates_at(rank))
    temperatures = (np.arange(num_temperatures + 1) / num_temperatures) ** 2
    log_weights = np.empty(num_runs)
    for run in range(num_runs):
        rng = stream(seed, rank, SHARED_KEY, 1, run)
        logs = q.sample(rng)
        current = path_point(density, q, 0.0, logs)
        log_weight, step = 0.0, 0.5
        for previous, b in zip(temperatures[:-1], temperatures[1:]):
            log_weight += (b - previous) * current[2]
            current = at_temperature(current[3], q, b)
            for _ in range(moves):
                logs, current, log_accept = mala_move(density, q, b, logs, current, step, rng)
                step *= np.exp(0.05 * (np.exp(min(log_accept, 0.0)) - TARGET_ACCEPTANCE))
        log_weights[run] = log_weight
    spread = float(log_weights.std(ddof=1) / np.sqrt(num_runs)) if num_runs > 1 else float("nan")
    return {"log_weights": log_weights.tolist(), "lower_bound": float(log_weights.mean()), "stderr": spread,
            "log_mean_weight": float(logsumexp(log_weights) - np.log(num_runs))}
