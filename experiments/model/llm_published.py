"""Published LLM-serving measurements: the files calibration fits on, their format and checks.

`published/llm-serving*.json` hold measured figures that vendors, serving-engine projects and
benchmark suites published (vendor-claim evidence: LUMA did not reproduce them), each record
with its source and the setting it was measured in: model, machine and deployment shape
(replicas × tensor × pipeline, expert parallel), engine, precisions, batching, arrivals (a
closed loop of N clients, Poisson/gamma arrivals at a rate, offline), lengths (fixed, or a mix
by dataset preset or stated statistics), the metric and its statistic. A split is frozen in the
files: whole sources marked `holdout` are never fitted, and within the others every third record
of each (source, metric) is held out. Every problem is one ContractError naming record and field.
The files' median and p99 pairs give the p95/p50 tails calibration applies (`tails`).
"""

from __future__ import annotations

import importlib.resources
import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from luma.errors import ContractError, LumaError
from luma.experiments.model import hardware, lengths, llm_config
from luma.kb.records.machine_catalog import load_machine

#: metric -> (the model's figure it checks, units a record may give it in)
METRICS = {"token_throughput": ("token_throughput", ("token/s",)),
           "token_throughput_per_device": ("token_throughput", ("token/s",)),
           "total_token_throughput": ("token_throughput", ("token/s",)),
           "request_throughput": ("throughput", ("request/s",)),
           "ttft": ("ttft", ("ms", "s")), "tpot": ("tpot", ("ms", "s")), "latency": ("latency", ("ms", "s"))}
SCENARIOS = ("static", "closed-loop", "max-throughput", "poisson")
STATISTICS = ("value", "mean", "median", "p90", "p95", "p99")
SCALE = {"ms": 1e-3, "s": 1.0, "token/s": 1.0, "request/s": 1.0}
#: Serving engines a record or a state names, with what each does by default that the model
#: needs: continuous (in-flight) batching, and how many tokens a step prefills when the engine
#: chunks prompts (`max_num_batched_tokens` and its kin), and the most sequences a step runs where
#: the engine caps them by count (`max_num_seqs`), as the engines document their defaults.
ENGINES = {
    "vllm": {"batching": "chunked", "chunk": 8192, "max_batch": 256,
             "source": "vLLM engine arguments: chunked prefill on (V1), max_num_batched_tokens 8192 for the "
                       "OpenAI server on large GPUs, max_num_seqs 256 "
                       "(https://docs.vllm.ai/en/latest/configuration/engine_args.html)"},
    "tensorrt-llm": {"batching": "continuous", "chunk": 8192,
                     "source": "TensorRT-LLM in-flight batching, max_num_tokens 8192 by default, context chunking off "
                               "(https://nvidia.github.io/TensorRT-LLM/performance/performance-tuning-guide/)"},
    "sglang": {"batching": "chunked", "chunk": 8192,
               "source": "SGLang server arguments: chunked_prefill_size 8192 on large GPUs "
                         "(https://docs.sglang.ai/advanced_features/server_arguments.html)"},
    "lmdeploy": {"batching": "chunked", "chunk": 8192,
                 "source": "LMDeploy TurboMind max_prefill_token_num 8192 "
                           "(https://lmdeploy.readthedocs.io/en/latest/api/pipeline.html)"},
    "tgi": {"batching": "chunked", "chunk": 4096,
            "source": "TGI launcher max_batch_prefill_tokens 4096 "
                      "(https://huggingface.co/docs/text-generation-inference/reference/launcher)"},
    "llama.cpp": {"batching": "chunked", "chunk": 2048,
                  "source": "llama.cpp server n_batch 2048 (logical batch) "
                            "(https://github.com/ggml-org/llama.cpp/tree/master/tools/server)"},
}
BATCHINGS = ("static", "continuous", "chunked")


def shipped_paths() -> list[Path]:
    """The shipped files of published figures, in name order (llm-serving.json first)."""
    root = importlib.resources.files("luma.experiments.model.published")
    return sorted((Path(str(p)) for p in root.iterdir()
                   if p.name.startswith("llm-serving") and p.name.endswith(".json")), key=lambda p: p.name)


def shipped_bytes() -> bytes:
    """The shipped files' bytes, concatenated in order (what a calibration's data hash covers)."""
    return b"".join(p.read_bytes() for p in shipped_paths())


