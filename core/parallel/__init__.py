"""Parallel execution: block/part schedules and the MPI backend."""

from core.parallel.tensor_blocks import (TensorBlockIndex, TensorBlocks, block_bounds, block_key,
                                         build_block_index, num_parts, part_keys)

__all__ = ["TensorBlockIndex", "TensorBlocks", "block_bounds", "block_key", "build_block_index",
           "num_parts", "part_keys"]

from core.parallel.blocks import (BlockChainResult, NMFBlockState, dense_part_update, init_state,  # noqa: E402
                                  initial_factors, part_update, run_block_chain)
from core.parallel.schedule import BlockSchedule  # noqa: E402

__all__ += ["BlockSchedule", "BlockChainResult", "NMFBlockState", "dense_part_update", "init_state",
            "initial_factors", "part_update", "run_block_chain"]

from core.parallel.parafac_blocks import (ParafacBlockState, init_block_state,  # noqa: E402
                                          parafac_part_update, run_parafac_block_chain)

__all__ += ["ParafacBlockState", "init_block_state", "parafac_part_update", "run_parafac_block_chain"]
