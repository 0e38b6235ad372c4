"""The analytical model of the services PEX sprints run on this host (matvec, classifier,
embedding, decoder): what each costs in FLOPs, bytes moved and memory, as physical facts of
its code, and the few efficiency figures calibration fits to measured trials.

* **Memory** the service needs above the runtime (what a `host_memory` level grants) =
  slope × (weights as loaded + activations of one batch [+ the KV pool]) + overhead; peak RSS =
  the runtime's own resident memory + that.
* **Time** of one engine step over a batch of b = step overhead (per variant) + max(FLOPs /
  (cores × FLOP/s per core), bytes / bandwidth) / efficiency, the bandwidth being the last-level
  cache's when the bytes a step reads fit in it, DRAM's otherwise. Closed-loop clients: each request waits
  ⌈concurrency / max_batch⌉ steps of min(concurrency, max_batch); Poisson arrivals: an M/D/1
  queue on single requests.
* The decoder is a transformer (`llm.serve` with its own config, its paged KV pool and the
  engine's wave-like admission).

Defaults stand until `luma model calibrate` replaces them with fitted figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from luma.errors import ContractError
from luma.experiments.model import llm, llm_config

#: Tiny GPT of the decoder service (experiments/services/tiny_gpt.py: GPTConfig defaults).
TINY_GPT = llm_config.ModelConfig("tiny-gpt", layers=2, hidden=128, heads=4, kv_heads=4, intermediate=512, vocab=256,
                           gated_ffn=False, precision="fp32",
                           # + biases, learned positions (512 x 128), LayerNorm weights and biases
                           params=2 * (128 * 384 + 384 + 128 * 128 + 128 + 128 * 512 + 512 + 512 * 128 + 128 + 512)
                           + 256 * 128 + 512 * 128 + 256 + 128 * 256)
MINILM_MATMUL = 6 * (4 * (384 * 384 + 384) + 2 * 384 * 1536 + 1536 + 384)  # encoder Linear parameters
MINILM_TABLES = 30522 * 384 + 512 * 384 + 2 * 384  # word, position, token-type embeddings
DIGITS = 64 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10


@dataclass
class ServiceParams:
    """The figures calibration fits (defaults: rough guesses, flagged as uncalibrated)."""

    step_overhead: float = 2e-4  # seconds per engine step (Python, dispatch) of a variant not in `overhead`
    #: variant -> seconds per engine step: an int8 variant dispatches more operations per step
    #: (dequantising weights per batch, quantising KV on write) — fitted per variant
    overhead: dict = field(default_factory=dict)
    request_overhead: float = 0.0  # seconds per request (or running sequence) per step: Python bookkeeping
    efficiency: float = 0.3  # achieved share of peak FLOP/s
    bandwidth_efficiency: float | None = None  # achieved share of the bandwidth (None: as `efficiency`)
    memory_slope: float = 1.0
    memory_overhead: float = 4 * 2**20  # bytes beyond weights and activations (allocator, loading)
    rss_runtime: float = 60e6  # resident bytes of the runtime (interpreter, libraries) before the service
    #: bytes a memory limit must grant beyond the peak need: an allocation that no longer fits fails
    #: whole (fitted to sprint trials that ran out of memory, when the ledger has them)
    limit_margin: float = 0.0
    tail: dict = field(default_factory=lambda: {"latency": 1.3, "ttft": 1.3, "tpot": 1.3})
    quality: dict = field(default_factory=dict)  # variant -> measured quality score
    weight_bytes: dict = field(default_factory=dict)  # variant -> bytes as loaded (measured)
    #: embedding: tokens each request is padded to, by batch size ({"1": 13.2, "8": 21.5}; a batch pads
    #: to its longest text), measured on the service's request texts by calibration
    tokens: dict | float | None = None
    calibrated: bool = False


def params_from(data: dict) -> ServiceParams:
    """ServiceParams from a calibration file's table (fields of other versions are ignored)."""
    names = set(ServiceParams.__dataclass_fields__)
    return ServiceParams(**{k: v for k, v in data.items() if k in names})