def read_shipped() -> dict:
    """Every shipped file, checked and merged into one document."""
    doc: dict = {}
    for p in shipped_paths():
        one = read_published(p)
        doc = one if not doc else merge(doc, one, str(p))
    return doc


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def read_published(path: Path) -> dict:
    """One file of published figures, checked: every record names a known source, model preset,
    machine, engine, setting, metric in a unit that fits it, and a positive value."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ContractError(f"cannot read published figures: {exc}", source=str(path)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        raise ContractError("needs a 'records' list (and 'sources')", source=str(path), field="records")
    sources = doc.get("sources") or {}
    if not isinstance(sources, dict):
        raise ContractError("sources is a table of source key -> source", source=str(path), field="sources")
    for key, src in sources.items():
        for f in ("title", "url", "read"):
            if not isinstance(src, dict) or not str(src.get(f) or "").strip():
                raise ContractError(f"source {key!r} needs a {f}", source=str(path), field=f"sources.{key}.{f}")
        if not str(src["url"]).startswith(("https://", "http://")):
            raise ContractError("url must be http(s)", source=str(path), field=f"sources.{key}.url")
        if src.get("engine") is not None and engine_of(src["engine"]) is None:
            raise ContractError(f"unknown engine {src['engine']!r} (known: {', '.join(ENGINES)})", source=str(path),
                                field=f"sources.{key}.engine")
        if not isinstance(src.get("holdout", False), bool):
            raise ContractError("holdout is true or false", source=str(path), field=f"sources.{key}.holdout")
    ids = set()
    for i, r in enumerate(doc["records"]):
        _check(r, f"records[{i}]", sources, str(path))
        if r["id"] in ids:
            raise ContractError(f"id {r['id']!r} repeats", source=str(path), field=f"records[{i}].id")
        ids.add(r["id"])
    for i, t in enumerate(doc.get("tails") or []):
        where = f"tails[{i}]"
        if t.get("source") not in sources:
            raise ContractError(f"unknown source {t.get('source')!r}", source=str(path), field=f"{where}.source")
        if t.get("metric") not in ("ttft", "tpot") or not _positive(t.get("p50")) or not _positive(t.get("p99")) \
                or t["p99"] < t["p50"]:
            raise ContractError("a tail names ttft or tpot and p50 <= p99, both positive", source=str(path), field=where)
        if t.get("set") not in ("calibration", "held-out"):
            raise ContractError("set must be calibration or held-out", source=str(path), field=f"{where}.set")
    return doc


def engine_of(text) -> str | None:
    """The engine key a source's or record's engine text names (its first word), if known."""
    if not isinstance(text, str) or not text.strip():
        return None
    head = text.strip().split()[0].rstrip(",:;").lower()
    aliases = {"trt-llm": "tensorrt-llm", "tensorrt-llm": "tensorrt-llm", "nvidia": "tensorrt-llm",
               "llama-cpp": "llama.cpp", "text-generation-inference": "tgi"}
    head = aliases.get(head, head)
    return head if head in ENGINES else None


def _check(r: dict, where: str, sources: dict, path: str) -> None:
    def bad(field: str, why: str):
        raise ContractError(why, source=path, field=f"{where}.{field}")

    if not isinstance(r, dict):
        raise ContractError("a record is a table", source=path, field=where)
    if not isinstance(r.get("id"), str) or not r["id"]:
        bad("id", "needs an id")
    if r.get("source") not in sources:
        bad("source", f"unknown source {r.get('source')!r} (known: {', '.join(sources)})")
    if r.get("model") not in llm_config.PRESETS:
        bad("model", f"unknown model {r.get('model')!r} (presets: {', '.join(llm_config.PRESETS)})")
    try:
        m = machine(str(r.get("machine")))
    except LumaError as exc:
        bad("machine", exc.message)
    if r.get("precision") in hardware.PRECISION_BYTES and \
            not math.isfinite(hardware.figures(m, r["precision"])["flops"]):
        bad("machine", f"{r['machine']} states no {hardware.COMPUTE_PRECISION[r['precision']]} compute figure: the "
                       "model cannot predict a figure measured on it at this precision")
    for f in ("precision", "kv_precision"):
        if r.get(f) not in hardware.PRECISION_BYTES:
            bad(f, f"unknown precision {r.get(f)!r}")
    if r.get("scenario") not in SCENARIOS:
        bad("scenario", f"unknown scenario {r.get('scenario')!r} (known: {', '.join(SCENARIOS)})")
    if r.get("metric") not in METRICS:
        bad("metric", f"unknown metric {r.get('metric')!r} (known: {', '.join(METRICS)})")
    if r.get("unit") not in METRICS[r["metric"]][1]:
        bad("unit", f"{r['metric']} is given in {' or '.join(METRICS[r['metric']][1])}, not {r.get('unit')!r}")
    if r.get("statistic", "value") not in STATISTICS:
        bad("statistic", f"unknown statistic {r.get('statistic')!r} (known: {', '.join(STATISTICS)})")
    for f in ("count", "tp", "concurrency", "context", "new_tokens"):
        if not isinstance(r.get(f), int) or isinstance(r.get(f), bool) or r[f] < 1:
            bad(f, f"must be a whole number >= 1, not {r.get(f)!r}")
    for f in ("pp", "replicas", "ep", "scheduler_steps", "max_batch"):
        if f in r and (not isinstance(r[f], int) or isinstance(r[f], bool) or r[f] < 1):
            bad(f, f"must be a whole number >= 1, not {r[f]!r}")
    shape = r["tp"] * r.get("pp", 1) * r.get("replicas", 1)
    if "pp" in r or "replicas" in r:
        if shape != r["count"]:
            bad("count", f"{r['count']} devices, but replicas x tp x pp = {shape}")
    elif r["count"] % r["tp"]:
        bad("tp", f"tp {r['tp']} does not divide the {r['count']} devices")
    if r.get("engine") is not None and engine_of(r["engine"]) is None:
        bad("engine", f"unknown engine {r['engine']!r} (known: {', '.join(ENGINES)})")
    if r.get("batching") is not None and r["batching"] not in BATCHINGS:
        bad("batching", f"unknown batching {r['batching']!r} (known: {', '.join(BATCHINGS)})")
    if r["scenario"] == "poisson" and not _positive(r.get("rate")):
        bad("rate", "a poisson scenario needs its rate (requests/s over the whole deployment), > 0")
    if "burstiness" in r and not _positive(r["burstiness"]):
        bad("burstiness", "must be a positive number (the gamma shape of the gaps; 1 = Poisson)")
    if "dataset" in r or "lengths" in r:
        mix(r, f"{where}.{'dataset' if 'dataset' in r else 'lengths'}", path)
    if not _positive(r.get("value")):
        bad("value", f"must be a positive number, not {r.get('value')!r}")
    if r.get("set") not in ("calibration", "held-out"):
        bad("set", "must be calibration or held-out")


def mix(r: dict, field: str = "lengths", path: str | None = None) -> lengths.LengthMix:
    """The record's length mix: its dataset preset or stated statistics, else its fixed lengths."""
    try:
        if "lengths" in r:
            return lengths.parse(r["lengths"], field)
        if "dataset" in r:
            return lengths.parse(r["dataset"], field)
    except ContractError as exc:
        exc.source = exc.source or path
        raise
    return lengths.fixed(int(r["context"]), int(r["new_tokens"]))


