"""This core's int8 and fp32 compute peaks, measured: the yardstick for an int8 GEMM's speed-up.

A small C program, compiled at run time with `cc -O2 -march=native`, times a long loop of
independent int8 dot-product instructions (AVX-512 VNNI `vpdpbusd` on 512 bits, else AVX-VNNI on
256 bits, else AVX2's `vpmaddubsw` + `vpmaddwd` + `vpaddd` emulation) and one of independent fp32
FMAs (512-bit where AVX-512 F is there, else 256-bit). Twelve accumulators per loop cover the
instructions' latency, so the loops run at the issue rate. It reports multiply-accumulates per
nanosecond and per TSC cycle (the TSC ticks at a fixed rate, not the core clock, so the ratio of
the two peaks is the figure that compares), and the ISA each loop used.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = r"""
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
#define ITERS 20000000L
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
#define R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
int main(void) {
  volatile int seed = 1; volatile float fseed = 1.0f;
  double t0, t1; unsigned long long c0, c1; long it;
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  const char *int8_isa = "avx512_vnni vpdpbusd zmm"; const int int8_macs = 64;
  __m512i a = _mm512_set1_epi8((char)seed), b = _mm512_set1_epi8(1);
#define DECL(i) __m512i acc##i = _mm512_set1_epi32(i);
#define STEP(i) acc##i = _mm512_dpbusd_epi32(acc##i, a, b);
#define SINK(i) sink += _mm512_reduce_add_epi32(acc##i);
#elif defined(__AVXVNNI__)
  const char *int8_isa = "avx_vnni vpdpbusd ymm"; const int int8_macs = 32;
  __m256i a = _mm256_set1_epi8((char)seed), b = _mm256_set1_epi8(1);
#define DECL(i) __m256i acc##i = _mm256_set1_epi32(i);
#define STEP(i) acc##i = _mm256_dpbusd_avx_epi32(acc##i, a, b);
#define SINK(i) sink += _mm256_extract_epi32(acc##i, 0);
#elif defined(__AVX2__)
  const char *int8_isa = "avx2 vpmaddubsw+vpmaddwd+vpaddd ymm"; const int int8_macs = 32;
  __m256i a = _mm256_set1_epi8((char)seed), b = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
#define DECL(i) __m256i acc##i = _mm256_set1_epi32(i);
#define STEP(i) acc##i = _mm256_add_epi32(acc##i, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
#define SINK(i) sink += _mm256_extract_epi32(acc##i, 0);
#else
#error "no x86 SIMD int8 dot product"
#endif
  long long sink = 0;
  R12(DECL)
  t0 = now(); c0 = __rdtsc();
  for (it = 0; it < ITERS; it++) { R12(STEP) __asm__ volatile("" ::: "memory"); }
  c1 = __rdtsc(); t1 = now();
  R12(SINK)
  double int8_s = t1 - t0, int8_c = (double)(c1 - c0);
#undef DECL
#undef STEP
#undef SINK
#if defined(__AVX512F__)
  const char *fp32_isa = "avx512f vfmadd zmm"; const int fp32_fmas = 16;
  __m512 x = _mm512_set1_ps(fseed), y = _mm512_set1_ps(0.999f);
#define DECL(i) __m512 f##i = _mm512_set1_ps((float)i);
#define STEP(i) f##i = _mm512_fmadd_ps(f##i, y, x);
#define SINK(i) fsink += _mm512_reduce_add_ps(f##i);
#else
  const char *fp32_isa = "fma vfmadd ymm"; const int fp32_fmas = 8;
  __m256 x = _mm256_set1_ps(fseed), y = _mm256_set1_ps(0.999f);
#define DECL(i) __m256 f##i = _mm256_set1_ps((float)i);
#define STEP(i) f##i = _mm256_fmadd_ps(f##i, y, x);
#define SINK(i) { float t[8]; _mm256_storeu_ps(t, f##i); fsink += t[0]; }
#endif
  float fsink = 0;
  R12(DECL)
  t0 = now(); c0 = __rdtsc();
  for (it = 0; it < ITERS; it++) { R12(STEP) __asm__ volatile("" ::: "memory"); }
  c1 = __rdtsc(); t1 = now();
  R12(SINK)
  double fp32_s = t1 - t0, fp32_c = (double)(c1 - c0);
  double n = 12.0 * ITERS;
  printf("int8_isa=%s\nint8_macs_per_ns=%.4f\nint8_macs_per_tsc_cycle=%.4f\n", int8_isa,
         n * int8_macs / int8_s * 1e-9, n * int8_macs / int8_c);
  printf("fp32_isa=%s\nfp32_fmas_per_ns=%.4f\nfp32_fmas_per_tsc_cycle=%.4f\n", fp32_isa,
         n * fp32_fmas / fp32_s * 1e-9, n * fp32_fmas / fp32_c);
  printf("sink=%lld %f\n", sink, (double)fsink);
  return 0;
}
"""


def measure(runs: int = 3) -> dict:
    """{"int8_isa", "int8_macs_per_ns", "fp32_isa", "fp32_fmas_per_ns", ..., "ratio"} (the best
    of `runs` runs of each loop), or {"skipped": reason} where it cannot be measured here."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        return {"skipped": "no C compiler (cc, gcc or clang) on PATH to build the peak microbenchmark"}
    with tempfile.TemporaryDirectory(prefix="luma-peak-") as tmp:
        src, exe = Path(tmp) / "peak.c", Path(tmp) / "peak"
        src.write_text(SOURCE)
        try:
            built = subprocess.run([compiler, "-O2", "-march=native", "-o", str(exe), str(src)],
                                   capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            return {"skipped": f"the peak microbenchmark did not build: {exc}"}
        if built.returncode != 0:
            return {"skipped": "the peak microbenchmark did not build with -march=native here: "
                               + (built.stderr.strip().splitlines() or ["?"])[-1][:200]}
        best: dict = {}
        for _ in range(runs):
            try:
                done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, check=True)
            except (OSError, subprocess.SubprocessError) as exc:
                return {"skipped": f"the peak microbenchmark failed: {exc}"}
            for line in done.stdout.splitlines():
                key, _, value = line.partition("=")
                if key.endswith("_isa"):
                    best[key] = value
                elif key != "sink":
                    best[key] = max(best.get(key, 0.0), float(value))
    best["ratio"] = best["int8_macs_per_ns"] / best["fp32_fmas_per_ns"]
    return best
