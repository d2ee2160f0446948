"""The ``sepsti`` command line.

Subcommands live in ``sepsti/commands/<name>.py`` and are imported only when
invoked, so ``sepsti --help`` starts fast. Errors a user can fix
(:class:`sepsti.core.errors.ParameterError`, unreadable or unwritable files) exit
with status 2 and one line ``Error: <what>: <why>``; so do click's usage errors
(a bad option value, a missing argument), without the usage block; anything
else exits 1. Output into a pipe whose reader has left ends quietly with status 141
(as after SIGPIPE); SIGTERM ends a command with status 143 after removing the files it was
writing (Ctrl-C: 130). Warnings (e.g. EM stopping at its iteration cap, STI chains that
did not equilibrate) print as one line ``Warning: <what>`` on stderr. File
names that are not valid UTF-8 print with backslash escapes instead of failing; in
errors and warnings, each space-separated word holding a line break or another control character
prints quoted like a Python string, so that the line stays one line (a file name without a space
prints as ``sepsti enhance`` prints it; in one with a space, only the word holding the character is quoted).
"""

import contextlib
import importlib
import os
import sys
import warnings

import click

from sepsti.core.errors import ParameterError

__all__ = ["cli", "main", "InputError"]

_COMMANDS = {
    "enhance": ("sepsti.commands.enhance", "enhance", "Remove noise from speech files."),
    "train": ("sepsti.commands.train", "train", "Train a speech dictionary on a corpus."),
    "evaluate": ("sepsti.commands.evaluate", "evaluate", "Score enhancement against clean speech (SDR, STOI, PESQ)."),
    "select-rank": ("sepsti.commands.select_rank", "select_rank",
                    "Choose the dictionary rank by marginal likelihood (STI)."),
    "corpus": ("sepsti.commands.corpus", "corpus", "Make NOIZEUS-style corpora, or describe a corpus folder."),
}


class InputError(click.ClickException):
    """Bad usage or bad input: one line on stderr, exit status 2."""

    exit_code = 2


class InternalError(click.ClickException):
    """An unexpected failure: one line on stderr, exit status 1."""

    exit_code = 1


def _describe_os_error(error):
    from sepsti.commands import shown

    where = shown(error.filename) if error.filename is not None else "file"
    why = error.strerror or _one_line(str(error))
    return f"{where}: {why}"


def _one_line(message):
    """``message`` with each space-separated word holding a line break or another control character quoted like a
    Python string (:func:`sepsti.commands.shown`), so that it stays one line."""
    from sepsti.commands import shown

    words = []
    for word in message.split(" "):
        start = len(word) - len(word.lstrip("("))
        end = max(start, len(word.rstrip(":;,)")))
        words.append(word[:start] + shown(word[start:end]) + word[end:])
    return " ".join(words)


def _one_line_warning(message, category, filename, lineno, line=None):
    return f"Warning: {_one_line(str(message))}\n"


def _usage_error(error):
    """A click usage error as one line: what is wrong, and where the help is."""
    message = " ".join(error.format_message().split())
    if error.ctx is not None:
        message += f" (see '{error.ctx.command_path} --help')"
    return InputError(message)


def _is_help_request(error):
    # `sepsti corpus` without a subcommand shows the help (click >= 8.2 raises it as a usage error)
    return type(error).__name__ == "NoArgsIsHelpError"


