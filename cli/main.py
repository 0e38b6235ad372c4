"""The `luma` command: one click group per layer, each command loaded when it runs (cli/groups.py);
LumaError becomes one line and exit code 1 (2 for a usage mistake), Ctrl-C one line and 130."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from luma import __version__
from luma.cli.groups import TOP
from luma.cli.lazy import LazyGroup
from luma.cli.project import remember_options
from luma.errors import Interrupted, LumaError
from luma.extras import from_import_error
from luma.privacy import private_umask


class LumaGroup(LazyGroup):
    """Turns every LumaError raised below into a one-line message and exit code 1; so too a
    missing optional extra and an operating-system error (a file or directory that cannot be
    made, read or written), which name what to do or the path at fault. Ctrl-C becomes one
    `Error: interrupted` line and exit code 130 (click's own `Aborted!` said nothing of what was
    kept; a command that keeps partial results raises luma.errors.Interrupted saying so)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _error(Interrupted()) from None
        except LumaError as exc:
            raise _error(exc) from None
        except ModuleNotFoundError as exc:
            missing = from_import_error(exc)
            if missing is None:
                raise  # not an optional extra: a broken install, worth its traceback
            raise click.ClickException(missing.one_line()) from None
        except BrokenPipeError:
            # The reader of our output went away (`luma kb export | head`): stop quietly.
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError):
                pass  # no real file descriptor (a test runner's stream)
            sys.exit(1)
        except OSError as exc:
            raise click.ClickException(_os_error(exc)) from None


def _error(exc: LumaError) -> click.ClickException:
    """The one `Error:` message of `exc`, with its exit code (2: a usage mistake; luma/errors.py)."""
    error = click.ClickException("\n".join(exc.lines()))
    error.exit_code = exc.exit_code
    if exc.exit_code == 2 and exc.source and Path(exc.source).is_file():
        # An unknown name read from a file the user gave is that file's content failing (one line
        # naming file and field, exit 1); a name typed on the command line is a usage mistake (2).
        error.exit_code = 1
    return error


def _os_error(exc: OSError) -> str:
    """`PATH: reason` of an operating-system error, on one line."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    where = ": ".join(str(f) for f in (exc.filename, exc.filename2) if f)
    return " ".join((f"{where}: {reason}" if where else reason).split())


@click.group(cls=LumaGroup, lazy=TOP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="luma")
@click.option(
    "--home", type=click.Path(file_okay=False), default=None,
    help="Project directory (default: $LUMA_HOME, else ./.luma).",
)
@click.option(
    "--wait", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
    help="A command that writes the embedded KB waits this long for the command holding it "
         "(default: $LUMA_WAIT, else 0; readers wait up to 30 s for a writer's snapshot).",
)
@click.pass_context
def cli(ctx: click.Context, home: str | None, wait: float | None) -> None:
    """LUMA: knowledge base and rule engine for hardware-software co-design of AI services.

    Concurrency on the embedded KB: one command writes at a time; commands that only read run
    side by side, and while a write runs they show the KB as it was when the write began."""
    # Project data is private (luma/privacy.py): from here on, whatever the command writes.
    private_umask()
    remember_options(ctx, home, wait)


def main() -> None:
    """Console-script entry point."""
    try:
        cli.main(prog_name="luma")
    except KeyboardInterrupt:  # before a command runs (LumaGroup.invoke handles it from there)
        error = _error(Interrupted())
        error.show()
        sys.exit(error.exit_code)


if __name__ == "__main__":
    main()
