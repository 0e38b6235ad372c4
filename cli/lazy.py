"""A click group that loads a command's module only when that command runs (or shows its own
`--help`): each entry names the command's "module:attribute" and its one-line help, so `luma
--help` and `luma kb --help` list every command without importing any command module.
tests/cli/test_lazy.py checks that each entry resolves and that its short help is the command's."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping

import click

from luma.extras import from_import_error


class LazyCommands(MutableMapping):
    """A group's commands by name: loaded ones, and lazy entries loaded on first access."""

    def __init__(self, lazy: dict[str, tuple[str, str]]):
        self.lazy = dict(lazy)
        self.loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded:
            if name not in self.lazy:
                raise KeyError(name)
            module, _, attribute = self.lazy[name][0].partition(":")
            self.loaded[name] = getattr(importlib.import_module(module), attribute)
        return self.loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self.loaded.pop(name, None)
        self.lazy.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self.lazy, *self.loaded]))

    def __len__(self) -> int:
        return len(set(self.lazy) | set(self.loaded))

    def __contains__(self, name: object) -> bool:
        return name in self.lazy or name in self.loaded

    def short_help(self, name: str) -> str | None:
        """The one-line help of a command not loaded yet (None once it is loaded)."""
        return None if name in self.loaded else self.lazy[name][1]


class LazyGroup(click.Group):
    """A click group whose commands are `{name: ("module:attribute", "short help")}`."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(lazy or {})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """The command `name`, its module loaded now; a module that needs a missing optional
        extra is one line naming the command and the extra (luma.extras.MissingExtra)."""
        try:
            return super().get_command(ctx, name)
        except ModuleNotFoundError as exc:
            missing = from_import_error(exc, f"{ctx.command_path} {name}")
            if missing is None:
                raise  # not an optional extra: a broken install, worth its traceback
            raise missing from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with the short help of commands not loaded taken from their entry."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            lazy_help = self.commands.short_help(name)
            if lazy_help is None:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                rows.append((name, click.Command(name, help=lazy_help).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

