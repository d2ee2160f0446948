"""Poisson PARAFAC with exponential priors (PARAFAC'18 eq. 11).

Model::

    a_ir ~ Exp(λ_a),  b_jr ~ Exp(λ_b),  c_kr ~ Exp(λ_c)
    x_ijk | A, B, C ~ Poisson(x̂_ijk),   x̂_ijk = Σ_r a_ir b_jr c_kr

Conventions: the data ``X`` is a dense array of shape ``(I, J, K)`` or a
:class:`sepsti.core.sparse_tensor.SparseTensor` of that shape; ``theta`` is
:class:`ParafacFactors` ``(A, B, C)`` with shapes ``(I, R)``, ``(J, R)``,
``(K, R)``, non-negative. A data point is one tensor entry (zeros included),
so ``n_data = I J K``.

Subsets: ``None`` (all entries), a :class:`sepsti.core.sparse_tensor.TensorBlocks`
(blocks, e.g. one part of the block-parallel scheme of
:mod:`sepsti.core.parallel.tensor_blocks`) or an integer array of
row-major flat entry indices (dense data). Log-likelihoods and gradients are
plain sums over the subset: the subsample scaling N/N_s and the temperature
are applied by the caller.

For a sparse block the Σ x̂ term is Σ_r (Σ_i a_ir)(Σ_j b_jr)(Σ_k c_kr) over
the block's index ranges and the x log x̂ terms run over the stored non-zeros
only; the same holds for the gradients (the −1 part of ∂/∂a_ir over a block
is (Σ_j b_jr)(Σ_k c_kr)). Nothing is densified.
"""

from typing import NamedTuple

import numpy as np
from scipy.special import gammaln, xlogy

from sepsti.core.checks import integer_at_least, real_array
from sepsti.core.errors import ParameterError
from sepsti.core.models.subsample import index_subset
from sepsti.core.sparse_tensor import SparseTensor, TensorBlocks, validate_sparse_tensor

__all__ = ["ParafacFactors", "PoissonParafac", "reconstruct"]


class ParafacFactors(NamedTuple):
    """Factor matrices of a three-way PARAFAC model.

    Attributes
    ----------
    A : ndarray, shape (I, R)
    B : ndarray, shape (J, R)
    C : ndarray, shape (K, R)
    """

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray


def reconstruct(theta):
    """Dense x̂ = Σ_r a_r ∘ b_r ∘ c_r, shape (I, J, K) (small tensors only).

    Raises
    ------
    ParameterError
        Factors that are not (I, R), (J, R), (K, R) of one R; the message names their shapes.
    """
    return np.einsum("ir,jr,kr->ijk", *_factor_matrices(theta))


def _factor_matrices(theta, shape=None):
    """θ's three factors as C-contiguous float64 arrays (I, R), (J, R), (K, R) of one R; ``shape``: (I, J, K)."""
    factors = [np.ascontiguousarray(f, dtype=np.float64) for f in theta]
    shapes = [f.shape for f in factors]
    if len(factors) != 3 or any(len(s) != 2 or s[1] != shapes[0][1] for s in shapes) or (
            shape is not None and tuple(s[0] for s in shapes) != shape):
        data = "" if shape is None else f" for data of shape {shape}"
        raise ParameterError(f"factors of shapes {shapes}: expected (I, R), (J, R), (K, R) of one R{data}")
    return factors


