"""MAP for NMF-GPP: recovers a simulated spectrum, is a stationary point, beats its start."""

import numpy as np
import pytest

from sepsti.core.errors import ConvergenceWarning, ParameterError
from sepsti.core.factorization.map import initialize_nmf_gpp, map_nmf_gpp
from sepsti.core.models.nmf_gpp import NMFGPP
from sepsti.core.random import stream
from sepsti.corpora.raman import simulate_raman


def small_problem(seed=0):
    data = simulate_raman(1, seed=seed, plate_shape=(12, 12), num_wavenumbers=30, noise_std=0.03)
    return data, NMFGPP(data.X, num_components=2, plate_shape=(12, 12), beta=6.0, noise_std=0.03)


def test_map_recovers_the_spectrum_and_is_stationary():
    data, model = small_problem()
    result = map_nmf_gpp(model, num_starts=2, seed=1)
    corr = max(np.corrcoef(result.H[k], data.H[0])[0, 1] for k in range(2))
    assert corr > 0.95, f"best spectrum correlation {corr:.3f}"
    fit = np.sqrt(np.mean((result.D @ result.H - data.X) ** 2))
    assert fit < 1.2 * 0.03, f"residual rms {fit:.4f} vs noise 0.03"
    _, grad = model.logdensity_and_grad(result.theta)
    # measured: 0.12 at convergence, against 1.1e3 / 194 when L-BFGS is stopped after 5 / 50 iterations
    # (the gradient at zero is 1.2e6)
    assert np.abs(grad).max() < 1.0, np.abs(grad).max()
    # the starts it was run from (seed 1, two of them)
    starts = [model.logdensity_and_grad(initialize_nmf_gpp(model, stream(1, 3, i)))[0] for i in range(2)]
    assert result.log_posterior > max(starts)
    assert result.log_posterior == pytest.approx(max(result.history))


def test_map_is_deterministic_and_validates():
    _, model = small_problem(1)
    with pytest.warns(ConvergenceWarning, match="max_iter=50"):
        a = map_nmf_gpp(model, num_starts=1, seed=4, max_iter=50)
    with pytest.warns(ConvergenceWarning):
        b = map_nmf_gpp(model, num_starts=1, seed=4, max_iter=50)
    np.testing.assert_array_equal(a.theta, b.theta)
    with pytest.raises(ParameterError, match="num_starts"):
        map_nmf_gpp(model, num_starts=0)
    with pytest.raises(ParameterError, match="method"):
        initialize_nmf_gpp(model, np.random.default_rng(0), method="svd")


@pytest.mark.parametrize("kwargs, match", [
    (dict(tol=-1e-6), "tol=-1e-06 must be a finite number >= 0"),
    (dict(tol=np.nan), "tol=nan"),
    (dict(max_iter=0), "max_iter=0 must be an integer of at least 1"),
    (dict(max_iter=-1), "max_iter=-1"),
    (dict(max_iter=2.5), "max_iter=2.5"),
    (dict(num_starts=2.5), "num_starts=2.5 must be an integer"),
    (dict(num_starts=True), "num_starts=True"),
    (dict(theta0=np.inf), "theta0 holds NaN or infinite values"),  # a ZeroDivisionError in the compiled pass
    (dict(theta0=np.nan), "theta0 holds NaN or infinite values"),
])
def test_settings_are_validated(kwargs, match):
    _, model = small_problem(1)
    if "theta0" in kwargs:
        kwargs = dict(theta0=np.full(model.dim, kwargs["theta0"]))
    with pytest.raises(ParameterError, match=match):
        map_nmf_gpp(model, **kwargs)


@pytest.mark.parametrize("rng, num_iter, match", [
    (np.random.default_rng(0), -1, r"^num_iter=-1 must be an integer of at least 0$"),  # ran no update
    (np.random.default_rng(0), 2.5, r"^num_iter=2.5 must be an integer"),  # a TypeError
    (3, 10, r"^rng=3: expected a numpy.random.Generator"),  # an AttributeError
])
def test_the_start_refuses_bad_iterations_and_a_seed_for_a_generator(rng, num_iter, match):
    _, model = small_problem(1)
    with pytest.raises(ParameterError, match=match):
        initialize_nmf_gpp(model, rng, num_iter=num_iter)


@pytest.mark.slow
def test_experiment_1_beta_10_map_spectrum():
    data = simulate_raman(1, seed=0)
    model = NMFGPP(data.X, num_components=2, plate_shape=data.plate_shape, beta=10.0, noise_std=data.noise_std)
    result = map_nmf_gpp(model, num_starts=3, seed=0)
    corr = max(np.corrcoef(result.H[k], data.H[0])[0, 1] for k in range(2))
    assert corr >= 0.95, f"MAP spectrum correlation {corr:.3f}"


