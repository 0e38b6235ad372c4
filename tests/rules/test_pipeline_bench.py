"""`luma kb bench`'s rdflib baseline (issue 32): a query rdflib's engine refuses (`capabilities`:
GROUP_CONCAT(DISTINCT ?remedy) over rows without a remedy raises NotBoundError) is reported as that
query's failure; the baseline's other figures still show (it used to be lost as `KeyError: 's'`)."""

from __future__ import annotations

from luma.cli.bench_report import print_bench
from luma.kb.query.named import named_queries
from luma.rules.pipeline_bench import child_rdflib

NS = "https://w3id.org/luma/ns#"
ID = "https://w3id.org/luma/id/"
DERIVED = f"{ID}graph/derived/"

# One capability candidate whose basis is not a remedy: ?remedy stays unbound in `capabilities`.
QUADS = f"""\
<{ID}candidate/c1> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{NS}CapabilityCandidate> <{DERIVED}capability-candidate> .
<{ID}candidate/c1> <{NS}candidateFor> <{ID}requirement/r1> <{DERIVED}capability-candidate> .
<{ID}candidate/c1> <{NS}capability> <{NS}HighBandwidthMemory> <{DERIVED}capability-candidate> .
<{ID}candidate/c1> <{NS}candidateBasis> "binding" <{DERIVED}capability-candidate> .
<{ID}requirement/r1> <{NS}resource> <https://w3id.org/luma/dim/host_memory> <{DERIVED}hardware-requirement> .
"""


def test_every_named_query_has_a_figure_or_says_why_not(tmp_path, capsys):
    (tmp_path / "records.nq").write_text(QUADS)
    out = child_rdflib(tmp_path, per_query_timeout=60)
    assert set(out["queries"]) == set(named_queries())
    for name, q in out["queries"].items():
        assert ("s" in q and "rows" in q) or q.get("error"), (name, q)
    timed = [name for name, q in out["queries"].items() if "s" in q]
    assert len(timed) >= len(named_queries()) - 1  # at most the one query rdflib refuses
    result = {"records": 1, "quads": 5, "ingest_s": 0.1, "records_per_s": 10.0, "quads_per_s": 50.0,
              "raw_bulk_load_s": 0.1, "ratio_vs_raw": 1.0, "peak_rss_mb": 100.0, "phases_s": {},
              "queries": {name: {"rows": 0, "min_s": 0.001, "median_s": 0.001} for name in named_queries()},
              "rdflib": out}
    print_bench([result])
    table = capsys.readouterr().out
    assert "not run" not in table
    for name, q in out["queries"].items():
        if "error" in q:
            assert f"failed: {q['error'].split(':')[0]}" in table and f"rdflib refused {name} (1 records): {q['error']}" in table
        else:
            assert f"{q['s'] * 1000:,.1f}" in table


def test_a_size_interrupted_leaves_no_work_directory(tmp_path, monkeypatch):
    """Ctrl-C during a size (the child running) removes its work directory; --keep keeps it."""
    import tempfile

    from luma.rules import pipeline_bench

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = []

    def interrupted(module, args, timeout=None):
        seen.append(args[1])
        (tmp_path / args[1] / "records.nq").write_text("big")
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline_bench, "run_child", interrupted)
    try:
        pipeline_bench.run_bench([10])
    except KeyboardInterrupt:
        pass
    assert seen and not any(tmp_path.glob("luma-bench-*"))
    kept = tmp_path / "kept"
    kept.mkdir()
    try:
        pipeline_bench.run_bench([10], keep=kept)
    except KeyboardInterrupt:
        pass
    assert len(list(kept.glob("luma-bench-*"))) == 1
