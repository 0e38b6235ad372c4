"""LUMA's own fused int8 quantize, compiled for this CPU at first use and called through ctypes.

ATen has no one-pass float32 -> int8 quantize that writes into a caller's buffer (its
`quantize_per_tensor` makes a fresh quantized tensor per call), and the blockwise torch pass
(`torch_ops.quantize_into`: multiply, round, clamp, cast) reads and writes its temporary four
times: 0.39-0.43 of copy bandwidth on an AVX-512 host. This kernel does it in one pass: multiply
by the float32 reciprocal, clamp to +-lim in float, convert with round-half-to-even (the default
MXCSR mode, the rounding `torch.round` uses), narrow to int8; 512-bit on AVX-512 BW, 256-bit on
AVX2, scalar `nearbyintf` elsewhere and for the tail. Outputs larger than the cache are written
with non-temporal stores (no read-for-ownership of the destination): a quantized weight or a
large activation buffer is read later by a GEMM, not now.

It is built with `cc -O3 -march=native` into the kernel cache (`luma.settings.kernel_cache`),
named by a digest of the source, the compiler and this CPU's model and flags, so a home shared
between machines never loads another CPU's build. No compiler, a failed build or a library that
will not load: `library()` is None (with `unavailable()` saying why) and callers use the torch
pass. A NaN (only reachable when the caller skipped the finiteness check) becomes -lim.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import torch

from luma.experiments.host import cpu
from luma.settings import kernel_cache

SOURCE = r"""
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

static inline float clampf(float v, float lim) { return v < -lim ? -lim : (v > lim ? lim : v); }

/* q[i] = int8(round_half_even(clamp(x[i] * inv, -lim, lim))); NaN -> -lim. */
void luma_quantize_f32(const float *x, int8_t *q, int64_t n, float inv, float lim, int stream) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  const __m512 vinv = _mm512_set1_ps(inv), hi = _mm512_set1_ps(lim), lo = _mm512_set1_ps(-lim);
  if (stream) /* non-temporal 512-bit stores want 64-byte aligned destinations */
    for (; i < n && ((uintptr_t)(q + i) & 63); i++) q[i] = (int8_t)nearbyintf(clampf(x[i] * inv, lim));
#define LUMA_Q16(off) _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps( \
    _mm512_mul_ps(_mm512_loadu_ps(x + i + (off)), vinv), lo), hi)))
#define LUMA_Q64(off) _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(LUMA_Q16((off) + 16), \
    LUMA_Q16(off))), _mm256_set_m128i(LUMA_Q16((off) + 48), LUMA_Q16((off) + 32)), 1)
  if (stream) {
    /* 128 values a step, the input prefetched 4 KiB ahead: one core's read bandwidth is the limit */
    for (; i + 128 <= n; i += 128) {
      for (int p = 0; p < 128; p += 16) _mm_prefetch((const char *)(x + i + 1024 + p), _MM_HINT_T0);
      __m512i a = LUMA_Q64(0), b = LUMA_Q64(64);
      _mm512_stream_si512((__m512i *)(q + i), a);
      _mm512_stream_si512((__m512i *)(q + i + 64), b);
    }
    _mm_sfence();
  } else {
    for (; i + 64 <= n; i += 64) {
      __m128i a = LUMA_Q16(0), b = LUMA_Q16(16), c = LUMA_Q16(32), d = LUMA_Q16(48);
      _mm_storeu_si128((__m128i *)(q + i), a); _mm_storeu_si128((__m128i *)(q + i + 16), b);
      _mm_storeu_si128((__m128i *)(q + i + 32), c); _mm_storeu_si128((__m128i *)(q + i + 48), d);
    }
  }
#elif defined(__AVX2__)
  const __m256 vinv = _mm256_set1_ps(inv), hi = _mm256_set1_ps(lim), lo = _mm256_set1_ps(-lim);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
