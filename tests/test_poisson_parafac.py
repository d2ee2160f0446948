import numpy as np
import pytest
from scipy import special, stats

from sepsti.core.errors import ParameterError
from sepsti.core.models.poisson_parafac import ParafacFactors, PoissonParafac, reconstruct
from sepsti.core.parallel.tensor_blocks import build_block_index
from sepsti.core.sparse_tensor import from_dense

SHAPE = (6, 7, 8)
RANK = 3


@pytest.fixture
def problem(rng):
    theta = ParafacFactors(*(rng.exponential(1.0, size=(n, RANK)) for n in SHAPE))
    X = rng.poisson(reconstruct(theta)).astype(float)
    X[0, 0, 0] = 7.0  # a count > 1 exercises the lgamma term of the sparse kernel
    init = ParafacFactors(*(rng.exponential(1.0, size=(n, RANK)) + 0.1 for n in SHAPE))
    return X, init


def _reference_log_likelihood(X, theta):
    return float(np.sum(stats.poisson.logpmf(X, reconstruct(theta))))


def _finite_difference(fn, theta, h=1e-6):
    grads = []
    for which, factor in enumerate(theta):
        g = np.zeros_like(factor)
        for idx in np.ndindex(factor.shape):
            up = [f.copy() for f in theta]
            down = [f.copy() for f in theta]
            up[which][idx] += h
            down[which][idx] -= h
            g[idx] = (fn(ParafacFactors(*up)) - fn(ParafacFactors(*down))) / (2 * h)
        grads.append(g)
    return grads


def test_dense_log_likelihood_matches_scipy(problem):
    X, theta = problem
    model = PoissonParafac(X, RANK)
    assert model.log_likelihood(theta) == pytest.approx(_reference_log_likelihood(X, theta), rel=1e-12)
    assert model.n_data == X.size


