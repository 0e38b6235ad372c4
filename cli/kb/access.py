"""How `luma kb` commands open the project's KB: for writing (waits per --wait), for reading
(beside other readers; a running writer's starting state), or the last exploratory rule run's copy."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import click

from luma.cli.project import require, settings


def open_for_writing(sync: bool = True):
    """The project's KB for a command that writes (waits per --wait / LUMA_WAIT)."""
    from luma.kb.knowledge_base import KnowledgeBase  # the store stack: `luma kb … --help` stays light

    return KnowledgeBase.open(settings(), sync=sync)


def open_for_reading():
    """The project's KB for a command that only reads: concurrent with other readers, and with a
    running writer it reads the state that writer started from (said on stderr)."""
    from luma.kb.knowledge_base import KnowledgeBase  # the store stack: `luma kb … --help` stays light

    base = KnowledgeBase.open(require(), read_only=True)
    writer = base.snapshot_writer
    if writer:
        click.echo(f"note: pid {writer.get('pid')} ({writer.get('command', '?')}) is writing the knowledge base "
                   f"since {writer.get('since', '?')}; this shows it as it was then", err=True)
    return base


@contextmanager
def maybe_exploratory(base, exploratory: bool):
    """`base` itself, or a view of the last exploratory rule run's copy of the KB (rules/exploratory.py)
    read under the same project lock."""
    if not exploratory:
        yield base
        return
    from luma.kb.store.embedded import EmbeddedStore  # pyoxigraph: `luma kb … --help` stays light
    from luma.rules import exploratory as explore  # only for --exploratory: plain reads start faster

    path = explore.store_path(base.settings.home)
    run = explore.last_run(base.settings.home)
    if run is None or not path.is_dir():
        raise click.ClickException("no exploratory run yet: `luma rules run --exploratory --param …` makes one")
    click.echo(f"note: exploratory results (run {run['at']}, parameters {run['parameters'] or 'defaults'}), "
               "not the KB's", err=True)
    store = EmbeddedStore(path, read_only=True)
    try:
        yield ExploratoryView(store, base.ledger, base.settings)
    finally:
        store.close()


@dataclass
class ExploratoryView:
    """The exploratory copy's store with the project's ledger and settings (what a query reads)."""

    store: object
    ledger: object
    settings: object
