"""`luma kernels bench`: the int8 fast paths against named baselines measured in the same run.

* Quantize throughput as a fraction of this machine's copy bandwidth (both measured here): the
  bytes a quantizer must move (read 4 B, write 1 B per value) per second, over the bytes a
  float32 `copy_` moves (read 4 B, write 4 B) per second.
* int8 Linear (K = N = 4096 and 1024, M = 1, 16, 256, 2048): fp32 `nn.Linear` (the baseline),
  LUMA's dynamic `Int8Linear` with `auto` (naming the path it chose), LUMA's weight-only layer,
  the peers `torch.ao.quantization.quantize_dynamic` on each quantized engine and torchao's int8
  dynamic configuration (when installed), each with its relative error against an fp64 product.
* This core's int8 / fp32 compute peak ratio (luma.kernels.peak), and a summary: auto over the
  best `quantize_dynamic` engine, auto's speed-up over the peak ratio at M >= 256, weight-only
  over fp32 at M <= 16, quantize over copy.

Timing: one thread unless told otherwise; candidates of one shape are timed interleaved, one call
each per round in a fresh random order every round (so a neighbour's load and the cache a
predecessor left fall on all of them alike), after a warm-up call, with more rounds for short
calls; min and median of the rounds.
"""

from __future__ import annotations

import copy
import random
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from luma.experiments.host import describe
from luma.kernels import peak, torch_ops
from luma.kernels.linear import Int8Linear

BASELINE = "fp32 nn.Linear (baseline)"
SHAPES = ((4096, 4096), (1024, 1024))
MS = (1, 16, 256, 2048)


def interleaved(cases: dict[str, Callable[[], object]], rounds: int = 7,
                slow_factor: float | None = None, budget_s: float = 0.0,
                max_rounds: int = 400) -> dict[str, tuple[float, float, int]]:
    """{name: (min, median seconds, calls timed)}: one warm-up call each, then rounds of one call
    per case in a fresh random order each round (seeded: so no case always follows the one that
    evicts its weights from the cache), at least `rounds` rounds and, for short calls, more until
    `budget_s` seconds are spent (at most `max_rounds`). With `slow_factor`, a case whose warm-up
    took that many times the first case's is timed once more and reported as is (a peer with no
    fast kernel here can take minutes per round; its figure is still measured, just not repeated)."""
    first = {}
    for name, fn in cases.items():
        t = time.perf_counter()
        fn()
        first[name] = time.perf_counter() - t
    ref = next(iter(first.values()))
    slow = {n for n, t in first.items() if slow_factor is not None and t > slow_factor * ref}
    out = {}
    for name in slow:
        t = time.perf_counter()
        cases[name]()
        once = time.perf_counter() - t
        out[name] = (once, once, 1)
    names = [n for n in cases if n not in slow]
    times: dict[str, list[float]] = {n: [] for n in names}
    order, spent, r = random.Random(0), 0.0, 0
    while names and (r < rounds or (spent < budget_s and r < max_rounds)):
        for name in order.sample(names, len(names)):
            t = time.perf_counter()
            cases[name]()
            dt = time.perf_counter() - t
            times[name].append(dt)
            spent += dt
        r += 1
    out.update({n: (min(ts), statistics.median(ts), len(ts)) for n, ts in times.items()})
    return {n: out[n] for n in cases}


def quantize_rows(n: int = 1 << 24, repeat: int = 7) -> list[dict]:
    """Copy bandwidth, then each quantizer's effective bandwidth and its fraction of it (all
    interleaved)."""
    x = torch.randn(n)
    dst = torch.empty_like(x)
    levels = torch.empty(n, dtype=torch.int8)
    s = torch_ops.scale_per_tensor(x)
    inv = 1.0 / float(s)
    xn, sn = x.numpy(), float(s)
    cases = {
        "float32 copy_ (baseline)": lambda: dst.copy_(x),
        "numpy clip(rint(x/s)).astype(int8)": lambda: np.clip(np.rint(xn / sn), -127, 127).astype(np.int8),
        "torch eager clamp(round(x*inv)).to(int8)": lambda: torch.clamp(torch.round(x * inv), -127, 127).to(torch.int8),
        # Into a reused buffer, as copy_ writes into one (and as Int8Linear quantises): the one pass.
        "luma quantize_per_tensor (scale given, into a buffer)":
            lambda: torch_ops.quantize_per_tensor(x, s, check=False, out=levels),
        "luma quantize_per_tensor (scale given, new tensor)": lambda: torch_ops.quantize_per_tensor(x, s, check=False),
        "luma quantize_per_tensor (with max|x|, into a buffer)":
            lambda: torch_ops.quantize_per_tensor(x, check=False, out=levels),
    }
    timed = interleaved(cases, repeat)
    copy_bw = 8 * n / timed["float32 copy_ (baseline)"][0]
    rows = []
    for name, (t_min, t_med, _) in timed.items():
        bw = (8 if name.startswith("float32 copy_") else 5) * n / t_min
        rows.append({"case": name, "values": n, "min_s": t_min, "median_s": t_med, "gb_per_s": bw / 1e9,
                     "fraction_of_copy": bw / copy_bw})
    return rows


