"""Tests for sepsti.core.models.pltf: index sets, the contraction engine, densities and the source layout."""

import numpy as np
import pytest
from scipy.special import gammaln
from scipy.stats import gamma as gamma_dist, poisson

from sepsti.core.errors import ParameterError
from sepsti.core.models.pltf import gamma_log_pdf, parse_spec, pltf_model

SPECS = [
    ("ik,kj->ij", dict(i=4, k=3, j=5)),
    ("ir,jr,kr->ijk", dict(i=3, j=2, k=4, r=2)),
    ("fi,ik,kt->ft", dict(f=5, i=3, k=2, t=4)),
    ("r,d,dtr->t", dict(r=3, d=4, t=6)),
]


def brute_intensity(model, factors):
    """Lambda(v) by explicit broadcasting over all indices, axes ordered output + latent."""
    letters = model.output + model.latent
    total = np.ones([model.dims[c] for c in letters])
    for indices, z in zip(model.factor_indices, factors):
        perm = [indices.index(c) for c in letters if c in indices]
        shape = [model.dims[c] if c in indices else 1 for c in letters]
        total = total * np.transpose(z, perm).reshape(shape)
    return total


@pytest.mark.parametrize("spec,dims", SPECS)
def test_xhat_and_phi_match_brute_force(spec, dims, rng):
    model = pltf_model(spec, dims)
    factors = model.sample_prior(rng)
    lam = brute_intensity(model, factors)
    n_out = len(model.output)
    np.testing.assert_allclose(model.xhat(factors), lam.sum(axis=tuple(range(n_out, lam.ndim))))
    np.testing.assert_allclose(model.intensity(factors), lam)
    weight = rng.random(model.output_shape)
    letters = model.output + model.latent
    for a, indices in enumerate(model.factor_indices):
        safe = [np.where(z > 0, z, 1.0) for z in factors]
        others = brute_intensity(model, [np.ones_like(z) if b == a else safe[b] for b, z in enumerate(factors)])
        weighted = others * weight.reshape(weight.shape + (1,) * len(model.latent))
        expected = np.einsum(f"{letters}->{indices}", weighted)
        np.testing.assert_allclose(model.phi(safe, a, weight), expected, rtol=1e-10)
        unweighted = np.einsum(f"{letters}->{indices}", others)
        np.testing.assert_allclose(model.phi(safe, a), unweighted, rtol=1e-10)


def test_source_layout_addresses_the_intensity(rng):
    model = pltf_model("fi,ik,kt->ft", dict(f=4, i=3, k=2, t=5))
    factors = model.sample_prior(rng)
    X = model.sample_data(rng, factors) + 1
    layout = model.source_layout(X)
    flat = np.concatenate([z.ravel() for z in factors])
    lam = model.intensity(factors).reshape(X.size, -1)
    for n, entry in enumerate(layout.entries):
        for u in range(model.num_latent):
            p = np.prod([flat[layout.starts[a] + layout.obs_offsets[a, n] + layout.lat_offsets[a, u]]
                         for a in range(model.num_factors)])
            assert p == pytest.approx(lam[entry, u])
    np.testing.assert_array_equal(layout.counts, X.ravel()[layout.entries])


def test_log_likelihood_is_poisson_with_mask(rng):
    mask = rng.random((4, 5)) < 0.7
    model = pltf_model("ik,kj->ij", dict(i=4, k=2, j=5), mask=mask)
    factors = model.sample_prior(rng)
    X = rng.poisson(3.0, size=(4, 5))
    expected = poisson.logpmf(X, model.xhat(factors))[mask].sum()
    assert model.log_likelihood(factors, X) == pytest.approx(expected)
    # non-integer data use gammaln(x + 1) as the normaliser
    Y = X + 0.5
    lam = model.xhat(factors)
    expected = (Y * np.log(lam) - lam - gammaln(Y + 1))[mask].sum()
    assert model.log_likelihood(factors, Y) == pytest.approx(expected)


def test_zero_data_and_zero_intensity_underflow():
    model = pltf_model("ik,kj->ij", dict(i=2, k=1, j=2))
    factors = (np.array([[0.0], [1.0]]), np.array([[1.0, 1e-300]]))
    X = np.array([[0, 0], [3, 0]])
    # 0 log 0 counts as 0; the one count: 3 log 1 − 1 − log 3!
    assert model.log_likelihood(factors, X) == pytest.approx(-1.0 - np.log(6.0), rel=1e-12)
    assert model.log_likelihood(factors, np.array([[1, 0], [0, 0]])) == -np.inf