# "dense_blocks": blocks that share index ranges, so each factor's gradient adds up several blocks' terms (the C
# gradient of the last block written over the others' passed before)
@pytest.mark.parametrize("kind", ["dense", "sparse", "entries", "sparse_part", "dense_blocks"])
def test_gradient_matches_finite_differences(problem, rng, kind):
    X, theta = problem
    if kind in ("sparse", "sparse_part"):
        model = PoissonParafac(from_dense(X), RANK)
    else:
        model = PoissonParafac(X, RANK)
    if kind == "entries":
        subset = rng.choice(X.size, size=X.size // 4, replace=False)
    elif kind == "sparse_part":
        subset = build_block_index(model.data, 3).part(4)
    elif kind == "dense_blocks":
        subset = build_block_index(X, 3).blocks([(0, 0, 0), (1, 0, 0), (0, 1, 0), (2, 2, 1), (2, 1, 1)])
    else:
        subset = None
    grad = model.grad_log_likelihood(theta, subset)
    numeric = _finite_difference(lambda th: model.log_likelihood(th, subset), theta)
    for g, n in zip(grad, numeric):
        np.testing.assert_allclose(g, n, rtol=1e-5, atol=1e-5)


def test_sparse_parts_equal_dense_blocks(problem):
    X, theta = problem
    dense, sparse = PoissonParafac(X, RANK), PoissonParafac(from_dense(X), RANK)
    dense_index, sparse_index = build_block_index(X, 3), build_block_index(sparse.data, 3)
    total = 0.0
    for p in range(sparse_index.num_parts):
        ls, gs = sparse.log_likelihood_and_grad(theta, sparse_index.part(p))
        ld, gd = dense.log_likelihood_and_grad(theta, dense_index.part(p))
        assert ls == pytest.approx(ld, rel=1e-12, abs=1e-10)
        for a, b in zip(gs, gd):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        total += ls
    # the parts cover the tensor once, so their sum is the full log-likelihood
    assert total == pytest.approx(dense.log_likelihood(theta), rel=1e-12)
    full_sparse, full_dense = sparse.log_likelihood_and_grad(theta), dense.log_likelihood_and_grad(theta)
    assert full_sparse[0] == pytest.approx(full_dense[0], rel=1e-12)
    for a, b in zip(full_sparse[1], full_dense[1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_single_block_and_parallel_part_agree_with_serial(problem):
    X, theta = problem
    sparse = PoissonParafac(from_dense(X), RANK, parallel=True)
    index = build_block_index(sparse.data, 3)
    part = index.part(5)
    logl_part, grad_part = sparse.log_likelihood_and_grad(theta, part)  # parallel kernel
    logl_sum = 0.0
    grad_sum = [np.zeros_like(f) for f in theta]
    for key in part.keys:
        logl, grad = sparse.log_likelihood_and_grad(theta, index.block(*key))  # serial kernel
        logl_sum += logl
        for acc, g in zip(grad_sum, grad):
            acc += g
    assert logl_part == pytest.approx(logl_sum, rel=1e-13)
    for a, b in zip(grad_part, grad_sum):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_entry_subset_of_everything_equals_full(problem):
    X, theta = problem
    model = PoissonParafac(X, RANK)
    logl, grad = model.log_likelihood_and_grad(theta, np.arange(X.size))
    full_logl, full_grad = model.log_likelihood_and_grad(theta)
    assert logl == pytest.approx(full_logl, rel=1e-12)
    for a, b in zip(grad, full_grad):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11)
    assert model.subset_size(np.arange(10)) == 10


def test_subset_size_counts_zeros(problem):
    X, _ = problem
    sparse = PoissonParafac(from_dense(X), RANK)
    index = build_block_index(sparse.data, 2)
    assert sum(sparse.subset_size(index.part(p)) for p in range(index.num_parts)) == X.size
    assert sparse.subset_size(None) == X.size


def test_zero_counts_with_tiny_rate_are_exact(rng):
    theta = ParafacFactors(np.full((2, 1), 1e-200), np.ones((3, 1)), np.ones((4, 1)))
    X = np.zeros((2, 3, 4))
    model = PoissonParafac(X, 1)
    logl, grad = model.log_likelihood_and_grad(theta)
    assert logl == pytest.approx(-24e-200, rel=1e-12)
    np.testing.assert_allclose(grad.A, -12.0, rtol=1e-12)  # −Σ_jk B_j C_k where every count is 0


def test_prior_matches_scipy(problem):
    _, theta = problem
    model = PoissonParafac(np.zeros(SHAPE), RANK, prior_rate=(2.0, 3.0, 0.5))
    expected = sum(stats.expon.logpdf(f, scale=1 / rate).sum() for f, rate in zip(theta, (2.0, 3.0, 0.5)))
    assert model.log_prior(theta) == pytest.approx(expected, rel=1e-12)
    grad = model.grad_log_prior(theta)
    assert np.all(grad.B == -3.0)
    negative = ParafacFactors(-theta.A, theta.B, theta.C)
    assert model.log_prior(negative) == -np.inf
    # 0 is in the support of the exponential prior: its density there is the rate (-inf at 0 passed before)
    zero = ParafacFactors(np.where(np.eye(*theta.A.shape) > 0, 0.0, theta.A), theta.B, theta.C)
    expected = sum(stats.expon.logpdf(f, scale=1 / rate).sum() for f, rate in zip(zero, (2.0, 3.0, 0.5)))
    assert model.log_prior(zero) == pytest.approx(expected, rel=1e-12)


def test_sample_prior_mean(rng):
    model = PoissonParafac(np.zeros((400, 5, 5)), 10, prior_rate=4.0)
    A = model.sample_prior(rng).A
    # mean of 4000 Exp(4) draws: SE = 0.25 / sqrt(4000)
    assert abs(A.mean() - 0.25) < 4 * 0.25 / np.sqrt(A.size)


@pytest.mark.parametrize("data, rank, rate, match", [
    (np.zeros((3, 4)), 2, 1.0, "three-way"),
    (-np.ones((2, 2, 2)), 2, 1.0, "non-negative"),
    (np.zeros((2, 2, 2)), 0, 1.0, "rank"),
    (np.zeros((2, 2, 2)), 2, -1.0, "prior_rate"),
    (np.zeros((2, 2, 2)), 2, (1.0, 0.0, 1.0), r"^prior_rate=\(1.0, 0.0, 1.0\) must be positive"),  # was accepted
    (np.zeros((2, 2, 2)), None, 1.0, "rank=None"),
    (np.zeros((2, 2, 2)), 2.5, 1.0, "rank=2.5"),
    (np.zeros((2, 2, 2)), 2, (1.0, 2.0), "one value or three"),
    (np.full((2, 2, 2), "1"), 2, 1.0, r"^data: expected real numbers, got values of type <U1$"),  # were read as 1.0
    (np.ones((2, 2, 2), complex), 2, 1.0, r"^data: complex values \(complex128\); expected real numbers$"),
])
def test_invalid_input(data, rank, rate, match):
    with pytest.raises(ParameterError, match=match):
        PoissonParafac(data, rank, prior_rate=rate)


def test_entry_subset_rejected_for_sparse(problem):
    X, theta = problem
    with pytest.raises(ParameterError, match="dense data"):
        PoissonParafac(from_dense(X), RANK).log_likelihood(theta, np.arange(3))



@pytest.mark.parametrize("sparse", [False, True])
def test_factors_of_other_shapes_are_refused_before_the_kernels(problem, sparse):
    # the compiled kernels index the factors by the data's coordinates: out of bounds, not an error
    from sepsti.core.factorization.parafac_map import poisson_parafac_map

    X, theta = problem
    model = PoissonParafac(from_dense(X) if sparse else X, RANK)
    short = ParafacFactors(theta.A[:2], theta.B, theta.C)
    ranks_apart = ParafacFactors(theta.A[:, :1], theta.B, theta.C)
    for bad in (short, ranks_apart):
        with pytest.raises(ParameterError, match="factors of shapes"):
            model.log_likelihood_and_grad(bad)
        with pytest.raises(ParameterError, match="factors of shapes"):
            poisson_parafac_map(model, bad, max_iter=2)
    with pytest.raises(ParameterError, match="finite and strictly positive"):
        poisson_parafac_map(model, ParafacFactors(theta.A * np.nan, theta.B, theta.C), max_iter=2)
    # another rank throughout is the model's to score (the reference path keeps one model for every rank)
    lower = ParafacFactors(*(f[:, :1] for f in theta))
    assert np.isfinite(model.log_likelihood(lower))


def test_a_stored_zero_counts_as_the_dense_path_counts_it():
    # a zero kept among the non-zeros, at an entry whose intensity is 0: nothing, as in the dense sum
    from sepsti.core.sparse_tensor import SparseTensor

    stored = SparseTensor(np.array([[0, 0, 0], [1, 1, 1]]), np.array([0.0, 2.0]), (2, 2, 2))
    dense = np.zeros((2, 2, 2))
    dense[1, 1, 1] = 2.0
    theta = ParafacFactors(np.array([[0.0], [1.5]]), np.ones((2, 1)), np.ones((2, 1)))
    ours, grad = PoissonParafac(stored, 1).log_likelihood_and_grad(theta)
    reference, reference_grad = PoissonParafac(dense, 1).log_likelihood_and_grad(theta)
    assert ours == pytest.approx(reference, rel=1e-12) and np.isfinite(ours)
    for got, want in zip(grad, reference_grad):
        np.testing.assert_allclose(got, want, rtol=1e-12)



def test_a_fractional_count_is_scored_as_written_on_the_sparse_path_and_an_entry_subset():
    """Counts in (0, 1), which the model allows, score x log x̂ − x̂ − lgamma(x + 1) on the sparse path and on an
    entry subset too; a sparse kernel that kept the lgamma term for counts above 1 only, and an entry kernel that
    scored counts below 1 as zeros, passed before."""
    X = np.zeros((2, 3, 2))
    X[0, 1, 0], X[1, 2, 1], X[1, 0, 0], X[0, 0, 1] = 0.5, 0.25, 3.0, 1.0
    theta = ParafacFactors(np.array([[0.7], [1.2]]), np.array([[0.4], [1.1], [2.0]]), np.array([[1.3], [0.6]]))
    xhat = np.einsum("ir,jr,kr->ijk", *theta)
    expected = float(np.sum(X * np.log(xhat) - xhat - special.gammaln(X + 1)))
    ratio = X / xhat - 1  # d/dx̂ of the terms
    expected_grad = (np.einsum("ijk,jr,kr->ir", ratio, theta[1], theta[2]),
                     np.einsum("ijk,ir,kr->jr", ratio, theta[0], theta[2]),
                     np.einsum("ijk,ir,jr->kr", ratio, theta[0], theta[1]))
    for model, subset in ((PoissonParafac(from_dense(X), 1), None), (PoissonParafac(X, 1), np.arange(X.size))):
        value, grad = model.log_likelihood_and_grad(theta, subset)
        assert value == pytest.approx(expected, rel=1e-12)
        for got, want in zip(grad, expected_grad):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)

def test_a_boolean_mask_is_not_an_entry_subset(problem):
    X, theta = problem
    mask = np.zeros(X.size, dtype=bool)
    mask[:13] = True
    model = PoissonParafac(X, RANK)
    with pytest.raises(ParameterError, match="got dtype bool; give np.flatnonzero"):
        model.log_likelihood(theta, mask)
    assert model.subset_size(np.flatnonzero(mask)) == 13


def test_entry_indices_past_the_last_entry_are_refused(problem):
    """Index I J K, one past the last entry, is refused as -1 is (it passed the check and met NumPy's ValueError
    before)."""
    X, theta = problem
    model = PoissonParafac(X, RANK)
    for bad in (X.size, -1):
        with pytest.raises(ParameterError, match=rf"^subset indices must be in 0\.\.{X.size - 1}$"):
            model.log_likelihood(theta, np.array([0, bad]))
    assert model.log_likelihood(theta, np.array([X.size - 1])) == pytest.approx(
        stats.poisson.logpmf(X[-1, -1, -1], reconstruct(theta)[-1, -1, -1]), rel=1e-12)


def test_reconstruct_names_factors_of_other_shapes(problem):
    _, theta = problem
    assert reconstruct(theta).shape == SHAPE
    bad = ParafacFactors(theta.A, theta.B[:, :2], theta.C)
    with pytest.raises(ParameterError, match=r"^factors of shapes \[\(6, 3\), \(7, 2\), \(8, 3\)\]: expected "
                                             r"\(I, R\), \(J, R\), \(K, R\) of one R$"):
        reconstruct(bad)
