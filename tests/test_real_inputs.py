"""Complex arrays are refused where real numbers are expected, not cast (NumPy drops the imaginary part with a
warning only): Chib's estimate, NUTS's start, the enhancer's dictionary and the BSS_EVAL scores ran on them."""

import numpy as np
import pytest

from sepsti.core.checks import real_array
from sepsti.core.errors import ParameterError


def test_real_array_refuses_complex_and_non_numeric_values():
    np.testing.assert_array_equal(real_array("a", [1, 2]), [1.0, 2.0])
    assert real_array("a", np.ones(2, np.float32)).dtype == np.float64
    with pytest.raises(ParameterError, match=r"^a: complex values \(complex128\); expected real numbers$"):
        real_array("a", [1j])
    for text in (["x"], ["1.5"]):  # a numeric string was read as its number
        with pytest.raises(ParameterError, match=r"^a: expected real numbers, got values of type <U"):
            real_array("a", text)


def test_real_array_keeps_a_dtype_asked_for_and_refuses_objects():
    kept = real_array("a", np.array([1, 2], dtype=np.int32), keep_dtype=True)
    assert kept.dtype == np.int32 and real_array("a", [True], keep_dtype=True).dtype == np.bool_
    with pytest.raises(ParameterError, match=r"^a: expected real numbers, got values of type object$"):
        real_array("a", np.array([1.0, 2.0], dtype=object))


def test_scalar_settings_are_checked_at_their_bounds_and_named():
    """Each check at and beside its bounds, and the names its messages give, written out."""
    from sepsti.core.checks import finite_number, integer_within, integers_at_least, number_within, positive_number

    assert integer_within("k", np.int64(5), 1, 5) == 5 and integer_within("k", 1, 1, 5) == 1
    with pytest.raises(ParameterError, match=r"^k=6 must be an integer in 1\.\.5$"):
        integer_within("k", 6, 1, 5)
    assert number_within("p", 0.0, 0.0, 1.0) == 0.0 and number_within("p", np.array(1.0), 0.0, 1.0) == 1.0
    assert integers_at_least("ranks", [2, np.int32(1)], 1) == (2, 1)
    with pytest.raises(ParameterError, match=r"^ranks\[1\]=0 must be an integer of at least 1$"):
        integers_at_least("ranks", (2, 0), 1)
    with pytest.raises(ParameterError, match=r"^x=inf must be a finite number$"):
        finite_number("x", np.inf)
    with pytest.raises(ParameterError, match=r"^x=-inf must be a finite number$"):
        finite_number("x", np.array(-np.inf))
    with pytest.raises(ParameterError, match=r"^x=-1\.0 must be a positive number$"):  # a 0-d array named as its number
        positive_number("x", np.array(-1.0))
    with pytest.raises(ParameterError, match=r"^x=array\(\[5\.\]\) must be a positive number$"):  # not 0-d
        positive_number("x", np.array([5.0]))


def test_real_array_refuses_sequences_that_form_no_array(rng):
    """NumPy's 'inhomogeneous shape' ValueError came out of denoise(y, dictionary) and bss_eval."""
    from sepsti.denoise import denoise
    from sepsti.dictionary import load_dictionary, narrowband_dictionary_path
    from sepsti.metrics import bss_eval

    with pytest.raises(ParameterError, match=r"^a: expected an array of real numbers, got a list that does not form "
                                             r"one \(sequences of unequal lengths\?\)$"):
        real_array("a", [[1.0, 2.0], [3.0]])
    dictionary = load_dictionary(narrowband_dictionary_path())  # the Dictionary where its W is expected
    with pytest.raises(ParameterError, match="^W: expected an array of real numbers, got a Dictionary that does"):
        denoise(rng.standard_normal(8000), dictionary)
    signal = rng.standard_normal(10)
    with pytest.raises(ParameterError, match="^speech: expected an array of real numbers, got a list"):
        bss_eval(signal, signal, [signal, 1.0])


def test_public_entrances_refuse_complex_arrays(rng):
    from sepsti import features
    from sepsti.core.evidence.chib import chib_poisson_nmf
    from sepsti.core.samplers import sample_nuts
    from sepsti.denoise import denoise
    from sepsti.metrics import bss_eval

    X = rng.poisson(3.0, (6, 5)).astype(complex)
    with pytest.raises(ParameterError, match="^X: complex values"):
        chib_poisson_nmf(X, 1, 1.0, num_burn_in=20, num_samples=40)
    with pytest.raises(ParameterError, match="^x0: complex values"):
        sample_nuts(lambda x: (-0.5 * float(x @ x), -x), np.zeros(3, complex), num_warmup=50, num_draws=10,
                    num_workers=1)
    W = np.ones((features.NARROWBAND.n_bins, 2), complex)
    with pytest.raises(ParameterError, match="^W: complex values"):
        denoise(rng.standard_normal(8000), W)
    signal = rng.standard_normal(1000)
    with pytest.raises(ParameterError, match="^speech: complex values"):
        bss_eval(signal, signal, signal.astype(complex))


