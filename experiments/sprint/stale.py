"""The closed loop's runner side (`luma sprint requalify`, issue 16 item 4): which qualified
boundaries are stale and how to measure each again, and which optimize runs a hardware change
calls for.

A stale boundary is re-run as the sprint that measured it: its contract, dimension, levels,
intervention and repetitions come from its sprint folder (`$LUMA_HOME/sprints/<id>/`, found by
the chain record's content hash), else from the chain record itself and the shipped contract of
its name. An optimize result is proposed again when this machine is not the hardware its latest
qualified optimum ran on (another architecture, CPU model, ISA, CPU count or accelerator), or a
measured machine record of that architecture came in after it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from luma.errors import ConfigError, ContractError, LumaError
from luma.experiments.sprint import contract as contracts
from luma.kb.query.named import get_named_query
from luma.kb.records.loader import validate_document
from luma.kb.vocab import ID, LUMA

_QB = ID + "graph/derived/qualified-boundary"
_QO = ID + "graph/derived/qualified-optimum"
#: Environment fields that describe the hardware (the rest are software: library versions).
HARDWARE = ("cpu_model", "isa", "logical_cpus", "usable_cpus", "machine", "accelerator")


@dataclass
class Target:
    """One boundary to measure again, and the sprint that does it."""

    chain: str
    contract: object  # luma.experiments.sprint.contract.Contract
    dimension: str
    levels: list[str]
    intervention: str | None
    repetitions: int
    stale: list[dict] = field(default_factory=list)  # the stale-boundaries rows about it
    source: str = ""  # where the plan came from (sprint folder or chain record)

    def key(self) -> tuple:
        """Two boundaries with the same key are measured again by one sprint."""
        return (json.dumps(self.contract.model_dump(mode="json"), sort_keys=True), self.dimension,
                tuple(self.levels), self.intervention, self.repetitions)


def stale_rows(kb) -> list[dict]:
    """The open stale boundaries (the `stale-boundaries` named query's rows)."""
    return kb.store.select(get_named_query("stale-boundaries").sparql)


def chain_hashes(kb, chains: list[str]) -> dict[str, str]:
    """{chain IRI: content hash of its pex-chain record}."""
    if not chains:
        return {}
    values = " ".join(f"<{c}>" for c in chains)
    rows = kb.store.select(f"SELECT ?chain ?h WHERE {{ VALUES ?chain {{ {values} }} GRAPH ?g {{ "
                           f"?g <{LUMA}recordKind> \"pex-chain\" ; <{LUMA}contentHash> ?h . ?chain a <{LUMA}BoundaryQualification> }} }}")
    return {r["chain"]: r["h"] for r in rows}


def chains_named(kb, refs: list[str]) -> list[str]:
    """The chain IRIs `refs` name (a chain IRI, its boundary's IRI, or the start of the chain's
    key, at least 8 hex digits), read from the chain records (so before any rule runs);
    ConfigError naming the first that names none or several."""
    rows = kb.store.select(f"SELECT ?chain WHERE {{ GRAPH ?g {{ ?g <{LUMA}recordKind> \"pex-chain\" . "
                           f"?chain a <{LUMA}BoundaryQualification> }} }}")
    known = sorted({r["chain"] for r in rows})
    out = []
    for ref in refs:
        ref = ref.strip().removesuffix("/qualified")
        hits = [c for c in known if c == ref or (len(ref) >= 8 and c.rsplit("/", 1)[-1].startswith(ref))]
        if len(hits) != 1:
            why = "no chain" if not hits else f"{len(hits)} chains"
            raise ConfigError(f"{why} matches {ref!r} (give a chain IRI or at least 8 hex digits of its key; "
                              "`luma kb query --name qualified-boundaries` lists them)", field="CHAIN")
        out.append(hits[0])
    return list(dict.fromkeys(out))


def unqualified(kb, chains: list[str]) -> list[str]:
    """Those of `chains` the rules did not qualify (there is no boundary to measure again)."""
    rows = kb.store.select(f"SELECT ?chain WHERE {{ GRAPH <{_QB}> {{ ?q <{LUMA}qualifies> ?chain }} }}")
    qualified = {r["chain"] for r in rows}
    return [c for c in chains if c not in qualified]


def sprint_folders(home: Path) -> dict[str, Path]:
    """{content hash of chain.json: its sprint folder} over `$LUMA_HOME/sprints/`."""
    out = {}
    for path in sorted((home / "sprints").glob("*/chain.json")):
        try:
            rec = validate_document(json.loads(path.read_text()), str(path), home)
        except (LumaError, ValueError, OSError):
            continue  # a folder the user edited: the chain record is the fallback
        out[rec.content_hash] = path.parent
    return out


def target(settings, chain: str, content_hash: str, folders: dict[str, Path], ledger) -> Target:
    """How to measure `chain` again (module docstring); ConfigError when nothing says how."""
    folder = folders.get(content_hash)
    if folder is not None and (folder / "sprint.json").is_file():
        run = json.loads((folder / "sprint.json").read_text())
        spec = run.get("contract_spec")
        c = contracts.Contract.model_validate(spec) if spec else contracts.load(run["contract"], settings)
        return Target(chain, c, run["dimension"], list(run["levels"]), run.get("intervention"),
                      int(run["repetitions"]), source=str(folder))
    entries = [e for e in ledger.entries([content_hash]) if e.kind == "pex-chain"]
    if not entries:
        raise ConfigError(f"chain {chain} has no record in the ledger", field="CHAIN")
    rec = json.loads(entries[0].payload)
    name = rec["contract"]["name"]
    shipped = contracts.shipped().get(name)
    if shipped is None:
        raise ConfigError(f"chain {chain}: no sprint folder under {settings.home / 'sprints'} and no shipped "
                          f"contract named {name!r}; run `luma sprint run CONTRACT_FILE` for it yourself",
                          field="CHAIN")
    c = contracts.load(shipped, settings)
    if c.record_contract() != rec["contract"]:
        raise ContractError(f"chain {chain}: the shipped contract {name!r} is not the one it was measured under",
                          field="CHAIN")
    levels = [x if isinstance(x, str) else f"{x.value:g} {x.unit}".strip() for x in (c.sprint.levels or [])] \
        if c.sprint else []
    if c.sprint is None or rec["crossed_dimension"] != c.sprint.dimension:
        raise ConfigError(f"chain {chain}: no levels known for dimension {rec['crossed_dimension']!r} "
                          "(no sprint folder)", field="CHAIN")
    return Target(chain, c, rec["crossed_dimension"], levels, rec["intervention"]["name"], int(rec["repetitions"]),
                  source="chain record")


def proposed_optimizations(kb, here_architecture: dict, here_environment: dict) -> list[dict]:
    """Optimize runs a hardware change calls for: per (workload, contract, state), the latest
    qualified optimum, when this machine is not the hardware it ran on, or a measured machine
    record of its architecture came in after it."""
    rows = kb.store.select(f"""SELECT ?o ?result ?workload ?contract ?state ?at ?arch ?archName ?h WHERE {{
      GRAPH <{_QO}> {{ ?o <{LUMA}qualifiesOptimum> ?result ; <{LUMA}workload> ?workload ;
        <{LUMA}contract> ?contract ; <{LUMA}machineState> ?state ; <{LUMA}measuredAt> ?at ;
        <{LUMA}architecture> ?arch }}
      ?arch <http://www.w3.org/2000/01/rdf-schema#label> ?archName .
      GRAPH ?g {{ ?result <{LUMA}evidenceClass> ?ec . ?g <{LUMA}recordKind> "optimize-result" ; <{LUMA}contentHash> ?h }} }}""")
    latest: dict[tuple, dict] = {}
    for r in rows:
        key = (r["workload"], r["contract"], r["state"])
        if key not in latest or r["at"] > latest[key]["at"]:
            latest[key] = r
    out = []
    for r in latest.values():
        entries = [e for e in kb.ledger.entries([r["h"]]) if e.kind == "optimize-result"]
        if not entries:
            continue
        rec = json.loads(entries[0].payload)
        then = rec.get("provenance", {}).get("environment") or {}
        reasons = []
        if r["archName"] != here_architecture.get("name"):
            reasons.append(f"measured on {r['archName']}, this machine is {here_architecture.get('name')}")
        else:
            changed = [k for k in HARDWARE if _norm(then.get(k)) != _norm(here_environment.get(k))]
            if changed:
                reasons.append("this machine's " + ", ".join(changed) + " changed since")
            newer = _newer_machine_records(kb, r["arch"], r["at"])
            if newer:
                reasons.append(f"{newer} measured machine record(s) of {r['archName']} came in since")
        if reasons:
            state = ",".join(f"{d}={_level(lv)}" for d, lv in rec["state"]["dimensions"].items())
            out.append({"optimum": r["o"], "contract": rec["contract"]["name"], "state": state,
                        "best": rec.get("best", {}).get("variant"), "measured_at": r["at"],
                        "reason": "; ".join(reasons)})
    return out


def _newer_machine_records(kb, arch: str, at: str) -> int:
    rows = kb.store.select(f"""SELECT (COUNT(DISTINCT ?m) AS ?n) WHERE {{ GRAPH ?g {{
      ?m a <{LUMA}MachineParameters> ; <{LUMA}architecture> <{arch}> ; <{LUMA}evidenceClass> <{LUMA}Measured> .
      ?g <{LUMA}recordKind> "machine" ; <http://www.w3.org/ns/prov#generatedAtTime> ?t }}
      FILTER(?t > "{at}"^^<http://www.w3.org/2001/XMLSchema#dateTime>) }}""")
    return int(rows[0]["n"]) if rows else 0


def _norm(value):
    return sorted(value) if isinstance(value, list) else value


def _level(level: dict) -> str:
    return str(level["value"]) if level.get("unit") is None else f"{level['value']:g} {level['unit']}"
