"""`luma kernels bench`: the int8 fast paths against named baselines measured in the same run.

* Quantize throughput as a fraction of this machine's copy bandwidth (both measured here): the
  bytes a quantizer must move (read 4 B, write 1 B per value) per second, over the bytes a
  float32 `copy_` moves (read 4 B, write 4 B) per second.
* int8 Linear (activation quantization + int8 matmul + rescale) against fp32 `nn.Linear`, beside
  the peers `torch.ao.quantization.quantize_dynamic` and torchao's int8 dynamic configuration
  (when torchao is installed), each with its relative error against an fp64 product.

Timing: one thread unless told otherwise, warm-up runs first, min and median of `repeat` runs.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from luma.kernels import gemm_backend, torch_ops
from luma.experiments.host import describe
from luma.kernels.linear import Int8Linear


def timed(fn: Callable[[], object], repeat: int = 7, warmup: int = 2,
          slow_s: float | None = None) -> tuple[float, float, int]:
    """(min, median) seconds of `repeat` calls after `warmup` calls, and how many were timed.
    A first call slower than
    `slow_s` is timed once more and reported as is (a peer with no fast kernel here can take
    minutes per repeat; its figure is still measured, just not repeated)."""
    t = time.perf_counter()
    fn()
    if slow_s is not None and time.perf_counter() - t > slow_s:
        t = time.perf_counter()
        fn()
        once = time.perf_counter() - t
        return once, once, 1
    for _ in range(warmup - 1):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times), repeat


def quantize_rows(n: int = 1 << 24, repeat: int = 7) -> list[dict]:
    """Copy bandwidth, then each quantizer's effective bandwidth and its fraction of it."""
    x = torch.randn(n)
    dst = torch.empty_like(x)
    copy_min, copy_med, _ = timed(lambda: dst.copy_(x), repeat)
    copy_bw = 8 * n / copy_min
    rows = [{"case": "float32 copy_ (baseline)", "values": n, "min_s": copy_min, "median_s": copy_med,
             "gb_per_s": copy_bw / 1e9, "fraction_of_copy": 1.0}]
    s = torch_ops.scale_per_tensor(x)
    inv = 1.0 / float(s)
    xn, sn = x.numpy(), float(s)
    cases = {
        "numpy clip(rint(x/s)).astype(int8)": lambda: np.clip(np.rint(xn / sn), -127, 127).astype(np.int8),
        "torch eager clamp(round(x*inv)).to(int8)": lambda: torch.clamp(torch.round(x * inv), -127, 127).to(torch.int8),
        "luma quantize_per_tensor (scale given)": lambda: torch_ops.quantize_per_tensor(x, s, check=False),
        "luma quantize_per_tensor (with max|x|)": lambda: torch_ops.quantize_per_tensor(x, check=False),
    }
    for name, fn in cases.items():
        t_min, t_med, _ = timed(fn, repeat)
        bw = 5 * n / t_min
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
def linear_rows(ms=(1, 16, 256, 2048), k: int = 4096, n: int = 4096, repeat: int = 5) -> list[dict]:
    """Per M: fp32 nn.Linear, LUMA's dynamic int8 Linear and the peers; speed-up over fp32 and
    relative error against the fp64 product."""
    torch.manual_seed(0)
    lin = nn.Linear(k, n)
    ours = Int8Linear.from_float(lin, "dynamic")
    peers = _peers(lin)
    rows = []
    for m in ms:
        x = torch.randn(m, k)
        exact = x.double() @ lin.weight.double().t() + lin.bias.double()
        reps = repeat if m >= 256 else repeat * 4
        base_min, base_med, _ = timed(lambda: lin(x), reps)
        engine = gemm_backend.engine_for(ours.backend, m, ours._auto)
        cases = {"fp32 nn.Linear (baseline)": lin, f"luma Int8Linear dynamic ({engine})": ours, **peers}
        for name, mod in cases.items():
            if mod is lin:
                t_min, t_med, n_timed = base_min, base_med, reps
            else:
                mod(x)  # first call outside the timing: lazy set-up (weight prepacking) is not per call
                t_min, t_med, n_timed = timed(lambda mod=mod: mod(x), reps, slow_s=10 * base_med)
            rows.append({"m": m, "k": k, "n": n, "case": name, "min_s": t_min, "median_s": t_med, "repeats": n_timed,
                         "speedup_vs_fp32": base_min / t_min, "rel_error_vs_fp64": _rel_error(mod(x), exact)})
    return rows


def run(threads: int = 1, quick: bool = False) -> dict:
    """Everything `luma kernels bench` prints, with the environment it ran in."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if quick:
            q = quantize_rows(1 << 20, repeat=3)
            lin = linear_rows(ms=(1, 256), k=512, n=512, repeat=3)
        else:
            q = quantize_rows()
            lin = linear_rows()
        return {"environment": describe(threads), "threads": threads, "quantize": q, "linear": lin}
    finally:
        torch.set_num_threads(old)
