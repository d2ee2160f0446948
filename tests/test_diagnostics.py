"""ESS, split-R̂ and MCSE: closed forms for AR(1) chains and agreement with ArviZ."""

import warnings

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.samplers import diagnostics


def ar1(rng, phi, shape):
    """AR(1) chains with unit stationary variance, shape (num_chains, num_draws)."""
    noise = rng.standard_normal(shape) * np.sqrt(1 - phi ** 2)
    x = np.empty(shape)
    x[:, 0] = rng.standard_normal(shape[0])
    for t in range(1, shape[1]):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


def test_ess_of_ar1_matches_its_autocorrelation_time(rng):
    phi = 0.8
    draws = ar1(rng, phi, (4, 5000))
    expected = draws.size * (1 - phi) / (1 + phi)  # N / τ with τ = (1 + φ) / (1 − φ)
    assert diagnostics.effective_sample_size(draws, method="mean") == pytest.approx(expected, rel=0.15)
    independent = rng.standard_normal((4, 1000))
    assert diagnostics.effective_sample_size(independent) == pytest.approx(4000, rel=0.15)


def test_rhat_detects_chains_that_disagree(rng):
    draws = rng.standard_normal((4, 1000))
    assert diagnostics.split_rhat(draws) < 1.01
    draws[0] += 1.0
    assert diagnostics.split_rhat(draws) > 1.05
    trend = rng.standard_normal((2, 1000)) + np.linspace(0, 2, 1000)  # non-stationary within chains
    assert diagnostics.split_rhat(trend, method="split") > 1.1


def test_shapes_and_errors(rng):
    draws = rng.standard_normal((2, 100, 3, 4))
    assert diagnostics.effective_sample_size(draws).shape == (3, 4)
    assert diagnostics.split_rhat(draws).shape == (3, 4)
    assert diagnostics.mcse_variance(draws).shape == (3, 4)
    with pytest.raises(ParameterError, match="at least 2 chains"):
        diagnostics.split_rhat(draws[:1])
    with pytest.raises(ParameterError, match="method"):
        diagnostics.effective_sample_size(draws, method="quantile")


@pytest.mark.parametrize("shape", [(0, 100), (2, 100, 0)])
def test_draws_without_a_chain_or_a_parameter_are_refused(shape):
    """No chain, or a parameter shape of size 0, met NumPy's 'cannot reshape array of size 0'."""
    for diagnostic in (diagnostics.effective_sample_size, diagnostics.split_rhat, diagnostics.mcse_mean,
                       diagnostics.mcse_variance):
        with pytest.raises(ParameterError, match=rf"^draws of shape \({shape[0]}, 100.*none empty$"):
            diagnostic(np.zeros(shape))


def test_tail_ess_matches_arviz(rng):
    arviz = pytest.importorskip("arviz")
    # Autocorrelated chains (a random walk plus noise), so the tails mix more slowly than independent draws.
    draws = 0.1 * np.cumsum(rng.standard_normal((3, 500, 4)), axis=1) + rng.standard_normal((3, 500, 4))
    expected = arviz.ess(arviz.convert_to_dataset(draws), method="tail")["x"].values
    np.testing.assert_allclose(diagnostics.effective_sample_size(draws, method="tail"), expected, rtol=1e-10)


def test_mcse_mean_of_independent_draws(rng):
    draws = 3.0 * rng.standard_normal((4, 2500))
    assert diagnostics.mcse_mean(draws) == pytest.approx(3.0 / 100, rel=0.1)


def test_mcse_variance_of_independent_and_ar1_draws(rng):
    # the mean of squared deviations: Var((x − μ)²) = 2σ⁴, and for AR(1) the squares' autocorrelation is φ^(2k),
    # so τ = (1 + φ²) / (1 − φ²); tolerances 4 times the estimator's spread over 40 seeds (2.9 % and 5.1 %)
    draws = 3.0 * rng.standard_normal((4, 2500))
    assert diagnostics.mcse_variance(draws) == pytest.approx(9.0 * np.sqrt(2 / draws.size), rel=0.12)
    phi = 0.8
    draws = ar1(rng, phi, (4, 5000))
    tau = (1 + phi ** 2) / (1 - phi ** 2)
    assert diagnostics.mcse_variance(draws) == pytest.approx(np.sqrt(2 * tau / draws.size), rel=0.2)


