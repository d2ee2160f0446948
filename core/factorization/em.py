"""EM (MAP-EM) for Poisson NMF: the KL multiplicative updates, with optional exponential priors.

Conventions
-----------
``X`` is ``(n_rows, n_cols)`` and non-negative (for spectrograms: ``(n_bins, n_frames)``);
``W`` is ``(n_rows, rank)`` and ``H`` is ``(rank, n_cols)``, both non-negative. The model
(MLSP'12 §1.1, ICASSP'16 eq. 13) is

    X_ij ~ Poisson((W H)_ij),    W_ir ~ Exponential(λ^W_ir),    H_rj ~ Exponential(λ^H_rj),

and a rate of 0 means a flat (improper) prior on that entry. The EM algorithm of this model,
with the latent Poisson components integrated out, is the pair of multiplicative updates

    W ← W ∘ ((X / WH) Hᵀ) / (1 Hᵀ + λ^W),      H ← H ∘ (Wᵀ (X / WH)) / (Wᵀ 1 + λ^H),

applied alternately (W first, then H, as scikit-learn's ``solver='mu'``). Each update never
decreases the log-posterior. With all rates 0 they are the Lee–Seung KL updates.

A known *background* ``B`` (same shape as ``X``) adds to the rate: ``X_ij ~ Poisson((W H)_ij +
B_ij)``. The updates are the same with ``W H + B`` in the ratio: the latent Poisson component
that ``B`` stands for takes its share of every count, and the factors explain the rest (a
noise spectrum known frame by frame beside a fixed dictionary, say).

The log-likelihood is ``Σ xlogy(x, λ) − λ − gammaln(x + 1)`` (x = 0 is exact); with priors
the log-prior ``Σ log λ − λ w`` over the entries with a positive rate is added. Any factor,
or any subset of the columns of ``W`` (rows of ``H``), can be held fixed: a fixed speech
dictionary next to a learned noise dictionary is ``update_W=mask``.

Rates and the updates' denominators are floored at ``eps · min(1, max X)`` (eps of the dtype). KL-NMF
is scale covariant, the fit of ``c X`` being ``c`` times the fit of ``X``; a floor that follows the data
down keeps it so at small scales, and at 1 and above it is eps (the largest entry sets the scale, so
sparse counts, whose mean is below 1, keep eps too). The floor never goes below the dtype's
``tiny``, so scale covariance holds down to a largest entry of ``tiny / eps`` (about 1e-292 in float64,
1e-31 in float32) and degrades gradually below it.

Computation is in the dtype of ``X`` (float32 or float64; anything else is converted to
float64); the log-likelihood is accumulated in float64 either way. float32 halves the time
of the matrix products, which dominate. Products are BLAS matrix products into preallocated
buffers; the ratio ``X / WH`` and the ``x log λ`` sum are in-place numpy passes. The
denominator of the H update, one number per component, divides the columns of ``W``
before the product. Wide matrices are processed in column blocks, optionally in worker
threads (``threads``), with results that do not depend on the number of threads.
"""

import contextlib
import itertools
import math
from typing import NamedTuple
import warnings

import numpy as np

from sepsti.core.checks import integer_at_least, positive_number
from sepsti.core.errors import ConvergenceWarning, ParameterError

__all__ = ["EMResult", "poisson_nmf_em", "initialize_nmf", "poisson_log_likelihood"]


class EMResult(NamedTuple):
    """Result of :func:`poisson_nmf_em`.

    Attributes
    ----------
    W : ndarray, shape (n_rows, rank)
    H : ndarray, shape (rank, n_cols)
    log_likelihood : ndarray, shape (n_iter + 1,)
        Log-posterior (log-likelihood plus log-prior; the log-likelihood alone without priors)
        at the start and after each iteration, in float64. Untracked entries are NaN: with
        ``tol=0`` only the first and last are computed by default, and none with
        ``track_log_likelihood=False``.
    n_iter : int
        Number of iterations run.
    num_threads : int
        Worker threads the column blocks ran on (1 for a single block or no iteration).
    """

    W: np.ndarray
    H: np.ndarray
    log_likelihood: np.ndarray
    n_iter: int
    num_threads: int


# --------------------------------------------------------------------------------------------
# elementwise passes
#
# Plain in-place numpy: its SIMD loops run as fast as a serial numba loop here, and a parallel
# numba kernel is slower in practice, because its threads contend with OpenBLAS's threads, which
# keep spinning for a while after each matrix product. Keeping numba out also keeps imports light.