class BatchService:
    """A request/response service behind a dynamic-batching engine."""

    generative = False

    def __init__(self, name, variants, weight_bytes, quality, defaults):
        self.name, self.variants = name, tuple(variants)
        self.default_weights, self.default_quality, self.defaults = weight_bytes, quality, defaults

    def params(self, calibration: dict | None) -> ServiceParams:
        got = ((calibration or {}).get("services") or {}).get(self.name)
        return params_from({**self.defaults, **got, "calibrated": True} if got else self.defaults)

    def table(self, p: ServiceParams, what: str) -> np.ndarray:
        """Per-variant figure (measured when calibrated, else the code's own count or default)."""
        if what == "overhead":
            return np.array([float(p.overhead.get(v, p.step_overhead)) for v in self.variants])
        src = p.weight_bytes if what == "weights" else p.quality
        dflt = self.default_weights if what == "weights" else self.default_quality
        return np.array([float(src.get(v, dflt[v])) for v in self.variants])

    def costs(self, v: np.ndarray, context: np.ndarray, p: ServiceParams, b: np.ndarray) -> dict:
        raise NotImplementedError


class Matvec(BatchService):
    def costs(self, v, context, p, b):
        n = 4096 * 256
        int8 = v == 1
        return {"flops_req": np.full(v.shape, 2.0 * n), "flops_batch": np.where(int8, 2.0 * n, 0.0),
                # fp32 reads W once per batch; int8 dequantises W block by block (read 1 B, write and read 4 B)
                "bytes_batch": np.where(int8, 9.0 * n, 4.0 * n), "act_req": np.full(v.shape, (256 + 4096) * 8.0)}


class Classifier(BatchService):
    def costs(self, v, context, p, b):
        return {"flops_req": np.full(v.shape, 2.0 * DIGITS), "flops_batch": np.zeros(v.shape),
                "bytes_batch": np.take(self.table(p, "weights"), v), "act_req": np.full(v.shape, 458 * 8.0)}


class Embedding(BatchService):
    def costs(self, v, context, p, b):
        t = np.minimum(context, padded_tokens(p.tokens, b))
        flops = 2.0 * MINILM_MATMUL * t + 4.0 * 6 * t * t * 384
        per_param = np.where(v == 0, 4.0, 1.0)
        return {"flops_req": flops, "flops_batch": np.zeros(v.shape), "bytes_batch": MINILM_MATMUL * per_param,
                "act_req": t * (8 * 384 + 2 * 1536 + 12 * t) * 4.0}


def padded_tokens(table, b) -> np.ndarray:
    """Tokens per request at batch size b: interpolated in log2(b) from the measured table."""
    if not isinstance(table, dict):
        return np.broadcast_to(np.float64(table or 16.0), np.shape(b))
    sizes = sorted(int(k) for k in table)
    return np.interp(np.log2(np.maximum(b, 1)), np.log2(sizes), [float(table[str(s)]) for s in sizes])


