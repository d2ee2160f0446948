import warnings

import numpy as np
import pytest

from sepsti.core.errors import ParameterError
from sepsti.core.factorization.corcondia import core_consistency, corcondia

pytest.importorskip("tensorly")


def _low_rank(rng, shape=(10, 12, 14), rank=3, noise=0.01):
    A, B, C = (rng.standard_normal((n, rank)) for n in shape)
    X = np.einsum("ir,jr,kr->ijk", A, B, C)
    return X + noise * X.std() * rng.standard_normal(X.shape), (A, B, C)


def test_exact_factors_have_full_consistency(rng):
    X, factors = _low_rank(rng, noise=0.0)
    assert core_consistency(X, factors) == pytest.approx(100.0, abs=1e-8)
    # the diagnostic does not depend on how the components are scaled between modes
    A, B, C = factors
    d = np.array([2.0, 0.5, 3.0])
    assert core_consistency(X, (A * d, B / d, C)) == pytest.approx(100.0, abs=1e-8)


def test_wrong_core_lowers_consistency(rng):
    X, (A, B, C) = _low_rank(rng, noise=0.0)
    # a rank-3 model whose third component is replaced by noise cannot explain X
    C_bad = C.copy()
    C_bad[:, 2] = rng.standard_normal(C.shape[0])
    assert core_consistency(X, (A, B, C_bad)) < 90.0


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.filterwarnings("ignore::sepsti.core.errors.ConvergenceWarning")  # ALS above the true rank: 4, 5
def test_consistency_is_high_up_to_the_true_rank_and_drops_above(seed):
    X, _ = _low_rank(np.random.default_rng(seed))
    result = corcondia(X, [1, 2, 3, 4, 5], num_starts=3, seed=seed)
    assert np.all(result.consistency[:3] > 99.0), result.consistency
    assert result.consistency[3] < 50.0, result.consistency
    assert result.selected_rank == 3
    # the fit error stops improving once the true rank is reached
    assert result.relative_error[2] < 0.02 < result.relative_error[1]


def test_same_seed_same_result(rng):
    X, _ = _low_rank(rng)
    a = corcondia(X, [2, 4], num_starts=2, seed=5)
    b = corcondia(X, [2, 4], num_starts=2, seed=5)
    np.testing.assert_array_equal(a.consistency, b.consistency)


@pytest.mark.parametrize("X, ranks, match", [
    (np.zeros((3, 4)), [1], "three-way"),
    (np.full((2, 2, 2), np.nan), [1], "NaN"),
    (np.ones((2, 2, 2)), [0], "ranks"),
])
def test_invalid_input(X, ranks, match):
    with pytest.raises(ParameterError, match=match):
        corcondia(X, ranks)


@pytest.mark.parametrize("X, ranks, settings, match", [
    (np.ones((2, 2, 2), complex), [1], {}, r"^X: complex values"),  # was fitted to its real part
    (np.full((2, 2, 2), "1"), [1], {}, r"^X: expected real numbers"),  # was read as numbers
    (np.ones((2, 2, 2)), [np.nan], {}, r"^ranks\[0\]=nan must be an integer"),  # was a ValueError
    (np.ones((2, 2, 2)), [1], dict(max_iter=0), r"^max_iter=0 must be an integer of at least 1$"),  # fitted nothing
    (np.ones((2, 2, 2)), [1], dict(num_starts=2.5), r"^num_starts=2.5 must be an integer"),  # was 2 starts
    (np.ones((2, 2, 2)), [1], dict(tol=np.nan), r"^tol=nan must be a finite number"),
    (np.ones((2, 2, 2)), [1], dict(tol=-1.0), r"^tol=-1.0 must be a finite number >= 0$"),
    (np.ones((2, 2, 2)), [1], dict(seed=-1), r"^seed=-1 must be an integer in \[0, 2\*\*32\)$"),  # a ValueError
    (np.ones((2, 2, 2)), [1], dict(seed=1.5), r"^seed=1.5 must be an integer"),  # was seed 1
    (np.ones((2, 2, 2)), [1], dict(threshold=np.nan), r"^threshold=nan must be a finite number$"),  # selected 1
])
def test_invalid_settings_are_refused_before_any_fit(X, ranks, settings, match):
    with pytest.raises(ParameterError, match=match):
        corcondia(X, ranks, **settings)


