import numpy as np
import pytest
from scipy.stats import kstest, norm

from sepsti.core.parallel.noise import seed_states, standard_normal
from sepsti.core.parallel.ziggurat import LAYER_WIDTHS, TAIL_EDGE
from sepsti.core.random import stream


def test_ziggurat_normals_are_standard_normal():
    state = seed_states(0, 0, [0])[0]
    z, _ = standard_normal(state, 400000)
    se = 1 / np.sqrt(z.size)
    assert abs(z.mean()) < 4 * se
    assert abs(z.var() - 1) < 4 * np.sqrt(2) * se
    assert kstest(z, "norm").pvalue > 1e-3
    # the tail beyond the ziggurat base is drawn by its own branch
    tail = np.mean(np.abs(z) > 3.5)
    expected = 2 * norm.sf(3.5)
    assert abs(tail - expected) < 4 * np.sqrt(expected / z.size)


def test_streams_depend_only_on_seed_chain_block():
    a = seed_states(3, 1, [0, 1, 2])
    b = seed_states(3, 1, [2])
    np.testing.assert_array_equal(a[2], b[0])
    assert len(set(a[:, 0].tolist())) == 3
    z1, s1 = standard_normal(a[0], 100)
    z2, s2 = standard_normal(a[0], 100)
    np.testing.assert_array_equal(z1, z2)
    # drawing 61 then 39 continues the same sequence (the pending half-draw travels with the state)
    first, state = standard_normal(a[0], 61)
    second, _ = standard_normal(state, 39)
    np.testing.assert_array_equal(np.concatenate([first, second]), z1)


def test_states_are_the_first_63_bit_draw_of_the_documented_stream():
    """Each row is stream(seed, *chain, block).integers(0, 2**63) written out; a chain tuple cut to its first
    key, or 31-bit counters, passed before."""
    states = seed_states(5, (2, 1, 4), [7, 0])
    for row, block in enumerate([7, 0]):
        assert int(states[row, 0]) == int(stream(5, 2, 1, 4, block).integers(0, 2 ** 63, dtype=np.int64))
    assert states[:, 1].tolist() == [0, 0]
    assert not np.array_equal(seed_states(5, (2, 1, 4), [7]), seed_states(5, (2, 1, 5), [7]))
    assert int(seed_states(0, 0, range(64))[:, 0].max()) >= 2 ** 62  # 63-bit counters, P(fail) = 2**-64


def test_standard_normal_returns_the_dtype_asked_for():
    """A float32 request came back as float64 before."""
    z, _ = standard_normal(seed_states(1, 0, [0])[0], 1000, dtype=np.float32)
    assert z.dtype == np.float32
    assert abs(float(z.mean())) < 4 / np.sqrt(z.size)  # 4 standard errors


def test_frequencies_between_the_layer_edges_are_the_normal_probabilities():
    """|z| falls between consecutive layer edges (and beyond the tail edge) as often as the normal says; a wrong
    density at the edge of the last layer, which skews its wedge, passed before."""
    z, _ = standard_normal(seed_states(2, 0, [0])[0], 4_000_000)
    edges = np.concatenate([[0.0], LAYER_WIDTHS[1:] * 2.0 ** 24, [np.inf]])  # x_1 < ... < x_127 = r
    assert edges[-2] == pytest.approx(TAIL_EDGE)
    counts = np.histogram(np.abs(z), edges)[0]
    p = 2 * np.diff(norm.cdf(edges))
    standardised = (counts - z.size * p) / np.sqrt(z.size * p * (1 - p))
    # 128 binomial counts: each beyond 4.5 standard errors with probability 6.8e-6, any of them 8.7e-4
    assert np.abs(standardised).max() < 4.5


def test_tail_draws_follow_the_normal_tail_beyond_its_edge():
    """Draws beyond r = TAIL_EDGE have the mean excess of a normal truncated at r, and its distribution; a tail
    acceptance test against y rather than 2 y passed before."""
    state = seed_states(4, 0, [0])[0]
    tail = []
    for _ in range(3):
        z, state = standard_normal(state, 4_000_000)
        tail.append(z[np.abs(z) > TAIL_EDGE])
    tail = np.concatenate(tail)
    excess = np.abs(tail) - TAIL_EDGE
    assert excess.size > 6000  # 1.2e7 draws x 2 Phi(-r) = 6900 expected
    # truncated normal beyond r: mean lam - r, variance 1 - lam (lam - r), lam = phi(r) / Phi(-r)
    lam = norm.pdf(TAIL_EDGE) / norm.sf(TAIL_EDGE)
    se = np.sqrt((1 - lam * (lam - TAIL_EDGE)) / excess.size)
    assert abs(excess.mean() - (lam - TAIL_EDGE)) < 4 * se
    assert kstest(excess, lambda t: 1 - norm.sf(TAIL_EDGE + t) / norm.sf(TAIL_EDGE)).pvalue > 1e-3
    # either sign with probability 1/2: 4 binomial standard errors, 0.5 / sqrt(n)
    assert abs(np.mean(tail > 0) - 0.5) < 4 * 0.5 / np.sqrt(tail.size)
