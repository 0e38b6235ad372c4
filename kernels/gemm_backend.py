"""Which int8 GEMM a dynamic `Int8Linear` runs on, chosen by measuring this machine.

* ``int_mm``: `torch._int_mm` (int8 x int8 -> int32) and LUMA's own symmetric activation
  quantisation (one scale per row) and rescale: the exact reference pipeline. Fast where the hardware has int8 dot
  products that PyTorch uses for it (CUDA; CPUs with AVX-512 VNNI / AVX-VNNI / AMX).
* ``x86`` / ``fbgemm`` / ``onednn``: the prepacked int8 GEMM of PyTorch's quantized engine (what
  `quantize_dynamic` runs), fed LUMA's int8 weights unchanged. Its activations are quantized by
  the engine: uint8, asymmetric (min..max), per call, with 7 bits ("reduce range"). Without
  reduce range, AVX2's u8 x s8 pair sums overflow int16 and saturate: measured here, onednn's
  relative error against fp64 rose from 2.1e-2 to 1.1e-1 on a 512x512 layer. So the weight
  integers are the reference's and the activation step is (max - min) / 127 over the batch.
  `Int8Linear` keeps rows holding NaN or ±inf out of the engine's batch (they are computed in
  float), so they cannot move that grid for the other rows.

On an AVX2-only CPU `torch._int_mm` has no fast kernel (measured here: 3.7 s for 256x4096x4096
against 0.19 s in fp32), so `auto` picks an engine there: x86 for small products, onednn from
LARGE_M rows on (each engine's weights packed once, on first use).
"""

from __future__ import annotations

import time
import warnings
from contextlib import contextmanager
from functools import lru_cache

import torch

from luma.errors import TensorError
from luma.kernels.reference import SCALE_MIN

BACKENDS = ("auto", "int_mm", "x86", "fbgemm", "onednn")
#: x86 dispatches to fbgemm or onednn by shape; measured here it was the fastest at M <= 16 and
#: within ~20 % of the best at M >= 256.
_ENGINE_PREFERENCE = ("x86", "fbgemm", "onednn")
#: Rows from which `auto` hands large products to onednn: measured here (K = N = 4096, one
#: thread) onednn reached 2.2-2.3x fp32 at M = 256 and 2048, x86 1.65-2.2x; at M = 16 x86 6.1x,
#: onednn 2.0x.
LARGE_M = 256



@lru_cache(maxsize=1)
def int_mm_is_fast() -> bool:
    """Whether `torch._int_mm` beats an fp32 matmul of the same shape here (a ~10 ms probe)."""
    if not hasattr(torch, "_int_mm"):
        return False
    a8 = torch.randint(-127, 128, (64, 512), dtype=torch.int8)
    b8 = torch.randint(-127, 128, (512, 512), dtype=torch.int8)
    a, b = a8.float(), b8.float()
    try:
        return _best(lambda: torch._int_mm(a8, b8)) <= _best(lambda: a @ b)
    except RuntimeError:
        return False


@lru_cache(maxsize=1)
def weight_int8pack_is_fast() -> bool:
    """Whether `torch._weight_int8pack_mm` (float x int8 weight) beats dequantize-then-matmul here.
    Measured on this AVX2 machine: no (MiniLM weight-only ran at 2.3 sentences/s on it, 99 on
    the dequantized weight)."""
    if not hasattr(torch, "_weight_int8pack_mm"):
        return False
    x = torch.randn(64, 512)
    w = torch.randint(-127, 128, (512, 512), dtype=torch.int8)
    s = torch.rand(512) + 0.5
    try:
        packed = _best(lambda: torch._weight_int8pack_mm(x, w, s))
    except RuntimeError:
        return False
    return packed <= _best(lambda: x @ (w.float() * s[:, None]).t())


def _best(fn) -> float:
    """Best of three timed calls after one warm-up."""
    fn()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def resolve(name: str = "auto") -> str:
    """The backend to use: `name`, or for `auto` the fastest available here."""
    if name not in BACKENDS:
        raise TensorError(f"unknown int8 GEMM backend {name!r} (known: {', '.join(BACKENDS)})", field="backend")
    engines = torch.backends.quantized.supported_engines
    if name == "auto":
        if int_mm_is_fast():
            return "int_mm"
        return next((e for e in _ENGINE_PREFERENCE if e in engines), "int_mm")
    if name != "int_mm" and name not in engines:
        raise TensorError(f"this PyTorch build has no {name!r} quantized engine (has: {', '.join(engines)})",
                          field="backend")
    return name


def engine_for(backend: str, rows: int, auto: bool) -> str:
    """The engine one call uses: `backend`, except that an `auto` choice sends large products
    (rows >= LARGE_M) to onednn when the build has it."""
    if auto and backend != "int_mm" and rows >= LARGE_M and "onednn" in torch.backends.quantized.supported_engines:
        return "onednn"
    return backend


@contextmanager
def _engine(engine: str):
    """PyTorch's quantized engine is process-global: set it for the call, then put it back."""
    prev = torch.backends.quantized.engine
    if prev != engine:
        torch.backends.quantized.engine = engine
    try:
        yield
    finally:
        if prev != engine:
            torch.backends.quantized.engine = prev


def prepack(q_weight: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None, engine: str):
    """The engine's packed form of LUMA's int8 weight (N, K) and its scales."""
    with _engine(engine), warnings.catch_warnings():
        # The quantized-tensor constructors are deprecated in favour of torchao, but they are
        # still the only way into the engine's packed GEMM (quantize_dynamic uses them too).
        warnings.simplefilter("ignore")
        if w_scale.ndim:
            zeros = torch.zeros(w_scale.shape, dtype=torch.int64)
            wq = torch._make_per_channel_quantized_tensor(q_weight, w_scale.double(), zeros, 0)
        else:
            wq = torch._make_per_tensor_quantized_tensor(q_weight, float(w_scale), 0)
        return torch.ops.quantized.linear_prepack(wq, bias)


def linear_dynamic(x2: torch.Tensor, packed, engine: str) -> torch.Tensor:
    with _engine(engine):
        return torch.ops.quantized.linear_dynamic(x2, packed, True)  # reduce range: see the module docstring


def activation_step(x: torch.Tensor, backend: str) -> torch.Tensor:
    """The activation quantisation step the backend uses for each row of x (M, K), as a (M, 1)
    tensor for error bounds: int_mm quantises each row on its own (max|x_row| / 127), the
    engines the whole batch on one asymmetric 7-bit grid ((max - min) / 127)."""
    if backend == "int_mm":
        if x.shape[1] == 0:
            return x.new_zeros((len(x), 1))
        return (x.abs().amax(dim=1, keepdim=True) / 127).clamp(min=SCALE_MIN)
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    return torch.full((x.shape[0], 1), (hi - lo) / 127)
