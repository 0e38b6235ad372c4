"""Untrusted input files (DESIGN §8): only a regular file within its kind's size limit is read,
and never by a blocking open; nesting is capped; no key may be stated twice; YAML is read by the
1.2 core schema, without anchors or aliases. Each bad file is refused whole: one line naming the
file (and the record and field where there is one), exit code 1, nothing written.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import ConfigError, RecordError
from luma.experiments.sprint import contract as contracts
from luma.experiments.model import space as spaces
from luma.kb.trust.partners import read_partner_files
from luma.kb.records.documents import MAX_DEPTH, _too_deep, parse_json
from luma.kb.records.loader import read_documents
from luma.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).parents[1] / "data"
VALID_JSON = DATA / "valid_chain.json"
VALID_YAML = DATA / "valid_chain.yaml"
KV = ROOT / "kb" / "examples" / "partner-kv-compression.toml"
_LOCATION_VARS = ("LUMA_DB_URL", "LUMA_KB_URL", "LUMA_KB_QUERY_URL", "LUMA_KB_UPDATE_URL", "LUMA_KB_STORE_URL")


# -- helpers -------------------------------------------------------------------------------------


def luma(*args):
    """`luma ARGS` in-process; an exception that is not a clean exit fails the test."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def state() -> tuple:
    """What a refused file must leave untouched: the ledger's rows and every quad of the KB."""
    stats = json.loads(luma("kb", "stats", "--format", "json").stdout)
    return stats["ledger_records"], luma("kb", "export").output


def assert_one_line(result, *fragments: str) -> None:
    assert result.exit_code == 1, (result.exit_code, result.output)
    err = result.stderr
    assert err.startswith("Error: ") and err.count("\n") == 1 and "Traceback" not in err, repr(err)
    assert all(f in err for f in fragments), (fragments, err)


def _limited_memory() -> None:
    # Before the fix these commands read /dev/zero until memory ran out: keep that bounded.
    resource.setrlimit(resource.RLIMIT_DATA, (4 << 30, 4 << 30))


