"""Fuzzing the record path as an attacker and a careless submitter would.

A seeded generator mutates valid records of every kind -- deleted keys, wrong types, extreme and
non-finite numbers, hostile unit strings, YAML aliases, deep nesting, odd bytes, duplicate keys,
huge strings -- writes each as a JSON, JSON Lines, YAML or TOML file and hands it to the CLI
(`luma kb ingest`, `luma partner add`) the way a user would. For every one of them:

* exit 0 (a record that is still valid is accepted) or exit 1 with exactly one line naming the
  file (and the field, where the mutation touched one), never a traceback; the measured seeds are
  signed by the project's runner key, so a mutation that leaves such a record valid but changes
  its content is refused for its signature (`attestation.signature`), as ingest must;
* bounded time (an alarm per record) and memory (a data-segment limit around the whole run);
* on refusal the ledger and the KB are exactly as they were (checked after every refusal for the
  ledger, every 100 files and at the end for the KB).
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import resource
import signal
import sqlite3
import time
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.kb.records import yaml_core
from luma.kb.records.loader import validate_document
from luma.kb.trust.runners import signer

ROOT = Path(__file__).resolve().parents[3]
MUTATED_RECORDS = 1000
SEED = int(os.environ.get("LUMA_FUZZ_SEED", "13"))
PER_RECORD_S = 30

HOSTILE_UNITS = ["10**10**10", "GiB/0", "1/0", "GiB**(1/0)", "ms/0", "W/0", "Gi\x00B", "", " ", "G" * 5000,
                 "(((((((((GiB)))))))))", "GiB^99999", "__import__('os').system('id')", "e", "1e400",
                 "GiB**-9999", "ms*" * 2000 + "ms", "nan", "inf", "\u202egib", "GiB\nms", "GHz", "kg", "%%"]
EXTREME_NUMBERS = [1e308, -1e308, 2**63, 2**64, -(2**63) - 1, -1, 0, 1e-320, 10**400, 3.5, -0.0]
NON_FINITE = [math.nan, math.inf, -math.inf]
WRONG_TYPES = [None, True, "text", 7, 1.5, [], {}, [1, 2], {"a": 1}]


def _seeds(key) -> list[tuple[str, dict]]:
    """(command, record) pairs: one valid record of every kind a user submits, the measured ones
    consistent and signed by `key` (a runner key the project trusts)."""
    load = lambda p: json.loads((ROOT / p).read_text())  # noqa: E731
    chain = load("kb/examples/embedding-minilm.json")
    trial = {
        "record_type": "pex-trial", "evidence_class": "measured", "sprint": "fuzz-sprint", "sequence": 0,
        "phase": "boundary", "workload": chain["workload"], "architecture": chain["architecture"],
        "contract": chain["contract"], "state": chain["pass_state"], "variant": "fp32", "verdict": "PASS",
        "attempts": 1, "observations": [  # a PASS on every clause of the contract, as re-judged at ingest
            {"metric": "completed_requests", "value": 1000, "unit": "request"},
            {"metric": "p99_latency", "value": 12.5, "unit": "ms"},
            {"metric": "p99_latency.ci_low", "value": 11.8, "unit": "ms"},
            {"metric": "p99_latency.ci_high", "value": 13.4, "unit": "ms"},
            {"metric": "throughput", "value": 55, "unit": "request/s"},
            {"metric": "cosine_similarity", "value": 0.995, "unit": "dimensionless"}],
        "provenance": {"tool": "luma sprint", "host": "fuzz"},
    }
    assert [c["metric"] for c in trial["contract"]["clauses"]] == ["p99_latency", "throughput", "cosine_similarity"]
    # Through JSON: TOML dates become the strings a JSON or YAML partner file would hold.
    partners = [json.loads(json.dumps(tomllib.loads((ROOT / p).read_text()), default=str)) for p in
                ("kb/examples/partner-kv-compression.toml", "kb/examples/partner-cxl-expander.toml")]
    records = [chain, load("tests/kb/data/full_chain.json"), load("tests/kb/data/kernel_result.json"), trial,
               load("experiments/machines/nvidia-h100-sxm5-80gb.json")]
    signed = [key.sign(r) if r["evidence_class"] == "measured" else r for r in records]
    assert sum("attestation" in r for r in signed) == 2  # the kernel result and the trial
    return [("ingest", r) for r in signed] + [("partner", p) for p in partners]


def _paths(node, prefix=()):
    """Every (path, value) in a record, the record itself included."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _set(doc, path, value):
    node = doc
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value