def _ratio(X, P, floor, log_buffer=None):
    """P <- X / max(P, floor) in place; with ``log_buffer``, return Σ x log max(P, floor)."""
    np.maximum(P, floor, out=P)
    xlogp = None
    if log_buffer is not None:
        np.log(P, out=log_buffer)
        xlogp = _xdot(X, log_buffer)
    np.divide(X, P, out=P)
    return xlogp


def _xdot(X, log_values):
    """Σ x · log λ, accumulated in float64 (log_values is overwritten for float32)."""
    if X.dtype == np.float64:
        return float(np.vdot(X.ravel(), log_values.ravel()))
    np.multiply(X, log_values, out=log_values)
    return float(log_values.sum(dtype=np.float64))


# --------------------------------------------------------------------------------------------
# validation

def _as_float_matrix(value, name, dtype=None):
    try:
        array = np.asarray(value)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ParameterError(f"{name}: could not be read as an array ({exc})") from exc
    if array.ndim != 2:
        raise ParameterError(f"{name}: expected a 2-D array, got shape {array.shape}")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool) or np.iscomplexobj(array):
        raise ParameterError(f"{name}: expected real numbers, got dtype {array.dtype}")
    if dtype is None:
        dtype = array.dtype if array.dtype in (np.float32, np.float64) else np.float64
    array = np.array(array, dtype=dtype, order="C", copy=True)
    if not np.all(np.isfinite(array)):
        raise ParameterError(f"{name}: contains NaN or Inf values; remove or replace them")
    if array.size and array.min() < 0:
        raise ParameterError(f"{name}: must be non-negative, got minimum {array.min():g}")
    return array


def _check_shapes(X, W, H):
    if W.shape[0] != X.shape[0] or H.shape[1] != X.shape[1] or W.shape[1] != H.shape[0]:
        raise ParameterError(f"shapes do not agree: X {X.shape}, W {W.shape}, H {H.shape}; "
                             "expected W (n_rows, rank) and H (rank, n_cols)")


def _validate_mask(update, rank, name):
    if isinstance(update, (bool, np.bool_)):
        return np.full(rank, bool(update))
    mask = np.asarray(update)
    if mask.dtype != bool or mask.shape != (rank,):
        raise ParameterError(f"{name}: expected a bool or a boolean mask of shape ({rank},), "
                             f"got {mask.dtype} array of shape {mask.shape}")
    return mask.copy()