def _rel_error(y: torch.Tensor, exact: torch.Tensor) -> float:
    return float((y.double() - exact).norm() / exact.norm())


def _peers(lin: nn.Linear) -> dict[str, nn.Module]:
    peers: dict[str, nn.Module] = {}
    for engine in ("onednn", "fbgemm", "x86"):
        if engine in torch.backends.quantized.supported_engines:
            torch.backends.quantized.engine = engine
            peers[f"quantize_dynamic ({engine})"] = torch.ao.quantization.quantize_dynamic(
                copy.deepcopy(nn.Sequential(lin)), {nn.Linear}, dtype=torch.qint8)
    try:
        # torchao is optional: a peer measured only where installed
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError:
        return peers
    model = copy.deepcopy(nn.Sequential(lin))
    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    peers["torchao int8 dynamic (eager)"] = model
    return peers


@torch.no_grad()
def linear_rows(ms=MS, shapes=SHAPES, repeat: int = 5) -> list[dict]:
    """Per (K, N) and M: fp32 nn.Linear, LUMA's dynamic (auto) and weight-only int8 Linear and the
    peers, interleaved; speed-up over fp32 and relative error against the fp64 product. A LUMA
    layer's first call of a shape (its measured choice and weight packing) is not timed."""
    rows = []
    for k, n in shapes:
        torch.manual_seed(0)
        lin = nn.Linear(k, n)
        ours = Int8Linear.from_float(lin, "dynamic")
        weight_only = Int8Linear.from_float(lin, "weight-only")
        peers = _peers(lin)
        for m in ms:
            x = torch.randn(m, k)
            exact = x.double() @ lin.weight.double().t() + lin.bias.double()
            ours(x), weight_only(x)  # lazy set-up outside the timing: the tuner's probe, packing
            mods = {BASELINE: lin, f"luma Int8Linear dynamic auto ({ours.path(m)})": ours,
                    f"luma Int8Linear weight-only ({weight_only.path(m)})": weight_only, **peers}
            reps = repeat if m >= 256 else repeat * 4
            # Short calls get more rounds (a second and a half of them at M <= 16): a 30 us GEMM's
            # minimum over a handful of calls is the neighbour's, not the kernel's.
            timed = interleaved({name: (lambda mod=mod: mod(x)) for name, mod in mods.items()}, reps, slow_factor=10,
                                budget_s=1.5 if m <= 16 else 0.5)
            base = timed[BASELINE][0]
            for name, mod in mods.items():
                t_min, t_med, n_timed = timed[name]
                rows.append({"m": m, "k": k, "n": n, "case": name, "min_s": t_min, "median_s": t_med,
                             "repeats": n_timed, "speedup_vs_fp32": base / t_min,
                             "rel_error_vs_fp64": _rel_error(mod(x), exact)})
    return rows


def summary(linear: list[dict], quantize: list[dict], peak_ratio: float | None) -> list[dict]:
    """Per (K, M): auto over the best quantize_dynamic engine, the path auto took, auto's speed-up
    over fp32 and (M >= 256) over the measured int8/fp32 peak ratio, weight-only over fp32
    (M <= 16); then the quantizers' fractions of copy bandwidth."""
    out = []
    for k, m in sorted({(r["k"], r["m"]) for r in linear}, key=lambda km: (-km[0], km[1])):
        rows = [r for r in linear if r["k"] == k and r["m"] == m]
        auto = next(r for r in rows if r["case"].startswith("luma Int8Linear dynamic"))
        wo = next(r for r in rows if r["case"].startswith("luma Int8Linear weight-only"))
        engines = [r for r in rows if r["case"].startswith("quantize_dynamic")]
        best = min(engines, key=lambda r: r["min_s"]) if engines else None
        row = {"k": k, "m": m, "auto_path": auto["case"].rsplit("(", 1)[-1].rstrip(")"),
               "auto_speedup": auto["speedup_vs_fp32"],
               "best_engine": best["case"].rsplit("(", 1)[-1].rstrip(")") if best else "-",
               "auto_over_best_engine": best["min_s"] / auto["min_s"] if best else None,
               "auto_over_peak_ratio": auto["speedup_vs_fp32"] / peak_ratio if peak_ratio and m >= 256 else None,
               "weight_only_speedup": wo["speedup_vs_fp32"] if m <= 16 else None}
        out.append(row)
    for q in quantize:
        if q["case"].startswith("luma"):
            out.append({"k": "-", "m": "-", "auto_path": q["case"], "quantize_fraction_of_copy": q["fraction_of_copy"]})
    return out


def run(threads: int = 1, quick: bool = False) -> dict:
    """Everything `luma kernels bench` prints, with the environment it ran in."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if quick:
            q = quantize_rows(1 << 20, repeat=3)
            lin = linear_rows(ms=(1, 256), shapes=((512, 512),), repeat=3)
            pk = {"skipped": "--quick"}
        else:
            q = quantize_rows()
            lin = linear_rows()
            pk = peak.measure()
        return {"environment": describe(threads), "threads": threads, "peak": pk, "quantize": q, "linear": lin,
                "summary": summary(lin, q, pk.get("ratio"))}
    finally:
        torch.set_num_threads(old)