def _delete(doc, path):
    node = doc
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]


def _leaf(path) -> str | None:
    """The last key name of a path (what an error about it names)."""
    names = [p for p in path if isinstance(p, str)]
    return names[-1] if names else None


def mutate(rng: random.Random, record: dict) -> tuple[str, dict | None, str | None, str | None]:
    """(mutation, mutated record or None when the mutation is textual, key named, text mutation)."""
    doc = copy.deepcopy(record)
    paths = [p for p, _ in _paths(doc) if p]
    kind = rng.choice(["delete", "wrong-type", "extreme", "non-finite", "unit", "deep", "long-string",
                       "duplicate-key", "odd-bytes", "alias", "truncate", "record-type"])
    path = rng.choice(paths)
    if kind == "delete":
        _delete(doc, path)
        return kind, doc, _leaf(path), None
    if kind == "wrong-type":
        _set(doc, path, copy.deepcopy(rng.choice(WRONG_TYPES)))
        return kind, doc, _leaf(path), None
    numeric = [p for p, v in _paths(doc) if isinstance(v, (int, float)) and not isinstance(v, bool) and p]
    if kind in ("extreme", "non-finite") and numeric:
        path = rng.choice(numeric)
        _set(doc, path, rng.choice(EXTREME_NUMBERS if kind == "extreme" else NON_FINITE))
        return kind, doc, _leaf(path), None
    units = [p for p, v in _paths(doc) if p and p[-1] == "unit"]
    if kind == "unit" and units:
        path = rng.choice(units)
        _set(doc, path, rng.choice(HOSTILE_UNITS))
        return kind, doc, "unit", None
    if kind == "long-string":
        _set(doc, path, rng.choice(["x" * 2_000_000, "\u0000" * 10, "\ufffe" * 100]))
        return kind, doc, None, None
    if kind == "record-type":
        doc["record_type"] = rng.choice(["pex-chain", "pex-trial", "machine", "kernel-result", "nope", 3, None])
        # Another real type makes other fields wrong; an unknown one must be named.
        return kind, doc, None if doc["record_type"] in ("pex-chain", "pex-trial", "machine", "kernel-result") \
            else "record_type", None
    return kind, doc, None, kind  # textual mutations: applied to the file's text


