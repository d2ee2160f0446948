"""The small-counts evidence of Poisson NMF against closed forms and quadrature."""

import numpy as np
import pytest
from scipy import integrate
from scipy.special import logsumexp

from sepsti.core.errors import ParameterError
from sepsti.core.evidence.rank_one import rank_one_log_evidence
from sepsti.core.evidence.small_counts import row_log_likelihood, small_counts_log_evidence
from sepsti.core.models.poisson_nmf import PoissonNMF
from sepsti.core.random import stream


def test_row_likelihood_is_the_integral_over_w():
    x, rate = np.array([3, 2]), 0.7
    H = np.array([[0.4, 1.3], [2.1, 0.2]])

    def integrand(w2, w1):
        mean = w1 * H[0] + w2 * H[1]
        poisson = np.prod(mean ** x * np.exp(-mean) / np.array([6.0, 2.0]))
        return rate ** 2 * np.exp(-rate * (w1 + w2)) * poisson

    value, error = integrate.dblquad(integrand, 0, np.inf, 0, np.inf, epsabs=0, epsrel=1e-11)
    assert row_log_likelihood(x, H, rate) == pytest.approx(np.log(value), abs=1e-8)


def test_rank_one_agrees_with_the_closed_form_within_its_errors():
    z = []
    for seed in range(6):
        X = PoissonNMF.sample(stream(seed, 11), (6, 3), 1, rate_W=0.5, rate_H=0.5)[2]
        estimate = small_counts_log_evidence(X, 1, 0.5, num_samples=40_000, seed=seed)
        exact = rank_one_log_evidence(X, 0.5)
        assert abs(estimate.log_evidence - exact) < 0.05
        z.append((estimate.log_evidence - exact) / estimate.stderr)
    # six standard normals: the rms lies below 1.9 with probability 0.9986 (chi-square, 6 degrees of freedom)
    assert np.sqrt(np.mean(np.square(z))) < 1.9, z


def _quadrature_one_column(X, rate, points=800):
    """log p(X | R = 2) of an I x 1 matrix: the two entries of H integrated on a grid in log h."""
    u = np.linspace(-45.0, 8.0, points)  # toward 0 the prior in log h falls as h itself
    log_h = np.stack(np.meshgrid(u, u, indexing="ij"), axis=-1).reshape(-1, 2, 1)
    total = sum(row_log_likelihood(x, np.exp(log_h), rate) for x in X.astype(int))
    total += 2 * np.log(rate) - rate * np.exp(log_h).sum(axis=(1, 2)) + log_h.sum(axis=(1, 2))
    grid = total.reshape(points, points)
    edge = np.concatenate([grid[[0, -1]].ravel(), grid[:, [0, -1]].ravel()])
    assert edge.max() < total.max() - 30  # the grid holds the whole posterior
    return logsumexp(total) + 2 * np.log(u[1] - u[0])


def test_rank_two_on_one_column_agrees_with_quadrature():
    """A posterior the same in both labellings (h1 <-> h2): the estimate counts both modes."""
    X = np.array([[4], [0], [7], [2], [9]])
    estimate = small_counts_log_evidence(X, 2, 0.5, num_samples=40_000, seed=3)
    exact = _quadrature_one_column(X, 0.5)
    assert abs(estimate.log_evidence - exact) < max(4 * estimate.stderr, 0.01)


@pytest.mark.parametrize("X, rank", [
    (np.array([[6, 1], [0, 4]]), 2),                  # 4 entries of H sampled either way
    (np.array([[5, 1], [0, 3], [2, 2]]), 2),          # 4 against 6
    (np.array([[3, 0], [1, 4], [0, 2], [2, 1]]), 2),  # 4 against 8
    (np.array([[2, 0, 1], [0, 3, 1], [1, 1, 0]]), 3),  # 9 either way, six labellings
])
def test_the_evidence_is_the_same_for_the_transpose(X, rank):
    """p(X) = p(X^T): W and H trade places, the exact sum runs over other rows and the sampling over other entries."""
    a = small_counts_log_evidence(X, rank, 0.5, num_samples=60_000, seed=1)
    b = small_counts_log_evidence(X.T, rank, 0.5, num_samples=60_000, seed=2)
    assert abs(a.log_evidence - b.log_evidence) < 4 * np.hypot(a.stderr, b.stderr) + 1e-3