def test_agrees_with_arviz(rng):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arviz = pytest.importorskip("arviz")
    draws = np.stack([rng.standard_normal((3, 400)), ar1(rng, 0.9, (3, 400)),
                      np.cumsum(rng.standard_normal((3, 400)), axis=1)], axis=-1)
    dataset = arviz.convert_to_dataset(draws)
    np.testing.assert_allclose(diagnostics.effective_sample_size(draws), arviz.ess(dataset).x.values, rtol=1e-10)
    np.testing.assert_allclose(diagnostics.effective_sample_size(draws, method="mean"),
                               arviz.ess(dataset, method="mean").x.values, rtol=1e-10)
    np.testing.assert_allclose(diagnostics.split_rhat(draws), arviz.rhat(dataset).x.values, rtol=1e-10)
    np.testing.assert_allclose(diagnostics.split_rhat(draws, method="split"),
                               arviz.rhat(dataset, method="split").x.values, rtol=1e-10)
    np.testing.assert_allclose(diagnostics.mcse_mean(draws), arviz.mcse(dataset).x.values, rtol=1e-10)
    data = diagnostics.to_inference_data({"theta": draws}, sample_stats={"diverging": np.zeros((3, 400), bool)})
    assert data.posterior["theta"].shape == (3, 400, 3)
    assert "diverging" in data.sample_stats


def test_a_nan_draw_gives_no_ess_and_no_rhat(rng):
    draws = rng.standard_normal((2, 300, 2))
    draws[0, 5, 1] = np.nan
    for method in ("bulk", "tail", "mean"):
        ess = diagnostics.effective_sample_size(draws, method=method)
        assert np.isfinite(ess[0]) and np.isnan(ess[1]), method
    assert np.isnan(diagnostics.split_rhat(draws)[1])


def test_odd_length_chains_and_tied_tail_quantiles_agree_with_arviz(rng):
    # 401 draws: each half has 200, the middle draw is left out (halves overlapping at it passed before);
    # Poisson counts put the 5 % and 95 % quantiles on tied draws, counted as in the tail (< in place of <=
    # passed before)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arviz = pytest.importorskip("arviz")
    draws = np.stack([ar1(rng, 0.5, (3, 401)), np.cumsum(rng.standard_normal((3, 401)), axis=1)], axis=-1)
    dataset = arviz.convert_to_dataset(draws)
    np.testing.assert_allclose(diagnostics.effective_sample_size(draws, method="mean"),
                               arviz.ess(dataset, method="mean").x.values, rtol=1e-10)
    np.testing.assert_allclose(diagnostics.split_rhat(draws, method="split"),
                               arviz.rhat(dataset, method="split").x.values, rtol=1e-10)
    counts = rng.poisson(3.0, (3, 400, 2)).astype(float)
    expected = arviz.ess(arviz.convert_to_dataset(counts), method="tail")["x"].values
    np.testing.assert_allclose(diagnostics.effective_sample_size(counts, method="tail"), expected, rtol=1e-10)


def test_mcse_variance_centres_draws_away_from_zero(rng):
    # Draws of mean 10 and sd 3: the variance's MCSE is still 9 sqrt(2 / N), within the 12 % of the test
    # above (the MCSE of the mean of x^2, sqrt((4 mu^2 sigma^2 + 2 sigma^4) / N), 6.9 times larger, passed before)
    draws = 10.0 + 3.0 * rng.standard_normal((4, 2500))
    assert diagnostics.mcse_variance(draws) == pytest.approx(9.0 * np.sqrt(2 / draws.size), rel=0.12)


def test_chains_constant_to_rounding_have_the_full_sample_size(rng):
    # a spread of 2.2e-16, below float resolution, counts as constant: the raw draws' ESS is 4 x 100 draws, as
    # ArviZ's (a rounding-noise autocorrelation passed before)
    draws = np.ones((4, 100)) + np.finfo(float).eps * (rng.random((4, 100)) < 0.5)
    assert diagnostics.effective_sample_size(draws, method="mean") == 400.0
