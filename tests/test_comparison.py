"""The paired comparison of two enhancers: against scipy's paired t test and against a known truth."""

import warnings

import numpy as np
import pytest
from scipy import stats

from sepsti.comparison import paired_difference
from sepsti.core.errors import ParameterError


def test_one_pair_per_group_is_the_paired_t_interval():
    rng = np.random.default_rng(1)
    ours, theirs = rng.normal(1.0, 1.0, 25), rng.normal(0.0, 1.0, 25)
    result = paired_difference(ours, theirs, confidence=0.9)
    reference = stats.ttest_rel(ours, theirs).confidence_interval(0.9)
    assert result.mean == pytest.approx(np.mean(ours - theirs))
    assert (result.low, result.high) == pytest.approx((reference.low, reference.high))
    assert (result.pairs, result.groups) == (25, 25)
    assert result.wins + result.losses == 25 and result.wins == np.sum(ours > theirs)


def test_groups_are_the_replicates():
    ours = np.array([3.0, 5.0, 1.0, 2.0, 2.0, 10.0])
    theirs = np.zeros(6)
    result = paired_difference(ours, theirs, ["a", "a", "b", "b", "b", "c"])
    means = np.array([4.0, 5.0 / 3.0, 10.0])
    assert result.mean == pytest.approx(means.mean())
    assert result.standard_error == pytest.approx(means.std(ddof=1) / np.sqrt(3))
    assert result.groups == 3 and result.pairs == 6


def test_interval_covers_the_true_difference_when_pairs_share_their_group():
    """Ten sentences, each in 16 mixtures, with a per-sentence effect as large as the per-mixture scatter:
    the interval over sentences covers the truth at its nominal rate; one over mixtures does not."""
    rng = np.random.default_rng(7)
    replicates, n_groups, per_group, truth = 2000, 10, 16, 0.7
    groups = np.repeat(np.arange(n_groups), per_group)
    grouped = pooled = 0
    for _ in range(replicates):
        difference = truth + np.repeat(rng.normal(0.0, 1.0, n_groups), per_group) + rng.normal(0.0, 1.0, groups.size)
        result = paired_difference(difference, np.zeros_like(difference), groups)
        grouped += result.low <= truth <= result.high
        naive = paired_difference(difference, np.zeros_like(difference))
        pooled += naive.low <= truth <= naive.high
    tolerance = 4.0 * np.sqrt(0.95 * 0.05 / replicates)  # four Monte-Carlo standard errors
    assert abs(grouped / replicates - 0.95) < tolerance
    assert pooled / replicates < 0.95 - 10 * tolerance


def test_undefined_scores_are_left_out():
    result = paired_difference([1.0, np.nan, 3.0, np.inf], [0.0, 0.0, 0.0, 0.0])
    assert result.pairs == 2 and result.mean == pytest.approx(2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one group has no spread: NaN, not NumPy's warning of zero degrees of freedom
        single = paired_difference([1.0], [0.0])
        group = paired_difference([1.0, 3.0], [0.0, 0.0], ["a", "a"])
    assert single.mean == 1.0 and np.isnan(single.standard_error) and np.isnan(single.low)
    assert (group.mean, group.pairs, group.groups) == (2.0, 2, 1) and np.isnan(group.standard_error)
    assert np.isnan(group.low) and np.isnan(group.high)


@pytest.mark.parametrize("ours, theirs, groups, confidence", [
    ([1.0, 2.0], [1.0], None, 0.95),
    ([1.0, 2.0], [1.0, 2.0], [0], 0.95),
    ([np.nan], [1.0], None, 0.95),
    ([1.0, 2.0], [0.0, 0.0], None, 1.0),
    ([1.0, 2.0], [0.0, 0.0], None, 0.0),
    (np.ones((2, 2)), np.zeros((2, 2)), np.zeros((2, 2)), 0.95),
])
def test_bad_input_is_refused(ours, theirs, groups, confidence):
    with pytest.raises(ParameterError):
        paired_difference(ours, theirs, groups, confidence=confidence)


@pytest.mark.parametrize("confidence", ["0.95", None])
def test_a_confidence_that_is_not_a_number_is_refused_by_name(confidence):
    with pytest.raises(ParameterError, match="^confidence: expected a number in"):
        paired_difference([1.0, 2.0, 4.0], [0.0, 0.0, 0.0], confidence=confidence)


@pytest.mark.parametrize("groups", [[np.nan, np.nan, np.nan], [1.0, np.nan, 2.0],
                                    np.array(["a", float("nan"), "b"], dtype=object)])
def test_nan_group_labels_are_refused(groups):
    """NaN is no label: np.unique would put every NaN-labelled pair in one group."""
    with pytest.raises(ParameterError, match="^groups: .*NaN label"):
        paired_difference([1.0, 2.0, 4.0], [0.0, 0.0, 0.0], groups)


def test_a_tie_is_neither_a_win_nor_a_loss():
    """Scores that tie (a PESQ rounded alike, an input left unchanged by both) count for neither side."""
    result = paired_difference([1.0, 2.0, 3.0, 5.0], [1.0, 1.0, 4.0, 5.0])
    assert (result.wins, result.losses, result.pairs) == (1, 1, 4)


def test_a_pair_whose_other_score_is_undefined_is_left_out():
    """A peer that gives no score for a file (NaN) or an infinite one leaves that pair out, as ours does: the mean
    of 1 - 0 and 3 - 0 is 2, over two pairs."""
    result = paired_difference([1.0, 2.0, 3.0, 4.0], [0.0, np.nan, 0.0, -np.inf])
    assert (result.pairs, result.groups, result.mean) == (2, 2, pytest.approx(2.0))


def test_a_score_defined_on_one_side_only_gives_no_comparison():
    """The unprocessed input's SAR is infinite on every file (nothing added to it): no pair has both scores, and
    there is nothing to compare (None), whichever side is undefined; a single pair with both gives a comparison."""
    from sepsti.comparison import paired_difference_if_defined

    assert paired_difference_if_defined([1.0, 2.0], [np.inf, np.inf]) is None
    assert paired_difference_if_defined([np.nan, np.nan], [1.0, 2.0]) is None
    assert paired_difference_if_defined([1.0, np.nan], [np.nan, 2.0]) is None
    result = paired_difference_if_defined([1.0, np.nan, 5.0], [np.nan, 2.0, 3.0])
    assert (result.pairs, result.mean) == (1, 2.0)