class _PartlyUndefined:
    """A posterior N(-1, 1/2) per coordinate, undefined (NaN) where the first coordinate exceeds 0.5."""

    dim = 3

    def logdensity_and_grad(self, theta):
        if theta[0] > 0.5:
            return np.nan, np.full(3, np.nan)
        return -np.sum((theta + 1) ** 2), -2 * (theta + 1)

    def factors(self, theta):
        return theta[:1, None], theta[None, 1:]


def test_starts_ending_where_the_posterior_is_undefined_are_passed_over(monkeypatch):
    import sepsti.core.factorization.map as module

    starts = iter([np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0])])
    monkeypatch.setattr(module, "initialize_nmf_gpp", lambda model, rng, method="nmf": next(starts))
    result = map_nmf_gpp(_PartlyUndefined(), num_starts=2)
    assert np.isnan(result.history[0]) and result.log_posterior == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(result.theta, -1.0, atol=1e-6)
    with pytest.raises(ParameterError, match="every start \\(1\\) ended at a log posterior that is not finite"):
        map_nmf_gpp(_PartlyUndefined(), theta0=np.array([1.0, 0.0, 0.0]))


def test_prior_start_is_a_standard_normal_scaled_by_a_tenth():
    # dim = (144 + 30) 2 = 348 draws of N(0, 0.1^2): the sample standard deviation within 4 of its standard
    # errors, 0.1 / sqrt(2 dim) (an unscaled draw passed before)
    _, model = small_problem()
    theta = initialize_nmf_gpp(model, stream(2), method="prior")
    assert theta.shape == (model.dim,)
    assert abs(theta.std() - 0.1) < 4 * 0.1 / np.sqrt(2 * model.dim)


def test_nmf_start_without_updates_is_the_balanced_random_start():
    # num_iter = 0 leaves W, H ~ U(0.1, 1) sqrt(mean(X) / M) as drawn; balancing by c = sqrt(max H_m / max W_m)
    # keeps W H and makes the largest entries of D_m and H_m equal (sqrt dropped from c, and H times c,
    # passed before; so did W, H scaled by sqrt(mean(X)))
    _, model = small_problem()
    theta = initialize_nmf_gpp(model, stream(5), num_iter=0)
    draws = stream(5)
    size = np.sqrt(np.maximum(model.X, 0).mean() / 2)
    W = draws.uniform(0.1, 1.0, (144, 2)) * size
    H = draws.uniform(0.1, 1.0, (2, 30)) * size
    D, Hs = model.factors(theta)
    np.testing.assert_allclose(D @ Hs, W @ H, rtol=1e-6)
    np.testing.assert_allclose(D.max(axis=0), Hs.max(axis=1), rtol=1e-6)


def test_each_start_comes_from_its_stream_and_the_best_one_is_kept():
    # stopped after 3 iterations, the starts end apart; start i is initialize_nmf_gpp(stream(seed, 3, i)), and
    # the result is the highest of them (one stream for every start, the lowest start kept, and converged=True
    # at max_iter, passed before)
    _, model = small_problem()
    with pytest.warns(ConvergenceWarning):
        result = map_nmf_gpp(model, num_starts=3, seed=7, max_iter=3)
    for i in range(3):
        with pytest.warns(ConvergenceWarning):
            alone = map_nmf_gpp(model, theta0=initialize_nmf_gpp(model, stream(7, 3, i)), max_iter=3)
        assert result.history[i] == alone.log_posterior
    assert len(set(result.history)) == 3
    assert result.log_posterior == max(result.history)
    assert not result.converged
    converged = map_nmf_gpp(model, theta0=result.theta, tol=1e-3)
    assert converged.converged


def test_nmf_start_is_lee_seung_on_the_clipped_data():
    # data with negative entries: two multiplicative updates of least-squares NMF of max(X, 0), written out from
    # the start's draws, give the start's D H (X unclipped in the numerator, and an extra term in the
    # denominator, passed before)
    data, _ = small_problem()
    model = NMFGPP(data.X - 0.15, num_components=2, plate_shape=(12, 12), beta=6.0, noise_std=0.03)
    assert model.X.min() < 0
    theta = initialize_nmf_gpp(model, stream(6), num_iter=2)
    X = np.maximum(model.X, 0)
    draws = stream(6)
    W = draws.uniform(0.1, 1.0, (144, 2)) * np.sqrt(X.mean() / 2)
    H = draws.uniform(0.1, 1.0, (2, 30)) * np.sqrt(X.mean() / 2)
    for _ in range(2):
        H = H * (W.T @ X) / (W.T @ W @ H)
        W = W * (X @ H.T) / (W @ H @ H.T)
    D, Hs = model.factors(theta)
    np.testing.assert_allclose(D @ Hs, W @ H, rtol=1e-6)
