"""kernel-result records: the benchmark standard's fields in, measured facts out, bad input refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from luma.errors import RecordError
from luma.kb.knowledge_base import KnowledgeBase
from luma.kb.vocab import LUMA
from luma.settings import Settings

EXAMPLE = json.loads((Path(__file__).parents[1] / "data" / "kernel_result.json").read_text())


def _write(tmp_path, record, name="result.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(record) if not isinstance(record, str) else record)
    return path


def test_a_kernel_result_becomes_queryable_measured_facts(signed, tmp_path):
    with KnowledgeBase.open(Settings.from_env()) as kb:  # measured: signed by the project's runner key
        report = kb.ingest([signed(EXAMPLE, "result.json")], submitter="tester")
        assert len(report.added) == 1
        rows = kb.store.select(f"""
            PREFIX luma: <{LUMA}> PREFIX qudt: <http://qudt.org/schema/qudt/>
            SELECT ?ev ?acc ?cpu ?bits ?artifact WHERE {{
              ?r a luma:KernelResult ; luma:evidenceClass ?ev ; luma:bits ?bits ; luma:artifact ?artifact ;
                 luma:observation ?o ; luma:environment ?env .
              ?o luma:metric "accuracy" ; qudt:numericValue ?acc .
              ?env luma:cpuModel ?cpu .
            }}""")
        assert rows == [{"ev": LUMA + "Measured", "acc": "0.9689", "cpu": "AMD EPYC", "bits": "8",
                         "artifact": "luma kernels evaluate --model digits --bits 8"}]
        quads = kb.store.count()
        again = kb.ingest([signed(EXAMPLE, "again.json")], submitter="tester")
        assert (len(again.added), len(again.duplicates), kb.store.count()) == (0, 1, quads)


def _bad(**changes):
    record = json.loads(json.dumps(EXAMPLE))
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = record
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is KeyError:
            del node[leaf]
        else:
            node[int(leaf) if leaf.isdigit() else leaf] = value
    return record


@pytest.mark.parametrize("record,field,message", [
    (_bad(metrics__0__value=float("nan")), "metrics[0].value", "finite"),
    (_bad(metrics__0__unit="zorkmids"), "metrics[0].unit", "unknown unit"),
    (_bad(artifact=" "), "artifact", "String should match pattern"),
    (_bad(artifact=KeyError), "artifact", "Field required"),
    (_bad(repetitions=0), "repetitions", "greater than or equal to 1"),
    (_bad(metrics=[]), "metrics", "at least 1 item"),
    (_bad(environment__logical_cpus=0), "environment.logical_cpus", "greater than or equal to 1"),
    (_bad(method__kind="magic"), "method.kind", "'software', 'hardware' or 'partner'"),
    (_bad(evidence_class="rumour"), "evidence_class", "measured"),
    (_bad(surprise=1), "surprise", "Extra inputs are not permitted"),
])
def test_bad_kernel_results_are_refused_naming_the_field_and_change_nothing(signed, tmp_path, record, field,
                                                                           message):
    with KnowledgeBase.open(Settings.from_env()) as kb:
        before = (kb.ledger.last_id(), kb.store.count())
        path = _write(tmp_path, json.dumps(record, allow_nan=True))
        with pytest.raises(RecordError) as info:
            kb.ingest([signed(EXAMPLE, "fine.json"), path], submitter="tester")
        assert info.value.field == field, info.value.one_line()
        assert message in info.value.message
        assert (kb.ledger.last_id(), kb.store.count()) == before
