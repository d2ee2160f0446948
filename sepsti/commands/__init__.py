"""One module per ``sepsti`` subcommand; each defines a click command."""

import click


class Command(click.Command):
    """A subcommand whose option parser's errors ("Option '-o' requires an argument.") carry its context, as
    click's other usage errors do, so that their one line too ends with where the help is."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as error:
            if error.ctx is None:
                error.ctx = ctx
            raise


class Group(Command, click.Group):
    """A group of :class:`Command` subcommands."""

    command_class = Command


def shown(path):
    """A path as the commands print it: as it is, or quoted like a Python string where it holds a line break
    or another control character (which would break or garble the line)."""
    import unicodedata

    text = str(path)
    return repr(text) if any(unicodedata.category(character) in ("Cc", "Zl", "Zp") for character in text) else text


#: Figure formats the commands' ``--plot`` writes, chosen by the file's extension (matplotlib's writers).
PLOT_EXTENSIONS = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def check_plot_format(plot_path):
    """Refuse a ``--plot`` file whose extension is not one of :data:`PLOT_EXTENSIONS` (None passes)."""
    from pathlib import Path

    from sepsti.core.errors import ParameterError

    if plot_path is not None and Path(plot_path).suffix.lower() not in PLOT_EXTENSIONS:
        raise ParameterError(f"--plot {plot_path}: unknown image format; use one of {', '.join(PLOT_EXTENSIONS)}")


def single_blas_thread_by_default():
    """Use one BLAS thread unless the user chose otherwise (effective only before NumPy loads): ``enhance``
    and ``evaluate``.

    The per-file EM multiplies matrices of a few hundred rows, where a second BLAS thread gains little, and
    on busy cores spinning BLAS threads only slow it down (docs/enhance.md, "Speed").
    """
    import os
    import sys

    if "numpy" not in sys.modules:
        for name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")


def progress_option(bars):
    """``--progress/--no-progress`` of a long-running command: True, False, or None (bars only on a terminal).

    ``bars`` says what is drawn, in the help. The command draws its bars when ``progress is not False``; with
    ``--progress`` it runs within :func:`sepsti.core.progress.forced`, so they are drawn whatever stderr is.
    """
    import functools

    def decorate(command):
        @functools.wraps(command)
        def run(*args, progress, **kwargs):
            import contextlib

            from sepsti.core.progress import forced

            with forced() if progress else contextlib.nullcontext():
                return command(*args, progress=progress, **kwargs)

        return click.option("--progress/--no-progress", default=None,
                            help=f"Progress bars on stderr, {bars} (default: only when stderr is a terminal).")(run)

    return decorate


#: ``--seed`` of every command: the seeds of :func:`sepsti.core.random.stream` lie below its ``KEY_LIMIT``
#: (2**32), and a seed is its first key.
SEED = click.IntRange(0, 2 ** 32 - 1)



#: ``--iterations`` of ``enhance``, ``evaluate`` and ``train``: at most 100000 EM iterations (EM keeps a
#: log-likelihood history of that length, 0.8 MB; a count beyond it asked for gigabytes or more than NumPy can hold).
ITERATIONS = click.IntRange(min=1, max=100_000)


class EnhancerIterations(click.Option):
    """``--iterations`` of ``enhance`` and ``evaluate``, None unless given: the enhancer's own count,
    :data:`sepsti.denoise.EM_ITERATIONS`, which replaces ``{default}`` in the help.

    The enhancer is imported only when the help is shown: it loads NumPy, before which the commands set
    their BLAS threads.
    """

    def get_help_record(self, ctx):
        from sepsti.denoise import EM_ITERATIONS

        spec, text = super().get_help_record(ctx)
        return spec, text.replace("{default}", str(EM_ITERATIONS))


class NonEmptyPath(click.Path):
    """A path option or argument that refuses an empty path, which would name the working folder.

    Parameters
    ----------
    noun : str
        What the option names (``file``, ``folder``), for the message.
    **options
        For :class:`click.Path`.
    """

    def __init__(self, noun="file", **options):
        super().__init__(**options)
        self.noun = noun

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value:
            self.fail(f"an empty path; give a {self.noun} name", param, ctx)
        return super().convert(value, param, ctx)


class OutputPath(NonEmptyPath):
    """An output path, refusing an empty one."""


class InputPath(NonEmptyPath):
    """An input path, refusing an empty one (an unset shell variable, ``--corpus "$CORPUS"``, would name the
    working folder and read whatever it holds)."""


def parse_list(text, name, convert=str, example=None):
    """Split ``"a,b"`` into ``[convert("a"), convert("b")]``; None stays None.

    The list options of every command (``--noise``, ``--snr``, ``--ranks``, ...) are read so.

    Parameters
    ----------
    text : str or None
    name : str
        The option without its dashes, for the messages.
    convert : callable
        Of each item; a ValueError means the item is not an integer.
    example : str, optional
        A valid list for the messages (default ``car,babble`` for ``noise``, else ``0,5``).

    Raises
    ------
    ParameterError
        If an item is empty or ``convert`` rejects it.
    """
    from sepsti.core.errors import ParameterError

    if text is None:
        return None
    example = example or ("car,babble" if name == "noise" else "0,5")
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise ParameterError(f"--{name} {text!r}: empty item; give a comma-separated list like {example}")
    try:
        return [convert(item) for item in items]
    except ValueError:
        raise ParameterError(f"--{name} {text!r}: expected comma-separated integers like {example}") from None


class FiniteRange(click.FloatRange):
    """A number in a range; NaN and infinities, which a range's comparisons can let through, are refused too."""

    def convert(self, value, param, ctx):
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


#: ``--max-reduction`` of ``enhance`` and ``evaluate``: the most any bin is lowered, in dB.
MAX_REDUCTION = FiniteRange(min=0, max=120)
