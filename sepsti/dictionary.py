"""Speech dictionary files (``.npz``): what they hold, saving, and checked loading.

Conventions
-----------
``W`` is ``(n_bins, rank)``, non-negative and finite, with ``n_bins = n_fft // 2 + 1``;
its columns are spectral atoms on the magnitude scale of :mod:`sepsti.features`
(``scale`` = int16 full scale). The STFT is a property of the dictionary: ``sample_rate``,
``n_fft`` and ``hop_length`` are the framing the enhancer uses with it
(:attr:`Dictionary.framing`), so the 8 kHz dictionaries (512 points, hop 256) and the
16 kHz wideband one (1024 points, hop 512) are read by the same code. ``W`` may be stored
in float32 (the shipped files are) and is read as float64. A file holds, besides ``W``: ``rank``,
``sample_rate``, ``n_fft``, ``hop_length``, ``window``, ``scale``, ``prior_rate``
(the exponential prior rate on the factors the training used; 0 for plain
maximum likelihood), provenance: ``corpus``, ``files``, ``iterations``,
``seed``, ``version``, and ``context``: atoms of ``2 · context + 1`` consecutive frames of the
enhancer's framing (a quarter window apart, :func:`sepsti.features.enhancement_framing`), stacked
in ``W``'s rows frame by frame, ``W`` then ``(n_bins · (2 · context + 1), rank)``; 0 (single
frames) in files written before the field existed; and ``mask_atoms``, ``(n_bins, rank)``: the atoms the enhancer
rebuilds the speech with for its mask, learned for it (:mod:`sepsti.mask_atoms`), in files that have them (without
them, the atoms' centre frame); and ``band_gains``, the networks of the mask's learned band-gain correction
(:mod:`sepsti.band_gains`), in files that have them, stored as ``band_gains_mean``, ``band_gains_scale``,
``band_gains_hidden_1`` … ``band_gains_hidden_<n>`` and ``band_gains_output``, and ``band_gains_predicts`` where the
networks predict the move (:attr:`sepsti.band_gains.BandGains.predicts`; without it, the ideal gain). Everything is
stored as plain arrays, so files load with ``allow_pickle=False``.
"""

import numbers
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sepsti.core.errors import ParameterError

__all__ = ["Dictionary", "save_dictionary", "load_dictionary", "validate_dictionary",
           "default_dictionary_path", "wideband_dictionary_path", "narrowband_dictionary_path", "FIELDS",
           "OPTIONAL_FIELDS", "MAX_ENTRIES", "MAX_FIELD_BYTES"]

FIELDS = ("W", "rank", "sample_rate", "n_fft", "hop_length", "window", "scale", "prior_rate",
          "corpus", "files", "iterations", "seed", "version")
#: Fields a file may lack, with the value such a file means.
OPTIONAL_FIELDS = {"context": 0, "mask_atoms": None, "band_gains": None}
#: The prefix of the arrays ``band_gains`` is stored in.
_BAND_GAINS = "band_gains_"
#: Fields held as 64-bit integers.
_INTEGER_FIELDS = ("rank", "sample_rate", "n_fft", "hop_length", "iterations", "seed", "context")
#: The most entries a dictionary's ``W`` may hold (256 MiB in float64), checked before it is read:
#: a 48 kHz dictionary of rank 1024 with atoms of three frames holds 4.7 million.
MAX_ENTRIES = 2 ** 25
#: The most bytes any other field may hold (16 MiB; NumPy stores 4 bytes per character: ``files`` of
#: 262,144 identifiers of 16 characters), checked before it is read.
MAX_FIELD_BYTES = 2 ** 24


class Dictionary(NamedTuple):
    """A speech dictionary and how it was made.

    Attributes
    ----------
    W : ndarray, shape (n_bins · (2 · context + 1), rank)
        Non-negative spectral atoms, frame by frame.
    rank : int
    sample_rate : int
        Rate of the audio the atoms describe (Hz).
    n_fft, hop_length : int
        STFT framing of the atoms.
    window : str
        STFT window name.
    scale : float
        Amplitude scale of the magnitudes (signal in [-1, 1) times ``scale``).
    prior_rate : float
        Rate of the exponential prior on the factors during training (0: none).
    corpus : str
        The training corpus folder.
    files : tuple of str
        Identifiers of the training files.
    iterations : int
        EM iterations run.
    seed : int
        Seed of the initialization.
    version : str
        sepsti version that trained it.
    context : int
        Frames on each side of an atom's centre frame, a quarter window apart (0: single frames).
    mask_atoms : ndarray, shape (n_bins, rank), optional
        The atoms the speech is rebuilt with for the enhancer's mask, on the scale of ``W``'s columns (None:
        their centre frame).
    band_gains : sepsti.band_gains.BandGains, optional
        The networks of the mask's learned band-gain correction (None: no correction).
    """

    W: np.ndarray
    rank: int
    sample_rate: int
    n_fft: int
    hop_length: int
    window: str
    scale: float
    prior_rate: float
    corpus: str
    files: tuple
    iterations: int
    seed: int
    version: str
    context: int = 0
    mask_atoms: np.ndarray = None
    band_gains: tuple = None

    @property
    def framing(self):
        """The STFT the atoms were made with, :class:`sepsti.features.Framing`."""
        from sepsti.features import Framing

        return Framing(self.sample_rate, self.n_fft, self.hop_length)


