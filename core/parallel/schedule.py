"""Block/part schedules for block-parallel stochastic gradient samplers.

Conventions
-----------
An array of shape (n_0, ..., n_{d-1}) is cut into B groups along every mode
(``numpy.array_split`` sizes: the first n mod B groups one longer), giving
B^d blocks. The NMF block samplers (d = 2) and the PARAFAC block index
(d = 3, :mod:`sepsti.core.parallel.tensor_blocks`) both cut their data with this
class, so both follow one rule for group edges and part numbering. A *part* is B blocks that
share no group in any mode: part p, written in base B as offsets
(k_1, ..., k_{d-1}), is {(b, (b + k_1) mod B, ..., (b + k_{d-1}) mod B) :
b = 0..B-1}. The B^(d-1) parts tile the array. For a matrix (d = 2) part k is
{(b, (b + k) mod B)}: W's row group b and H's column group (b + k) mod B are
updated from block b alone, so the B updates of a part are independent.

Iteration k (from 1) uses part (k - 1) mod B^(d-1): parts are visited in
order, cyclically, so every B^(d-1) iterations cover the data once.

References
----------
ICASSP'16 §4.1.2 (Parallel SGLD); PARAFAC'18 §III and Fig. 1.
"""

import math

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["BlockSchedule"]


class BlockSchedule:
    """B groups per mode, B^(d-1) parts of B blocks.

    Parameters
    ----------
    shape : tuple of int
        Shape of the data array.
    num_blocks : int
        B, groups per mode; at most the smallest dimension.
    """

    def __init__(self, shape, num_blocks):
        shape = tuple(int(n) for n in shape)
        if int(num_blocks) != num_blocks or num_blocks < 1:
            raise ParameterError(f"num_blocks={num_blocks} must be a positive integer")
        if num_blocks > min(shape):
            raise ParameterError(f"num_blocks={num_blocks} exceeds the smallest dimension of shape {shape}")
        self.shape = shape
        self.num_blocks = int(num_blocks)
        self.ndim = len(shape)
        # edges[m] has B + 1 entries: group g of mode m is edges[m][g]:edges[m][g+1]
        self.edges = [_group_edges(n, self.num_blocks) for n in shape]

    @property
    def num_parts(self):
        """B^(d-1)."""
        return self.num_blocks ** (self.ndim - 1)

    def part_index(self, iteration):
        """The part used at ``iteration`` (counting from 1)."""
        return (int(iteration) - 1) % self.num_parts

    def offsets(self, part):
        """(k_1, ..., k_{d-1}) of ``part``."""
        digits = []
        for _ in range(self.ndim - 1):
            part, digit = divmod(part, self.num_blocks)
            digits.append(digit)
        return tuple(reversed(digits))

    def part_groups(self, part):
        """ndarray (B, d): the group of each mode for each block of ``part``.

        Raises
        ------
        ParameterError
            If ``part`` is not in 0..B^(d-1) - 1.
        """
        if not 0 <= part < self.num_parts:
            raise ParameterError(f"part={part} must be in 0..{self.num_parts - 1} for num_blocks={self.num_blocks} "
                                 f"and {self.ndim} modes")
        b = np.arange(self.num_blocks)
        columns = [b] + [(b + k) % self.num_blocks for k in self.offsets(part)]
        return np.stack(columns, axis=1).astype(np.int64)

    def group_slice(self, mode, group):
        """Slice of ``group`` along ``mode``."""
        return slice(int(self.edges[mode][group]), int(self.edges[mode][group + 1]))

    def part_blocks(self, part):
        """The blocks of ``part`` as tuples of slices, usable as a model ``subset``."""
        return tuple(tuple(self.group_slice(m, g) for m, g in enumerate(groups)) for groups in self.part_groups(part))

    def part_size(self, part):
        """Number of entries N_s in ``part`` (a Python int: no overflow)."""
        return sum(math.prod(s.stop - s.start for s in block) for block in self.part_blocks(part))


def _group_edges(size, num_blocks):
    """The B + 1 edges of ``numpy.array_split(range(size), B)``, without building the range."""
    base, longer = divmod(size, num_blocks)
    groups = np.arange(num_blocks + 1, dtype=np.int64)
    return groups * base + np.minimum(groups, longer)