#define LUMA_Q8(off) _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps( \
    _mm256_mul_ps(_mm256_loadu_ps(x + i + (off)), vinv), lo), hi))
  for (; i + 32 <= n; i += 32) {
    /* packs work per 128-bit lane: the permute puts the four groups of eight back in order */
    __m256i ab = _mm256_packs_epi32(LUMA_Q8(0), LUMA_Q8(8)), cd = _mm256_packs_epi32(LUMA_Q8(16), LUMA_Q8(24));
    __m256i v = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), order);
    if (stream && !((uintptr_t)(q + i) & 31)) _mm256_stream_si256((__m256i *)(q + i), v);
    else _mm256_storeu_si256((__m256i *)(q + i), v);
  }
  if (stream) _mm_sfence();
#endif
  for (; i < n; i++) q[i] = (int8_t)nearbyintf(clampf(x[i] * inv, lim));
}

/* Weight-only int8: y[m][n] = s[n] * sum_k x[m][k] * q[n][k] (+ b[n]), float32 accumulation, the
   int8 levels widened in registers: the weight is read at 1 byte per value, never materialised in
   float. Blocks of four weight rows by four activation rows (x stays in cache: meant for small M). */
#if defined(__AVX512F__)
static inline __m512 luma_w16(const int8_t *p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
static float luma_dot1(const int8_t *q, const float *x, int64_t K) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    a0 = _mm512_fmadd_ps(luma_w16(q + k), _mm512_loadu_ps(x + k), a0);
    a1 = _mm512_fmadd_ps(luma_w16(q + k + 16), _mm512_loadu_ps(x + k + 16), a1);
    a2 = _mm512_fmadd_ps(luma_w16(q + k + 32), _mm512_loadu_ps(x + k + 32), a2);
    a3 = _mm512_fmadd_ps(luma_w16(q + k + 48), _mm512_loadu_ps(x + k + 48), a3);
  }
  for (; k + 16 <= K; k += 16) a0 = _mm512_fmadd_ps(luma_w16(q + k), _mm512_loadu_ps(x + k), a0);
  float acc = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; k < K; k++) acc += (float)q[k] * x[k];
  return acc;
}
/* out[r * 4 + c] = sum_k x[r][k] * q[c][k] for four activation rows and four weight rows: 16
   accumulators, so each widened weight vector and each loaded activation vector serves four FMAs. */
static void luma_block44(const int8_t *q, const float *x, int64_t K, float *out) {
  __m512 acc[16];
  for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 w0 = luma_w16(q + k), w1 = luma_w16(q + K + k), w2 = luma_w16(q + 2 * K + k), w3 = luma_w16(q + 3 * K + k);
    for (int r = 0; r < 4; r++) {
      __m512 v = _mm512_loadu_ps(x + r * K + k);
      acc[r * 4 + 0] = _mm512_fmadd_ps(w0, v, acc[r * 4 + 0]);
      acc[r * 4 + 1] = _mm512_fmadd_ps(w1, v, acc[r * 4 + 1]);
      acc[r * 4 + 2] = _mm512_fmadd_ps(w2, v, acc[r * 4 + 2]);
      acc[r * 4 + 3] = _mm512_fmadd_ps(w3, v, acc[r * 4 + 3]);
    }
  }
  for (int i = 0; i < 16; i++) {
    float t = _mm512_reduce_add_ps(acc[i]);
    const int8_t *qc = q + (i % 4) * K;
    const float *xr = x + (i / 4) * K;
    for (int64_t j = k; j < K; j++) t += (float)qc[j] * xr[j];
    out[i] = t;
  }
}
#else
static float luma_dot1(const int8_t *q, const float *x, int64_t K) {
  float acc = 0.0f;
  for (int64_t k = 0; k < K; k++) acc += (float)q[k] * x[k];
  return acc;
}
static void luma_block44(const int8_t *q, const float *x, int64_t K, float *out) {
  for (int i = 0; i < 16; i++) out[i] = luma_dot1(q + (i % 4) * K, x + (i / 4) * K, K);
}
#endif