def default_dictionary_path():
    """Path of the 8 kHz NOIZEUS dictionary shipped with the package (rank 128, sp01–sp20; the papers' setting)."""
    return Path(__file__).resolve().parent / "data" / "default_dictionary.npz"


def wideband_dictionary_path():
    """Path of the 16 kHz dictionary shipped with the package (LibriSpeech, docs/wideband.md)."""
    return Path(__file__).resolve().parent / "data" / "wideband_dictionary.npz"


def narrowband_dictionary_path():
    """Path of the 8 kHz dictionary the enhancer uses (LibriSpeech, atoms of three frames; docs/enhance.md)."""
    return Path(__file__).resolve().parent / "data" / "narrowband_dictionary.npz"


def save_dictionary(path, dictionary, *, overwrite=False, dtype=np.float64):
    """Write a dictionary atomically (temporary file beside ``path``, then rename).

    Parameters
    ----------
    path : str or Path
        Target ``.npz`` file; a file there is replaced only with ``overwrite``.
    dictionary : Dictionary
        Validated before writing.
    overwrite : bool
        True: replace a file at ``path``. False (the default): refuse one before anything is written, and one that
        appears meanwhile at the final rename (:func:`sepsti.core.io.atomic_path`).
    dtype : numpy dtype
        Type ``W`` is stored in: float64, or float32 for a file half the size (atoms
        need no more than single precision; loading returns float64 either way). ``mask_atoms`` and ``band_gains``
        are stored alike (the networks run in single precision, :meth:`sepsti.band_gains.BandGains.predict`, so
        their predictions are the same either way).

    Raises
    ------
    ParameterError
        If a field is invalid (of the wrong type included), an integer field does not fit in 64 bits, ``W``
        would not be valid in ``dtype`` (an entry beyond float32's range), ``path`` is a directory, or ``path``
        exists and ``overwrite`` is False.
    """
    from sepsti.core.io import atomic_path, refuse_existing

    storage = _storage_dtype(dtype)
    dictionary = validate_dictionary(dictionary, name=str(path))
    if not overwrite:  # before the conversions
        refuse_existing(path)
    for field in _INTEGER_FIELDS:
        value = int(getattr(dictionary, field))
        if not -2 ** 63 <= value < 2 ** 63:
            raise ParameterError(f"{path}: field {field!r}={value} does not fit the 64-bit integer a dictionary file "
                                 "holds")
    with np.errstate(over="ignore"):  # entries beyond the storage type's range, refused below
        stored = np.ascontiguousarray(dictionary.W, dtype=storage)
        mask_atoms = None if dictionary.mask_atoms is None else np.ascontiguousarray(dictionary.mask_atoms,
                                                                                     dtype=storage)
    validate_dictionary(dictionary._replace(W=stored, mask_atoms=mask_atoms), name=f"{path} (stored as {storage})")
    arrays = {
        "W": stored,
        "rank": np.int64(dictionary.rank),
        "sample_rate": np.int64(dictionary.sample_rate),
        "n_fft": np.int64(dictionary.n_fft),
        "hop_length": np.int64(dictionary.hop_length),
        "window": np.str_(dictionary.window),
        "scale": np.float64(dictionary.scale),
        "prior_rate": np.float64(dictionary.prior_rate),
        "corpus": np.str_(dictionary.corpus),
        "files": np.array(list(dictionary.files), dtype=np.str_).reshape(-1),
        "iterations": np.int64(dictionary.iterations),
        "seed": np.int64(dictionary.seed),
        "version": np.str_(dictionary.version),
        "context": np.int64(dictionary.context),
    }
    if mask_atoms is not None:
        arrays["mask_atoms"] = mask_atoms
    if dictionary.band_gains is not None:
        arrays.update(_band_gain_arrays(dictionary.band_gains, storage))
    with atomic_path(path, suffix=".npz", overwrite=overwrite) as tmp:
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, **arrays)