def test_priors_and_fixed_factors(rng):
    W = rng.random((4, 2))
    model = pltf_model("ik,kj->ij", dict(j=3), prior_shape=[None, np.array([[1.0], [2.0]])],
                       prior_rate=[None, 3.0], fixed={0: W})
    assert model.free == (1,)
    assert model.dims == dict(i=4, k=2, j=3)
    np.testing.assert_array_equal(model.prior_shape[1], [[1, 1, 1], [2, 2, 2]])
    factors = model.sample_prior(rng)
    assert factors[0] is W
    expected = gamma_dist.logpdf(factors[1], model.prior_shape[1], scale=1 / 3.0).sum()
    assert model.log_prior(factors) == pytest.approx(expected)
    np.testing.assert_allclose(gamma_log_pdf(2.0, 3.0, 0.5), gamma_dist.logpdf(2.0, 3.0, scale=2.0))


@pytest.mark.parametrize("spec,match", [
    ("ik,kj", "one '->'"),
    ("ii,kj->ij", "repeated"),
    ("ik,kj->iz", "appear in no factor"),
    ("i1,kj->ij", "ASCII letters"),
])
def test_parse_errors(spec, match):
    with pytest.raises(ParameterError, match=match):
        parse_spec(spec)


def test_model_errors():
    with pytest.raises(ParameterError, match="lacks the size"):
        pltf_model("ik,kj->ij", dict(i=2, k=2))
    with pytest.raises(ParameterError, match="not broadcastable"):
        pltf_model("ik,kj->ij", dict(i=2, k=2, j=3), prior_rate=[np.ones(3), 1.0])
    with pytest.raises(ParameterError, match="positive"):
        pltf_model("ik,kj->ij", dict(i=2, k=2, j=3), prior_shape=0.0)
    with pytest.raises(ParameterError, match="every factor is fixed"):
        pltf_model("i,j->ij", fixed={0: np.ones(2), 1: np.ones(3)})
    model = pltf_model("ik,kj->ij", dict(i=2, k=2, j=3))
    with pytest.raises(ParameterError, match="shape"):
        model.validate_data(np.ones((3, 2)))
    with pytest.raises(ParameterError, match="integer counts"):
        model.validate_data(np.full((2, 3), 0.5), integer=True)


@pytest.mark.parametrize("size, match", [
    (2.5, r"^dims\['k'\]=2.5 must be an integer of at least 1$"),  # was a size of 2
    ("2", r"^dims\['k'\]='2' must be an integer"),  # was parsed
    (np.nan, r"^dims\['k'\]=nan must be an integer"),  # was a bare ValueError
    (True, r"^dims\['k'\]=True must be an integer"),  # was a size of 1
    (0, r"^dims\['k'\]=0 must be an integer of at least 1$"),
])
def test_a_size_that_is_not_a_positive_integer_is_refused(size, match):
    with pytest.raises(ParameterError, match=match):
        pltf_model("ik,kj->ij", dict(i=2, k=size, j=3))
    with pytest.raises(ParameterError, match="every size must be a positive integer"):  # from an empty fixed factor
        pltf_model("ik,kj->ij", dict(i=2, k=2), fixed={1: np.ones((2, 0))})


@pytest.mark.parametrize("X, match", [
    (np.ones((2, 3), complex), r"^X: complex values \(complex128\); expected real numbers$"),  # was its real part
    (np.full((2, 3), "1"), r"^X: expected real numbers, got values of type <U1$"),  # was a TypeError
    (np.ones((2, 3), object), r"^X: expected real numbers, got values of type object$"),
])
def test_data_that_are_not_real_numbers_are_refused(X, match):
    model = pltf_model("ik,kj->ij", dict(i=2, k=2, j=3))
    for integer in (False, True):
        with pytest.raises(ParameterError, match=match):
            model.validate_data(X, integer=integer)
    assert model.validate_data(np.ones((2, 3), np.uint8), integer=True).dtype == np.int64


def test_a_seed_in_place_of_a_generator_is_refused():
    model = pltf_model("ik,kj->ij", dict(i=2, k=2, j=3))
    with pytest.raises(ParameterError, match=r"^rng=3: expected a numpy.random.Generator"):  # an AttributeError
        model.chain_start(np.ones((2, 3), int), rng=3)