def render(rng: random.Random, command: str, doc: dict, textual: str | None) -> tuple[str, bytes]:
    """(file suffix, bytes) of a (mutated) record in a format its command reads."""
    fmt = rng.choice(["json", "yaml", "toml"] if command == "partner" else ["json", "jsonl", "yaml"])
    if textual == "alias" or (textual is None and fmt == "yaml" and rng.random() < 0.1):
        fmt = "yaml"
    if fmt == "toml":
        try:
            text = _toml(doc)
        except (TypeError, ValueError):
            fmt, text = "json", json.dumps(doc)
    elif fmt == "yaml":
        text = yaml_core.dump(doc)
    elif fmt == "jsonl":
        text = json.dumps(doc) + "\n" + json.dumps(doc) + "\n"
    else:
        text = json.dumps(doc, indent=rng.choice([None, 2]))
    data = text.encode("utf-8", "surrogatepass")
    if textual == "duplicate-key":
        key = rng.choice(["record_type", "evidence_class", "unit", "value", "name"])
        if fmt == "yaml":
            data = data.replace(f"{key}:".encode(), f"{key}: 1\n{key}:".encode(), 1)
        elif fmt == "toml":
            data = data.replace(f"{key} =".encode(), f"{key} = 1\n{key} =".encode(), 1)
        else:
            data = data.replace(f'"{key}":'.encode(), f'"{key}": 1, "{key}":'.encode(), 1)
    elif textual == "odd-bytes":
        cut = rng.randrange(len(data))
        data = data[:cut] + rng.choice([b"\xff\xfe", b"\x00", b"\xc3", b"\xef\xbb\xbf", b"\x1b[2J", b"\r"]) + data[cut:]
    elif textual == "truncate":
        data = data[: rng.randrange(1, max(2, len(data)))]
    elif textual == "deep":
        depth = rng.choice([70, 300, 1200, 5000, 100_000])
        nest = b"[" * depth + b"1" + b"]" * depth
        if fmt == "yaml":
            data = b"deep: " + nest + b"\n" + data
        elif fmt == "toml":
            data = b"deep = " + nest + b"\n" + data
        else:
            data = data.replace(b"{", b'{"deep": ' + nest + b", ", 1)
    elif textual == "alias":
        anchor = b"base: &a {value: 1, unit: ms}\nother: *a\n" if rng.random() < 0.5 else \
            b"x: &x [1,2,3]\ny: [*x,*x,*x,*x,*x,*x,*x,*x]\n"
        data = anchor + data
    return fmt, data


def _toml(doc) -> str:
    """A small TOML writer (the standard library only reads TOML)."""
    lines: list[str] = []

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            if isinstance(v, float) and not math.isfinite(v):
                return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
        raise TypeError(type(v))

    for k, v in doc.items():
        lines.append(f"{json.dumps(k)} = {value(v)}")
    return "\n".join(lines) + "\n"


class _Alarm(Exception):
    pass


def _ledger_count(home: Path) -> int:
    db = home / "ledger.sqlite"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        try:
            return conn.execute("SELECT COUNT(*) FROM ledger_record").fetchone()[0]
        except sqlite3.OperationalError:
            return 0


def _kb_files(home: Path) -> list[tuple[str, int, int]]:
    """Every file of the KB (and its read snapshots) with size and modification time: a refused
    record must not even open it for writing."""
    out = []
    for root, _dirs, files in os.walk(home / "kb"):
        for name in files:
            st = os.stat(os.path.join(root, name))
            out.append((os.path.join(root, name), st.st_size, st.st_mtime_ns))
    snapshots = home / "kb-snapshots"
    out += [(name, 0, 0) for name in (sorted(os.listdir(snapshots)) if snapshots.is_dir() else [])]
    return sorted(out)


def _kb_state(home: Path) -> tuple[int, int, int]:
    """(graphs of records -- public and partners' --, quads, ledger records)."""
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.kb.store.partner_graphs import PARTNER_GRAPHS
    from luma.kb.vocab import RECORD_GRAPH
    from luma.settings import Settings

    with KnowledgeBase.open(Settings.from_env(home=home), read_only=True) as kb:
        st = kb.stats()
        rows = kb.store.select(f'SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE {{ GRAPH ?g {{ }} FILTER(STRSTARTS(STR(?g), '
                               f'"{RECORD_GRAPH}") || STRSTARTS(STR(?g), "{PARTNER_GRAPHS}")) }}', union=False)
        return int(rows[0]["n"]), st["quads"], st["ledger_records"]


