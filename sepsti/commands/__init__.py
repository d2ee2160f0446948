"""One module per ``sepsti`` subcommand; each defines a click command."""

import click

#: ``--seed`` of every command: the seeds of :func:`sepsti.core.random.stream` lie below its ``KEY_LIMIT``
#: (2**32), and a seed is its first key.
SEED = click.IntRange(0, 2 ** 32 - 1)
