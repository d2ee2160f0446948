"""Parallel execution: block/part schedules and the MPI backend.

Names are imported from their submodules on first use, so importing the package is cheap.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "blocks": [
            'BlockChainResult',
            'NMFBlockState',
            'dense_part_update',
            'init_state',
            'initial_factors',
            'part_update',
            'run_block_chain',
        ],
        "parafac_blocks": [
            'ParafacBlockState',
            'init_block_state',
            'num_evaluations',
            'parafac_part_update',
            'run_parafac_block_chain',
            'slab_log_likelihoods',
        ],
        "schedule": ['BlockSchedule'],
        "tensor_blocks": [
            'TensorBlockIndex',
            'TensorBlocks',
            'block_bounds',
            'block_key',
            'build_block_index',
            'num_parts',
            'owned_blocks',
            'part_keys',
            'slab_index',
        ],
    },
)
