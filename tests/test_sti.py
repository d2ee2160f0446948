import numpy as np
import pytest

from core.errors import ParameterError
from core.evidence.sti import (integrated_time, integration_weights, stochastic_thermodynamic_integration,
                               temperature_grid, thermodynamic_integral)
from core.models.gaussian_additive import GaussianAdditiveModel


def test_grid_counts_intervals():
    np.testing.assert_allclose(temperature_grid(5), [0, 0.2, 0.4, 0.6, 0.8, 1.0])
    np.testing.assert_allclose(temperature_grid(4, schedule="power", power=3), (np.arange(5) / 4) ** 3)
    with pytest.raises(ParameterError, match="schedule='log'"):
        temperature_grid(4, schedule="log")
    with pytest.raises(ParameterError, match="num_intervals=0"):
        temperature_grid(0)


@pytest.mark.parametrize("rule,power", [("trapezoid", 1.0), ("trapezoid", 4.0), ("simpson", 1.0), ("simpson", 3.0)])
def test_weights_integrate_what_they_should(rule, power):
    t = temperature_grid(8, schedule="power" if power > 1 else "uniform", power=power)
    w = integration_weights(t, rule=rule, power=power)
    assert w.sum() == pytest.approx(1.0)  # exact: c u^(c-1) is at most quadratic here
    if rule == "simpson":
        # f(t) = t^(1/c) gives the cubic-free integrand c u^c ... exact for c <= 3
        u = t ** (1 / power)
        assert w @ u == pytest.approx(power / (power + 1), rel=1e-9)


def test_integrated_time_of_ar1(rng):
    rho = 0.8
    x = np.empty(200000)
    x[0] = 0
    noise = rng.standard_normal(x.size)
    for i in range(1, x.size):
        x[i] = rho * x[i - 1] + noise[i]
    assert integrated_time(x) == pytest.approx((1 + rho) / (1 - rho), rel=0.1)
    assert integrated_time(np.ones(10)) == 1.0


def test_integral_of_exact_expectations_and_error_propagation():
    t = temperature_grid(4)
    traces = [np.array([2 * ti, 2 * ti]) for ti in t]
    result = thermodynamic_integral(t, traces, tol=0)
    assert result.log_evidence == pytest.approx(1.0)
    assert result.stderr == 0.0
    with pytest.raises(ParameterError, match="traces"):
        thermodynamic_integral(t, traces[:-1])


@pytest.mark.filterwarnings("ignore:traces shorter")
def test_sti_matches_exact_evidence_on_gaussian_model(rng):
    # full-data gradients (no subsampling noise), small steps: STI must agree with the
    # closed form within its standard error plus the known quadrature error of the grid.
    _, x = GaussianAdditiveModel.sample(rng, 200, 2)
    for rank in (1, 3):
        model = GaussianAdditiveModel(x, rank)
        result = stochastic_thermodynamic_integration(
            model, model.sample_prior, num_intervals=12, schedule="power", power=4, rule="simpson",
            num_steps=1500, num_keep=1000, sampler="psgld", step_a=1e-6, seed=3, control_variate=True,
            evaluate="before_update")
        exact = model.log_marginal_likelihood()
        t = result.temperatures
        quadrature = integration_weights(t, rule="simpson", power=4) @ model.expected_log_likelihood(t) - exact
        bias = result.log_evidence - exact - quadrature
        assert abs(bias) < 4 * result.stderr + 0.3, (rank, result.log_evidence, exact, result.stderr)
