"""`--submitter`: who submits a record, checked against the ledger's column before anything is
read or written (`luma kb ingest|load`, `luma partner add`, `luma runner …`)."""

from __future__ import annotations

import click

from luma.errors import LedgerError
from luma.kb.store.ledger_fields import check_text


def submitter_option(help_text: str = "Who submits (default: user@host)."):
    """`--submitter`, checked against the ledger's column before anything is read or written."""

    def check(ctx, param, value):
        if value is None:
            return value
        try:
            check_text("submitter", value)
        except LedgerError as exc:
            raise click.BadParameter(exc.message) from None
        return value

    return click.option("--submitter", default=None, callback=check, help=help_text)