def _validate_rate(rate, shape, name, dtype):
    try:
        array = np.asarray(rate, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{name}: expected a non-negative number or array, got {rate!r}") from exc
    if not np.all(np.isfinite(array)) or (array.size and array.min() < 0):
        raise ParameterError(f"{name}: prior rates must be finite and non-negative, got {rate!r}")
    try:
        array = np.broadcast_to(array, shape)
    except ValueError:
        raise ParameterError(f"{name}: shape {array.shape} does not broadcast to the factor's "
                             f"shape {shape}; use a scalar, a per-row or a per-column array") from None
    return np.ascontiguousarray(array, dtype=dtype)


def _validate_background(background, X):
    """The known background as a matrix of X's shape and dtype (None stays None)."""
    if background is None:
        return None
    B = _as_float_matrix(background, "background", X.dtype)
    if B.shape != X.shape:
        raise ParameterError(f"background: expected the shape of X {X.shape}, got {B.shape}")
    return B


def _log_prior(factor, rate):
    """Σ log λ − λ w over the entries with λ > 0 (exponential prior), in float64."""
    if rate is None:
        return 0.0
    positive = rate > 0
    if not positive.any():
        return 0.0
    r = rate[positive].astype(np.float64)
    return float(np.sum(np.log(r)) - np.dot(r, factor[positive].astype(np.float64)))


def poisson_log_likelihood(X, W, H):
    """Poisson log-likelihood ``Σ xlogy(x, WH) − WH − gammaln(x + 1)`` (dense reference).

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
    W : ndarray, shape (n_rows, rank)
    H : ndarray, shape (rank, n_cols)

    Returns
    -------
    float

    Raises
    ------
    ParameterError
        Arrays that are not non-negative finite matrices, or shapes that disagree.
    """
    from scipy.special import gammaln, xlogy

    X, W, H = (_as_float_matrix(value, name, np.float64) for value, name in ((X, "X"), (W, "W"), (H, "H")))
    _check_shapes(X, W, H)
    rate = W @ H
    return float(np.sum(xlogy(X, rate) - rate - gammaln(X + 1)))


# --------------------------------------------------------------------------------------------
# initialisation

def initialize_nmf(X, rank, rng=None, *, method="random", scale=None):
    """Starting factors for :func:`poisson_nmf_em`.

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
        Non-negative data.
    rank : int
        Number of components.
    rng : numpy.random.Generator or int, optional
        Random stream (an int is used as a seed). Default: seed 0.
    method : {"random", "columns"}
        ``"random"``: ``W`` and ``H`` entries ``s·u`` with ``u ~ Uniform(0.5, 1.5)`` and
        ``s = sqrt(mean(X) / rank)``, so that ``WH`` starts at the data's mean level.
        ``"columns"``: the columns of ``W`` are randomly chosen columns of ``X`` (plus 1 % of
        the mean, so none is zero), each rescaled to sum 1 with ``H`` random as above at the
        matching level; a data-driven start for dictionaries.
    scale : float, optional
        Overrides ``s`` (the entries' typical size).

    Returns
    -------
    W : ndarray, shape (n_rows, rank)
    H : ndarray, shape (rank, n_cols)
        In the dtype of ``X`` (float32 or float64).
    """
    X = _as_float_matrix(X, "X")
    rank = _validate_rank(rank)
    if rng is None or not isinstance(rng, (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)):
        rng = 0 if rng is None else integer_at_least("rng", rng, 0)
    rng = np.random.default_rng(rng)
    n_rows, n_cols = X.shape
    mean = float(X.mean(dtype=np.float64)) if X.size else 0.0  # a float32 sum overflows from about 3e38
    if scale is None:
        scale = np.sqrt(mean / rank) if mean > 0 else 1.0
    else:
        scale = positive_number("scale", scale)
    if method == "random":
        W = scale * rng.uniform(0.5, 1.5, size=(n_rows, rank))
        H = scale * rng.uniform(0.5, 1.5, size=(rank, n_cols))
    elif method == "columns":
        if n_cols == 0:
            raise ParameterError("X: method='columns' needs at least one column")
        picks = rng.choice(n_cols, size=rank, replace=rank > n_cols)
        W = X[:, picks].astype(np.float64) + 0.01 * max(mean, np.finfo(np.float64).tiny)
        W /= W.sum(axis=0, keepdims=True)
        level = X.sum(axis=0, dtype=np.float64).mean() / rank if mean > 0 else 1.0
        H = level * rng.uniform(0.5, 1.5, size=(rank, n_cols))
    else:
        raise ParameterError(f"method: expected 'random' or 'columns', got {method!r}")
    return W.astype(X.dtype), H.astype(X.dtype)


def _rate_floor(X):
    """The floor of the rates and of the updates' denominators, ``max(eps · min(1, max X), tiny)``, in X's dtype."""
    info = np.finfo(X.dtype)
    top = float(X.max()) if X.size else 0.0
    floor = float(info.eps) * min(1.0, top) if top > 0 else float(info.eps)
    return X.dtype.type(max(floor, float(info.tiny)))


def _validate_start(X, W, H, mask_W, mask_H, B, floor):
    """Refuse starts that multiplicative updates cannot leave or that explain no count.

    Learned entries must be strictly positive (a zero stays zero); fixed ones may be zero, unless
    together they hold the rate ``W H + B`` at 0 where ``X > 0``. A start whose every rate is below
    the floor is negligible: the floor, not the start, would set the first updates and the
    log-likelihood (which could then stop the relative rule at once).
    """
    for learned, name, part in ((W[:, mask_W], "W", "columns"), (H[mask_H], "H", "rows")):
        if not np.all(learned > 0):
            raise ParameterError(f"{name}: the learned {part} must be finite and strictly positive to start "
                                 "multiplicative updates (a zero stays zero)")
    if not X.any():
        return
    top = float(X.max())
    if top < floor:
        raise ParameterError(f"X: its largest entry {top:.3g} is below the least rate {floor:.3g} that "
                             f"{X.dtype} holds at full precision; scale the data up (the fit of c X is c times the "
                             "fit of X)")
    bound = float(np.dot(W.max(axis=0).astype(np.float64), H.max(axis=1).astype(np.float64)))
    if B is not None:
        bound += float(B.max())
    if bound < floor:
        raise ParameterError(f"W, H: a negligible start, W H + background is at most {bound:.3g}, below the least "
                             f"rate {floor:.3g}; start at the data's level (initialize_nmf)")
    if np.any(W[:, ~mask_W] == 0) or np.any(H[~mask_H] == 0):
        support = (W > 0).astype(X.dtype) @ (H > 0).astype(X.dtype)
        if B is not None:
            support += B > 0
        if np.any((support == 0) & (X > 0)):
            raise ParameterError("W, H: zeros of the fixed factors hold W H + background at 0 where X > 0, a count "
                                 "no fit can explain")


def _validate_rank(rank):
    if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)) or rank < 1:
        raise ParameterError(f"rank: expected a positive integer, got {rank!r}")
    return int(rank)


