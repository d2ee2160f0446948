"""Parallel execution: block/part schedules and the MPI backend."""

from core.parallel.tensor_blocks import (TensorBlockIndex, TensorBlocks, block_bounds, block_key,
                                         build_block_index, num_parts, part_keys)

__all__ = ["TensorBlockIndex", "TensorBlocks", "block_bounds", "block_key", "build_block_index",
           "num_parts", "part_keys"]