def load_dictionary(path, *, features=True, band_gains=True):
    """Read a dictionary file and check every field.

    Parameters
    ----------
    path : str or Path
        A file written by :func:`save_dictionary`.
    features : bool
        Also require what :mod:`sepsti.features` can compute: the Hamming window, the int16
        scale and a framing of 50 % overlap (:func:`sepsti.features.validate_framing`).
    band_gains : bool
        Read the learned correction of the band gains; False leaves it out unread, for a recipe that
        trains it again (whichever version trained the stored one).

    Returns
    -------
    Dictionary

    Raises
    ------
    ParameterError
        If the file is missing, not a regular file (a directory, a FIFO), not an ``.npz``, corrupt,
        lacks a field, holds one larger than a dictionary's (:data:`MAX_ENTRIES`,
        :data:`MAX_FIELD_BYTES`), or a field has the wrong type, shape or value; the message names
        the field.
    """
    path = Path(path)
    name = f"dictionary {path}"
    if not path.exists():
        from sepsti.core.io import why_missing

        raise ParameterError(f"{name}: {why_missing(path)}")
    if path.is_dir():
        raise ParameterError(f"{name}: is a directory, not a dictionary file")
    if not path.is_file():
        raise ParameterError(f"{name}: not a regular file")
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if not magic:
        raise ParameterError(f"{name}: empty file, not a dictionary")
    if magic != b"PK\x03\x04":
        raise ParameterError(f"{name}: not a dictionary file (expected an .npz archive written by `sepsti train`)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [field for field in FIELDS if field not in archive.files]
            if missing:
                raise ParameterError(f"{name}: field {missing[0]!r} is missing (a dictionary holds "
                                     f"{', '.join(FIELDS)}); retrain it with `sepsti train`")
            networks = [field for field in archive.files if band_gains and field.startswith(_BAND_GAINS)]
            present = [*FIELDS, *(field for field in OPTIONAL_FIELDS if field in archive.files), *networks]
            _check_sizes(archive, present, name)
            raw = {field: archive[field] for field in FIELDS}
            optional = {field: archive[field] for field in OPTIONAL_FIELDS if field in archive.files}
            if networks:
                optional["band_gains"] = _band_gains_from(archive, networks, name)
    except ParameterError:
        raise
    except Exception as error:  # noqa: BLE001  any failure to parse the archive means a corrupt file
        why = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ParameterError(f"{name}: not a readable dictionary file (.npz): {why}") from None

    fields = {}
    for field in ("rank", "sample_rate", "n_fft", "hop_length", "iterations", "seed"):
        fields[field] = _scalar(raw[field], field, name, kind="i")
    if "context" in optional:
        fields["context"] = _scalar(optional["context"], "context", name, kind="i")
    for field in ("mask_atoms", "band_gains"):
        if field in optional:
            fields[field] = optional[field]
    for field in ("scale", "prior_rate"):
        fields[field] = _scalar(raw[field], field, name, kind="f")
    for field in ("window", "corpus", "version"):
        fields[field] = _scalar(raw[field], field, name, kind="U")
    files = raw["files"]
    if files.dtype.kind != "U" or files.ndim != 1:
        raise ParameterError(f"{name}: field 'files' must be a 1-D array of strings, got dtype {files.dtype} "
                             f"and shape {files.shape}")
    fields["files"] = tuple(str(f) for f in files)
    fields["W"] = raw["W"]
    return validate_dictionary(Dictionary(**fields), name=name, features=features)


def validate_dictionary(dictionary, *, name="dictionary", features=False):
    """Check the fields of a :class:`Dictionary` and return it with ``W`` as float64.

    Parameters
    ----------
    dictionary : Dictionary
    name : str
        How to name it in messages.
    features : bool
        Require a framing, window and scale :mod:`sepsti.features` can compute.

    Raises
    ------
    ParameterError
        Naming the first invalid field (of the wrong type included).
    """
    _check_types(dictionary, name)
    W = np.asarray(dictionary.W)
    if W.dtype.kind not in "fiu":
        raise ParameterError(f"{name}: field 'W' must be a real array, got dtype {W.dtype}")
    W = W.astype(np.float64, copy=False)
    if W.ndim != 2:
        raise ParameterError(f"{name}: field 'W' must be 2-D (bins, rank), got shape {W.shape}")
    for field in ("n_fft", "hop_length", "sample_rate", "rank"):
        value = getattr(dictionary, field)
        if int(value) < 1:
            raise ParameterError(f"{name}: field {field!r}={value} must be a positive integer")
    if int(dictionary.context) < 0:
        raise ParameterError(f"{name}: field 'context'={dictionary.context} must be >= 0")
    frames = 2 * int(dictionary.context) + 1
    bins = dictionary.n_fft // 2 + 1
    if W.shape[0] != bins * frames:
        stacked = f", {frames} frames of them with context={dictionary.context}: {bins * frames}" if frames > 1 else ""
        raise ParameterError(f"{name}: field 'W' has {W.shape[0]} rows but n_fft={dictionary.n_fft} gives {bins} "
                             f"frequency bins{stacked}")
    if W.shape[1] != dictionary.rank:
        raise ParameterError(f"{name}: field 'W' has {W.shape[1]} columns but rank={dictionary.rank}")
    if not np.all(np.isfinite(W)):
        raise ParameterError(f"{name}: field 'W' has {int(np.sum(~np.isfinite(W)))} NaN or infinite entries")
    if np.any(W < 0):
        raise ParameterError(f"{name}: field 'W' has negative entries (min {W.min():.3g}); atoms must be "
                             "non-negative")
    if not np.any(W > 0):
        raise ParameterError(f"{name}: field 'W' is all zero")
    with np.errstate(over="ignore"):  # a sum beyond float64's range, refused below
        sums = W.sum(axis=0)
    tiny = (sums > 0) & (sums < np.finfo(np.float64).tiny)
    if np.any(tiny):
        atom = int(np.argmax(tiny))
        raise ParameterError(f"{name}: field 'W': atom {atom} sums to {sums[atom]:.3g}, too small to be scaled "
                             f"to sum 1 (atoms of a dictionary sum to 1)")
    if not np.all(np.isfinite(sums)):
        atom = int(np.argmax(~np.isfinite(sums)))
        raise ParameterError(f"{name}: field 'W': atom {atom} sums to {sums[atom]:.3g}, too large to be scaled "
                             f"to sum 1 (atoms of a dictionary sum to 1)")
    mask_atoms = None if dictionary.mask_atoms is None else _valid_mask_atoms(dictionary.mask_atoms, bins, W.shape[1],
                                                                              name)
    band_gains = None
    if dictionary.band_gains is not None:
        from sepsti.band_gains import validate_band_gains

        band_gains = validate_band_gains(dictionary.band_gains, name=f"{name}: field 'band_gains'")
    if not np.isfinite(dictionary.scale) or dictionary.scale <= 0:
        raise ParameterError(f"{name}: field 'scale'={dictionary.scale} must be positive")
    if not np.isfinite(dictionary.prior_rate) or dictionary.prior_rate < 0:
        raise ParameterError(f"{name}: field 'prior_rate'={dictionary.prior_rate} must be >= 0")
    if dictionary.iterations < 0:
        raise ParameterError(f"{name}: field 'iterations'={dictionary.iterations} must be >= 0")
    if features:
        from sepsti import features as feat

        for field, want in (("window", feat.WINDOW), ("scale", feat.AMPLITUDE_SCALE)):
            value = getattr(dictionary, field)
            if value != want:
                raise ParameterError(f"{name}: field {field!r}={value!r} does not match the features "
                                     f"({field}={want!r}); retrain the dictionary with `sepsti train`")
        feat.validate_framing(dictionary.sample_rate, dictionary.n_fft, dictionary.hop_length, name=name)
    return dictionary._replace(W=W, files=tuple(dictionary.files), mask_atoms=mask_atoms, band_gains=band_gains)


def _valid_mask_atoms(mask_atoms, bins, rank, name):
    """``mask_atoms`` as float64, checked: real, ``(bins, rank)``, finite and non-negative."""
    atoms = np.asarray(mask_atoms)
    if atoms.dtype.kind not in "fiu":
        raise ParameterError(f"{name}: field 'mask_atoms' must be a real array, got dtype {atoms.dtype}")
    if atoms.shape != (bins, rank):
        raise ParameterError(f"{name}: field 'mask_atoms' must have shape ({bins}, {rank}), a frame of bins per "
                             f"atom, got {atoms.shape}")
    atoms = atoms.astype(np.float64, copy=False)
    if not np.all(np.isfinite(atoms)) or np.any(atoms < 0):
        raise ParameterError(f"{name}: field 'mask_atoms' must be finite and non-negative")
    return atoms


def _band_gain_arrays(band_gains, storage):
    """The arrays a file stores ``band_gains`` in, by name, of the type ``storage``."""
    arrays = {f"{_BAND_GAINS}mean": band_gains.mean, f"{_BAND_GAINS}scale": band_gains.scale,
              f"{_BAND_GAINS}output": band_gains.output}
    arrays.update({f"{_BAND_GAINS}hidden_{i}": layer for i, layer in enumerate(band_gains.hidden, start=1)})
    arrays = {field: np.ascontiguousarray(array, dtype=storage) for field, array in arrays.items()}
    if band_gains.predicts != "gain":
        arrays[f"{_BAND_GAINS}predicts"] = np.str_(band_gains.predicts)
    return arrays


def _band_gains_from(archive, fields, name):
    """The :class:`sepsti.band_gains.BandGains` stored in ``fields`` of ``archive`` (checked later)."""
    from sepsti.band_gains import BandGains

    layers = sum(1 for field in fields if field.startswith(f"{_BAND_GAINS}hidden_"))
    expected = {f"{_BAND_GAINS}{part}" for part in ("mean", "scale", "output")}
    expected |= {f"{_BAND_GAINS}hidden_{i}" for i in range(1, layers + 1)}
    predicts = f"{_BAND_GAINS}predicts"
    if set(fields) - {predicts} != expected:
        odd = sorted((set(fields) - {predicts}) ^ expected)[0]
        raise ParameterError(f"{name}: field {odd!r}: the band gains are stored as {_BAND_GAINS}mean, "
                             f"{_BAND_GAINS}scale, {_BAND_GAINS}hidden_1 … {_BAND_GAINS}hidden_<n> and "
                             f"{_BAND_GAINS}output, all of them, and optionally {predicts}")
    what = _scalar(archive[predicts], predicts, name, kind="U") if predicts in fields else "gain"
    return BandGains(archive[f"{_BAND_GAINS}mean"], archive[f"{_BAND_GAINS}scale"],
                     tuple(archive[f"{_BAND_GAINS}hidden_{i}"] for i in range(1, layers + 1)),
                     archive[f"{_BAND_GAINS}output"], what)


def _check_sizes(archive, fields, name):
    """Refuse, from their headers and before they are read, a ``W`` of more than :data:`MAX_ENTRIES` entries
    (or of more bytes than as many in float64) and any other field of more than :data:`MAX_FIELD_BYTES` bytes."""
    for field in fields:
        with archive.zip.open(f"{field}.npy") as member:
            version = np.lib.format.read_magic(member)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, _, dtype = read_header(member)
        entries = int(np.prod(shape, dtype=object))
        atoms = field in ("W", "mask_atoms")
        if atoms and entries > MAX_ENTRIES:
            raise ParameterError(f"{name}: field {field!r} has shape {shape} ({entries:,} entries), more than the "
                                 f"{MAX_ENTRIES:,} a dictionary may hold")
        limit = 8 * MAX_ENTRIES if atoms else MAX_FIELD_BYTES
        if entries * dtype.itemsize > limit:
            raise ParameterError(f"{name}: field {field!r} has shape {shape} of {dtype} "
                                 f"({entries * dtype.itemsize:,} bytes), more than the {limit:,} it may hold")


def _check_types(dictionary, name):
    """Refuse fields of the wrong type: integers (not bools, not floats), real numbers, strings, and a sequence of
    strings for ``files``."""
    for field in _INTEGER_FIELDS:
        value = getattr(dictionary, field)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise ParameterError(f"{name}: field {field!r}={value!r} must be an integer")
    for field in ("scale", "prior_rate"):
        value = getattr(dictionary, field)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ParameterError(f"{name}: field {field!r}={value!r} must be a real number")
    for field in ("window", "corpus", "version"):
        value = getattr(dictionary, field)
        if not isinstance(value, str):
            raise ParameterError(f"{name}: field {field!r}={value!r} must be a string")
    files = dictionary.files
    if not isinstance(files, (tuple, list, np.ndarray)) or not all(isinstance(file, str) for file in files):
        raise ParameterError(f"{name}: field 'files' must be a tuple of strings, got {files!r:.80}")


def _storage_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ParameterError(f"dtype={dtype}: a dictionary is stored as float32 or float64")
    return dtype


def _scalar(array, field, name, *, kind):
    if array.ndim != 0:
        raise ParameterError(f"{name}: field {field!r} must be a scalar, got shape {array.shape}")
    value = array[()]
    if kind == "i":
        if array.dtype.kind not in "iu":
            raise ParameterError(f"{name}: field {field!r} must be an integer, got dtype {array.dtype}")
        return int(value)
    if kind == "f":
        if array.dtype.kind not in "fiu":
            raise ParameterError(f"{name}: field {field!r} must be a number, got dtype {array.dtype}")
        return float(value)
    if array.dtype.kind != "U":
        raise ParameterError(f"{name}: field {field!r} must be a string, got dtype {array.dtype}")
    return str(value)
