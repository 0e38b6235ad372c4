"""Each report as a use case, as `luma report …` calls it (so may a program): open what the report
reads, build it, and write report.md, report.html and its plots into a folder."""

from __future__ import annotations

import json
from pathlib import Path

from luma.errors import ConfigError
from luma.experiments import prices
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.query.scope import Scope
from luma.reports import boundary, design_in, partner, pilot, pilot_data
from luma.reports.render import Written, write


def boundary_report(settings, out: Path, chain: str | None = None, sprint: str | None = None) -> Written:
    """The Resource Boundary Report of one PEX chain (CHAIN, the chain of `sprint`, else the latest
    qualified one), read from the project's KB."""
    with KnowledgeBase.open(settings, read_only=True) as kb:
        rep = boundary.build(kb, chain=chain, sprint=sprint)
    return write(rep, out)


def design_in_report(settings, out: Path, scope: Scope, max_rows: int, prices_path: Path | None) -> Written:
    """The Design-In Report in `scope`'s view, its economics priced by `prices_path` (default: the
    shipped example table); a bad price table fails before the KB is opened."""
    table = prices.load(prices_path, settings)
    with KnowledgeBase.open(settings, read_only=True) as kb:
        rep = design_in.build(kb, scope=scope, max_rows=max_rows, prices=table)
    return write(rep, out)


def partner_report(evaluation, out: Path, scope: Scope) -> tuple[Written, Path]:
    """The Partner Evaluation Report of an evaluation (luma.experiments.model.partner_evaluation),
    and its frozen experiment matrix written as matrix.json beside it; a partner's view never
    shows another partner's record."""
    doc, record = evaluation.doc, evaluation.record
    if scope.partner is not None and scope.partner != record.partner:
        # A partner's report never shows another partner's record, whatever path it came by.
        raise ConfigError(f"the record is {record.partner}'s, not {scope.partner}'s", field="scope")
    written = write(partner.build(doc, record), out)
    matrix = out / "matrix.json"
    matrix.write_text(json.dumps(doc["matrix"], indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return written, matrix


def pilot_report(settings, run: str | None, out: Path | None, source: str | None = None) -> Written:
    """The Economic Control Report of pilot run `run` (an id under the project's pilots/, a
    pilot.json or its folder; None: the latest), from its pilot.json alone; `out` defaults to
    report/ beside it."""
    path = pilot_data.locate(run, settings.home, source=source)
    doc = pilot_data.load(path, settings)
    return pilot.write(doc, str(path), out if out is not None else path.parent / "report")