def test_a_0_d_prior_rate_is_a_number(rng):
    """np.array(1.0) met 'iteration over a 0-d array'."""
    from sepsti.core.evidence.chib import chib_poisson_nmf

    X = rng.poisson(3.0, (6, 5)).astype(float)
    options = dict(num_burn_in=20, num_samples=40, seed=3)
    assert (chib_poisson_nmf(X, 1, np.array(1.0), **options).log_marginal_likelihood
            == chib_poisson_nmf(X, 1, 1.0, **options).log_marginal_likelihood)


def test_a_0_d_array_stands_for_its_number(rng):
    """np.array(5.0) was refused where 5.0 is taken, by the checks of scales, cutoffs, SNRs and settings."""
    from sepsti.core.evidence.rank_selection import ChainSettings
    from sepsti.core.factorization.em import initialize_nmf
    from sepsti.corpora.synth import mix
    from sepsti.metrics import high_band_share

    X = rng.poisson(3.0, (6, 5)).astype(float)
    np.testing.assert_array_equal(initialize_nmf(X, 2, scale=np.array(1.5))[0], initialize_nmf(X, 2, scale=1.5)[0])
    y = rng.standard_normal(1000)
    assert high_band_share(y, 16000, cutoff=np.array(4000.0)) == high_band_share(y, 16000, cutoff=4000.0)
    np.testing.assert_array_equal(mix(y, y, np.array(5.0)), mix(y, y, 5.0))
    assert ChainSettings(sigma=np.array(0.2)).sigma == 0.2
    with pytest.raises(ParameterError, match=r"^sigma=array\(\[0\.2, 0\.3\]\) must be"):
        from sepsti.core.checks import positive_number

        positive_number("sigma", np.array([0.2, 0.3]))


def test_a_bool_is_refused_where_a_number_or_an_integer_is_expected():
    """True is an int to Python: it passed as 1 where a setting's number was expected."""
    from sepsti.core.checks import finite_number, integer_within, number_within, positive_number

    with pytest.raises(ParameterError, match=r"^k=True must be an integer in 0\.\.5$"):
        integer_within("k", True, 0, 5)
    with pytest.raises(ParameterError, match=r"^x=True must be a finite number$"):
        finite_number("x", True)
    with pytest.raises(ParameterError, match=r"^x=(np\.)?True_? must be a positive number$"):
        positive_number("x", np.bool_(True))
    with pytest.raises(ParameterError, match=r"^p=False must be a number in \[0, 1\]$"):
        number_within("p", False, 0.0, 1.0)
    assert integer_within("k", np.int8(0), 0, 5) == 0 and finite_number("x", np.float32(-2.5)) == -2.5


def test_positive_checks_refuse_zero_infinity_and_empty_arrays():
    """Above 0 and finite, each number of an array too: 0, inf, an empty or a boolean array were taken."""
    from sepsti.core.checks import positive_number, positive_numbers

    for value in (0, 0.0, -0.0, np.inf, np.nan):
        with pytest.raises(ParameterError, match=r"must be a positive number$"):
            positive_number("x", value)
    assert positive_number("x", 1e-300) == 1e-300 and positive_number("x", np.int64(3)) == 3.0
    for value in (0.0, np.inf, np.float64(0.0), np.array([1.0, 0.0]), [1.0, np.inf], np.array([]),
                  np.array([True]), "1.0"):
        with pytest.raises(ParameterError, match=r"^step=.* must be a positive finite number, or an array of them$"):
            positive_numbers("step", value)
    steps = np.array([1e-300, 2.0])
    assert positive_numbers("step", 0.5) == 0.5 and positive_numbers("step", steps) is steps


def test_ranks_and_integer_sequences_are_checked_whole():
    """No ranks, a rank given twice, a fractional rank (truncated) or no sequence at all were taken or met a
    TypeError."""
    from sepsti.core.checks import distinct_ranks, integers_at_least

    assert distinct_ranks((3, np.int64(1))) == [3, 1] and all(type(rank) is int for rank in distinct_ranks([2, 1]))
    for ranks, why in (([], r"^ranks=\[\]: expected distinct positive integers$"),
                       ([2, 1, 2], r"^ranks=\[2, 1, 2\]: expected distinct positive integers$"),
                       ([1, 1.5], r"^ranks\[1\]=1\.5 must be an integer of at least 1$"),
                       ([0], r"^ranks\[0\]=0 must be an integer of at least 1$"),
                       (3, r"^ranks=3: expected distinct positive integers$")):
        with pytest.raises(ParameterError, match=why):
            distinct_ranks(ranks)
    for values in (None, 3):
        with pytest.raises(ParameterError, match=rf"^sizes={values}: expected a sequence of integers of at least 2$"):
            integers_at_least("sizes", values, 2)
