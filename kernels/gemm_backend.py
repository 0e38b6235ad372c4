"""The GEMM paths an `Int8Linear` can run on: a registry of how each packs LUMA's int8 weight
once and runs one call. Which path runs is measured per shape class (`luma.kernels.gemm_tuning`)
unless the layer is given one.

Dynamic mode (int8 activations):

* ``int_mm``: LUMA's own symmetric activation quantisation (one scale per row), `torch._int_mm`
  (int8 x int8 -> int32) on the weight transposed once to (K, N), and one rescale pass: the exact
  reference pipeline. Fast where PyTorch has int8 dot products for it (AVX-512 VNNI, AVX-VNNI,
  AMX, CUDA) and M is large; its CPU kernel wants M > 16 (smaller batches are padded to 17 rows).
* ``x86`` / ``fbgemm`` / ``onednn``: the prepacked int8 GEMM of PyTorch's quantized engine (what
  `quantize_dynamic` runs), fed LUMA's int8 weights unchanged. Its activations are quantized by
  the engine: uint8, asymmetric (min..max), per call, with 7 bits ("reduce range"). Without
  reduce range, AVX2's u8 x s8 pair sums overflow int16 and saturate: measured on an AVX2 host,
  onednn's relative error against fp64 rose from 2.1e-2 to 1.1e-1 on a 512x512 layer. So the
  weight integers are the reference's and the activation step is (max - min) / 127 over the
  batch. A packed weight carries its engine: `quantized::linear_dynamic` dispatches on it, not on
  the process-global `torch.backends.quantized.engine` (checked bit for bit under every engine
  setting), so a call never switches the global engine; only packing does, once.

Weight-only mode (float activations, int8 weight levels, float32 accumulation):

* ``int8-native``: LUMA's own kernel (`luma.kernels.native`, built for this CPU on first use): the
  int8 levels widened in registers and multiplied into float32 accumulators, the scale applied
  to each output, in blocks of four weight rows by four activation rows. Reads the weight at 1 B
  per value and keeps nothing else; meant for up to 64 rows (the activations stay in cache).
* ``fp16-levels``: fbgemm's fp16-weight GEMM fed the integer levels (exact in float16, |q| <= 127)
  with float32 activations and accumulators; the per-channel scale is applied to the output.
  It keeps a packed copy of 2 B per weight beside the int8 levels, which defeats weight-only's
  purpose (a quarter of fp32's memory), so `auto` never picks it: it is measured by `luma kernels
  tune` and the bench for comparison only.
* ``int8pack``: `torch._weight_int8pack_mm` (float32 x int8 weight x per-channel scale). On
  AVX-512 hosts PyTorch 2.13 vectorises it for bfloat16/float16 only: its float32 kernel measured
  4-20x slower than fp32 there, so the tuner rarely picks it, but it is measured, not assumed.
* ``tiled``: the levels converted to float32 a tile of rows at a time into a reused buffer (at
  most 4 MiB and a quarter of the weight), then one float GEMM per tile: never the whole float32
  weight. Available everywhere; the choice for large batches, where the GEMM dominates.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import torch

from luma.errors import TensorError
from luma.kernels import native, torch_ops
from luma.kernels.reference import SCALE_MIN

ENGINES = ("x86", "fbgemm", "onednn")
BACKENDS = ("auto", "int_mm", *ENGINES)
#: Floats per tile of the `tiled` weight-only path at most (4 MiB: large GEMMs per tile, and the
#: tile stays in the last-level cache).
TILE_VALUES = 1 << 20


@dataclass(frozen=True)
class GemmPath:
    """One way to run y = x Wᵀ + b on LUMA's int8 weight levels (N, K) and float32 scales."""

    name: str
    mode: str  # "dynamic" or "weight-only"
    available: Callable[[], bool]
    #: (q_weight, w_scale, bias) -> the packed weight, made once per layer on first use
    pack: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], object]
    #: (x (M, K), packed, w_scale, bias, float_rows) -> float32 (M, N). x is float32 and
    #: contiguous, except on a path that `takes_any_float` (int_mm quantises float16/bfloat16/
    #: float64 exactly). A path that `isolates_rows` computes rows holding NaN or ±inf with
    #: `float_rows(x_rows)` (the layer's float product); the others never see such rows.
    run: Callable[..., torch.Tensor]
    #: the path keeps rows independent itself (one activation scale per row), so a batch holding
    #: NaN or ±inf rows needs no separate pass to find them before the call
    isolates_rows: bool = False
    takes_any_float: bool = False
    #: the most activation rows the path is meant for (None: any); the tuner does not try it beyond
    max_rows: int | None = None
    #: whether `auto` may choose it (False: measured for comparison only)
    auto: bool = True