def test_validate_data_refuses_counts_beyond_int64():
    model = pltf_model("ik,kj->ij", dict(i=2, k=1, j=2))
    for X in (np.array([[1e19, 0.0], [1.0, 2.0]]), np.array([[2**63, 0], [1, 2]], dtype=np.uint64)):
        with pytest.raises(ParameterError, match="beyond the int64 counts"):
            model.validate_data(X, integer=True)
        assert model.validate_data(X).dtype == np.float64  # EM takes them as floats
    # the largest float below 2**63 still fits
    largest = np.nextafter(2.0**63, 0.0)
    assert model.validate_data(np.array([[largest, 0.0], [1.0, 2.0]]), integer=True)[0, 0] == int(largest)


def test_validate_data_looks_at_observed_entries_only():
    mask = np.array([[True, True, False], [True, True, True]])
    model = pltf_model("ik,kj->ij", dict(i=2, k=1, j=3), mask=mask)
    X = np.array([[1.0, 2.0, np.nan], [3.0, 4.0, 5.0]])
    for integer in (False, True):
        checked = model.validate_data(X, integer=integer)
        np.testing.assert_array_equal(checked, [[1, 2, 0], [3, 4, 5]])
    assert model.validate_data(np.where(mask, X, -7.0)).min() == 0.0
    with pytest.raises(ParameterError, match="finite and non-negative"):
        model.validate_data(np.where(mask, np.nan, X))


def test_gamma_normalisers_and_density_at_zero_match_scipy(rng):
    # Shapes 1 and 2 have gammaln(shape) = 0: shape 3 needs the normaliser log Gamma(3) = log 2
    # (the normaliser left out of the prior's constant passed before); Exp(2) has density 2 at zero
    # (-inf at z = 0 whatever the shape passed before).
    model = pltf_model("ik,kj->ij", dict(i=3, k=2, j=4), prior_shape=3.0, prior_rate=[2.0, 0.5])
    factors = model.sample_prior(rng)
    expected = (gamma_dist.logpdf(factors[0], 3.0, scale=1 / 2.0).sum()
                + gamma_dist.logpdf(factors[1], 3.0, scale=1 / 0.5).sum())
    assert model.log_prior(factors) == pytest.approx(expected, rel=1e-12)
    assert gamma_log_pdf(0.0, 1.0, 2.0) == pytest.approx(np.log(2.0), rel=1e-12)
    assert gamma_log_pdf(-1e-9, 1.0, 2.0) == -np.inf


def test_sample_prior_means_are_shape_over_rate(rng):
    # Gamma(A, B) has mean A / B and standard deviation sqrt(A) / B: the means of 2000 draws
    # within 4 standard errors (a scale of B in place of 1 / B passed before).
    model = pltf_model("ik,kj->ij", dict(i=40, k=50, j=40), prior_shape=2.0, prior_rate=[4.0, 0.5])
    factors = model.sample_prior(rng)
    for z, rate in zip(factors, (4.0, 0.5)):
        assert abs(z.mean() - 2.0 / rate) < 4 * np.sqrt(2.0) / rate / np.sqrt(z.size)


def test_masked_entries_are_left_out_of_the_draws_and_the_layout(rng):
    # Intensity 50 everywhere: an observed entry is 0 with probability e^-50, an unobserved one is set to 0
    # (zeroing the observed entries, and a layout over unobserved counts, passed before).
    mask = np.array([[True, False, True], [False, True, True]])
    model = pltf_model("ik,kj->ij", dict(i=2, k=1, j=3), mask=mask)
    factors = (np.full((2, 1), 5.0), np.full((1, 3), 10.0))
    X = model.sample_data(rng, factors)
    assert np.all(X[~mask] == 0) and np.all(X[mask] > 0)
    layout = model.source_layout(np.full((2, 3), 7))
    np.testing.assert_array_equal(layout.entries, [0, 2, 4, 5])
    np.testing.assert_array_equal(layout.counts, [7, 7, 7, 7])


def test_log_prior_with_a_rate_per_entry_and_off_the_orthant(rng):
    # a rate array pairs each entry with its own rate (rates reversed over the entries passed before); a negative
    # entry has density 0 (only entries below -1 refused passed before)
    rates = np.array([[0.5, 1.0, 2.0], [3.0, 4.0, 5.0]])
    model = pltf_model("ik,kj->ij", dict(i=3, k=2, j=3), prior_shape=[1.0, 2.5], prior_rate=[1.0, rates])
    factors = model.sample_prior(rng)
    expected = (gamma_dist.logpdf(factors[0], 1.0).sum()
                + gamma_dist.logpdf(factors[1], 2.5, scale=1 / rates).sum())
    assert model.log_prior(factors) == pytest.approx(expected, rel=1e-12)
    factors[1][0, 0] = -0.5
    assert model.log_prior(factors) == -np.inf
