"""The lazy command tree (cli/lazy.py, cli/groups.py): every entry resolves to its command, its
one-line help is the command's own, and `luma --help` / `luma kb --help` import no command module."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from luma.cli.lazy import LazyGroup
from luma.cli.main import cli


def _entries(group: LazyGroup, path: tuple[str, ...] = ()):
    for name, (target, short) in group.commands.lazy.items():
        yield (*path, name), target, short, group
    for name in list(group.commands):
        command = group.commands[name]
        if isinstance(command, LazyGroup):
            yield from _entries(command, (*path, name))


ENTRIES = list(_entries(cli))


def test_the_tree_has_every_group_and_command():
    names = {" ".join(path) for path, *_ in ENTRIES}
    assert {"kb", "kb stats", "sprint run", "sprint requalify", "model calibrate", "demo", "campaign bench"} <= names
    assert len(names) > 60


@pytest.mark.parametrize("path,target,short,group", ENTRIES, ids=[" ".join(e[0]) for e in ENTRIES])
def test_each_entry_resolves_and_its_short_help_is_the_commands(path, target, short, group):
    command = group.commands[path[-1]]
    assert isinstance(command, click.Command)
    assert command.name == path[-1], f"{target} is the command {command.name!r}"
    assert short == command.get_short_help_str(limit=10**6), f"{target}: the entry's help is not the command's"


@pytest.mark.parametrize("args", [["--help"], ["kb", "--help"], ["sprint", "--help"]])
def test_help_lists_commands_without_importing_them(args):
    code = ("import sys; from luma.cli.main import main; sys.argv = ['luma', *%r]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('luma.')"
            " and m not in ('luma.cli', 'luma.cli.main', 'luma.cli.groups', 'luma.cli.lazy', 'luma.cli.project',"
            " 'luma.cli.kb', 'luma.cli.sprint', 'luma.cli.model') and m.startswith('luma.cli'))\n"
            "print('LOADED', loaded, file=sys.stderr)\n"
            "print('KB', sorted(m for m in sys.modules if m.startswith('luma.kb')), file=sys.stderr)") % (args,)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Commands:" in done.stdout
    assert "LOADED []" in done.stderr, done.stderr
    assert "KB []" in done.stderr, done.stderr