# --------------------------------------------------------------------------------------------
# EM

def poisson_nmf_em(X, W, H, *, update_W=True, update_H=True, prior_rate_W=0.0, prior_rate_H=0.0,
                   max_iter=200, tol=1e-4, track_log_likelihood=None, progress=False, desc="EM",
                   threads=None, background=None):
    """Fit ``X ≈ W H`` under the Poisson model by (MAP-)EM: alternating KL multiplicative updates.

    Parameters
    ----------
    X : ndarray, shape (n_rows, n_cols)
        Non-negative data (need not be integer). Its dtype (float32 or float64) is kept.
    W : ndarray, shape (n_rows, rank)
        Starting dictionary (not modified): non-negative, its learned columns strictly positive.
    H : ndarray, shape (rank, n_cols)
        Starting activations (not modified): non-negative, their learned rows strictly positive.
    update_W : bool or ndarray of bool, shape (rank,)
        Which columns of ``W`` are learned; the others come back bit-identical to the input and
        may hold zeros (a dictionary's empty bins), as long as some term of every rate where
        ``X > 0`` can be positive.
    update_H : bool or ndarray of bool, shape (rank,)
        Which rows of ``H`` are learned.
    prior_rate_W, prior_rate_H : float or array_like
        Rates of exponential priors (MAP-EM); 0 is a flat prior. Anything broadcastable to
        the factor's shape: a scalar, a per-component rate (shape ``(rank,)`` for ``W``,
        ``(rank, 1)`` for ``H``), a per-row or per-entry array.
    max_iter : int
        Iteration cap (≥ 0). One iteration updates ``W`` then ``H``.
    tol : float
        Stop when the objective ``D = −(log-likelihood + log-prior) + const`` (the KL
        divergence plus the prior penalty, ≥ 0) decreases by less than ``tol · D`` in one
        iteration. ``tol=0`` runs exactly ``max_iter`` iterations.
    track_log_likelihood : bool, optional
        Record the log-posterior after every iteration. Default: every iteration when ``tol > 0``
        (the criterion needs it), only the initial and final values when ``tol == 0`` (a log
        per entry saved per iteration). False (with ``tol=0``): none at all, for a caller that
        wants the factors only (no log-gamma of the data, no product after the last iteration).
    progress : bool
        Show a progress bar on stderr.
    desc : str
        Label of the progress bar.
    threads : int, optional
        Worker threads over the column blocks of ``X`` (blocks of about 1024 columns; a
        matrix with fewer columns is one block), each with single-threaded BLAS. Default: the
        number of threads BLAS is set to use (threadpoolctl), so ``threadpool_limits(1)``
        around the call makes it serial. With more than one block, BLAS is limited to one
        thread (process-wide, threadpoolctl) for the duration of the call, whatever this number,
        so the result does not depend on it.
    background : ndarray, shape (n_rows, n_cols), optional
        A known non-negative part of the rate: ``X ~ Poisson(W H + background)``.

    Returns
    -------
    EMResult
        ``(W, H, log_likelihood, n_iter)``.

    Raises
    ------
    ParameterError
        Shapes that disagree, negative or non-finite entries, bad masks or rates; a zero in a
        learned part of the start, a start below the rates' floor everywhere, fixed zeros that
        hold a rate at 0 where ``X > 0``.

    Warns
    -----
    ConvergenceWarning
        ``tol > 0`` and ``max_iter`` reached before the tolerance was met.

    References
    ----------
    MLSP'12 §1.1 (Poisson/KL model, Gamma priors); ICASSP'16 eq. 13–14; Lee & Seung (2001).
    """
    X = _as_float_matrix(X, "X")
    dtype = X.dtype
    W = _as_float_matrix(W, "W", dtype)
    H = _as_float_matrix(H, "H", dtype)
    n_rows, n_cols = X.shape
    _check_shapes(X, W, H)
    rank = W.shape[1]
    if rank < 1:
        raise ParameterError(f"W: rank must be at least 1, got shape {W.shape}")
    mask_W = _validate_mask(update_W, rank, "update_W")
    mask_H = _validate_mask(update_H, rank, "update_H")
    rate_W = _validate_rate(prior_rate_W, W.shape, "prior_rate_W", dtype)
    rate_H = _validate_rate(prior_rate_H, H.shape, "prior_rate_H", dtype)
    if isinstance(max_iter, (bool, np.bool_)) or not isinstance(max_iter, (int, np.integer)) or max_iter < 0:
        raise ParameterError(f"max_iter: expected a non-negative integer, got {max_iter!r}")
    if isinstance(tol, (bool, np.bool_)) or not (
            isinstance(tol, (int, float, np.floating, np.integer)) and np.isfinite(tol) and tol >= 0):
        raise ParameterError(f"tol: expected a finite number >= 0, got {tol!r}")
    if not (track_log_likelihood is None or isinstance(track_log_likelihood, (bool, np.bool_))):
        raise ParameterError(f"track_log_likelihood: expected True, False or None, got {track_log_likelihood!r}")
    if tol > 0 and track_log_likelihood is not None and not track_log_likelihood:
        raise ParameterError("track_log_likelihood=False needs tol=0: the stopping rule uses it")
    ends = track_log_likelihood is None or bool(track_log_likelihood)  # the initial and final values
    track_log_likelihood = tol > 0 if track_log_likelihood is None else bool(track_log_likelihood)
    max_iter = int(max_iter)
    if threads is not None and (isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer))
                                or threads < 1):
        raise ParameterError(f"threads: expected a positive integer or None, got {threads!r}")

    B = _validate_background(background, X)

    floor = _rate_floor(X)
    _validate_start(X, W, H, mask_W, mask_H, B, floor)
    has_prior_W = bool(np.any(rate_W > 0))
    has_prior_H = bool(np.any(rate_H > 0))
    use_rate_W = rate_W if has_prior_W else None
    use_rate_H = rate_H if has_prior_H else None
    lgamma_sum = saturated = 0.0
    if ends:
        from scipy.special import gammaln

        lgamma_sum = float(np.sum(gammaln(X.astype(np.float64) + 1)))
    if tol > 0:
        # x log x - x: the saturated model's log-likelihood minus the lgamma term, for the criterion
        X64 = X.astype(np.float64)
        positive = X64 > 0
        saturated = float(np.sum(X64[positive] * np.log(X64[positive])) - X64.sum()) - lgamma_sum
        # the criterion's objective leaves out the priors' constant Σ log λ, so it stays >= 0
        saturated += sum(float(np.sum(np.log(r[r > 0].astype(np.float64))))
                         for r in (use_rate_W, use_rate_H) if r is not None)

    learn_W = mask_W.any()
    learn_H = mask_H.any()
    cols_W = None if mask_W.all() else np.flatnonzero(mask_W)
    rows_H = None if mask_H.all() else np.flatnonzero(mask_H)
    # a prior rate on H that is constant along each row folds into W before the product
    fold_H = not has_prior_H or bool(np.all(rate_H == rate_H[:, :1]))

    blocks = _column_blocks(n_cols)
    n_W = rank if cols_W is None else cols_W.size
    n_H = rank if rows_H is None else rows_H.size
    numerators_W = np.empty((len(blocks), n_rows, n_W), dtype=dtype)

    def columns(array, s):
        return array if array is None or len(blocks) == 1 else np.ascontiguousarray(array[:, s])

    buffers = [_Block(s, columns(X, s), np.empty((n_rows, s.stop - s.start), dtype=dtype),
                      np.empty((n_rows, s.stop - s.start), dtype=dtype), numerators_W[index],
                      np.empty((n_H, s.stop - s.start), dtype=dtype), columns(B, s))
               for index, s in enumerate(blocks)]

    background_sum = 0.0 if B is None else float(B.sum(dtype=np.float64))

    def log_posterior(xlogp):
        # Σλ = Σ_r (Σ_i W_ir)(Σ_j H_rj) + Σ B: no need for W H itself.
        total_rate = float(np.dot(W.sum(axis=0, dtype=np.float64), H.sum(axis=1, dtype=np.float64)))
        total_rate += background_sum
        value = xlogp - total_rate - lgamma_sum
        return value + _log_prior(W, use_rate_W) + _log_prior(H, use_rate_H)

    def full_log_posterior():
        return log_posterior(math.fsum(ratio(buffer, True) for buffer in buffers))

    def ratio(buffer, want_log):
        np.dot(W, H[:, buffer.columns], out=buffer.ratio)
        if buffer.background is not None:
            np.add(buffer.ratio, buffer.background, out=buffer.ratio)
        return _ratio(buffer.X, buffer.ratio, floor, buffer.log if want_log else None)

    history = np.full(max_iter + 1, np.nan)
    if max_iter == 0 or not (learn_W or learn_H):
        if ends:
            history[0] = full_log_posterior()
        return EMResult(W, H, history[:1], 0, 1)

    workers = _workers(threads, len(blocks))

    def phase_W(buffer, want_log):
        xlogp = ratio(buffer, want_log)
        H_b = H[:, buffer.columns] if cols_W is None else H[cols_W, buffer.columns]
        np.dot(buffer.ratio, H_b.T, out=buffer.numerator_W)
        return xlogp, H_b.sum(axis=1)

    def phase_H(buffer, want_log, W_scaled):
        xlogp = ratio(buffer, want_log) if want_log is not None else None
        if W_scaled is not None:
            _update_H_block(H, buffer, rows_H, W_scaled, use_rate_H, fold_H, floor)
        return xlogp

    from sepsti.core.progress import progress_bar

    converged = False
    n_iter = 0
    with contextlib.ExitStack() as stack:
        run = _runner(stack, workers, len(blocks))
        bar = stack.enter_context(progress_bar(max_iter, desc=desc, enabled=progress))
        for iteration in range(1, max_iter + 1):
            want_log = track_log_likelihood or (ends and iteration == 1)
            first = True
            if learn_W:
                parts = run(phase_W, buffers, want_log)
                if want_log:
                    history[iteration - 1] = log_posterior(math.fsum(p[0] for p in parts))
                    first = False
                    if _converged(history, iteration - 1, saturated, tol):
                        converged = True
                        break
                # sums over the blocks, in block order
                numerator, denominator = numerators_W[0], parts[0][1]
                for other, part in zip(numerators_W[1:], parts[1:]):
                    numerator += other
                    denominator += part[1]
                denominator = denominator[None, :]
                if use_rate_W is not None:
                    denominator = denominator + (use_rate_W if cols_W is None else use_rate_W[:, cols_W])
                if cols_W is None:
                    _mu_step(W, numerator, denominator, floor)
                else:
                    block = W[:, cols_W]
                    _mu_step(block, numerator, denominator, floor)
                    W[:, cols_W] = block
            if learn_H:
                W_scaled = _scaled_W(W, rows_H, use_rate_H, fold_H, floor)
                if want_log and first:
                    xlogp = math.fsum(run(phase_H, buffers, True, None))
                    history[iteration - 1] = log_posterior(xlogp)
                    if _converged(history, iteration - 1, saturated, tol):
                        converged = True
                        break
                    run(phase_H, buffers, None, W_scaled)
                else:
                    run(phase_H, buffers, False, W_scaled)
            n_iter = iteration
            bar.update(1)

    if converged:
        # the state was not updated in the iteration that detected convergence
        history = history[:n_iter + 1]
    else:
        history = history[:n_iter + 1]
        if ends:
            history[n_iter] = full_log_posterior()
        if tol > 0 and not _converged(history, n_iter, saturated, tol):
            warnings.warn(f"EM stopped at max_iter={max_iter} before reaching tol={tol:g}; "
                          "raise max_iter or tol", ConvergenceWarning, stacklevel=2)
    return EMResult(W, H, history, n_iter, workers)


