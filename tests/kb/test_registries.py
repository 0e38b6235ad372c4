"""One registry of record kinds (luma.kb.records.kinds) and one of evidence classes
(luma.kb.vocab.EVIDENCE): the loader, schemas, projection, scoping, trust code, CLI choices and
reports derive from them, and no other module spells the lists out (issue 15 item 23)."""

from __future__ import annotations

import ast
from pathlib import Path

from click.testing import CliRunner

from luma.kb.records import kinds
from luma.kb.vocab import EVIDENCE, EVIDENCE_CLASSES, LOADABLE_CLASSES

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("kb", "cli", "reports", "rules", "experiments", "kernels")


def _literal_lists(path: Path):
    """Every tuple/list/set literal and dict's keys in `path`, as sets of their string constants."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        yield node.lineno, {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def _spelled_out(names: set[str], at_least: int, allowed: set[str]) -> list[str]:
    found = []
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel in allowed:
                continue
            for line, strings in _literal_lists(path):
                if len(strings & names) >= at_least:
                    found.append(f"{rel}:{line}: {sorted(strings & names)}")
    return found


def test_record_kinds_are_listed_once():
    names = {k.name for k in kinds.KINDS}
    assert _spelled_out(names, 2, {"kb/records/kinds.py"}) == []


def test_evidence_classes_are_listed_once():
    # Three or more together is a list of the classes; a pair can be a legitimate rule of one module.
    assert _spelled_out(set(EVIDENCE_CLASSES), 3, {"kb/vocab.py", "kb/records/synthetic.py"}) == []


def test_everything_is_derived_from_the_registries():
    from luma.cli.main import cli
    from luma.kb.trust.partners import _KINDS as partner_kinds
    from luma.kb.ingest.projection import PROJECTORS
    from luma.kb.records.loader import record_types
    from luma.kb.records.schema import SCHEMAS
    from luma.kb.trust.runners import _KINDS as runner_kinds
    from luma.kb.store.partner_graphs import PARTNER_RECORD_TYPES

    names = [k.name for k in kinds.KINDS]
    assert set(PROJECTORS) == set(names)  # replay (kb/ingest/write.reproject) reads kinds.BY_NAME itself
    assert set(record_types()) == {k.name for k in kinds.KINDS if k.file_record}
    assert set(SCHEMAS) == {k.name for k in kinds.KINDS if k.schema}
    assert set(PARTNER_RECORD_TYPES) == set(partner_kinds) == {k.name for k in kinds.KINDS if k.partner}
    assert set(runner_kinds) == {k.name for k in kinds.KINDS if k.command_only}
    for k in kinds.KINDS:  # each model really is the model of its kind
        assert k.model_class().model_fields["record_type"].default in (k.name, None) or \
            k.name in str(k.model_class().model_fields["record_type"].annotation)
    help_text = CliRunner().invoke(cli, ["kb", "schema", "--help"]).output
    assert all(name in help_text for name in kinds.SCHEMA_KINDS)
    load_help = CliRunner().invoke(cli, ["kb", "load", "--help"]).output
    assert all(name in load_help for name in LOADABLE_CLASSES) and "measured" not in LOADABLE_CLASSES
    assert [c.name for c in EVIDENCE] == list(EVIDENCE_CLASSES)


def test_the_ontology_knows_every_evidence_class():
    text = (ROOT / "ontology").glob("*.ttl")
    ttl = "\n".join(p.read_text() for p in text)
    for c in EVIDENCE:
        assert c.iri.split("#")[1] in ttl, c.name


def test_the_evidence_by_class_query_leaves_out_exactly_the_kinds_that_are_no_evidence():
    import re

    text = (ROOT / "kb" / "queries" / "evidence-by-class.rq").read_text()
    listed = re.search(r"NOT IN \(([^)]*)\)", text).group(1)
    assert {s.strip().strip('"') for s in listed.split(",")} == set(kinds.NOT_EVIDENCE)
