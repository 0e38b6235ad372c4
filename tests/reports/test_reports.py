"""`luma report boundary|design-in`: both reports render from a KB with a real sprint, synthetic
chains, machine spec sheets and model error facts, and from the demo KB; Markdown has every
section and table; the HTML is self-contained and — opened in headless Chromium — has every
section, table and plot; rendering twice gives the same bytes; empty KBs give one-line errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.rules.loader import load_all

from tests import workers

_LOCATION_VARS = ("LUMA_DB_URL", "LUMA_KB_URL", "LUMA_KB_QUERY_URL", "LUMA_KB_UPDATE_URL", "LUMA_KB_STORE_URL")
ROOT = Path(__file__).resolve().parents[2]


def _run(home: Path, *args):
    return CliRunner().invoke(cli, ["--home", str(home), *args])


@pytest.fixture(scope="module")
def env():
    """No URL overrides from the environment: each project uses its own ledger and KB. LUMA_HOME is
    recorded too (`luma --home` sets it in os.environ), so the module leaves it as it found it."""
    with pytest.MonkeyPatch.context() as mp:
        for var in _LOCATION_VARS:
            mp.delenv(var, raising=False)
        mp.setenv("LUMA_HOME", os.environ.get("LUMA_HOME", "unset"))  # records the original for undo
        yield mp


@pytest.fixture(scope="module")
def full_home(tmp_path_factory, env) -> dict:
    """A project with a matvec sprint, 150 synthetic chains, the machine catalog (vendor claims),
    model error facts (simulated) and the rules run. It is marked as a throwaway benchmark project
    (kb/records/synthetic.py), so that the would-be measured synthetic chains are measured and the rules
    derive requirements from them; the reports must still label them."""
    from luma.experiments.model.facts import turtle
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.kb.operations.runner_keys import project_signer
    from luma.kb.records.synthetic import mark_bench_project, write_jsonl
    from luma.rules.engine import Engine
    from luma.settings import Settings

    home = tmp_path_factory.mktemp("full") / "home"
    env.setenv("LUMA_HOME", str(home))
    with workers.alone():  # a real sprint: the rest of the module shares the host
        result = _run(home, "sprint", "run", "matvec-memory", "--format", "json")
    assert result.exit_code == 0, result.output
    sprint = json.loads(result.stdout)["sprint"]
    # Signed by the key the sprint made for the project, the measured synthetic chains are measured.
    mark_bench_project(home)
    synthetic = write_jsonl(home / "synthetic.jsonl", 150, signer=project_signer(Settings.from_env(home=home), create=False))
    errors = home / "model-errors.ttl"
    errors.write_text(turtle({"created": "2026-12-01T00:00:00Z", "trials": [], "errors": {"matvec-memory": {
        "p95_latency": {"n": 13, "median": 0.08, "max": 0.31, "held_out_median": 0.11, "held_out_max": 0.42}}}}))
    with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
        kb.ingest([synthetic, *sorted((ROOT / "experiments" / "machines").glob("*.json"))], submitter="test")
        kb.load_rdf(errors, "turtle", "simulated", submitter="test")
        Engine(kb).run()
    return {"home": home, "sprint": sprint}


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory, env) -> Path:
    """The demo KB (`luma demo`) with the rules run."""
    home = tmp_path_factory.mktemp("demo") / "home"
    with workers.alone():  # the demo's sprint is measured here
        assert _run(home, "demo", "--home", str(home)).exit_code == 0
    assert _run(home, "rules", "run").exit_code == 0
    return home


def _report(home: Path, out: Path, *args) -> Path:
    result = _run(home, "report", *args, "--out", str(out))
    assert result.exit_code == 0, result.output
    paths = [Path(line) for line in result.stdout.splitlines()]
    assert paths[:2] == [out / "report.md", out / "report.html"] and all(p.is_file() for p in paths)
    return out


def _build(home: Path, kind: str, **kw):
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.reports import boundary, design_in
    from luma.settings import Settings

    with KnowledgeBase.open(Settings.from_env(home=home)) as kb:
        return (boundary if kind == "boundary" else design_in).build(kb, **kw)


BOUNDARY_SECTIONS = ["contract", "boundary", "binding", "intervention", "frontier", "trials", "decision", "provenance"]
DESIGN_SECTIONS = ["requirements", "measured-on", "capabilities", "economics", "prices", "counter-evidence", "remedies", "derivations", "evidence", "evidence-measured",
                   "evidence-simulated", "evidence-projected", "evidence-vendor-claim", "evidence-synthetic", "published-results"]


def _check_markdown(report, md: str, out: Path) -> None:
    for s in report.sections:
        assert re.search(rf"^{'#' * s.level} {re.escape(s.title)}$", md, re.M), s.title
    for t in report.tables():
        assert "| " + " | ".join(t.columns) + " |" in md, t.id
        assert len(t.rows) >= 1
    for p in report.plots():
        assert f"](plots/{p.id}.svg)" in md and (out / "plots" / f"{p.id}.svg").read_text().startswith("<?xml")


def _check_self_contained(html: str) -> None:
    lowered = html.lower()
    assert "<script" not in lowered and "<link" not in lowered and "@import" not in lowered
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", lowered), "external reference"
    assert "url(" not in lowered.replace("url(#", "")  # SVG clip paths refer to their own ids only


@pytest.mark.slow
def test_boundary_report_of_a_sprint(full_home, tmp_path):
    out = _report(full_home["home"], tmp_path / "b", "boundary", "--sprint", full_home["sprint"])
    rep = _build(full_home["home"], "boundary", sprint=full_home["sprint"])
    assert [s.id for s in rep.sections] == BOUNDARY_SECTIONS
    md = (out / "report.md").read_text()
    _check_markdown(rep, md, out)
    _check_self_contained((out / "report.html").read_text())
    tables = {t.id for t in rep.tables()}
    assert {"table-clauses", "table-states", "table-diagnosis", "table-fail-telemetry", "table-recovery",
            "table-frontier", "table-next-binding", "table-trials", "table-provenance"} <= tables
    assert {p.id for p in rep.plots()} == {"plot-quality", "plot-p95-latency"}
    # the facts behind the decision, as the sprint measured them
    assert "host_memory ≥ " in rep.callout and "with int8-weights" in rep.callout and "binds again" in rep.callout
    assert "95% bootstrap interval" in md and re.search(r"\d ms \[[\d.]+ ms – [\d.]+ ms\]|µs \[", md)
    assert full_home["sprint"] in md and "evidence" in md and "measured" in md


def test_design_in_report_has_every_class_section(full_home, tmp_path):
    out = _report(full_home["home"], tmp_path / "d", "design-in")
    rep = _build(full_home["home"], "design-in")
    assert [s.id for s in rep.sections] == DESIGN_SECTIONS
    md = (out / "report.md").read_text()
    _check_markdown(rep, md, out)
    _check_self_contained((out / "report.html").read_text())
    tables = {t.id for t in rep.tables()}
    assert {"table-requirements", "table-counter-evidence", "table-remedies", "table-evidence", "table-qualified",
            "table-simulated-chains", "table-simulated-model-error", "table-projected-chains",
            "table-vendor-claim-chains", "table-vendor-claim-machines"} <= tables
    assert {p.id for p in rep.plots()} == {"plot-requirement-ranges", "plot-evidence"}
    assert any(b.__class__.__name__ == "Tree" for s in rep.sections for b in s.blocks)
    version = next(r.version for r in load_all() if r.id == "hardware-requirement")
    assert f"rule `hardware-requirement` v{version}" in md and "supporting record(s)" in md
    assert "nvidia-h100-sxm5-80gb" in md and "p95_latency" in md  # a spec sheet, a model error fact


def test_design_in_summary_counts_the_remedies_its_table_lists(full_home):
    rep = _build(full_home["home"], "design-in")
    listed = next(t for t in rep.tables() if t.id == "table-remedies")
    assert dict(rep.facts)["Recurring remedies"] == str(len(listed.rows)) and listed.rows


@pytest.mark.slow
def test_both_reports_render_from_the_demo_kb(demo_home, tmp_path):
    b = _report(demo_home, tmp_path / "b", "boundary", "--latest")
    d = _report(demo_home, tmp_path / "d", "design-in")
    md = (d / "report.md").read_text()
    for s in ("Hardware requirements", "Counter-evidence", "Recurring remedies", "Simulated evidence"):
        assert f"## {s}" in md or f"### {s}" in md
    assert "none in this kb" in md.lower()  # the demo derives no requirement: said, not left blank
    # ... and why no capability qualifies: the thresholds and what the KB lacks against them
    assert "**Nothing qualifies for Design-In.**" in md and "at least 3 workloads on at least 2 architectures" in md
    # The shipped evidence set (two machine types, both KVM guests reading "AMD EPYC": matvec and
    # MiniLM bind host memory, the count of boundaries grows with the set) and the demo's own
    # sprint, when it qualifies on a contended host: two workloads, one architecture.
    from luma.experiments.evidence import manifest, shipped
    from luma.experiments.host import cpu

    shipped_cpus = {m["cpu_model"] for m in manifest.read(shipped.default_root())["machines"]}
    assert "## Measured on" in md
    if shipped_cpus == {cpu()["cpu_model"]}:  # the demo ran on the shipped set's one machine type
        assert re.search(r"\| host_memory \| \d+ \| 2 \| 1 \| 1 more workload, 1 more architecture \|", md)
        assert "come from 1 architecture" in md
    if len(shipped_cpus) == 1:
        shipped_alone = (demo_home / "reports" / "design-in-shipped" / "report.md").read_text()
        assert "cannot say which hardware to ask for elsewhere" in shipped_alone
    assert "Deploy" in (b / "report.md").read_text()
    # a vendor claim is reported, never as a boundary to deploy on
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.settings import Settings

    with KnowledgeBase.open(Settings.from_env(home=demo_home)) as kb:
        claim = kb.store.select("PREFIX luma: <https://w3id.org/luma/ns#> SELECT ?c WHERE { "
                                "?c a luma:BoundaryQualification ; luma:evidenceClass luma:VendorClaim }")[0]["c"]
    v = (_report(demo_home, tmp_path / "v", "boundary", claim) / "report.md").read_text()
    assert "No deployment decision" in v and "evidence is vendor-claim, not measured" in v


def test_synthetic_chains_are_never_taken_for_measurements(full_home):
    # 150 synthetic chains were signed as measured in this throwaway benchmark project after the
    # sprint (the second guard, for such projects): the latest-qualified default
    # still picks the sprint's measured chain, a synthetic chain's report says what it is, and
    # the Design-In report counts the synthetic boundaries behind its requirements.
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.reports import boundary, design_in
    from luma.settings import Settings

    with KnowledgeBase.open(Settings.from_env(home=full_home["home"])) as kb:
        latest = boundary.build(kb)
        assert "Synthetic chain" not in latest.callout and "matvec-memory" in latest.callout
        rows = kb.store.select(
            "SELECT ?q WHERE { ?q a <https://w3id.org/luma/ns#QualifiedBoundary> ; <https://w3id.org/luma/ns#qualifies> ?c ."
            " ?c <http://www.w3.org/ns/prov#wasGeneratedBy> ?a . ?a <https://w3id.org/luma/ns#tool> ?t"
            ' FILTER(STRSTARTS(?t, "luma synthetic")) } LIMIT 1')
        assert rows, "the fixture has qualified synthetic chains"
        synthetic = boundary.build(kb, chain=rows[0]["q"])
        assert synthetic.callout.startswith("**Synthetic chain: generated for benchmarks") and "Deploy" in synthetic.callout
        di = design_in.build(kb)
    assert re.search(r"\d+ of the \d+ qualified boundaries behind them are synthetic", di.callout)
    # ... and the capability rows do not call that support measured
    cells = [row[-1] for t in di.tables() if t.id == "table-capabilities" for row in t.rows]
    assert cells and all("synthetic ones among them" in c and "measured qualified" not in c
                         and not c.endswith("throughput: measured") for c in cells), cells[:2]


@pytest.fixture(scope="module")
def readme_home(tmp_path_factory, env) -> dict:
    """A project built the README's way (docs/figures/readme-excerpts.sh): a matvec sprint, 150
    synthetic chains as kb/records/synthetic.py writes them by default, the machine catalog, the rules run.
    No opt-in: it is no benchmark project."""
    from luma.kb.records.synthetic import write_jsonl

    home = tmp_path_factory.mktemp("readme") / "home"
    env.setenv("LUMA_HOME", str(home))
    with workers.alone():
        assert _run(home, "sprint", "run", "matvec-memory").exit_code == 0
    synthetic = write_jsonl(home / "synthetic.jsonl", 150)
    generated = sum(json.loads(line)["evidence_class"] == "synthetic" for line in synthetic.read_text().splitlines())
    result = _run(home, "kb", "ingest", str(synthetic), *map(str, sorted((ROOT / "experiments" / "machines").glob("*.json"))))
    assert result.exit_code == 0, result.output
    assert _run(home, "rules", "run").exit_code == 0
    return {"home": home, "synthetic": generated}


def test_a_project_built_the_readme_way_never_calls_a_synthetic_chain_measured(readme_home):
    # Issue 28: the would-be measured synthetic chains are `synthetic`, which no rule qualifies;
    # every count, query and report lists them apart.
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.reports import boundary, design_in
    from luma.reports import design_in_data as data
    from luma.settings import Settings

    home, n = readme_home["home"], readme_home["synthetic"]
    assert n > 100
    query = _run(home, "kb", "query", "--name", "evidence-by-class", "--format", "json")
    assert query.exit_code == 0, query.output
    by_class = {(r["evidenceClass"]["value"], r["kind"]["value"]): int(r["records"]["value"])
                for r in json.loads(query.stdout)["results"]["bindings"]}
    assert by_class[("Synthetic", "pex-chain")] == n and by_class[("Measured", "pex-chain")] == 1  # the sprint's
    qualified = _run(home, "kb", "query", "--name", "qualified-boundaries", "--format", "json")
    assert len(json.loads(qualified.stdout)["results"]["bindings"]) == 1
    with KnowledgeBase.open(Settings.from_env(home=home), read_only=True) as kb:
        r = data.Reader(kb)
        assert (data.qualified_count(r), data.synthetic_count(r)) == (1, 0)
        assert r.count("?u a luma:UnqualifiedChain ; luma:evidenceClass luma:Synthetic .") == n
        latest = boundary.build(kb)
        assert "Synthetic chain" not in latest.callout and "matvec-memory" in latest.callout
        chain = r.select("SELECT ?c WHERE { ?u luma:evidenceClass luma:Synthetic ; luma:about ?c } LIMIT 1")[0]["c"]
        one = boundary.build(kb, chain=chain)
        assert one.callout.startswith("**Synthetic chain") and "No deployment decision" in one.callout
        di = design_in.build(kb)
    facts = dict(di.facts)
    assert facts["PEX chains"].startswith("1 measured,") and facts["PEX chains"].endswith(f", {n} synthetic")
    assert facts["Qualified boundaries"] == "1" and "Synthetic boundaries" not in facts
    assert f"{n} synthetic PEX chains (generated, not measurements) are reported apart" in di.callout
    sections = {s.id: s for s in di.sections}
    assert sections["evidence-synthetic"].title == "Synthetic evidence (generated, not measurements)"
    assert f"{n} synthetic PEX chains, reported as unqualified" in sections["evidence-synthetic"].paragraphs[0]
    assert not any("synthetic" in p for p in sections["evidence-measured"].paragraphs)
    assert not any("(synthetic)" in cell for t in di.tables() if t.id == "table-qualified" for row in t.rows
                   for cell in row)
    assert any(f"{n} synthetic" in p and "never qualify" in p for p in sections["capabilities"].paragraphs)


def test_rendering_twice_gives_identical_bytes(full_home, tmp_path):
    for args in (("boundary", "--sprint", full_home["sprint"]), ("design-in",)):
        one = _report(full_home["home"], tmp_path / "one", *args)
        two = _report(full_home["home"], tmp_path / "two", *args)
        files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(two) for p in two.rglob("*") if p.is_file())
        for rel in files:
            assert (one / rel).read_bytes() == (two / rel).read_bytes(), rel
        shutil.rmtree(one)
        shutil.rmtree(two)


def test_errors_are_one_line(tmp_path, env):
    empty = tmp_path / "empty"
    assert _run(empty, "kb", "init").exit_code == 0  # a project with nothing in it
    # A KB without what the report needs is a failure (1); a name given that does not exist, a usage mistake (2).
    for args, text, code in ((("boundary",), "no qualified chain", 1), (("design-in",), "no PEX chains", 1),
                             (("boundary", "id:chain/0000"), "not a PEX chain", 2),
                             (("boundary", "--sprint", "nope"), "no sprint 'nope'", 2)):
        result = _run(empty, "report", *args, "--out", str(tmp_path / "x"))
        assert result.exit_code == code and text in result.output and "Traceback" not in result.output, result.output
    both = _run(empty, "report", "boundary", "id:chain/x", "--latest", "--out", str(tmp_path / "x"))
    assert both.exit_code == 2


def test_design_in_needs_the_rules_and_a_known_scope(full_home, demo_home, tmp_path):
    bare = tmp_path / "bare"
    assert _run(bare, "kb", "ingest", str(ROOT / "kb" / "examples" / "embedding-minilm.json")).exit_code == 0
    result = _run(bare, "report", "design-in", "--out", str(tmp_path / "x"))
    assert result.exit_code == 1 and "luma rules run" in result.output
    for scope in ("bogus", "partner:nobody-here"):
        result = _run(demo_home, "report", "design-in", "--scope", scope, "--out", str(tmp_path / "x"))
        assert result.exit_code == 1 and "--scope" in result.output, result.output


@pytest.mark.slow
def test_a_partner_scope_sees_its_own_records_only(tmp_path, env):
    home = tmp_path / "scoped"
    examples = ROOT / "kb" / "examples"
    assert _run(home, "kb", "ingest", str(examples / "embedding-minilm.json")).exit_code == 0
    added = _run(home, "partner", "add", str(examples / "partner-kv-compression.toml"),
                 str(examples / "partner-cxl-expander.toml"))
    assert added.exit_code == 0, added.output
    assert _run(home, "rules", "run").exit_code == 0
    seen = {}
    for scope in ("owner", "partner:kvzip-labs"):
        out = _report(home, tmp_path / scope.replace(":", "-"), "design-in", "--scope", scope)
        md = (out / "report.md").read_text()
        assert f"| Scope | {scope} |" in md
        seen[scope] = re.search(r"^\| intervention-parameters \| (\d+) \|$", md, re.M).group(1)
    assert seen == {"owner": "2", "partner:kvzip-labs": "1"}


# -- the HTML in a browser ------------------------------------------------------------------------

def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


class _Dom(HTMLParser):
    """Ids, tag counts and which figures hold an <svg>, from the DOM Chromium dumps."""

    def __init__(self):
        super().__init__()
        self.ids, self.tags, self.stack, self.figures_with_svg = set(), {}, [], set()
        self.repeated: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            if a["id"] in self.ids:
                self.repeated.append(a["id"])
            self.ids.add(a["id"])
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "svg":
            figure = next((i for t, i in reversed(self.stack) if t == "figure"), None)
            if figure:
                self.figures_with_svg.add(figure)
        if tag not in ("meta", "br", "img", "input", "path", "use", "stop", "rect", "circle", "line", "polyline"):
            self.stack.append((tag, a.get("id")))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break


def _dom(html: Path, tmp_path: Path) -> _Dom:
    binary = _chromium()
    if binary is None:
        pytest.skip("no chromium binary (Debian: apt-get install chromium)")
    proc = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--dump-dom", html.as_uri()],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert proc.returncode == 0 and "<html" in proc.stdout, proc.stderr[-2000:]
    dom = _Dom()
    dom.feed(proc.stdout)
    return dom


@pytest.mark.parametrize("kind", ["boundary", "design-in"])
def test_chromium_sees_every_section_table_and_plot(full_home, tmp_path, kind):
    args = ("boundary", "--sprint", full_home["sprint"]) if kind == "boundary" else ("design-in",)
    out = _report(full_home["home"], tmp_path / kind, *args)
    rep = _build(full_home["home"], kind, **({"sprint": full_home["sprint"]} if kind == "boundary" else {}))
    dom = _dom(out / "report.html", tmp_path)
    assert {s.id for s in rep.sections} <= dom.ids
    assert {t.id for t in rep.tables()} <= dom.ids
    assert dom.tags["table"] == len(rep.tables()) + 1  # + the facts table at the top
    plots = {p.id for p in rep.plots()}
    assert plots and plots <= dom.figures_with_svg
    assert dom.tags["svg"] == len(plots)
    assert "callout" in dom.ids and "title" in dom.ids and "facts" in dom.ids
    assert dom.repeated == []  # plots' own element ids included: each plot salts its hashes


def test_the_demo_runs_the_whole_loop_and_writes_the_three_reports(demo_home):
    # `luma demo`: sprint (measured), rules, query, partner record, and the three reports
    for kind in ("boundary", "design-in", "partner"):
        assert (demo_home / "reports" / kind / "report.html").is_file(), kind
        assert (demo_home / "reports" / kind / "report.md").is_file(), kind
    boundary = (demo_home / "reports" / "boundary" / "report.md").read_text()
    assert "Deploy" in boundary
    assert "**Verdict: gain.**" in (demo_home / "reports" / "partner" / "report.md").read_text()
    # Measured means signed (issue 14): no measured record of the demo lacks a verified
    # attestation, and the reports say which runner key measured each fact.
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.settings import Settings

    with KnowledgeBase.open(Settings.from_env(home=demo_home), read_only=True) as kb:
        unsigned = kb.store.select(
            "SELECT ?g WHERE { GRAPH ?g { ?g <https://w3id.org/luma/ns#evidenceClass> <https://w3id.org/luma/ns#Measured> }"
            " FILTER NOT EXISTS { GRAPH ?g { ?g <https://w3id.org/luma/ns#attestedBy> ?key } } }", union=False)
        signed = kb.store.select(
            "SELECT ?g ?name WHERE { GRAPH ?g { ?g <https://w3id.org/luma/ns#attestedBy> ?key } "
            "GRAPH ?t { ?key <https://w3id.org/luma/ns#runnerName> ?name } }", union=False)
    assert unsigned == [] and len(signed) >= 2  # the sprint's trials and its chain
    # The latest qualified chain: the demo's own sprint's, or the shipped evidence set's (its runner key).
    shown = [r["name"] for r in signed if f"measured by runner {r['name']}" in boundary]
    assert shown and f"| measured by (runner key) | {shown[0]}" in boundary
    assert f"| {shown[0]} |" in (demo_home / "reports" / "design-in" / "report.md").read_text()


@pytest.mark.slow
def test_running_the_demo_again_counts_its_sprint_once(demo_home, tmp_path):
    """Issue 15, item 19: a second `luma demo` in the same project measures nothing again, so the
    Design-In report still has one qualified boundary and no "recurring" remedy made of one sprint
    counted twice; its own refused record prints with the CLI's one error prefix."""
    def counts() -> list[str]:
        md = (demo_home / "reports" / "design-in" / "report.md").read_text()
        return re.findall(r"\| (?:Qualified boundaries|Recurring remedies) \| \d+ \|", md)

    first = counts()
    again = _run(demo_home, "demo", "--home", str(demo_home))
    assert again.exit_code == 0, again.output
    assert "already measured in this project" in again.output
    assert "\nError: " in again.output and "\nerror: " not in again.output
    # The same boundaries and remedies (the shipped set's and the demo's own sprint's), none twice.
    assert len(first) == 2 and counts() == first