def luma_process(*args, home: Path) -> subprocess.CompletedProcess:
    """`luma ARGS` as its own process: what would block or read forever cannot stall the tests."""
    env = {k: v for k, v in os.environ.items() if k not in _LOCATION_VARS} | {"LUMA_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "luma.cli.main", *map(str, args)], env=env, capture_output=True,
                          text=True, timeout=60, preexec_fn=_limited_memory)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A project holding the valid chain (measured: signed by the project's runner key), and its state."""
    home = tmp_path_factory.mktemp("input-files") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LUMA_HOME", str(home))
        for var in (*_LOCATION_VARS, "LUMA_RUNNER_KEY"):
            mp.delenv(var, raising=False)
        assert luma("runner", "keygen", "--name", "test-runner").exit_code == 0
        signed = home.parent / "signed"
        assert luma("runner", "sign", VALID_JSON, "--out", signed).exit_code == 0
        assert luma("kb", "ingest", signed / VALID_JSON.name).exit_code == 0
        return home, state()


@pytest.fixture
def seeded(template, tmp_path, monkeypatch):
    """A fresh copy of the template project as LUMA_HOME; returns its state."""
    home = tmp_path / "home"
    shutil.copytree(template[0], home)
    monkeypatch.setenv("LUMA_HOME", str(home))
    for var in _LOCATION_VARS:
        monkeypatch.delenv(var, raising=False)
    return template[1]


def chain_json(**replace: str) -> str:
    """The valid chain as one JSON line, with text replacements {old: new} (each must apply)."""
    text = json.dumps(json.loads(VALID_JSON.read_text()))
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def chain_yaml(*replace: tuple[str, str]) -> str:
    text = VALID_YAML.read_text()
    for old, new in replace:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


# -- what is read: regular files only, within the limit, never blocking --------------------------


@pytest.mark.parametrize("kind", ["character device", "directory", "socket"])
def test_a_file_that_is_not_regular_is_refused(kind, seeded, tmp_path):
    path = tmp_path / "x.json"
    if kind == "character device":
        path.symlink_to("/dev/null")  # before: read as an empty file
    elif kind == "directory":
        path.mkdir()
    else:
        if len(str(path)) >= 100:
            pytest.skip("socket path too long for AF_UNIX")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    with pytest.raises(RecordError) as caught:
        list(read_documents(path))
    assert str(caught.value) == f"{path}: not a regular file ({kind})"
    with pytest.raises(RecordError, match=rf"not a regular file \({kind}\)"):
        read_partner_files([path])
    if kind != "directory":  # a directory is a usage error to click (exit 2)
        assert_one_line(luma("kb", "ingest", path), f"{path}: not a regular file ({kind})")
        assert state() == seeded


@pytest.mark.slow
def test_devices_and_fifos_are_refused_at_once(seeded, tmp_path):
    """Before: /dev/zero was read until memory ran out, a FIFO waited forever for a writer."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    links = {"zero.json": "/dev/zero", "random.jsonl": "/dev/urandom", "zero.ttl": "/dev/zero",
             "fifo.yaml": fifo, "fifo.rq": fifo}
    for name, target in links.items():
        (tmp_path / name).symlink_to(target)
    for args in [("kb", "ingest", "zero.json"), ("kb", "ingest", "fifo.json"), ("kb", "ingest", "random.jsonl"),
                 ("kb", "load", "zero.ttl", "--evidence-class", "simulated"), ("partner", "add", "fifo.yaml"),
                 ("kb", "query", "--file", "fifo.rq")]:
        path = tmp_path / next(a for a in args if "." in a)
        proc = luma_process(*(tmp_path / a if a == path.name else a for a in args), home=Path(os.environ["LUMA_HOME"]))
        what = "FIFO" if path.name.startswith("fifo") else "character device"
        assert (proc.returncode, proc.stderr) == (1, f"Error: {path}: not a regular file ({what})\n"), proc.stderr[-2000:]
    assert state() == seeded


def test_contract_and_space_files_are_read_as_untrusted(tmp_path, monkeypatch):
    fifo = tmp_path / "contract.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"contract\.toml: not a regular file \(FIFO\)"):
        contracts.load(fifo)
    with pytest.raises(ConfigError, match=r"contract\.toml: not a regular file \(FIFO\)"):
        spaces.load(fifo, contracts.load("matvec-memory"))
    shipped = contracts.shipped()["matvec-memory"]
    monkeypatch.setenv("LUMA_MAX_CONFIG_FILE_BYTES", "10")
    contracts.load(shipped)  # a library call without settings keeps the default limit
    with pytest.raises(ConfigError) as caught:
        contracts.load(shipped, Settings.from_env())  # the command's settings carry the user's
    assert str(caught.value) == (f"{shipped}: file is over the contract and space file limit of 10 bytes "
                                 "(LUMA_MAX_CONFIG_FILE_BYTES)")
    deep = tmp_path / "deep.toml"
    deep.write_text("name = " + "[" * 2000 + "]" * 2000 + "\n")  # before: RecursionError
    monkeypatch.delenv("LUMA_MAX_CONFIG_FILE_BYTES")
    with pytest.raises(ConfigError, match=f"deep.toml: nested deeper than {MAX_DEPTH} levels"):
        contracts.load(deep)


def test_the_size_limit_holds_whatever_the_file_system_says(seeded, tmp_path, monkeypatch):
    status = tmp_path / "status.json"
    status.symlink_to("/proc/self/status")  # a regular file of size 0, with a kilobyte in it
    monkeypatch.setenv("LUMA_MAX_RECORD_FILE_BYTES", "64")
    assert_one_line(luma("kb", "ingest", status),
                    f"{status}: file is over the limit of 64 bytes (LUMA_MAX_RECORD_FILE_BYTES)")
    monkeypatch.delenv("LUMA_MAX_RECORD_FILE_BYTES")
    query = tmp_path / "q.rq"
    query.write_text("SELECT * WHERE { ?s ?p ?o } LIMIT 1\n")
    monkeypatch.setenv("LUMA_MAX_QUERY_FILE_BYTES", "16")
    assert_one_line(luma("kb", "query", "--file", query),
                    f"{query}: file is over the query file limit of 16 bytes (LUMA_MAX_QUERY_FILE_BYTES)")
    assert state() == seeded


# -- nesting ---------------------------------------------------------------------------------------


def _deep_yaml(levels: int) -> str:
    return "record_type: pex-chain\nnotes:\n" + "".join("  " * i + "-\n" for i in range(1, levels)) + "  " * levels + "- x\n"


DEEP = {  # name: (file name, content, fragments of the one-line error)
    "json": ("deep.json", '{"notes": ' + "[" * 2000 + "]" * 2000 + "}", ["nested deeper than 64 levels"]),
    "jsonl": ("deep.jsonl", chain_json() + "\n" + "[" * 2000 + "]" * 2000 + "\n", ["deep.jsonl: line 2: nested deeper"]),
    "jsonl-under-pydantic-limit": ("deep.jsonl", '{"record_type": "pex-chain", "notes": ' + "[" * 100 + "]" * 100 + "}",
                                   ["line 1: nested deeper than 64 levels"]),
    "yaml": ("deep.yaml", _deep_yaml(100), ["invalid YAML: line", "nested deeper than 64 levels"]),
    "toml": ("deep.toml", "notes = " + "[" * 2000 + "]" * 2000 + "\n", ["deep.toml: nested deeper than 64 levels"]),
}


@pytest.mark.parametrize("case", list(DEEP))
def test_deep_nesting_is_refused(case, seeded, tmp_path):
    name, content, fragments = DEEP[case]
    path = tmp_path / name
    path.write_text(content)
    assert_one_line(luma("kb", "ingest", path), str(path), *fragments)
    assert state() == seeded


def test_nesting_is_counted_outside_strings():
    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(at_limit, "x.json") is not None
    with pytest.raises(RecordError, match=f"x.json: nested deeper than {MAX_DEPTH} levels"):
        parse_json("[" + at_limit + "]", "x.json")
    assert parse_json(json.dumps({"text": "[{" * 500}), "x.json") == {"text": "[{" * 500}


_TRICKY_TEXT = st.text(alphabet='[]{}"\\\nab:,', max_size=12)


@given(st.recursive(st.none() | st.integers() | _TRICKY_TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY_TEXT, inner, max_size=3),
                    max_leaves=40),
       st.integers(0, 70), st.booleans())
@settings(max_examples=300, deadline=None)
def test_the_depth_check_counts_the_brackets_of_any_document_exactly(doc, wrap, in_object):
    # Brackets, quotes and backslashes inside keys and strings, escaped or not, never count.
    for _ in range(wrap):
        doc = {"k\\\"[": doc} if in_object else [doc, "]\\"]
    text = json.dumps(doc, ensure_ascii=in_object)
    if not _too_deep(doc):  # the parsed documents' own check (TOML's), the reference
        assert parse_json(text, "x.json") == doc
    else:
        with pytest.raises(RecordError, match="nested deeper"):
            parse_json(text, "x.json")


# -- duplicate keys --------------------------------------------------------------------------------


_CLAUSE_UNIT = ('"unit": "ms"', '"unit": "s", "unit": "ms"')
DUPLICATES = {  # name: (file name, content, the one-line error after the path)
    "json": ("dup.json", chain_json(**dict([_CLAUSE_UNIT])), ": contract.clauses[0]: duplicate key 'unit'"),
    "json-list": ("dup.json", "[" + chain_json() + ", " + chain_json(**dict([_CLAUSE_UNIT])) + "]",
                  ": record 2: contract.clauses[0]: duplicate key 'unit'"),
    # The JSON Lines fast path: pydantic alone would keep the second, and forge a measured record.
    "jsonl-top-level": ("dup.jsonl", "\n" + chain_json(**{'"evidence_class": "measured"':
                                                          '"evidence_class": "vendor-claim", "evidence_class": "measured"'}),
                        ": line 2: duplicate key 'evidence_class'"),
    "jsonl-same-value": ("dup.jsonl", chain_json(**{'"recovered": true': '"recovered": true, "recovered": true'}),
                         ": line 1: duplicate key 'recovered'"),
    "yaml": ("dup.yaml", chain_yaml(("unit: ms}", "unit: s, unit: ms}")), ": contract.clauses[0]: duplicate key 'unit' (line 15)"),
    "yaml-top-level": ("dup.yaml", chain_yaml(("recovered: true", "recovered: true\nrecovered: TRUE")),
                                  ": duplicate key 'recovered' (line 31)"),
}


@pytest.mark.parametrize("case", list(DUPLICATES))
def test_duplicate_keys_are_refused(case, seeded, tmp_path):
    name, content, message = DUPLICATES[case]
    path = tmp_path / name
    path.write_text(content)
    result = luma("kb", "ingest", path)
    assert_one_line(result)
    assert result.stderr == f"Error: {path}{message}\n"
    assert state() == seeded


def test_toml_refuses_duplicate_keys_itself(seeded, tmp_path):
    text = KV.read_text()
    path = tmp_path / "dup.toml"
    path.write_text(text.replace('name = "kvzip"\n', 'name = "kvzip"\nname = "kvzip2"\n', 1))
    assert_one_line(luma("partner", "add", path), f"{path}: invalid TOML: Cannot overwrite a value (at line 7")
    assert state() == seeded


# -- YAML: no anchors or aliases, the 1.2 core schema -----------------------------------------------


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 6)]
    return VALID_YAML.read_text() + "notes:\n" + "".join(f"  {line}\n" for line in lines)


def test_yaml_anchors_and_aliases_are_refused(seeded, tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    anchor = len(VALID_YAML.read_text().splitlines()) + 2  # the `a0: &a0` line, after `notes:`
    assert_one_line(luma("kb", "ingest", bomb), f"{bomb}: invalid YAML: line {anchor}, column 7: anchors and aliases")
    shared = tmp_path / "shared.yaml"  # a valid record but for the alias: before, it was ingested
    shared.write_text(chain_yaml(("compute: {value: 2", "compute: &two-cores {value: 2"),
                                 ("compute: {value: 2, unit: core}", "compute: *two-cores")))
    assert_one_line(luma("kb", "ingest", shared), f"{shared}: invalid YAML: line 19, column 14: anchors and aliases")
    partner = tmp_path / "partner.yaml"
    doc = yaml.safe_dump(tomllib.loads(KV.read_text()), sort_keys=False)
    doc = doc.replace("data_classes:\n- kv-cache", "data_classes:\n- &kv kv-cache", 1).replace(
        "data_class: kv-cache", "data_class: *kv", 1)
    assert "*kv" in doc and "&kv" in doc
    partner.write_text(doc)
    assert_one_line(luma("partner", "add", partner), f"{partner}: invalid YAML: line", "anchors and aliases")
    assert state() == seeded


def test_ampersands_and_stars_in_yaml_text_are_not_aliases(tmp_path):
    path = tmp_path / "text.yaml"
    path.write_text(chain_yaml(("vendor: AMD", 'vendor: "R&D *labs*"'), ("name: int8-weights", "name: int8 & more*")))
    (_, doc), = read_documents(path)
    assert doc["architecture"]["vendor"] == "R&D *labs*" and doc["intervention"]["name"] == "int8 & more*"


#: Plain scalars YAML 1.1 and 1.2 read alike: their value.
SAME_IN_1_1_AND_1_2 = {
    "true": True, "True": True, "TRUE": True, "false": False, "FALSE": False,
    "~": None, "null": None, "Null": None, "": None, "y": "y", "hello": "hello",
    "0x1F": 31, "0": 0, "-7": -7, "+3": 3, "2.5": 2.5, ".5": 0.5, "1.0e+3": 1000.0, "-.inf": -math.inf,
    ".Inf": math.inf,
}
#: Plain scalars they read differently (PyYAML's 1.1 reading in comments): refused, never guessed.
READ_DIFFERENTLY = [
    "1:30",  # 90
    "yes", "no", "on", "off",  # booleans
    "2025-01-02",  # a date
    "012",  # 10 (octal); 12 in 1.2
    "1_000",  # 1000
    "0b101",  # 5
    "1e3", "2e16739",  # strings (a git revision PyYAML's safe_dump leaves unquoted); numbers in 1.2
    "0o17",  # a string; 15 in 1.2
]


def test_yaml_scalars_resolve_by_the_core_schema(tmp_path):
    path = tmp_path / "scalars.yaml"
    keys = list(SAME_IN_1_1_AND_1_2)
    path.write_text("".join(f"k{i}: {text}\n" for i, text in enumerate(keys)) + "nan: .nan\n")
    (_, doc), = read_documents(path)
    assert {keys[int(k[1:])]: v for k, v in doc.items() if k != "nan"} == SAME_IN_1_1_AND_1_2
    assert math.isnan(doc["nan"])
    for tagged in ("!!timestamp 2025-01-02", "!!binary aGk=", "!!set {a}", "!!bool yes", "!!int 1:30", "!python/none"):
        path.write_text(f"x: {tagged}\n")
        with pytest.raises(RecordError, match=r"scalars\.yaml: invalid YAML: line 1, column 4: "):
            list(read_documents(path))


@pytest.mark.parametrize("text", READ_DIFFERENTLY)
def test_yaml_scalars_that_1_1_reads_otherwise_are_refused_naming_the_field(text, tmp_path):
    path = tmp_path / "scalars.yaml"
    path.write_text(f"a:\n  b: [1, {text}]\n")
    with pytest.raises(RecordError, match=r"in YAML 1\.1: quote it \(line 2\)") as err:
        list(read_documents(path))
    assert err.value.field == "a.b[1]"
    path.write_text(f'a:\n  b: [1, "{text}"]\n')  # quoted, it is the string it says
    assert [doc for _, doc in read_documents(path)] == [{"a": {"b": [1, text]}}]


@pytest.mark.parametrize("text, field", [("repetitions: 1:30", "repetitions"), ("recovered: yes", "recovered"),
                                         ("recovered: on", "recovered")])
def test_yaml_1_1_values_are_refused_naming_the_field(text, field, seeded, tmp_path):
    path = tmp_path / "old.yaml"
    key = text.split(":")[0]
    path.write_text(chain_yaml((f"{key}: {'3' if key == 'repetitions' else 'true'}", text)))
    assert_one_line(luma("kb", "ingest", path), f"{path}: {field}: ", "quote it")
    assert state() == seeded


def test_shipped_yaml_means_the_same_in_yaml_1_1_and_1_2():
    """The examples never relied on YAML 1.1 resolution: their content (and hashes) did not change."""
    files = sorted((ROOT / "kb" / "examples").glob("*.yaml")) + sorted(DATA.glob("*.yaml"))
    assert files
    for path in files:
        old = [d for d in yaml.load_all(path.read_text(), Loader=yaml.SafeLoader) if d is not None]
        new = [doc for _, doc in read_documents(path)]
        assert [item for d in old for item in (d if isinstance(d, list) else [d])] == new, path


# -- JSON Lines: lines are split at newlines only -----------------------------------------------


def test_a_json_lines_string_may_hold_a_unicode_line_separator(tmp_path):
    path = tmp_path / "sep.jsonl"
    path.write_text('{"note": "a\u2028b\u0085c"}\n{"note": 2}\n', encoding="utf-8")
    docs = [(label, doc.parse()) for label, doc in read_documents(path)]
    assert docs == [("line 1", {"note": "a\u2028b\u0085c"}), ("line 2", {"note": 2})]
