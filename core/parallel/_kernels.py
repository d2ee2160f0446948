"""Compiled building blocks shared by the block samplers' kernels: noise streams and the per-entry Langevin step.

Imported only inside the functions that run them, so that importing
``core`` (and starting the CLI) does not load numba.

Noise streams (:mod:`sepsti.core.parallel.noise`) are read into registers once per
factor block: :func:`draw_normal` carries the splitmix64 counter and the
buffered half-draw, which makes a normal about six times cheaper than going
through the state array at every draw. The NMF kernels
(:mod:`sepsti.core.parallel._nmf_kernels`) and the PARAFAC part update
(:mod:`sepsti.core.parallel._parafac_kernels`) both draw through it and both apply
:func:`langevin_entry`.
"""

import numba
import numpy as np

from sepsti.core.parallel.ziggurat import ACCEPT_BOUNDS, LAYER_DENSITIES, LAYER_WIDTHS, TAIL_EDGE

__all__ = ["draw_normal", "fill_normal_kernel", "langevin_entry", "uniform"]

_FLAG = np.uint64(1) << np.uint64(63)
_LOW = np.uint64(0xFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, inline="always")
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def uniform(counter):
    """One uniform on (0, 1] from a splitmix64 counter; returns (u, counter)."""
    counter = counter + _GOLDEN
    return ((_mix(counter) >> np.uint64(11)) + np.uint64(1)) * (1.0 / 9007199254740993.0), counter


@numba.njit(cache=True)
def _normal_slow(counter, pending, hz, iz):
    """The ziggurat's wedge and tail cases (about 1.5 % of draws); returns (z, counter, pending)."""
    while True:
        x = hz * LAYER_WIDTHS[iz]
        if iz == 0:
            while True:
                u, counter = uniform(counter)
                x = -np.log(u) / TAIL_EDGE
                u, counter = uniform(counter)
                y = -np.log(u)
                if y + y >= x * x:
                    break
            return (TAIL_EDGE + x if hz > 0 else -TAIL_EDGE - x), counter, pending
        u, counter = uniform(counter)
        if LAYER_DENSITIES[iz] + u * (LAYER_DENSITIES[iz - 1] - LAYER_DENSITIES[iz]) < np.exp(-0.5 * x * x):
            return x, counter, pending
        iz, hz, counter, pending = _ziggurat_box(counter, pending)
        if abs(hz) < ACCEPT_BOUNDS[iz]:
            return hz * LAYER_WIDTHS[iz], counter, pending


@numba.njit(cache=True, inline="always")
def _ziggurat_box(counter, pending):
    """32 fresh bits (half of a splitmix64 output, the other half kept pending) as the ziggurat's (iz, hz)."""
    if pending & _FLAG:
        bits = np.uint32(pending & _LOW)
        pending = np.uint64(0)
    else:
        counter = counter + _GOLDEN
        z = _mix(counter)
        pending = (z >> np.uint64(32)) | _FLAG
        bits = np.uint32(z & _LOW)
    return np.int64(bits & np.uint32(127)), np.int64(np.int32(bits) >> np.int32(7)), counter, pending


@numba.njit(cache=True, inline="always")
def draw_normal(counter, pending):
    """One standard normal from a stream held in registers; returns (z, counter, pending)."""
    iz, hz, counter, pending = _ziggurat_box(counter, pending)
    if abs(hz) < ACCEPT_BOUNDS[iz]:
        return hz * LAYER_WIDTHS[iz], counter, pending
    return _normal_slow(counter, pending, hz, iz)


@numba.njit(cache=True)
def fill_normal_kernel(states, i, out):
    """Fill contiguous ``out`` with standard normals from stream ``states[i]``, advancing it."""
    flat = out.reshape(-1)
    counter, pending = states[i, 0], states[i, 1]
    for k in range(flat.size):
        flat[k], counter, pending = draw_normal(counter, pending)
    states[i, 0], states[i, 1] = counter, pending


@numba.njit(cache=True, inline="always")
def langevin_entry(x, g, z, mean, v, step, noise_scale, constants):
    """One coordinate of the (p)SGLD step with mirroring; returns (new value, new v).

    ``g`` is the drift (log-prior plus tempered, scaled likelihood gradient), ``z``
    a standard normal draw, ``mean`` the tempered mean likelihood gradient feeding
    pSGLD's squared-gradient average ``v`` (which starts at the first ``mean**2``:
    a negative ``v`` marks it unset). ``constants`` is a
    :class:`sepsti.core.parallel.kernel_arguments.StepConstants` (SGLD or pSGLD, alpha, sigma).
    """
    if constants.preconditioned:
        alpha = constants.alpha
        v = mean * mean if v < 0.0 else alpha * v + (1.0 - alpha) * mean * mean
        G = 1.0 / (constants.sigma + np.sqrt(v))
        return abs(x + step * G * g + noise_scale * np.sqrt(G) * z), v
    return abs(x + step * g + noise_scale * z), v
