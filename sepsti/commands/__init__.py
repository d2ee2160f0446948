"""One module per ``sepsti`` subcommand; each defines a click command."""

import click

#: ``--seed`` of every command: the seeds of :func:`sepsti.core.random.stream` lie below its ``KEY_LIMIT``
#: (2**32), and a seed is its first key.
SEED = click.IntRange(0, 2 ** 32 - 1)


class _Decibels(click.FloatRange):
    """A number of dB in a range; NaN, which a range's comparisons let through, is refused too."""

    name = "decibels"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{value!r} is not a number of dB.", param, ctx)
        return number


#: ``--max-reduction`` of ``enhance`` and ``evaluate``: the most any bin is lowered, in dB.
MAX_REDUCTION = _Decibels(min=0, max=120)