class PoissonParafac:
    """Poisson PARAFAC likelihood with exponential priors on the three factors.

    Parameters
    ----------
    data : ndarray, shape (I, J, K), or SparseTensor
        Non-negative counts (non-integer values are allowed: the Poisson
        density is evaluated with ``lgamma(x + 1)``).
    rank : int
        R, the number of components.
    prior_rate : float or sequence of 3 floats
        λ, or (λ_a, λ_b, λ_c).
    parallel : bool
        Process the blocks of a part in parallel numba threads (their number is
        ``NUMBA_NUM_THREADS``). Off by default: on a machine whose cores are
        busy, a parallel region waits for its slowest thread's time slice.

    References
    ----------
    Nguyen, Şimşekli, Richard, Cemgil, "Efficient Bayesian model selection in
    PARAFAC via stochastic thermodynamic integration", IEEE SPL 2018, eq. 11.
    """

    #: All three factors are non-negative: samplers mirror them (PARAFAC'18 §III, remark).
    nonnegative = (True, True, True)

    def __init__(self, data, rank, *, prior_rate=1.0, parallel=False):
        if isinstance(data, SparseTensor):
            data = validate_sparse_tensor(data, nonnegative=True, name="data")
            if data.ndim != 3:
                raise ParameterError(f"data has shape {data.shape}; Poisson PARAFAC needs a three-way tensor")
            self.is_sparse = True
        else:
            data = real_array("data", data)  # strings were read as numbers, complex values cast with a warning
            if data.ndim != 3:
                raise ParameterError(f"data has shape {data.shape}; Poisson PARAFAC needs a three-way tensor")
            if not np.all(np.isfinite(data)) or (data.size and data.min() < 0):
                raise ParameterError("data must hold finite non-negative counts")
            self.is_sparse = False
        integer_at_least("rank", rank, 1)
        try:
            rates = np.broadcast_to(np.asarray(prior_rate, dtype=np.float64), (3,)).copy()
        except (TypeError, ValueError):
            rates = np.full(3, np.nan)
        if not np.all(np.isfinite(rates)) or np.any(rates <= 0):
            raise ParameterError(f"prior_rate={prior_rate!r} must be positive (one value or three)")
        self.data = data
        self.parallel = bool(parallel)
        self.rank = int(rank)
        self.prior_rates = rates
        self.shape = tuple(int(n) for n in data.shape)
        self.n_data = self.shape[0] * self.shape[1] * self.shape[2]
        self._full_blocks = None

    # ------------------------------------------------------------------ prior
    def sample_prior(self, rng):
        """Draw factors from the exponential priors."""
        return ParafacFactors(*(rng.exponential(1.0 / rate, size=(n, self.rank))
                                for rate, n in zip(self.prior_rates, self.shape)))

    def log_prior(self, theta):
        """Σ log Exp(θ | λ) over the three factors; −inf if any entry is negative."""
        total = 0.0
        for factor, rate in zip(theta, self.prior_rates):
            if np.any(factor < 0):
                return -np.inf
            total += factor.size * np.log(rate) - rate * float(np.sum(factor))
        return total

    def grad_log_prior(self, theta):
        """−λ for every entry (the gradient inside the non-negative orthant)."""
        return ParafacFactors(*(np.full(f.shape, -rate) for f, rate in zip(theta, self.prior_rates)))

    # ------------------------------------------------------------- likelihood
    def subset_size(self, subset):
        """N_s: the number of tensor entries (zeros included) in ``subset``."""
        if subset is None:
            return self.n_data
        if isinstance(subset, TensorBlocks):
            return subset.num_entries
        return int(index_subset(subset).size)

    def log_likelihood(self, theta, subset=None):
        """Σ log Poisson(x | x̂) over the entries of ``subset`` (unscaled)."""
        return self.log_likelihood_and_grad(theta, subset, want_grad=False)[0]

    def grad_log_likelihood(self, theta, subset=None):
        """Gradient of :meth:`log_likelihood` w.r.t. (A, B, C), full shapes (zero off the subset)."""
        return self.log_likelihood_and_grad(theta, subset)[1]

    def log_likelihood_and_grad(self, theta, subset=None, *, want_grad=True):
        """Log-likelihood over ``subset`` and its gradient in one pass.

        Parameters
        ----------
        theta : ParafacFactors
        subset : None, TensorBlocks or ndarray of int
            All entries, a set of blocks, or flat row-major entry indices (dense data).
        want_grad : bool
            If False the gradient is None.

        Returns
        -------
        log_likelihood : float
        grad : ParafacFactors or None
        """
        A, B, C = self.factors(theta)
        if want_grad:
            grads = ParafacFactors(np.zeros_like(A), np.zeros_like(B), np.zeros_like(C))
        else:
            grads = None
        if isinstance(subset, TensorBlocks) or (subset is None and self.is_sparse):
            blocks = self._all_blocks() if subset is None else subset
            if self.is_sparse:
                if blocks.coords is None:
                    raise ParameterError("subset blocks come from a dense index but the data is sparse; "
                                         "build the index from the SparseTensor")
                logl = sparse_blocks_log_likelihood(A, B, C, blocks, grads, parallel=self.parallel)
            else:
                logl = _dense_blocks(self.data, A, B, C, blocks, grads)
            return logl, grads
        if subset is None:
            return _dense_block(self.data, A, B, C, grads), grads
        if self.is_sparse:
            raise ParameterError("entry-index subsets need dense data; use blocks for a SparseTensor")
        flat = np.ascontiguousarray(index_subset(subset), dtype=np.int64).ravel()
        if flat.size and (flat.min() < 0 or flat.max() >= self.n_data):
            raise ParameterError(f"subset indices must be in 0..{self.n_data - 1}")
        i, j, k = np.unravel_index(flat, self.shape)
        x = self.data.reshape(-1)[flat]
        logl = _entries_kernel()(ParafacFactors(A, B, C), (i, j, k), x, _gradient_arrays(grads), grads is not None)
        return float(logl), grads

    def factors(self, theta):
        """θ's three factors as C-contiguous float64 arrays, checked against the data's modes.

        The compiled kernels index the factors by the data's coordinates and their columns by the
        first factor's: factors of other shapes would be read and written out of bounds. Any one
        number of columns R is accepted (the reference path scores every rank with one model).
        """
        return _factor_matrices(theta, self.shape)

    def _all_blocks(self):
        if self._full_blocks is None:
            nnz = self.data.nnz if self.is_sparse else 0
            ranges = np.array([[[0, n] for n in self.shape]], dtype=np.int64)
            self._full_blocks = TensorBlocks(
                np.zeros((1, 3), dtype=np.int64), ranges, np.zeros(1, dtype=np.int64),
                np.array([nnz], dtype=np.int64),
                self.data.coords if self.is_sparse else None, self.data.values if self.is_sparse else None)
        return self._full_blocks