void luma_int8_weight_gemm(const float *x, const int8_t *q, const float *s, const float *b, float *y,
                           int64_t M, int64_t K, int64_t N) {
  float r[16];
  int64_t n = 0;
  for (; n + 4 <= N; n += 4) {  /* four weight rows at a time: they stay in L1/L2 for every m */
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) {
      luma_block44(q + n * K, x + m * K, K, r);
      for (int i = 0; i < 16; i++) {
        int64_t c = n + i % 4;
        y[(m + i / 4) * N + c] = r[i] * s[c] + (b ? b[c] : 0.0f);
      }
    }
    for (; m < M; m++)
      for (int64_t c = n; c < n + 4; c++) y[m * N + c] = luma_dot1(q + c * K, x + m * K, K) * s[c] + (b ? b[c] : 0.0f);
  }
  for (; n < N; n++)
    for (int64_t m = 0; m < M; m++) y[m * N + n] = luma_dot1(q + n * K, x + m * K, K) * s[n] + (b ? b[n] : 0.0f);
}
"""

#: Outputs from this many bytes on are written with non-temporal stores (past a core's L2).
STREAM_BYTES = 4 << 20


def _compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def _library_path(compiler: str) -> Path:
    host = cpu()
    key = "\0".join([SOURCE, os.path.realpath(compiler), host["cpu_model"] or "", " ".join(host["isa"]),
                     host["machine"] or ""])
    return kernel_cache() / f"luma-native-{hashlib.sha256(key.encode()).hexdigest()[:16]}.so"


def _build(compiler: str, target: Path) -> str | None:
    """Compile SOURCE into `target` (atomically); None, or why it failed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="luma-native-", dir=target.parent) as tmp:
        src, lib = Path(tmp) / "native.c", Path(tmp) / "native.so"
        src.write_text(SOURCE)
        try:
            built = subprocess.run([compiler, "-O3", "-march=native", "-shared", "-fPIC", "-o", str(lib), str(src),
                                    "-lm"], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"the native kernel did not build: {exc}"
        if built.returncode != 0:
            return "the native kernel did not build: " + (built.stderr.strip().splitlines() or ["?"])[-1][:200]
        os.replace(lib, target)
    return None


_why: list[str] = []


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL | None:
    """The compiled kernel library, built on first use; None where it cannot be (see `unavailable`)."""
    compiler = _compiler()
    if compiler is None:
        _why.append("no C compiler (cc, gcc or clang) on PATH")
        return None
    try:
        path = _library_path(compiler)
        for attempt in range(2):
            if not path.is_file() or attempt:
                failed = _build(compiler, path)
                if failed:
                    _why.append(failed)
                    return None
            try:
                lib = ctypes.CDLL(str(path))
                break
            except OSError as exc:  # a truncated or foreign file: build it once more
                if attempt:
                    _why.append(f"the native kernel did not load: {exc}")
                    return None
    except OSError as exc:  # an unwritable cache folder
        _why.append(f"the native kernel has no cache folder to live in: {exc}")
        return None
    lib.luma_quantize_f32.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float,
                                      ctypes.c_float, ctypes.c_int]
    lib.luma_quantize_f32.restype = None
    lib.luma_int8_weight_gemm.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 3
    lib.luma_int8_weight_gemm.restype = None
    return lib


def unavailable() -> str | None:
    """Why the native kernel is not used here (None when it is)."""
    return None if library() is not None else (_why[-1] if _why else "unknown")


def int8_weight_gemm(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x (M, K) float32 times the int8 levels q (N, K) with one float32 scale per output channel
    (N,), plus bias: float32 (M, N). The caller checks shapes and dtypes (contiguous float32 x,
    int8 q, float32 scale and bias) and that `library()` is there."""
    m, k = x.shape
    y = torch.empty((m, q.shape[0]), dtype=torch.float32)
    library().luma_int8_weight_gemm(x.data_ptr(), q.data_ptr(), scale.data_ptr(),
                                    None if bias is None else bias.data_ptr(), y.data_ptr(), m, k, q.shape[0])
    return y


def quantize_f32(x: torch.Tensor, out: torch.Tensor, inv: float, lim: float) -> bool:
    """out = int8(round(clamp(x * inv, -lim, lim))) in one pass over contiguous float32 `x` into
    contiguous int8 `out` of the same size; False (nothing written) where the kernel is not available."""
    lib = library()
    if lib is None or x.dtype != torch.float32 or out.dtype != torch.int8 or x.device.type != "cpu" \
            or not (x.is_contiguous() and out.is_contiguous()) or x.numel() != out.numel():
        return False
    lib.luma_quantize_f32(x.data_ptr(), out.data_ptr(), x.numel(), inv, lim, int(x.numel() >= STREAM_BYTES))
    return True
