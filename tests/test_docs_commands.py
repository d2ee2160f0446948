"""Every command the README and docs/ show -- `sepsti ...` and `python recipes/....py ...` -- exists and takes
the options shown."""

import re
from pathlib import Path

import click
import pytest

from test_recipes_common import _parser_of

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# a command starts its code span or code line (after an mpiexec) and runs to a comment, a pipe or another command
COMMAND = re.compile(r"^(?:mpiexec -n \d+ )?(sepsti|python (recipes/[\w/]+\.py))((?:(?! #|\||;|&&).)*)")


def code_pieces(text):
    """The code of a Markdown ``text``: its code spans (which may wrap) and the lines of its fenced and indented
    code blocks, a line ending in a backslash joined to the next."""
    code, prose, fenced, in_block, previous = [], [], False, False, ""
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced or (line.startswith("    ") and (in_block or not previous.strip())):
            in_block = not fenced
            if code and code[-1].endswith("\\"):
                code[-1] = code[-1][:-1].rstrip() + " " + line.strip()
            else:
                code.append(line.strip())
        else:
            in_block = False
            prose.append(line)
        previous = line
    return [span.replace("\n", " ").strip() for span in re.findall(r"`([^`]+)`", "\n".join(prose))] + code


def shown_commands(text):
    """(program, arguments) of each command in ``text``'s code."""
    return [(match.group(2) or "sepsti", match.group(3).strip()) for match in map(COMMAND.match, code_pieces(text))
            if match]


def test_commands_are_read_from_spans_blocks_and_continued_lines():
    text = ("Run `sepsti enhance a.wav\n--max-reduction 20` or\n\n    sepsti train --corpus C \\\n"
            "        --rank 2 -o d.npz  # --not-this\n\n"
            "then `python recipes/sti_gaussian.py --quick | tee x --nor-this`\n"
            "- a list item\n    sepsti's output, prose; `sepsti` alone\n"
            "```bash\nmpiexec -n 2 sepsti select-rank --x\n```\n")
    assert shown_commands(text) == [("sepsti", "enhance a.wav --max-reduction 20"),
                                    ("recipes/sti_gaussian.py", "--quick"), ("sepsti", ""),
                                    ("sepsti", "train --corpus C --rank 2 -o d.npz"), ("sepsti", "select-rank --x")]


def _cli_options(words):
    """The long options of the subcommand named by ``words`` (e.g. ``["corpus", "synth"]``), or None."""
    from sepsti.cli import cli

    command, context = cli, click.Context(cli)
    for word in words:
        command = command.get_command(context, word) if isinstance(command, click.Group) else None
        if command is None:
            return None
        command = command._load() if hasattr(command, "_load") else command
    return {option for param in command.params for option in param.opts + param.secondary_opts}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_command_shown_takes_its_options(page, monkeypatch):
    wrong = []
    for program, arguments in shown_commands(page.read_text(encoding="utf-8")):
        if program == "sepsti":
            words = re.match(r"[a-z][a-z-]*(?: [a-z][a-z-]*)?", arguments)  # "--help", "--progress enhance" pass
            if words is None:
                continue
            words = words.group().split()
            words = words[:2] if words[0] == "corpus" else words[:1]
            options = _cli_options(words)
        else:
            script = ROOT / program
            options = None if not script.exists() else {
                option for action in _parser_of(script, monkeypatch)._actions for option in action.option_strings}
        if options is None:
            wrong.append(f"{program} {arguments}: no such command")
            continue
        wrong += [f"{program} {arguments}: no {option}" for option in OPTION.findall(arguments)
                  if option not in options | {"--help"}]
    assert wrong == []
