"""Mixtures for the benchmarks: excerpts of noise recordings at a rate, windows of a looped signal, levels."""

import numpy as np

from sepsti.core.errors import ParameterError

#: RMS (dBFS) below which an excerpt of a noise recording is silence, not noise
QUIETEST_EXCERPT_DB = -60.0


def at_level(y, level_db):
    """``y`` scaled to an RMS of ``level_db`` dBFS."""
    return y * (10 ** (level_db / 20) / max(np.sqrt(np.mean(y ** 2)), 1e-12))


def snr_gain(clean, noise, snr):
    """The gain that puts ``noise`` ``snr`` dB below ``clean`` (their energies over the whole signals)."""
    return np.sqrt(np.sum(clean ** 2) / (np.sum(noise ** 2) * 10 ** (snr / 10)))


def looped_window(y, n, rng):
    """``n`` consecutive samples of ``y`` repeated end to end, from a random start."""
    y = np.tile(y, -(-n // len(y)) + 1)
    start = int(rng.integers(0, len(y) - n + 1))
    return y[start:start + n]


def excerpt(recordings, n, rate, rng):
    """``n`` samples at ``rate`` from one of ``recordings``, chosen at random, from a random start.

    Channels are averaged; a recording shorter than the excerpt is repeated. An excerpt quieter than
    :data:`QUIETEST_EXCERPT_DB` (a track's silent ends) is drawn again; :class:`ParameterError` if 100 of
    them are.
    """
    import soundfile

    from sepsti.audio import resample

    for _ in range(100):
        path = recordings[rng.integers(len(recordings))]
        info = soundfile.info(path)
        frames = -(-n * info.samplerate // rate) + 1
        start = int(rng.integers(0, max(info.frames - frames, 0) + 1))
        y, _ = soundfile.read(path, start=start, frames=frames, always_2d=True)
        y = np.tile(y.mean(axis=1), -(-frames // max(len(y), 1)))[:frames]
        if y.size and 20 * np.log10(max(np.sqrt(np.mean(y ** 2)), 1e-12)) >= QUIETEST_EXCERPT_DB:
            return resample(y, info.samplerate, rate, length=n)
    raise ParameterError(f"100 excerpts of {n / rate:.1f} s drawn from the noise recordings were all quieter than "
                     f"{QUIETEST_EXCERPT_DB:g} dBFS")
