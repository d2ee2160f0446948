"""Non-negative matrix factorisation with Gaussian-process priors (NMF-GPP).

Model (Schmidt & Laurberg 2008; the NUTS paper's appendix F)::

    X ≈ D H,  D ∈ R₊^{K×M} (loadings over plate positions),  H ∈ R₊^{M×L} (spectra)
    d_m = C_d δ_m,  h_m = C_h η_m,  δ, η ~ N(0, I)          (C = lower Cholesky factor)
    D = f_d^{-1}(d),  H = f_h^{-1}(h)                         (exponential-to-Gaussian link, eq. 22)
    log p(δ, η | X) = −‖X − D H‖²_F / (2 σ_N²) − ½ ‖δ‖² − ½ ‖η‖² + const   (eq. 19)

Covariances: independent components; over wavenumbers a squared-exponential
kernel k(i, j) = exp(−(i − j)² / β²); over plate coordinates an exponential
kernel k(x, x') = exp(−‖x − x'‖ / β²) (the paper's forms, β the length-scale).

Conventions: X has shape ``(K, L)`` = (plate positions, wavenumbers), plate
positions in row-major order of the plate; ``theta`` is a flat vector of
size ``K M + M L`` holding ``delta`` (shape ``(K, M)``, row-major) then
``eta`` (shape ``(M, L)``, row-major) — :meth:`NMFGPP.split` and
:meth:`NMFGPP.join` convert. The link is evaluated in log space
(``log_ndtr``, ``erfcx``), finite for any finite argument.
"""

from typing import NamedTuple

import numpy as np
from scipy import linalg
from scipy.special import erfcx, log_ndtr, ndtri, ndtri_exp

from sepsti.core.checks import finite_number, integer_at_least, positive_number, real_array
from sepsti.core.errors import ParameterError

__all__ = ["NMFGPPParams", "NMFGPP", "squared_exponential_kernel", "exponential_kernel_2d",
           "exp_to_gauss", "exp_to_gauss_derivative", "gauss_to_exp", "stable_cholesky"]

_SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)


class NMFGPPParams(NamedTuple):
    """The latent standard-normal variables.

    Attributes
    ----------
    delta : ndarray, shape (K, M)
    eta : ndarray, shape (M, L)
    """

    delta: np.ndarray
    eta: np.ndarray


def squared_exponential_kernel(num_points, beta):
    """1-D kernel exp(−(i − j)² / β²) over indices 0..num_points−1, shape (n, n)."""
    index = np.arange(num_points, dtype=float)
    return np.exp(-np.subtract.outer(index, index) ** 2 / beta ** 2)


def exponential_kernel_2d(plate_shape, beta):
    """2-D kernel exp(−‖x − x'‖ / β²) over a plate's grid coordinates (row-major), shape (n, n)."""
    rows, cols = np.meshgrid(np.arange(plate_shape[0]), np.arange(plate_shape[1]), indexing="ij")
    coords = np.column_stack([rows.ravel(), cols.ravel()]).astype(float)
    distance = np.sqrt(((coords[:, None, :] - coords[None, :, :]) ** 2).sum(-1))
    return np.exp(-distance / beta ** 2)


def stable_cholesky(cov, *, jitter=1e-6, max_tries=8):
    """Lower Cholesky factor of ``cov + ε I``, ε starting at ``jitter`` × mean diagonal and growing ×10 on
    failure."""
    scale = float(np.mean(np.diag(cov)))
    eps = jitter * scale
    for _ in range(max_tries):
        try:
            return linalg.cholesky(cov + eps * np.eye(cov.shape[0]), lower=True)
        except linalg.LinAlgError:
            eps *= 10.0
    raise ParameterError(f"covariance is not positive definite even with jitter {eps:.1e}: check beta")


def exp_to_gauss(h, sigma, rate):
    """Inverse link (eq. 22): −log(½ − ½ erf(h / (√2 σ))) / λ = −log Φ(−h/σ) / λ,
    Exponential(λ) marginals."""
    return -log_ndtr(-h / sigma) / rate


def exp_to_gauss_derivative(h, sigma, rate):
    """Derivative of :func:`exp_to_gauss` (eq. 23): φ(z) / (λ σ Φ(−z)) = √(2/π) / (λ σ erfcx(z/√2)),
    z = h/σ."""
    return _SQRT_2_OVER_PI / (rate * sigma * erfcx(h / (np.sqrt(2.0) * sigma)))


