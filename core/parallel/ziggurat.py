"""Tables of Marsaglia & Tsang's 128-layer ziggurat for standard normals.

Shared by the Python side of the noise streams (:mod:`sepsti.core.parallel.noise`)
and the compiled draws (:mod:`sepsti.core.parallel._kernels`), which both import
them from here.

Conventions
-----------
A draw is a 7-bit layer index ``iz`` and a signed 25-bit integer ``hz``;
``hz * LAYER_WIDTHS[iz]`` is the candidate abscissa, accepted at once when
``|hz| < ACCEPT_BOUNDS[iz]`` (inside the layer's rectangle), else tested
against ``LAYER_DENSITIES`` (exp(-x^2 / 2) at the layers' outer edges) or,
in the base layer, drawn from the tail beyond :data:`TAIL_EDGE`.

References
----------
G. Marsaglia and W. W. Tsang, "The ziggurat method for generating random
variables", J. Stat. Softw. 5(8), 2000.
"""

import numpy as np

__all__ = ["ACCEPT_BOUNDS", "LAYER_DENSITIES", "LAYER_WIDTHS", "TAIL_EDGE"]

# 2^24: abscissae are signed 25-bit integers
_ABSCISSA_SCALE = 16777216.0

#: r, where the base layer's tail starts.
TAIL_EDGE = 3.442619855899


def _tables():
    bounds = np.zeros(128, dtype=np.int64)
    widths = np.zeros(128)
    densities = np.zeros(128)
    dn = tn = TAIL_EDGE
    vn = 9.91256303526217e-3
    q = vn / np.exp(-0.5 * dn * dn)
    bounds[0] = int((dn / q) * _ABSCISSA_SCALE)
    bounds[1] = 0
    widths[0] = q / _ABSCISSA_SCALE
    widths[127] = dn / _ABSCISSA_SCALE
    densities[0] = 1.0
    densities[127] = np.exp(-0.5 * dn * dn)
    for i in range(126, 0, -1):
        dn = np.sqrt(-2.0 * np.log(vn / dn + np.exp(-0.5 * dn * dn)))
        bounds[i + 1] = int((dn / tn) * _ABSCISSA_SCALE)
        tn = dn
        densities[i] = np.exp(-0.5 * dn * dn)
        widths[i] = dn / _ABSCISSA_SCALE
    return bounds, widths, densities


ACCEPT_BOUNDS, LAYER_WIDTHS, LAYER_DENSITIES = _tables()