def _escape_unencodable_output():
    """Print file names that are not valid UTF-8 (surrogate escapes) as backslash escapes."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")


def _quiet_stdout():
    """Stop writing to a stdout whose reader has left (``sepsti corpus info D | head -1``).

    The exit status is then 141, a SIGPIPE's (128 + 13), as a shell tool stopped by that signal gives, and
    nothing is printed. Stdout is pointed to the null device, as Python's ``signal`` documentation advises, so
    that the last flush at exit does not fail again.
    """
    with contextlib.suppress(AttributeError, ValueError, OSError):  # a stdout that is no file (tests)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@contextlib.contextmanager
def _sigterm_raised():
    """SIGTERM raised as :class:`sepsti.workers.Terminated` while a command runs (in the main thread), so that
    the files being written are removed; the previous handler afterwards. An ignored SIGTERM stays ignored (as
    Python leaves an ignored SIGINT), and one handled from C is left alone (it could not be put back)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None or previous == signal.SIG_IGN:
        yield
        return
    from sepsti.workers import raise_on_sigterm

    raise_on_sigterm()
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _LazyGroup(click.Group):
    """A group that imports a subcommand's module only when it runs."""

    def list_commands(self, ctx):
        return sorted(_COMMANDS)

    def get_command(self, ctx, name):
        if name not in _COMMANDS:
            return None
        module, attribute, help_text = _COMMANDS[name]
        return _LazyCommand(name, module, attribute, help_text)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as error:
            if _is_help_request(error):
                raise
            raise _usage_error(error) from None

    def invoke(self, ctx):
        from sepsti.workers import Terminated

        warnings.formatwarning = _one_line_warning
        _escape_unencodable_output()
        try:
            with _sigterm_raised():
                return super().invoke(ctx)
        except click.UsageError as error:
            if _is_help_request(error):
                raise
            raise _usage_error(error) from None
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Terminated:
            # a SIGTERM's conventional status; the files being written were removed
            click.echo("Terminated.", err=True)
            raise click.exceptions.Exit(143) from None
        except KeyboardInterrupt:
            # the conventional status of a SIGINT, after whatever was finished has been kept
            click.echo("Interrupted.", err=True)
            raise click.exceptions.Exit(130) from None
        except BrokenPipeError:
            _quiet_stdout()
            raise click.exceptions.Exit(141) from None
        except ParameterError as error:
            raise InputError(_one_line(str(error))) from None
        except OSError as error:
            raise InputError(_describe_os_error(error)) from None
        except Exception as error:
            if os.environ.get("SEPSTI_DEBUG"):
                raise
            if _is_broken_pool(error):
                raise InternalError("a worker process ended abruptly (killed, or out of memory?); the files "
                                    "written before it are complete; try fewer --jobs") from None
            if isinstance(error, RuntimeError) and str(error).startswith(_SYMLINK_LOOP):
                # pathlib's resolve() says so (Python < 3.13) where the system would give ELOOP, an OSError
                import ast

                from sepsti.commands import shown

                path = str(error)[len(_SYMLINK_LOOP):]
                with contextlib.suppress(ValueError, SyntaxError):
                    path = ast.literal_eval(path)  # the path's repr
                raise InputError(f"{shown(path)}: a loop of symbolic links") from None
            raise InternalError(_one_line(f"internal failure: {type(error).__name__}: {error}")) from None


_SYMLINK_LOOP = "Symlink loop from "


def _is_broken_pool(error):
    """Whether ``error`` says a worker process of ``--jobs`` died (only then is its module loaded)."""
    process = sys.modules.get("concurrent.futures.process")
    return process is not None and isinstance(error, process.BrokenProcessPool)


class _LazyCommand(click.Command):
    """Stands in for a subcommand in listings; loads the real one when used."""

    def __init__(self, name, module, attribute, help_text):
        super().__init__(name, help=help_text, short_help=help_text)
        self._target = (module, attribute)
        self._real = None

    def _load(self):
        if self._real is None:
            module, attribute = self._target
            self._real = getattr(importlib.import_module(module), attribute)
        return self._real

    def make_context(self, info_name, args, parent=None, **extra):
        return self._load().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx):
        return self._load().invoke(ctx)

    def get_help(self, ctx):
        return self._load().get_help(ctx)

    def get_params(self, ctx):
        return self._load().get_params(ctx)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sepsti")
@click.option("--progress", is_flag=True,
              help="Draw progress bars on stderr even when it is not a terminal (a log file, a pipe).")
@click.pass_context
def cli(ctx, progress):
    """sepsti: Bayesian NMF speech enhancement with rank selection by STI."""
    if progress:
        from sepsti.core.progress import forced

        ctx.with_resource(forced())


def main():
    """Entry point of the console script."""
    cli(prog_name="sepsti")