PATHS: dict[str, GemmPath] = {}


def register(path: GemmPath) -> GemmPath:
    """Add a path to the registry (by name)."""
    PATHS[path.name] = path
    return path


def candidates(mode: str, rows: int | None = None, *, all_paths: bool = False) -> list[str]:
    """The registered paths of `mode` this build has that `auto` may choose (every one with
    `all_paths`), for batches of `rows` rows when given."""
    return [p.name for p in PATHS.values() if p.mode == mode and (all_paths or p.auto)
            and (rows is None or p.max_rows is None or rows <= p.max_rows) and p.available()]


def resolve(name: str = "auto") -> str:
    """Check a dynamic-mode backend name: `auto` (measured per shape class), or a forced path
    this build has."""
    if name not in BACKENDS:
        raise TensorError(f"unknown int8 GEMM backend {name!r} (known: {', '.join(BACKENDS)})", field="backend")
    if name != "auto" and not PATHS[name].available():
        engines = torch.backends.quantized.supported_engines
        raise TensorError(f"this PyTorch build has no {name!r} quantized engine (has: {', '.join(engines)})",
                          field="backend")
    return name


# -- dynamic: int_mm ---------------------------------------------------------------------------


def _int_mm_run(x2, packed, w_scale, bias, float_rows=None):
    m = x2.shape[0]
    buf = packed["buffers"].get(m)
    if buf is None:
        # A reused int8 buffer per batch size (fresh large allocations page-fault). _int_mm's CPU
        # kernel wants more than 16 rows: a smaller batch gets zero rows appended, which change no
        # other row of the product.
        k, n = packed["weight"].shape
        rows = 17 if m <= 16 and torch_ops.int_mm_supported(17, k, n) else m
        if len(packed["buffers"]) >= 8:
            packed["buffers"].clear()
        buf = packed["buffers"][m] = torch.zeros((rows, k), dtype=torch.int8)
    _, s_x, bad = torch_ops.quantize_rows(x2, out=buf[:m])
    acc = torch_ops.int8_matmul(buf, packed["weight"])
    if buf.shape[0] != m:
        acc = acc[:m]
    y = torch_ops.rescale(acc, s_x, w_scale, bias=bias)
    if bad is not None:
        y[bad] = float_rows(x2[bad]) if float_rows is not None else float("nan")
    return y


register(GemmPath("int_mm", "dynamic", lambda: hasattr(torch, "_int_mm"),
                  lambda q, s, b: {"weight": q.t().contiguous(), "buffers": {}}, _int_mm_run,
                  isolates_rows=True, takes_any_float=True))


# -- dynamic: the quantized engines ------------------------------------------------------------


def _packed_under(engine: str, pack: Callable[[], object]):
    """Run `pack` with the process-global quantized engine set to `engine` (packing reads it;
    the packed weight then carries it), and put the global back."""
    prev = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = engine
        with warnings.catch_warnings():
            # The quantized-tensor constructors are deprecated in favour of torchao, but they are
            # still the only way into the engine's packed GEMM (quantize_dynamic uses them too).
            warnings.simplefilter("ignore")
            return pack()
    finally:
        torch.backends.quantized.engine = prev


def prepack(q_weight: torch.Tensor, w_scale: torch.Tensor, bias: torch.Tensor | None, engine: str):
    """The engine's packed form of LUMA's int8 weight (N, K) and its scales."""
    def pack():
        if w_scale.ndim:
            zeros = torch.zeros(w_scale.shape, dtype=torch.int64)
            wq = torch._make_per_channel_quantized_tensor(q_weight, w_scale.double(), zeros, 0)
        else:
            wq = torch._make_per_tensor_quantized_tensor(q_weight, float(w_scale), 0)
        return torch.ops.quantized.linear_prepack(wq, bias)

    return _packed_under(engine, pack)


#: The op itself, looked up once: `torch.ops.quantized.linear_dynamic` resolves two namespaces per
#: call (~1 us, a few percent of a 1 x 1024 x 1024 product).
_LINEAR_DYNAMIC = torch.ops.quantized.linear_dynamic


def _engine_run(x2, packed, w_scale, bias, float_rows=None):
    return _LINEAR_DYNAMIC(x2, packed, True)  # reduce range: see the module docstring


for _engine in ENGINES:
    register(GemmPath(_engine, "dynamic", lambda e=_engine: e in torch.backends.quantized.supported_engines,
                      lambda q, s, b, e=_engine: prepack(q, s, b, e), _engine_run))


