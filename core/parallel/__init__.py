"""Parallel execution: block/part schedules, the block-parallel samplers and the MPI backend.

Names are imported from their submodules on first use, so importing the package is cheap.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "blocks": [
            'BlockChainResult',
            'NMFBlockState',
            'block_layout',
            'dense_part_update',
            'init_state',
            'initial_factors',
            'part_update',
            'run_block_chain',
            'run_prior_chain',
        ],
        "kernel_arguments": [
            'EVALUATE_AFTER_UPDATE',
            'EVALUATE_BEFORE_UPDATE',
            'EVALUATE_CODES',
            'EVALUATE_NONE',
            'NMFBlockLayout',
            'NMFChainArrays',
            'PartStep',
            'StepConstants',
            'check_block_settings',
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
            'block_key',
            'build_block_index',
            'owned_blocks',
            'slab_index',
        ],
    },
)