def _prior_importance_sampling(X, rank, rate, num_samples, seed):
    """log p(X | R) by importance sampling from the prior of H: unbiased and free of any labelling, but
    usable only where the posterior of H is wide (here a few thousand effective samples per million)."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(4):
        H = rng.exponential(1 / rate, (num_samples // 4, rank, X.shape[1]))
        batches.append(logsumexp(sum(row_log_likelihood(x, H, rate) for x in X)) - np.log(len(H)))
    return logsumexp(batches) - np.log(4), np.std(batches, ddof=1) / 2


def test_the_label_mixture_covers_the_mirror_mode_the_pilot_never_visits():
    """Components far apart in size (one large in the first column, one small in the second): the pilot's
    draws, ordered by size, hold one labelling only, and the mirror mode lies far from them. Importance
    sampling from the prior, which knows no labelling, is the reference (a single labelling falls 0.6 and
    0.3 nats short of it at 40,000 and 200,000 samples)."""
    X = np.array([[40, 0], [0, 4], [30, 0], [0, 3], [35, 1]])
    estimate = small_counts_log_evidence(X, 2, 0.5, num_samples=40_000, seed=0)
    reference, error = _prior_importance_sampling(X, 2, 0.5, 2_000_000, seed=1)
    assert abs(estimate.log_evidence - reference) < 4 * np.hypot(estimate.stderr, error), (estimate, reference, error)


def test_batches_smaller_than_the_labellings_are_estimated():
    """A batch of one sample leaves labellings without a draw (it failed to reshape their empty selection)."""
    result = small_counts_log_evidence(np.array([[3, 1], [2, 5], [0, 1]]), 2, 0.5, num_samples=2, num_batches=2)
    assert np.all(np.isfinite(result.batches))


def test_the_standard_error_is_the_batches_spread():
    X = np.array([[3, 1], [2, 5], [0, 1]])
    result = small_counts_log_evidence(X, 2, 0.5, num_samples=20_000, num_batches=5, seed=0)
    assert len(result.batches) == 5
    assert result.stderr == pytest.approx(np.std(result.batches, ddof=1) / np.sqrt(5))
    assert result.log_evidence == pytest.approx(logsumexp(result.batches) - np.log(5))


@pytest.mark.parametrize("X, rank, message", [
    (np.array([[1.5, 2.0]]), 1, "integer counts"),
    (np.ones((3, 5)), 2, "more than 9 entries"),
    (np.array([[600, 700]]), 2, "too many counts"),
])
def test_refused_inputs(X, rank, message):
    with pytest.raises(ParameterError, match=message):
        small_counts_log_evidence(X, rank, 0.5)


def test_the_proposal_is_the_same_in_every_labelling():
    """Draws in each of the R! labellings alike, and a density that relabelling leaves unchanged."""
    from sepsti.core.evidence.small_counts import _LabelMixedT

    rng = np.random.default_rng(0)
    draws = rng.normal([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], 0.3, size=(500, 6))  # R = 3 components of 2 entries
    proposal = _LabelMixedT(draws, 3, 2)
    z = proposal.draw(6000, rng)
    order = np.argsort(z.reshape(-1, 3, 2).mean(axis=2), axis=1)
    _, counts = np.unique(order, axis=0, return_counts=True)
    assert len(counts) == 6 and np.all(np.abs(counts - 1000) < 5 * np.sqrt(1000 * 5 / 6)), counts
    swapped = z.reshape(-1, 3, 2)[:, [2, 0, 1]].reshape(-1, 6)
    assert np.allclose(proposal.log_density(swapped), proposal.log_density(z))


@pytest.mark.parametrize("x, H, message", [
    ([1.5, 2], np.ones((2, 2)), "integer counts"),
    ([1, 2], np.ones((2, 3)), "shape"),
    ([1, 2], -np.ones((2, 2)), "positive activations"),
])
def test_row_likelihood_refuses_bad_input(x, H, message):
    with pytest.raises(ParameterError, match=message):
        row_log_likelihood(x, H, 0.5)