# ---------------------------------------------------------------- dense path
def _dense_block(X, A, B, C, grads):
    """Reference computation on a dense (sub)tensor; accumulates into ``grads``."""
    Xhat = np.einsum("ir,jr,kr->ijk", A, B, C)
    logl = float(np.sum(xlogy(X, Xhat) - Xhat - gammaln(X + 1.0)))
    if grads is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            W = np.where(X > 0, X / Xhat, 0.0) - 1.0
        grads.A[...] += np.einsum("ijk,jr,kr->ir", W, B, C)
        grads.B[...] += np.einsum("ijk,ir,kr->jr", W, A, C)
        grads.C[...] += np.einsum("ijk,ir,jr->kr", W, A, B)
    return logl


def _dense_blocks(X, A, B, C, blocks, grads):
    total = 0.0
    for (i0, i1), (j0, j1), (k0, k1) in blocks.ranges:
        sub = None
        if grads is not None:
            sub = ParafacFactors(grads.A[i0:i1], grads.B[j0:j1], grads.C[k0:k1])
        total += _dense_block(X[i0:i1, j0:j1, k0:k1], A[i0:i1], B[j0:j1], C[k0:k1], sub)
    return total


# --------------------------------------------------------------- sparse path
def _is_disjoint(blocks):
    keys = blocks.keys
    return all(np.unique(keys[:, m]).size == keys.shape[0] for m in range(3))


def sparse_blocks_log_likelihood(A, B, C, blocks, grads=None, *, parallel=False):
    """Log-likelihood of sparse blocks from column sums and non-zeros; gradients accumulated.

    Parameters
    ----------
    A, B, C : ndarray of float64, C-contiguous, shapes (I, R), (J, R), (K, R)
    blocks : TensorBlocks
        Blocks with global coordinates.
    grads : ParafacFactors or None
        Arrays of the factors' shapes to which the gradient is added.
    parallel : bool
        Process the blocks in parallel threads when they share no index range
        in any mode (a part).

    Returns
    -------
    float
    """
    parallel = parallel and blocks.keys.shape[0] > 1 and _is_disjoint(blocks)
    kernel = _sparse_kernels()[1 if parallel else 0]
    per_block = kernel(ParafacFactors(A, B, C), blocks, _gradient_arrays(grads), grads is not None)
    return float(np.sum(per_block))


def _gradient_arrays(grads):
    """``grads`` for the kernels, or placeholders they never write when no gradient is wanted."""
    if grads is None:
        placeholder = np.zeros((1, 1))
        return ParafacFactors(placeholder, placeholder, placeholder)
    return ParafacFactors(*grads)


def _sparse_kernels():
    """The serial and block-parallel sparse kernels (numba, compiled once and cached on disk)."""
    from sepsti.core.models import _parafac_kernels

    return _parafac_kernels.sparse_serial, _parafac_kernels.sparse_parallel


def _entries_kernel():
    """The kernel for explicit entry subsets of dense data (numba, cached on disk)."""
    from sepsti.core.models import _parafac_kernels

    return _parafac_kernels.entries
