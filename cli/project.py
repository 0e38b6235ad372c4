"""What each command does with the project directory (`LUMA_HOME` / `--home`). A command that
reads a project refuses to run where there is none — a mistyped `LUMA_HOME` or a command before
`luma kb init` is one line, never an empty project answering "0 rows"; a command that writes
makes the directory before it starts, in one line if it cannot (a file, under /proc, read-only).

Every command declares its use with `@project(...)`, which also turns a missing optional extra
into one line naming the command; a test checks that no command is left undeclared."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import click

from luma.errors import ConfigError
from luma.extras import from_import_error
from luma.privacy import make_private
from luma.settings import Settings

#: The uses a command may declare.
READ, WRITE, OPTIONAL, NONE = "read", "write", "optional", "none"


_OPTIONS, _SETTINGS = "luma.options", "luma.settings"


def remember_options(ctx: click.Context, home: str | None, wait: float | None) -> None:
    """The root group keeps its --home / --wait for `settings()` (nothing is written to the
    environment: a child process or a later command never sees them by accident)."""
    ctx.meta[_OPTIONS] = {"home": home, "wait": wait}


def settings():
    """The command's Settings: built once per invocation, on first use (so `--help` and usage
    errors never trip over a bad variable), from the environment and the root's --home/--wait;
    every layer below gets them passed explicitly."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:  # a command function called outside click (a test): the environment alone
        return Settings.from_env()
    if _SETTINGS not in ctx.meta:
        ctx.meta[_SETTINGS] = Settings.from_env(**ctx.meta.get(_OPTIONS, {}))
    return ctx.meta[_SETTINGS]


def use_settings(s) -> None:
    """Make `s` the settings of this invocation from here on (`luma demo` runs the commands it
    shows on its own project)."""
    ctx = click.get_current_context()
    ctx.meta[_SETTINGS] = s


def where() -> str:
    """How the user named the project directory: `--home` or `LUMA_HOME` (or the default)."""
    return {"argument": "--home", "LUMA_HOME": "LUMA_HOME"}.get(settings().home_from,
                                                               "the default project (./.luma)")


def ledger_file(s) -> Path | None:
    """The SQLite ledger's file, or None when the ledger is a server (PostgreSQL …)."""
    url = s.db_url
    return Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else None


def exists(s) -> bool:
    """Whether the project has a ledger. A ledger on a server is taken to exist: it is only
    known by connecting, and the command then says what the server answered."""
    path = ledger_file(s)
    return path is None or path.is_file()


def _not_a_directory(home: Path) -> None:
    if home.exists() and not home.is_dir():
        raise ConfigError(f"{home} is not a directory", source=where())


def require(s=None):
    """The project's settings; ConfigError unless the project exists (a reader never creates
    one). READ commands call it when they open the project, after their arguments are checked
    (a usage error stays a usage error)."""
    s = s or settings()
    _not_a_directory(s.home)
    if not exists(s):
        raise ConfigError(f"no LUMA project at {s.home} (no ledger {ledger_file(s).name} there): `luma kb init` "
                          "creates one, or point LUMA_HOME / --home at your project", source=where())
    return s


def make_home(s) -> list[Path]:
    """Create the project directory if needed; the directories created (outermost first).
    ConfigError when it cannot be made or written."""
    home = s.home
    _not_a_directory(home)
    missing = []
    p = home
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    if missing and not p.is_dir():
        raise ConfigError(f"cannot create {home}: {p} is not a directory", source=where())
    try:
        make_private(home)  # owner-only, whatever the user's umask (luma/privacy.py)
    except OSError as exc:
        raise ConfigError(f"cannot create {home}: {exc.strerror or exc}", source=where()) from None
    if not os.access(home, os.W_OK | os.X_OK):
        raise ConfigError(f"{home} is not writable (a read-only file system or directory)", source=where())
    return list(reversed(missing))


def interactive() -> bool:
    """Whether a person watches stderr (notes for people; scripts get the output alone)."""
    import sys

    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _remove_empty(dirs: list[Path]) -> None:
    for d in reversed(dirs):  # innermost first
        try:
            d.rmdir()
        except OSError:
            return  # something was written there: it stays


def project(use: str, when=None, announce: bool = True):
    """Declare what a command does with the project:

    * READ: needs an existing one; the command calls `require` where it opens it, so that its
      arguments are checked first.
    * WRITE: makes it on first use (and says so on stderr, in a log too); `when(params)` tells whether
      this invocation writes (not with --no-record); `announce=False` for `luma kb init`, which
      says where the project is itself.
    * OPTIONAL: reads it when there is one (`luma machine list`).
    * NONE: never uses it."""
    assert use in (READ, WRITE, OPTIONAL, NONE), use

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return _run(fn, args, kwargs)
            except ModuleNotFoundError as exc:
                ctx = click.get_current_context(silent=True)
                what = " ".join(["luma", *ctx.command_path.split()[1:]]) if ctx else None
                missing = from_import_error(exc, what)
                if missing is None:
                    raise
                raise missing from None

        def _run(fn, args, kwargs):
            if use in (NONE, READ) or (use == WRITE and when is not None and not when(kwargs)):
                return fn(*args, **kwargs)
            s = settings()
            if use == OPTIONAL:
                _not_a_directory(s.home)
                if not exists(s) and interactive():
                    click.echo(f"note: no LUMA project at {s.home}: nothing of a project shown", err=True)
                return fn(*args, **kwargs)
            existed = exists(s)
            made = make_home(s)
            ok = False
            try:
                result = fn(*args, **kwargs)
                ok = True
                return result
            finally:
                if not ok:
                    _remove_empty(made)  # a failed first command leaves no empty directory behind
                elif announce and not existed and exists(s):
                    # In a log too, not only on a terminal: a relative LUMA_HOME after a `cd` makes a
                    # second project. After the command, so that a failed one stays one Error: line.
                    click.echo(f"note: created a new LUMA project at {s.home} ({where()})", err=True)

        wrapper.luma_project = use
        return wrapper

    return decorate
