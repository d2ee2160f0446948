"""Two enhancers compared on the same mixtures: the mean difference of a score and how sure it is.

The mixtures of a NOIZEUS-style corpus are not independent: one sentence is mixed with every
noise at every SNR, and a sentence that one enhancer finds hard is often hard in every noise. The
noise types are a fixed design, the sentences a sample, so the replicates are the groups (the
sentences): each group's mean difference, then the Student-t interval of their mean,
``n_groups − 1`` degrees of freedom. (A standard error over the mixtures would treat them as
independent: too small where the sentences differ, too large where the noise types do.) With one
mixture per group this is the paired t interval (``scipy.stats.ttest_rel``).
"""

import numbers
from typing import NamedTuple

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["PairedDifference", "paired_difference", "paired_difference_if_defined"]


class PairedDifference(NamedTuple):
    """``ours − theirs`` over paired scores.

    Attributes
    ----------
    mean : float
        Mean difference over the groups' means (over the pairs when the groups are of equal size).
    standard_error : float
        Standard error of ``mean`` from the spread of the groups' means (NaN with one group).
    low, high : float
        The confidence interval (NaN with one group).
    wins, losses : int
        Pairs where ``ours`` is above / below ``theirs``.
    pairs, groups : int
        Pairs and groups counted (pairs with an undefined score are left out).
    """

    mean: float
    standard_error: float
    low: float
    high: float
    wins: int
    losses: int
    pairs: int
    groups: int


def paired_difference_if_defined(ours, theirs, groups=None, *, confidence=0.95):
    """:func:`paired_difference`, or None where no pair has both scores defined (a score undefined for every
    file: the unprocessed input's SAR, STOI of pieces too short)."""
    ours_array, theirs_array = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if ours_array.shape == theirs_array.shape and not np.any(np.isfinite(ours_array) & np.isfinite(theirs_array)):
        return None
    return paired_difference(ours, theirs, groups, confidence=confidence)


def paired_difference(ours, theirs, groups=None, *, confidence=0.95):
    """Mean of ``ours − theirs`` with a t interval over independent groups of pairs.

    Parameters
    ----------
    ours, theirs : array_like, shape (n,)
        Scores of the same mixtures; pairs where either is NaN or infinite are left out.
    groups : array_like, shape (n,), optional
        Group label of each pair (e.g. the sentence), not NaN; by default every pair is its own group.
    confidence : float
        Coverage of the interval, in (0, 1).

    Returns
    -------
    PairedDifference

    Raises
    ------
    ParameterError
        Shapes that differ, a NaN group label, no pair left, a confidence that is not a number in (0, 1).
    """
    from scipy import stats

    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    groups = np.arange(ours.size) if groups is None else np.asarray(groups)
    if ours.ndim != 1 or ours.shape != theirs.shape or groups.shape != ours.shape:
        raise ParameterError(f"paired scores: expected three 1-D arrays of one length, got shapes {ours.shape}, "
                             f"{theirs.shape}, {groups.shape}")
    if isinstance(confidence, (bool, np.bool_)) or not isinstance(confidence, numbers.Real) \
            or not 0.0 < confidence < 1.0:
        raise ParameterError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    # NaN equals no label, not even itself: np.unique would put every NaN in one group
    unlabelled = [index for index, label in enumerate(groups.tolist()) if label != label]
    if unlabelled:
        raise ParameterError(f"groups: {len(unlabelled)} NaN labels, the first at pair {unlabelled[0]}; give every "
                             "pair a label")
    kept = np.isfinite(ours) & np.isfinite(theirs)
    if not kept.any():
        raise ParameterError("paired scores: no pair with both scores defined")
    difference, groups = ours[kept] - theirs[kept], groups[kept]
    labels, index = np.unique(groups, return_inverse=True)
    means = np.bincount(index, weights=difference) / np.bincount(index)
    mean = float(means.mean())
    if labels.size > 1:
        standard_error = float(means.std(ddof=1) / np.sqrt(labels.size))
        half = float(stats.t.ppf(0.5 + confidence / 2.0, labels.size - 1)) * standard_error
    else:
        standard_error = half = float("nan")
    return PairedDifference(mean, standard_error, mean - half, mean + half, int(np.sum(difference > 0)),
                            int(np.sum(difference < 0)), int(difference.size), int(labels.size))