# -- weight-only -------------------------------------------------------------------------------


def _fp16_available() -> bool:
    return "fbgemm" in torch.backends.quantized.supported_engines and hasattr(torch.ops.quantized,
                                                                               "linear_prepack_fp16")


def _fp16_run(x2, packed, w_scale, bias, float_rows=None):
    y = torch.ops.quantized.linear_dynamic_fp16(x2, packed)
    if bias is None:
        return y.mul_(w_scale)
    return torch.addcmul(bias, y, w_scale, out=y)


register(GemmPath("fp16-levels", "weight-only", _fp16_available,
                  lambda q, s, b: _packed_under("fbgemm", lambda: torch.ops.quantized.linear_prepack_fp16(q.float(), None)),
                  _fp16_run, auto=False))


def _native_pack(q, s, b):
    return {"weight": q.contiguous(), "scale": s.float().expand(q.shape[0]).contiguous(),
            "bias": None if b is None else b.float().contiguous()}


def _native_run(x2, packed, w_scale, bias, float_rows=None):
    return native.int8_weight_gemm(x2, packed["weight"], packed["scale"], packed["bias"])


register(GemmPath("int8-native", "weight-only", lambda: native.library() is not None, _native_pack, _native_run,
                  max_rows=64))


def _int8pack_run(x2, packed, w_scale, bias, float_rows=None):
    y = torch._weight_int8pack_mm(x2, packed["weight"], packed["scale"])
    return y if bias is None else y.add_(bias)


@lru_cache(maxsize=1)
def weight_int8pack_is_fast() -> bool:
    """Whether `torch._weight_int8pack_mm` on float32 beats a float32 matmul of the same shape
    here (a ~5 ms probe): it is a tuning candidate only then, since where it has no vectorised
    float32 kernel one call at a large M takes seconds (measured 0.7 s at 64 x 4096 x 4096)."""
    if not hasattr(torch, "_weight_int8pack_mm"):
        return False
    x, s = torch.randn(64, 512), torch.rand(512) + 0.5
    w = torch.randint(-127, 128, (512, 512), dtype=torch.int8)
    wf = w.float()
    try:
        return _best(lambda: torch._weight_int8pack_mm(x, w, s)) <= _best(lambda: x @ wf.t())
    except RuntimeError:
        return False


def _best(fn) -> float:
    """Best of three timed calls after one warm-up."""
    fn()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


register(GemmPath("int8pack", "weight-only", weight_int8pack_is_fast,
                  lambda q, s, b: {"weight": q, "scale": s.expand(q.shape[0]).contiguous()}, _int8pack_run))


def _tiled_pack(q, s, b):
    rows = max(1, min(q.shape[0] // 4, TILE_VALUES // max(q.shape[1], 1)))
    return {"weight": q, "tile": torch.empty((rows, q.shape[1]), dtype=torch.float32)}


def _tiled_run(x2, packed, w_scale, bias, float_rows=None):
    q, tile = packed["weight"], packed["tile"]
    rows = tile.shape[0]
    yt = torch.empty((q.shape[0], x2.shape[0]), dtype=torch.float32)
    xt = x2.t()
    for r in range(0, q.shape[0], rows):
        t = tile[: min(rows, q.shape[0] - r)]
        t.copy_(q[r : r + rows])  # int8 -> float32 levels, exact, into the reused tile
        torch.mm(t, xt, out=yt[r : r + rows])
    y = yt.t()
    if bias is None:
        return (y * w_scale).contiguous()
    return torch.addcmul(bias, y, w_scale)


register(GemmPath("tiled", "weight-only", lambda: True, _tiled_pack, _tiled_run))


def activation_step(x: torch.Tensor, path: str) -> torch.Tensor:
    """The activation quantisation step a dynamic path uses for each row of x (M, K), as a (M, 1)
    tensor for error bounds: int_mm quantises each row on its own (max|x_row| / 127), the
    engines the whole batch on one asymmetric 7-bit grid ((max - min) / 127)."""
    if path == "int_mm":
        if x.shape[1] == 0:
            return x.new_zeros((len(x), 1))
        return (x.abs().amax(dim=1, keepdim=True) / 127).clamp(min=SCALE_MIN)
    if path not in ENGINES:
        raise TensorError(f"{path!r} is not a dynamic int8 path (known: int_mm, {', '.join(ENGINES)})", field="path")
    lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    return torch.full((x.shape[0], 1), (hi - lo) / 127)