def engine(r: dict, sources: dict) -> str | None:
    """The engine a record was measured on: its own, else its source's."""
    return engine_of(r.get("engine")) or engine_of((sources.get(r["source"]) or {}).get("engine"))


def frozen(r: dict, sources: dict) -> bool:
    """A record of a source held out whole (`holdout`: never fitted, never left out in turn)."""
    return bool((sources.get(r["source"]) or {}).get("holdout"))


def held_out(r: dict, sources: dict) -> bool:
    """A record the fit never sees: its source is frozen held-out, or the split holds it out."""
    return frozen(r, sources) or r["set"] == "held-out"


def merge(doc: dict, extra: dict, source: str) -> dict:
    """Two files' figures as one document (their source keys must not clash)."""
    clash = sorted(set(extra.get("sources") or {}) & set(doc.get("sources") or {}))
    if clash:
        raise ContractError(f"source key {clash[0]!r} is already a shipped source; rename it", source=source,
                            field=f"sources.{clash[0]}")
    ids = {r["id"] for r in doc["records"]} & {r["id"] for r in extra.get("records") or []}
    if ids:
        raise ContractError(f"record id {sorted(ids)[0]!r} is already shipped", source=source, field="records")
    return {**doc, "sources": {**doc["sources"], **(extra.get("sources") or {})},
            "records": doc["records"] + list(extra.get("records") or []),
            "tails": list(doc.get("tails") or []) + list(extra.get("tails") or [])}


@lru_cache(maxsize=64)
def machine(name: str):
    """A catalog machine, cached (calibration reads each many times)."""
    return load_machine(name)


def vendor(name: str) -> str:
    """The vendor of a catalog machine (hardware.vendor)."""
    return hardware.vendor(machine(name))


E99 = math.log10(50.0)  # judge.exponent(0.99): p99 = p50 x tail^E99


def tails(doc: dict) -> tuple[dict, list[dict]]:
    """(p95/p50 per metric, per-pair rows): the geometric mean of the calibration pairs'
    (p99/p50)^(1/E99), and each pair's p99 predicted from its p50 with it."""
    rows = doc.get("tails") or []
    out = {}
    for metric in ("ttft", "tpot"):
        cal = [t for t in rows if t["metric"] == metric and t["set"] == "calibration"]
        if cal:
            out[metric] = round(float(np.exp(np.mean([math.log(t["p99"] / t["p50"]) / E99 for t in cal]))), 4)
    if "tpot" in out:
        out["latency"] = out["tpot"]  # a whole request's spread is its decode steps'
    checked = []
    for t in rows:
        if t["metric"] in out:
            pred = t["p50"] * out[t["metric"]] ** E99
            checked.append({"id": t["id"], "set": t["set"], "metric": t["metric"], "measured_p99": t["p99"],
                            "predicted_p99": round(pred, 4), "error": round((pred - t["p99"]) / t["p99"], 4)})
    return out, checked
