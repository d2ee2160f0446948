import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from sepsti.core.errors import ParameterError
from sepsti.core.evidence.rank_one import rank_one_log_evidence


def _monte_carlo_evidence(X, rate, rng, num_draws):
    """log p(X) by averaging p(X | h) over prior draws of h, with w integrated out (Gamma conjugacy)."""
    h = rng.exponential(1.0 / rate, size=(num_draws, X.shape[1]))
    rows = X.sum(axis=1)
    log_terms = (X.shape[0] * np.log(rate) + gammaln(rows + 1.0).sum() - gammaln(X + 1.0).sum()
                 + np.log(h) @ X.sum(axis=0) - (rows + 1.0).sum() * np.log(rate + h.sum(axis=1)))
    estimate = logsumexp(log_terms) - np.log(num_draws)
    weights = np.exp(log_terms - estimate)  # delta method: se of log(mean) = sd(weights) / sqrt(n)
    return estimate, weights.std(ddof=1) / np.sqrt(num_draws)


@pytest.mark.parametrize("rate", [0.3, 2.0])
def test_matches_monte_carlo_over_the_prior(rng, rate):
    X = np.array([[0.0, 2.0, 1.0], [3.0, 1.0, 0.0]])
    estimate, stderr = _monte_carlo_evidence(X, rate, rng, 400_000)
    assert abs(rank_one_log_evidence(X, rate) - estimate) < 4 * stderr


def test_single_entry_is_a_product_of_exponentials():
    # I = J = 1, x = 0: p(0) = E[exp(-w h)] = int rate e^(-rate h) rate / (rate + h) dh
    from scipy import integrate

    rate = 0.7
    value, _ = integrate.quad(lambda h: rate * np.exp(-rate * h) * rate / (rate + h), 0, np.inf)
    assert rank_one_log_evidence(np.zeros((1, 1)), rate) == pytest.approx(np.log(value), abs=1e-9)


@pytest.mark.parametrize("rate", [0.7, 3e-9, 1e-12])
def test_zeros_with_more_columns_than_rows_at_any_rate(rate):
    # I = 1, J = 2, X = 0: p(0) = rate^3 int S e^(-rate S) / (rate + S) dS = rate^3 (1/rate - rate e^(rate^2)
    # E1(rate^2)); at rate <~ 3e-9 rate + e^mode rounds to e^mode, and log1p(-1) = -inf sent the bracket
    # search to 1e308 (a NaN ValueError)
    from scipy.special import exp1

    exact = 3 * np.log(rate) + np.log(1 / rate - rate * np.exp(rate**2) * exp1(rate**2))
    assert rank_one_log_evidence(np.zeros((1, 2)), rate) == pytest.approx(exact, rel=1e-10)


def test_speech_sized_counts_are_finite_and_transposition_invariant(rng):
    X = rng.poisson(rng.exponential(5000.0, size=(257, 1)) @ rng.exponential(1.0, size=(1, 300))).astype(float)
    value = rank_one_log_evidence(X, 4e-4)
    assert np.isfinite(value)
    assert rank_one_log_evidence(X.T, 4e-4) == pytest.approx(value, rel=1e-10)


@pytest.mark.parametrize("rate", [0.0, -1.0, np.inf, np.nan, "1"])
def test_bad_rate(rate):
    with pytest.raises(ParameterError, match="rate"):
        rank_one_log_evidence(np.ones((2, 2)), rate)


def test_bad_input():
    with pytest.raises(ParameterError):
        rank_one_log_evidence(-np.ones((2, 2)), 1.0)