# --------------------------------------------------------------------------------------------
# column blocks and worker threads
#
# The columns of X are cut into blocks of about _BLOCK_COLUMNS; each block's products and
# element-wise passes are independent, except the numerator of W, summed over blocks in a
# fixed order. The blocks depend on the shape only, so results do not depend on the number
# of threads. With several workers, each block runs single-threaded BLAS in its own thread
# (numpy and BLAS release the GIL): the element-wise passes run in parallel too, and no BLAS
# thread spins waiting for work, which is what makes multi-threaded BLAS slow on a busy machine.

_BLOCK_COLUMNS = 1024


class _Block(NamedTuple):
    """One column block's data and work buffers."""

    columns: slice
    X: np.ndarray
    ratio: np.ndarray          # W H (+ background), then X / that
    log: np.ndarray            # log of the rate, when the log-likelihood is wanted
    numerator_W: np.ndarray
    numerator_H: np.ndarray
    background: np.ndarray | None


def _column_blocks(n_cols):
    count = max(1, -(-n_cols // _BLOCK_COLUMNS))
    edges = np.linspace(0, n_cols, count + 1).round().astype(int)
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(edges)]


def _workers(threads, n_blocks):
    """Worker threads: ``threads``, or by default the number of threads BLAS is set to use."""
    if n_blocks == 1:
        return 1
    if threads is None:
        try:
            from threadpoolctl import threadpool_info
        except ImportError:  # pragma: no cover - depends on the environment
            return 1
        counts = [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]
        threads = max(counts, default=1)
    return max(1, min(int(threads), n_blocks))


def _runner(stack, workers, n_blocks):
    """``run(function, buffers, *args)``: the function on every block, serially or in threads.

    Over several blocks BLAS runs on one thread whatever the number of workers: its products then
    sum in the same order, so the result does not depend on ``workers``.
    """
    if n_blocks > 1:
        from sepsti.core.blas import single_threaded_blas

        stack.enter_context(single_threaded_blas())
    if workers == 1:
        return lambda function, buffers, *args: [function(buffer, *args) for buffer in buffers]
    from concurrent.futures import ThreadPoolExecutor

    pool = stack.enter_context(ThreadPoolExecutor(workers - 1))

    def run(function, buffers, *args):
        # the calling thread takes the first block (and every workers-th after it)
        futures = [pool.submit(function, buffer, *args) for i, buffer in enumerate(buffers) if i % workers]
        mine = [function(buffer, *args) for buffer in buffers[::workers]]
        theirs = iter(future.result() for future in futures)
        return [mine[i // workers] if i % workers == 0 else next(theirs) for i in range(len(buffers))]

    return run


def _scaled_W(W, rows, rate, fold, floor):
    """The columns of W divided by the H-update's denominator when it folds (else W itself)."""
    Ws = W if rows is None else W[:, rows]
    if not fold:
        return Ws
    denominator = Ws.sum(axis=0)
    if rate is not None:
        denominator = denominator + (rate[:, 0] if rows is None else rate[rows, 0])
    return Ws / np.maximum(denominator, floor)[None, :]


def _update_H_block(H, buffer, rows, W_scaled, rate, fold, floor):
    """H[rows, s] <- H[rows, s] ∘ (Wᵀ ratio) / (Wᵀ 1 + λ^H) on one column block, in place.

    With ``fold`` (a rate constant along each row of H, or none) ``W_scaled`` already holds
    W divided by the denominator, one number per component, so the numerator needs one
    multiplication pass instead of a division and a multiplication.
    """
    s, numerator = buffer.columns, buffer.numerator_H
    np.dot(W_scaled.T, buffer.ratio, out=numerator)
    if not fold:
        block_rate = rate[:, s] if rows is None else rate[rows, s]
        numerator /= np.maximum(W_scaled.sum(axis=0)[:, None] + block_rate, floor)
    if rows is None:
        _scale(H[:, s], numerator)
    else:
        block = H[rows, s]
        _scale(block, numerator)
        H[rows, s] = block


def _mu_step(factor, numerator, denominator, floor):
    """factor <- factor * numerator / max(denominator, floor), in place (numerator overwritten)."""
    numerator /= np.maximum(denominator, floor)
    _scale(factor, numerator)


def _scale(factor, multiplier):
    """factor <- max(factor * multiplier, tiny), in place.

    Entries are kept at or above the smallest normal number: factors that shrink
    geometrically would otherwise reach subnormal values, which make BLAS products slow.
    """
    factor *= multiplier
    np.maximum(factor, np.finfo(factor.dtype).tiny, out=factor)


def _converged(history, index, saturated, tol):
    """Relative decrease of the objective D = saturated − log-posterior below tol."""
    if index == 0 or tol <= 0:
        return False
    previous, current = history[index - 1], history[index]
    objective = abs(saturated - previous)
    return (current - previous) <= min(tol, 1.0) * objective  # a tol above 1 stops as 1 does, without overflow
