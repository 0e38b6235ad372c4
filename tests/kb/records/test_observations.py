"""`luma.kb.records.observations`: what a clause needs observed is what ingest's re-judge asks for,
and the schema and `luma kb schema --observations` say it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import RecordError
from luma.kb.ingest.rejudge import rejudge
from luma.kb.records import judge
from luma.kb.records.observations import needs, role, table
from luma.kb.records.pex_chain import Clause, Observation
from luma.kb.records.schema import schema_text


@pytest.mark.parametrize("metric,op,value,unit", [("p95_ttft", "<=", 500, "ms"), ("p99_latency", "<", 2, "s"),
                                                  ("quality", ">=", 0.9, "dimensionless")])
def test_the_needs_are_exactly_what_rejudge_asks_for(metric, op, value, unit):
    clause = Clause(metric=metric, op=op, value=value, unit=unit)
    q = judge.quantile_of(metric)
    n = judge.min_requests(q) if q else 0
    values = {"samples": n, "ci_low": value * 0.5, "ci_high": value * 0.6}
    obs = [Observation(metric=need.metric, unit=need.unit if need.unit != "ms" else unit,
                       value=values.get(need.metric.rsplit(".", 1)[-1], value * 0.55))
           for need in needs(metric)]
    assert rejudge([clause], obs, None).verdict in ("PASS", "FAIL")
    for i in range(len(obs)):
        if i == 0 and q is not None:
            continue  # the percentile itself is shown, not judged on
        with pytest.raises(RecordError, match="no observation"):
            rejudge([clause], obs[:i] + obs[i + 1:], None)


def test_roles_name_the_request_count_rule():
    assert "at least 72" in role("p95_ttft.samples") and "lower bound" in role("p95_ttft.ci_low")
    assert role("cpu_temperature") is None


def test_the_table_and_the_schema_say_what_each_clause_needs():
    rows = {r["metric"]: r for r in table()}
    assert rows["p95_ttft"]["observations"] == "p95_ttft .ci_low .ci_high .samples"
    assert "≥ 72 samples" in rows["p95_ttft"]["judged"] and rows["quality"]["observations"] == "quality"
    described = json.loads(schema_text("pex-chain"))["$defs"]["Observation"]["description"]
    assert "<metric>.samples" in described and "ci_low" in described and "p95 72" in described
    out = CliRunner().invoke(cli, ["kb", "schema", "--observations", "--format", "json"])
    assert out.exit_code == 0 and {r["metric"] for r in json.loads(out.stdout)} == set(rows)