def test_bad_ranks_factors_and_data_are_named():
    from sepsti.core.errors import ParameterError
    from sepsti.core.factorization.corcondia import core_consistency, corcondia

    X = np.random.default_rng(0).random((4, 5, 6))
    with pytest.raises(ParameterError, match="ranks"):
        corcondia(X, [2.7])
    with pytest.raises(ParameterError, match="all zeros"):
        corcondia(np.zeros((4, 5, 6)), [1])
    with pytest.raises(ParameterError, match="factors of shapes"):
        core_consistency(X, (np.ones((4, 2)), np.ones((5, 2)), np.ones((6, 3))))
    for factors in ((np.ones((4, 2)), np.ones((5, 2))), (), (np.ones(4), np.ones(5), np.ones(6))):
        with pytest.raises(ParameterError, match=r"^factors of shapes .*: expected \(I, R\), \(J, R\), \(K, R\)"):
            core_consistency(X, factors)  # two factors met an unpacking ValueError, 1-d ones an IndexError


def _rank_two(seed):
    """Rank-2 data of positive factors with noise 1e-3: slow for ALS, so a short run stops unconverged."""
    rng = np.random.default_rng(100 + seed)
    A, B, C = (rng.uniform(0.2, 1.0, (n, 2)) for n in (6, 5, 4))
    X = np.einsum("ir,jr,kr->ijk", A, B, C)
    return X + 1e-3 * np.abs(X).mean() * rng.standard_normal(X.shape)


def test_a_best_fit_stopped_at_max_iter_is_reported():
    from sepsti.core.errors import ConvergenceWarning

    X = _rank_two(0)
    with pytest.warns(ConvergenceWarning, match=r"^corcondia: the best fit at ranks 2, 3 stopped at max_iter=300 "
                                                r"before its error changed by less than tol=1e-10") as caught:
        result = corcondia(X, [1, 2, 3], num_starts=3, max_iter=300, seed=0)
    assert len(caught) == 1
    assert result.converged.tolist() == [True, False, False]
    assert result.consistency[1] == pytest.approx(81.9, abs=0.05)  # an unconverged fit at the true rank
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = corcondia(X, [1, 2], num_starts=1, max_iter=20000, seed=0)
    assert result.converged.tolist() == [True, True]
    assert result.consistency[1] == pytest.approx(100.0, abs=0.05)


def test_each_start_has_its_own_seed_and_the_best_fit_is_kept():
    """Start s of rank R is TensorLy's random start from SeedSequence([seed, R, s]), run here directly: the reported
    error is the least of the three (one start repeated three times, or the worst start kept, passed before)."""
    import tensorly as tl
    from tensorly.decomposition import parafac

    X = _rank_two(0)
    errors = []
    for start in range(3):  # 300 iterations stop short, so each start ends at its own error
        state = np.random.RandomState(np.random.SeedSequence([2, 2, start]).generate_state(1))
        _, factors = parafac(tl.tensor(X), rank=2, init="random", n_iter_max=300, tol=1e-10, random_state=state,
                             normalize_factors=False)
        errors.append(np.linalg.norm(X - np.einsum("ir,jr,kr->ijk", *factors)) / np.linalg.norm(X))
    assert np.argmin(errors) == 2 and np.ptp(errors) > 0.1 * min(errors)  # start 0 is not the best here
    with pytest.warns(match="stopped at max_iter=300"):
        result = corcondia(X, [2], num_starts=3, max_iter=300, seed=2)
    assert result.relative_error[0] == pytest.approx(min(errors), rel=1e-9)


@pytest.mark.filterwarnings("ignore::sepsti.core.errors.ConvergenceWarning")  # ALS above the true rank
def test_selected_rank_is_the_largest_at_least_the_threshold_else_the_smallest(rng):
    """The documented selection: a rank whose consistency equals the threshold counts, and with none at the
    threshold the smallest rank tried is selected, whatever the order of the ranks (a strict inequality, and the
    largest rank as the fallback, passed before)."""
    X, _ = _low_rank(rng)
    ranks = [4, 2, 3]
    result = corcondia(X, ranks, num_starts=1, seed=0)
    assert result.consistency[2] > 99.0 > result.consistency[0]  # rank 3 fits, rank 4 does not
    assert corcondia(X, ranks, num_starts=1, seed=0, threshold=result.consistency[2]).selected_rank == 3
    assert corcondia(X, ranks, num_starts=1, seed=0, threshold=101.0).selected_rank == 2