@pytest.mark.slow
def test_a_thousand_mutated_records(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LUMA_HOME", str(home))
    for var in ("LUMA_DB_URL", "LUMA_KB_URL"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()
    assert runner.invoke(cli, ["kb", "init"]).exit_code == 0
    assert runner.invoke(cli, ["runner", "keygen", "--name", "fuzz-runner"]).exit_code == 0
    rng = random.Random(SEED)
    seeds = _seeds(signer(home, "fuzz-runner"))
    kb_state = _kb_state(home)
    accepted = refused = 0
    by_kind: dict[str, list[int]] = {}
    slowest = 0.0
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    # Memory: the whole run may grow this process by at most 2 GiB.
    with open("/proc/self/status") as fh:
        vm_data = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmData:"))
    resource.setrlimit(resource.RLIMIT_DATA, (vm_data + 2 * 2**30, hard))

    def alarm(*_):
        raise _Alarm

    old = signal.signal(signal.SIGALRM, alarm)
    try:
        for n in range(MUTATED_RECORDS):
            command, seed = seeds[n % len(seeds)]
            kind, doc, leaf, textual = mutate(rng, seed)
            fmt, data = render(rng, command, doc, textual)
            path = tmp_path / f"m{n:04d}.{fmt}"
            path.write_bytes(data)
            before, files = _ledger_count(home), _kb_files(home)
            args = ["kb", "ingest", str(path)] if command == "ingest" else ["partner", "add", str(path)]
            signal.alarm(PER_RECORD_S)
            t = time.perf_counter()
            try:
                result = runner.invoke(cli, args, catch_exceptions=True)
            except _Alarm:
                pytest.fail(f"{kind} mutation #{n} ({path.name}) ran over {PER_RECORD_S} s")
            finally:
                signal.alarm(0)
            slowest = max(slowest, time.perf_counter() - t)
            where = f"{kind} mutation #{n} ({path.name}, {command})"
            assert result.exception is None or isinstance(result.exception, SystemExit), \
                f"{where}: {type(result.exception).__name__}: {result.exception}"
            assert "Traceback" not in result.output, f"{where}: {result.output}"
            assert result.exit_code in (0, 1), f"{where}: exit {result.exit_code}: {result.output}"
            by_kind.setdefault(kind, [0, 0])[result.exit_code] += 1
            if result.exit_code == 0:
                accepted += 1
                kb_state = None  # read again at the next check
                continue
            refused += 1
            lines = [line for line in result.output.splitlines() if line.strip()]
            # One `Error:` line; a record with several problems lists them below it, indented, one
            # each (ingest reports every problem of a record in one run).
            assert lines[0].startswith("Error: ") and all(line.startswith("  ") for line in lines[1:]), \
                f"{where}: {result.output}"
            assert len(lines) == 1 or lines[0].endswith(" problems:"), f"{where}: {result.output}"
            assert str(path) in lines[0], f"{where}: the error does not name the file: {lines[0]}"
            lines = [" ".join(lines)]  # the checks below read the whole report
            if leaf is not None and kind in ("delete", "wrong-type", "unit", "record-type", "non-finite"):
                if "attestation.signature" in lines[0] and leaf not in lines[0]:
                    # Refused for its signature alone: only right for a signed record that is still
                    # valid but is no longer the record its runner signed.
                    assert "attestation" in seed, f"{where}: an unsigned record refused for a signature: {lines[0]}"
                    signed_hash = validate_document(seed, "seed").content_hash
                    assert validate_document(doc, "mutated").content_hash != signed_hash, \
                        f"{where}: the signed content did not change: {lines[0]}"
                else:
                    assert leaf in lines[0], f"{where}: the error does not name the field {leaf!r}: {lines[0]}"
            assert _ledger_count(home) == before, f"{where}: a refused record changed the ledger"
            assert _kb_files(home) == files, f"{where}: a refused record touched the KB"
            if n % 100 == 99:
                state = _kb_state(home)
                assert kb_state in (None, state), f"{where}: refused records changed the KB"
                assert state[0] == state[2], f"{where}: record graphs and ledger records differ"
                kb_state = state
    finally:
        signal.signal(signal.SIGALRM, old)
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    assert accepted + refused == MUTATED_RECORDS
    final = _kb_state(home)
    assert kb_state in (None, final)
    graphs, _quads, ledger = final
    assert graphs == ledger == _ledger_count(home)
    assert not list(home.glob("pending-ingest*")), "an ingest marker was left behind"
    print(f"fuzz seed {SEED}: {MUTATED_RECORDS} files, {refused} refused, {accepted} accepted, "
          f"slowest {slowest:.2f} s; by kind (accepted, refused): "
          + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(by_kind.items())))