def gauss_to_exp(value, sigma, rate):
    """The link itself: h = −σ Φ^{-1}(exp(−λ value)), the inverse of :func:`exp_to_gauss` (value > 0)."""
    x = rate * np.asarray(value, dtype=float)
    # exp(-x) underflows past 745 and rounds to 1 below 1e-16: there the exact ndtri_exp (elsewhere the two
    # agree to 1e-9, and the MAP starts of the documented runs stay as they were)
    tail = (x > 700.0) | (x < 1e-6)
    return -sigma * np.where(tail, ndtri_exp(-np.where(tail, x, 1.0)), ndtri(np.exp(-np.where(tail, 1.0, x))))


class NMFGPP:
    """NMF-GPP posterior over (δ, η) with its gradient in one forward pass.

    Parameters
    ----------
    X : ndarray, shape (K, L)
        Data: one spectrum per plate position (row-major over the plate).
    num_components : int
        M.
    plate_shape : tuple of int
        (rows, cols) with rows · cols = K.
    beta : float
        Length-scale of both kernels (``beta_d``/``beta_h`` override one each); each positive and finite.
    noise_std : float
        σ_N of the least-squares likelihood.
    rate_d, rate_h : float
        λ of the exponential marginals of D and H.
    jitter : float
        Relative diagonal jitter for the Cholesky factors, finite and >= 0.

    Raises
    ------
    ParameterError
        On data that are not a finite real matrix, a plate that does not match it, or settings outside
        the ranges above.

    References
    ----------
    Schmidt & Laurberg, "Non-negative matrix factorization with Gaussian process
    priors", Comput. Intell. Neurosci. 2008; Hansen, Alstrøm & Schmidt, "MCMC
    sampling for latent factor models", eq. 18–23.
    """

    def __init__(self, X, *, num_components, plate_shape, beta, noise_std, beta_d=None, beta_h=None,
                 rate_d=1.0, rate_h=1.0, jitter=1e-6):
        X = real_array("X", X)  # complex values were cast to their real part, strings read as numbers
        if X.ndim != 2 or not np.all(np.isfinite(X)):
            raise ParameterError(f"X must be a finite 2-D array (positions, wavenumbers), got shape {X.shape}")
        plate_shape = tuple(integer_at_least("plate_shape", size, 1) for size in plate_shape)
        if len(plate_shape) != 2 or plate_shape[0] * plate_shape[1] != X.shape[0] or X.shape[1] < 1:
            raise ParameterError(f"plate_shape={plate_shape} does not match {X.shape[0]} positions (rows of X)")
        integer_at_least("num_components", num_components, 1)
        for name, value in (("beta", beta), ("noise_std", noise_std), ("rate_d", rate_d), ("rate_h", rate_h),
                            ("beta_d", beta_d), ("beta_h", beta_h)):
            if value is not None:  # beta_d = -1 built a kernel, NaN met SciPy's ValueError in the Cholesky factor
                positive_number(name, value)
        if not finite_number("jitter", jitter) >= 0:
            raise ParameterError(f"jitter={jitter!r} must be a finite number >= 0")
        self.X = np.ascontiguousarray(X)
        self.num_components = int(num_components)
        self.plate_shape = plate_shape
        self.noise_std = float(noise_std)
        self.rate_d, self.rate_h = float(rate_d), float(rate_h)
        self.beta_d = float(beta if beta_d is None else beta_d)
        self.beta_h = float(beta if beta_h is None else beta_h)
        self.chol_d = np.ascontiguousarray(stable_cholesky(exponential_kernel_2d(plate_shape, self.beta_d),
                                                           jitter=jitter))
        self.chol_h = np.ascontiguousarray(stable_cholesky(squared_exponential_kernel(X.shape[1], self.beta_h),
                                                           jitter=jitter))
        # σ_i of eq. 22: marginal standard deviations of the (jittered) GP.
        self.sigma_d = np.sqrt(np.sum(self.chol_d ** 2, axis=1))[:, None]
        self.sigma_h = np.sqrt(np.sum(self.chol_h ** 2, axis=1))[None, :]
        self._chol_h_t = np.ascontiguousarray(self.chol_h.T)
        self._chol_d_t = np.ascontiguousarray(self.chol_d.T)
        # Per-entry constants of the compiled path (eq. 22–23), computed once.
        sigma_d, sigma_h = self.sigma_d[:, 0], self.sigma_h[0]
        self._link_d = (1.0 / (np.sqrt(2.0) * sigma_d), 1.0 / self.rate_d, _SQRT_2_OVER_PI / (self.rate_d * sigma_d))
        self._link_h = (1.0 / (np.sqrt(2.0) * sigma_h), 1.0 / self.rate_h, _SQRT_2_OVER_PI / (self.rate_h * sigma_h))
        self._inv_var = 1.0 / self.noise_std ** 2
        self._dim = self.dim
        self._kernel = None
        self._gp_factors = None  # the kernels' GPFactor of D and of H, made with the kernels

    @property
    def n_data(self):
        """Number of data entries K L."""
        return self.X.size

    @property
    def dim(self):
        """Size of theta: K M + M L."""
        return (self.X.shape[0] + self.X.shape[1]) * self.num_components

    def split(self, theta):
        """Flat theta → :class:`NMFGPPParams` (views)."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.dim,):
            raise ParameterError(f"theta has shape {theta.shape}, expected ({self.dim},)")
        num_d = self.X.shape[0] * self.num_components
        return NMFGPPParams(theta[:num_d].reshape(self.X.shape[0], self.num_components),
                            theta[num_d:].reshape(self.num_components, self.X.shape[1]))

    def join(self, params):
        """:class:`NMFGPPParams` → flat theta."""
        return np.concatenate([np.ravel(params.delta), np.ravel(params.eta)])

    def gaussian_fields(self, theta):
        """The GP values (d, h) as matrices of shapes (K, M) and (M, L)."""
        params = self.split(theta)
        return self.chol_d @ params.delta, params.eta @ self._chol_h_t

    def factors(self, theta):
        """(D, H): non-negative factors of shapes (K, M) and (M, L) (eq. 18)."""
        d, h = self.gaussian_fields(theta)
        return exp_to_gauss(d, self.sigma_d, self.rate_d), exp_to_gauss(h, self.sigma_h, self.rate_h)

    def latent_from_factors(self, D, H, *, floor=1e-8):
        """θ whose factors are (D, H) (entries floored at ``floor``), by triangular solves."""
        d = gauss_to_exp(np.maximum(D, floor), self.sigma_d, self.rate_d)
        h = gauss_to_exp(np.maximum(H, floor), self.sigma_h, self.rate_h)
        delta = linalg.solve_triangular(self.chol_d, d, lower=True)
        eta = linalg.solve_triangular(self.chol_h, h.T, lower=True).T
        return self.join(NMFGPPParams(delta, eta))

    def _kernels(self):
        """The compiled kernels module (numba loads on first use), with each factor's GPFactor made."""
        from sepsti.core.models import _nmf_gpp_kernels as kernels

        if self._gp_factors is None:
            self._gp_factors = (kernels.GPFactor(kernels.pack_rows(self.chol_d), *self._link_d),
                                kernels.GPFactor(kernels.pack_rows(self.chol_h), *self._link_h))
        return kernels

    def rescale(self, theta, log_scales):
        """Move θ along the scale symmetry of D H: (D, H) → (D diag(c), diag(c)⁻¹ H), c = exp(log_scales).

        The likelihood is unchanged by the move; the prior is not. Returns the
        new θ and log |det ∂θ'/∂θ|, which the Cholesky factors leave out (they
        cancel) and the link gives entry by entry:
        Σ_D [log c + log f'(d) − log f'(d')] + Σ_H [−log c + log f'(h) − log f'(h')]
        with f the inverse link (eq. 22) and f' its slope (eq. 23). The new
        fields are d' = −σ Φ⁻¹(exp(−λ D')) computed as ``ndtri_exp`` of the log,
        accurate in both tails. Entries whose factor underflows to 0 cannot be
        moved: θ' is then returned non-finite (a proposal to reject).

        Parameters
        ----------
        theta : ndarray, shape (dim,)
        log_scales : ndarray, shape (M,)

        Returns
        -------
        theta_new : ndarray, shape (dim,)
        log_jacobian : float
        """
        log_scales = np.asarray(log_scales, dtype=float)
        if log_scales.shape != (self.num_components,):
            raise ParameterError(f"log_scales has shape {log_scales.shape}, expected ({self.num_components},)")
        d, h = self.gaussian_fields(theta)
        with np.errstate(divide="ignore", invalid="ignore"):
            d_new = self._move_field(d, log_scales[None, :], self.sigma_d, self.rate_d)
            h_new = self._move_field(h, -log_scales[:, None], self.sigma_h, self.rate_h)
            log_jacobian = (np.sum(np.log(exp_to_gauss_derivative(d, self.sigma_d, self.rate_d)))
                            - np.sum(np.log(exp_to_gauss_derivative(d_new, self.sigma_d, self.rate_d)))
                            + np.sum(np.log(exp_to_gauss_derivative(h, self.sigma_h, self.rate_h)))
                            - np.sum(np.log(exp_to_gauss_derivative(h_new, self.sigma_h, self.rate_h)))
                            + (d.shape[0] - h.shape[1]) * np.sum(log_scales))
        if not (np.all(np.isfinite(d_new)) and np.all(np.isfinite(h_new))):
            return np.full(self.dim, np.nan), -np.inf
        kernels = self._kernels()
        delta_t, eta = np.empty_like(d_new.T), np.empty_like(h_new)
        kernels.tril_solve(self._gp_factors[0].packed, np.ascontiguousarray(d_new.T), delta_t)
        kernels.tril_solve(self._gp_factors[1].packed, np.ascontiguousarray(h_new), eta)
        return self.join(NMFGPPParams(delta_t.T, eta)), float(log_jacobian)

    def component_log_scales(self, theta):
        """log ‖D_m‖ − log ‖H_m‖ for each component m, shape (M,): the position along the scale orbit.

        :meth:`rescale` by c moves it by 2 log c and leaves D H unchanged, so it
        is the direction a sampler crosses most slowly; its ESS belongs in any
        judgement of mixing.
        """
        D, H = self.factors(theta)
        with np.errstate(divide="ignore"):
            return np.log(np.linalg.norm(D, axis=0)) - np.log(np.linalg.norm(H, axis=1))

    def gauss_newton_precision(self, theta):
        """I + σ_N⁻² Jᵀ J, J = ∂ vec(D H) / ∂θ: the Fisher information of the likelihood plus the prior's.

        The generalised Gauss–Newton approximation of −∇² log p (it drops the
        residual-weighted second derivatives), positive definite everywhere,
        so a dense metric can be built from it at any position, not only at a
        mode. Shape ``(dim, dim)``, θ's layout (δ row-major (K, M), then η).
        """
        d, h = self.gaussian_fields(theta)
        D = exp_to_gauss(d, self.sigma_d, self.rate_d)
        H = exp_to_gauss(h, self.sigma_h, self.rate_h)
        slope_d = exp_to_gauss_derivative(d, self.sigma_d, self.rate_d)   # (K, M)
        slope_h = exp_to_gauss_derivative(h, self.sigma_h, self.rate_h)   # (M, L)
        K, M, L = D.shape[0], self.num_components, H.shape[1]
        # Columns of J per component: ∂(DH)/∂δ_m = (diag(f'_dm) C_d) ⊗ H_m,
        # ∂(DH)/∂η_m = D_m ⊗ (diag(f'_hm) C_h).
        A = slope_d.T[:, :, None] * self.chol_d[None]            # (M, K, K): diag(f'_dm) C_d
        B = slope_h[:, :, None] * self.chol_h[None]              # (M, L, L): diag(f'_hm) C_h
        HH, DD = H @ H.T, D.T @ D                                # (M, M)
        precision = np.zeros((self.dim, self.dim))
        dd = precision[:K * M, :K * M].reshape(K, M, K, M)
        ee = precision[K * M:, K * M:].reshape(M, L, M, L)
        de = precision[:K * M, K * M:].reshape(K, M, M, L)
        for m in range(M):
            for n in range(M):
                dd[:, m, :, n] = HH[m, n] * (A[m].T @ A[n])
                ee[m, :, n, :] = DD[m, n] * (B[m].T @ B[n])
                # Σ_il (A_m)_ij H_ml · D_in (B_n)_lk = (A_mᵀ D_n)_j (B_nᵀ H_m)_k
                de[:, m, n, :] = np.outer(A[m].T @ D[:, n], B[n].T @ H[m])
        precision /= self.noise_std ** 2
        precision[K * M:, :K * M] = precision[:K * M, K * M:].T
        precision[np.diag_indices(self.dim)] += 1.0
        return precision

    @staticmethod
    def _move_field(field, log_scale, sigma, rate):
        # log F' = log F + log c, with log F = log(−log Φ(−f/σ)) − log λ;
        # then f' = −σ Φ⁻¹(exp(−λ F')).
        log_factor = np.log(-log_ndtr(-field / sigma)) - np.log(rate) + log_scale
        return -sigma * ndtri_exp(-rate * np.exp(log_factor))

    def logdensity_and_grad(self, theta):
        """Unnormalised log posterior (eq. 19) and its gradient (eq. 20–21), flat of size ``dim``.

        One compiled pass: the Cholesky products read only the packed lower
        triangles (half the memory of a dense matmul), the link and its slope
        share one ``erfcx`` evaluation per entry, and the residual, its squared
        norm and both back-propagated products come from one sweep over X.
        :meth:`logdensity_and_grad_numpy` is the same quantity in NumPy.
        """
        if self._kernel is None:
            kernels = self._kernels()
            self._kernel = kernels.logdensity_and_grad_flat
            self._kernel_args = (self.num_components, self.X, self._inv_var, *self._gp_factors)
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self._dim,):
            self.split(theta)  # raises with the shapes
        # NUTS calls this once per leaf: one compiled call (it also transposes δ and its gradient), no validation
        # beyond the shape.
        grad = np.empty(self._dim)
        logp = self._kernel(np.ascontiguousarray(theta), *self._kernel_args, grad)
        return float(logp), grad

    def logdensity_and_grad_numpy(self, theta):
        """:meth:`logdensity_and_grad` in plain NumPy (BLAS matmuls, SciPy ufuncs): its test reference."""
        params = self.split(theta)
        d = self.chol_d @ params.delta
        h = params.eta @ self._chol_h_t
        D = exp_to_gauss(d, self.sigma_d, self.rate_d)
        H = exp_to_gauss(h, self.sigma_h, self.rate_h)
        residual = D @ H - self.X
        inv_var = 1.0 / self.noise_std ** 2
        logp = -0.5 * (inv_var * np.sum(residual ** 2) + np.sum(params.delta ** 2) + np.sum(params.eta ** 2))
        grad_d = (-inv_var * (residual @ H.T)) * exp_to_gauss_derivative(d, self.sigma_d, self.rate_d)
        grad_h = (-inv_var * (D.T @ residual)) * exp_to_gauss_derivative(h, self.sigma_h, self.rate_h)
        grad = np.concatenate([(self._chol_d_t @ grad_d - params.delta).ravel(),
                               (grad_h @ self.chol_h - params.eta).ravel()])
        return float(logp), grad

    def log_likelihood(self, theta, subset=None):
        """−‖X − D H‖² / (2 σ_N²) − K L log(σ_N √(2π)) over all entries (``subset`` must be None)."""
        if subset is not None:
            raise ParameterError("NMF-GPP evaluates the full data only: subset must be None")
        D, H = self.factors(theta)
        return float(-0.5 * np.sum((D @ H - self.X) ** 2) / self.noise_std ** 2
                     - self.n_data * np.log(self.noise_std * np.sqrt(2 * np.pi)))

    def log_prior(self, theta):
        """Standard-normal log density of (δ, η)."""
        theta = np.asarray(theta, dtype=float)
        return float(-0.5 * theta @ theta - 0.5 * theta.size * np.log(2 * np.pi))

    def grad_log_prior(self, theta):
        """−θ."""
        return -np.asarray(theta, dtype=float)

    def grad_log_likelihood(self, theta, subset=None):
        """Gradient of :meth:`log_likelihood` with respect to θ."""
        if subset is not None:
            raise ParameterError("NMF-GPP evaluates the full data only: subset must be None")
        return self.logdensity_and_grad(theta)[1] + np.asarray(theta, dtype=float)