class Decoder(BatchService):
    generative = True

    def kv(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bytes per K/V element, extra bytes per vector): fp32, or int8 levels + an fp32 scale."""
        return np.where(v == 1, 1.0, 4.0), np.where(v == 1, 4.0, 0.0)


SERVICES = {
    "matvec": Matvec("matvec", ("fp32", "int8-weights"), {"fp32": 4 * 2**20, "int8-weights": 4096 * 256 + 4096 * 4},
                     {"fp32": 1.0, "int8-weights": 0.9999},
                     {"step_overhead": 3e-5, "memory_overhead": 3 * 2**20, "rss_runtime": 34e6}),
    "classifier": Classifier("classifier", ("fp32", "int8-weights", "int8-dynamic"),
                             {"fp32": DIGITS * 4, "int8-weights": DIGITS + 394 * 4, "int8-dynamic": DIGITS + 394 * 4},
                             {"fp32": 0.9689, "int8-weights": 0.9667, "int8-dynamic": 0.9667},
                             {"step_overhead": 1.5e-4, "memory_overhead": 8 * 2**20, "rss_runtime": 260e6}),
    "embedding": Embedding("embedding", ("fp32", "int8-weights", "int8-linear", "int8-attention", "int8-ffn",
                                         "int8-embeddings"),
                           {"fp32": (MINILM_MATMUL + MINILM_TABLES) * 4, "int8-weights": 23.5e6,
                            "int8-linear": MINILM_TABLES * 4 + MINILM_MATMUL, "int8-attention": 75e6,
                            "int8-ffn": 61e6, "int8-embeddings": 43e6},
                           {"fp32": 1.0, "int8-weights": 0.995, "int8-linear": 0.996, "int8-attention": 0.998,
                            "int8-ffn": 0.997, "int8-embeddings": 0.999},
                           {"step_overhead": 1e-3, "memory_overhead": 24 * 2**20, "rss_runtime": 260e6,
                            "tokens": {"1": 14.0, "8": 22.0}}),
    "decoder": Decoder("decoder", ("fp32", "int8-kv"), {"fp32": TINY_GPT.total_params() * 4.0,
                                                        "int8-kv": TINY_GPT.total_params() * 4.0},
                       {"fp32": 1.0, "int8-kv": 0.99},
                       {"step_overhead": 1.5e-3, "memory_overhead": 16 * 2**20, "rss_runtime": 260e6}),
}


def get(name: str) -> BatchService:
    if name not in SERVICES:
        raise ContractError(f"the model has no service {name!r} (it has: {', '.join(SERVICES)})", field="service")
    return SERVICES[name]


#: Host figures used until calibration measures them (a 2-core AVX2 server core, roughly).
DEFAULT_HOST = {"flops_per_core": 3e10, "bandwidth_per_core": 8e9, "bandwidth": 16e9, "cores": 2,
                "llc_bytes": 32 * 2**20, "cache_bandwidth_per_core": 5e10}


def bandwidth(hostfig: dict, cores, working_set) -> np.ndarray:
    """Bytes/s a step reads at: the last-level cache's when its working set fits, else DRAM's."""
    dram = np.minimum(cores * hostfig["bandwidth_per_core"], hostfig["bandwidth"])
    cache = cores * hostfig.get("cache_bandwidth_per_core", hostfig["bandwidth_per_core"])
    return np.where(working_set <= hostfig.get("llc_bytes", 0), np.maximum(cache, dram), dram)


def host(calibration: dict | None) -> dict:
    return {**DEFAULT_HOST, **((calibration or {}).get("host") or {})}


def evaluate(service: BatchService, p: ServiceParams, hostfig: dict, s: dict) -> dict:
    """Predicted figures on states `s` (arrays): variant (index into service.variants), compute
    (cores), host_memory (bytes, NaN: unlimited), concurrency, max_batch, context, rate (NaN:
    closed loop); decoder also kv_cache (bytes, NaN: the service's default pool), new_tokens."""
    f = {k: np.asarray(v, dtype=np.float64) for k, v in s.items()}
    v = np.asarray(s["variant"]).astype(np.int64)
    cores = f["compute"]
    peak = cores * hostfig["flops_per_core"]
    weights = np.take(service.table(p, "weights"), v)
    quality = np.take(service.table(p, "quality"), v)
    t0 = np.take(service.table(p, "overhead"), v)
    if service.generative:
        return _decoder(service, p, f, v, peak, hostfig, weights, quality, t0)
    C, B = f["concurrency"], f["max_batch"]
    b = np.minimum(C, B)
    c = service.costs(v, f["context"], p, b)

    def step(n):
        read = c["bytes_batch"] + c["act_req"] * n
        tc = (c["flops_req"] * n + c["flops_batch"]) / peak / p.efficiency
        tb = read / bandwidth(hostfig, cores, read) / (p.bandwidth_efficiency or p.efficiency)
        return t0 + p.request_overhead * n + np.maximum(tc, tb), tc, tb

    t_b, tc, tb = step(b)
    rate = f.get("rate", np.float64(np.nan))
    closed = np.isnan(rate)
    t1 = step(1.0)[0]
    rho = np.where(closed, 0.0, rate * t1)
    md1 = np.where(rho < 1, t1 + rho * t1 / (2 * np.maximum(1 - rho, 1e-9)), np.inf)  # M/D/1 sojourn
    latency = np.where(closed, np.ceil(C / B) * t_b, md1)
    need = p.memory_slope * (weights + b * c["act_req"]) + p.memory_overhead
    return _figures(f, need, p, latency=latency, quality=quality,
                    throughput=np.where(closed, C / latency, np.where(rho < 1, rate, 1 / t1)),
                    terms={"latency": {"compute": tc, "memory_bandwidth": tb, "runtime": t0 + 0 * tc}})


def _decoder(service, p, f, v, peak, hostfig, weights, quality, t0) -> dict:
    kvb, extra = service.kv(v)
    pool = f.get("kv_cache", np.float64(np.nan))
    B = f["max_batch"]
    default_pool = B * np.ceil(512 / 16) * 16 * 2 * TINY_GPT.layers * TINY_GPT.kv_heads * (TINY_GPT.d_head * kvb + extra)
    pool = np.where(np.isnan(pool), default_pool, pool)
    # A decode step reads the weights and the batch's KV blocks.
    read = weights + np.minimum(f["concurrency"], B) * (f["context"] + f["new_tokens"]) * 2 * TINY_GPT.layers * \
        TINY_GPT.kv_dim * kvb
    bw = bandwidth(hostfig, f["compute"], read)
    out = llm.serve(TINY_GPT, {
        "weight_bytes": 4.0, "kv_bytes": kvb, "kv_vector_extra": extra, "kv_block": 16.0, "kv_pool": pool,
        "flops": peak, "bandwidth": bw, "capacity": np.inf, "interconnect": 1.0, "link_latency": 0.0, "power": 0.0,
        "count": 1.0, "tp": 1.0, "pp": 1.0, "concurrency": f["concurrency"], "context": f["context"],
        "new_tokens": f["new_tokens"], "max_batch": B, "eff_compute": p.efficiency,
        "eff_bandwidth": p.bandwidth_efficiency or p.efficiency,
        "runtime_bytes": 0.0, "step_overhead": t0, "seq_overhead": p.request_overhead, "act_bytes": 4.0,
        "waves": True})
    need = p.memory_slope * (weights + pool + out["activations"]) + p.memory_overhead
    seq = np.ceil((f["context"] + f["new_tokens"]) / 16) * 16 * out["kv_bytes_per_token"]  # one sequence's blocks
    res = _figures(f, need, p, latency=out["latency"], quality=quality, throughput=out["throughput"],
                   terms={**out["terms"], "latency": out["terms"]["tpot"]})
    res.update(ttft=out["ttft"], tpot=out["tpot"], wait=out["wait"], wait_fraction=out["wait_fraction"],
               token_throughput=out["token_throughput"], slots=out["slots"], slot_dimension="kv_cache",
               kv_need=f["concurrency"] * seq, kv_margin=(pool - seq) / pool)
    return res


def _figures(f, need, p, *, latency, quality, throughput, terms) -> dict:
    cap = f.get("host_memory", np.float64(np.nan))
    cap = np.where(np.isnan(cap), np.inf, cap)
    shape = np.broadcast(need, latency).shape
    return {"memory_need": need, "memory_min": need + p.limit_margin, "memory_capacity": cap,
            "memory_dimension": "host_memory",
            "peak_rss": p.rss_runtime + need, "latency": latency, "throughput": throughput, "quality": quality,
            "tail": p.tail, "terms": terms, "supported": np.ones(shape, dtype=bool),
            "wait": np.zeros(shape), "wait_fraction": np.zeros(shape)}
