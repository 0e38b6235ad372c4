"""The LLM calibration as KB facts: the published figures it was fitted and checked on
(`luma:PublishedMeasurement`, vendor-claim: LUMA did not reproduce them) and the model's error on
the held-out ones (`luma:ModelError`, projected), each a Turtle document loaded like `luma kb load`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from luma.kb.knowledge_base import KnowledgeBase

DOUBLE = "<http://www.w3.org/2001/XMLSchema#double>"


def _lit(x) -> str:
    return json.dumps(str(x), ensure_ascii=False)


def turtle(doc: dict, cal: dict) -> tuple[str, str]:
    """(the published figures, the model's error on them) as Turtle: luma:PublishedMeasurement
    nodes with their source (vendor-claim), and luma:ModelError nodes per metric (projected)."""
    key = (cal.get("data_sha256") or hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest())[:16]
    # Relative: it resolves under the loaded document's own graph (kb/records/sealed.py: a document describes
    # only the nodes it brings).
    root = f"published-llm/{key}"
    head = ("@prefix luma: <https://w3id.org/luma/ns#> .\n@prefix qudt: <http://qudt.org/schema/qudt/> .\n"
            "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n")
    lines = [head, f'<{root}> a luma:PublishedMeasurementSet ; rdfs:label "published LLM serving measurements" .']
    for k, src in sorted((doc.get("sources") or {}).items()):
        lines.append(f"<{root}/source/{k}> a luma:SourceDocument ; luma:sourceTitle {_lit(src['title'])} ; "
                     f"luma:sourceUrl {_lit(src['url'])} ; luma:sourceRetrieved {_lit(src['read'])} .")
    for i, r in enumerate(doc["records"]):
        lines.append(
            f"<{root}/record/{i}> a luma:PublishedMeasurement ; luma:source <{root}/source/{r['source']}> ;\n"
            f"    rdfs:label {_lit(r['id'])} ; luma:modelName {_lit(r['model'])} ; luma:machineName {_lit(r['machine'])} ;\n"
            f"    luma:deviceCount {int(r['count'])} ; luma:precision {_lit(r['precision'])} ; "
            f"luma:scenario {_lit(r['scenario'])} ; luma:concurrency {int(r['concurrency'])} ;\n"
            f"    luma:promptTokens {int(r['context'])} ; luma:newTokens {int(r['new_tokens'])} ; "
            f"luma:metric {_lit(r['metric'])} ; qudt:numericValue \"{float(r['value'])!r}\"^^{DOUBLE} ;\n"
            f"    luma:unitText {_lit(r['unit'])} ; luma:calibrationSet {_lit(r['set'])} .")
    errs = [head, f'<{root}/model> a luma:ModelCalibration ; rdfs:label "LLM serving model fitted to published measurements" .']
    fields = (("median", "heldOutMedianRelativeError"), ("p90", "heldOutP90RelativeError"),
              ("max", "heldOutMaxRelativeError"), ("bias", "heldOutMedianSignedError"))
    for metric, e in sorted(cal["errors"]["held-out"].items()):
        props = ['luma:contractName "llm-serving"', f"luma:metric {_lit(metric)}", f"luma:trials {int(e['n'])}"]
        props += [f'luma:{p} "{float(e[k]):.6g}"^^{DOUBLE}' for k, p in fields]
        errs.append(f"<{root}/model/{metric}> a luma:ModelError ;\n    " + " ;\n    ".join(props) + " .")
    return "\n".join(lines) + "\n", "\n".join(errs) + "\n"


def record(project, cal: dict) -> list[Path]:
    """Load the published figures (vendor-claim) and the error facts (projected) into the KB."""
    measurements, errors = turtle(cal["_doc"], cal)
    out = [project.home / "model" / "published-llm.ttl", project.home / "model" / "llm-calibration-errors.ttl"]
    out[0].write_text(measurements)
    out[1].write_text(errors)
    with KnowledgeBase.open(project) as kb:
        kb.load_rdf(out[0], "turtle", "vendor-claim", submitter="luma model calibrate --llm")
        kb.load_rdf(out[1], "turtle", "projected", submitter="luma model calibrate --llm")
    return out
