"""Ctrl-C as one `Error:` line: `Error: interrupted`, or what the interrupted command kept
(`Error: interrupted: 11 trials kept in …/sprints/…, no chain`), and exit code 130 (128 + SIGINT,
as a shell reports a command that SIGINT stopped: a script tells it from a failure, 1, and a usage
mistake, 2). cli/main.py turns any KeyboardInterrupt into one; a command that keeps partial
results catches it first and says what it kept."""

from __future__ import annotations

from pathlib import Path

import click

#: The exit code of a command stopped by Ctrl-C.
EXIT_CODE = 130


class Interrupted(click.ClickException):
    """The command was stopped by Ctrl-C; `kept` says what it left behind."""

    exit_code = EXIT_CODE

    def __init__(self, kept: str | None = None):
        super().__init__("interrupted" + (f": {kept}" if kept else ""))


def sprint_kept(folder: Path, recorded: bool) -> str:
    """What an interrupted sprint left in its records folder: its trials (ingested when the sprint
    records) and whether its chain was written."""
    trials = len(list(folder.glob("trial-*.json"))) if folder.is_dir() else 0
    if not trials:
        return "no trial kept, no chain"
    where = f"{trials} trial{'s' if trials != 1 else ''} kept in {folder}"
    chain = "chain written" if (folder / "chain.json").exists() else "no chain"
    return f"{where} ({'ingested' if recorded else 'not ingested'}), {chain}"
