"""Boundary search along one ordered dimension: the minimum PASS level and the adjacent FAIL.

Levels are ordered from least to most of the resource. Monotonicity is assumed (more of a
resource never turns PASS into FAIL), so bisection needs ⌈log₂(L+1)⌉ single trials to place
the boundary among L levels, then `repetitions − 1` more at the minimum PASS to show it
reproduces: ⌈log₂ L⌉ + repetitions trials at most, against L × repetitions for a sweep.

Where trials contradict monotonicity — a repetition of the minimum PASS fails, or a level
below a FAIL passes — the contradiction is recorded and the search goes on above the level
that failed (a PASS that does not reproduce is not a PASS).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Boundary:
    """Where the boundary lies, and the trials it took."""

    levels: int
    min_pass: int | None = None  # index of the minimum PASS level (None: nothing passed)
    adjacent_fail: int | None = None  # index of the FAIL level just below (None: all passed)
    verdicts: dict[int, list[str]] = field(default_factory=dict)
    trials: int = 0
    contradictions: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.min_pass is not None and self.adjacent_fail is not None


def find(levels: int, probe: Callable[[int], str], repetitions: int = 1, start: int | None = None,
         known: dict[int, str] | None = None) -> Boundary:
    """Bisect `levels` with `probe(index) -> "PASS"|"FAIL"|"INCONCLUSIVE"`; INCONCLUSIVE counts
    as not PASS. `start`: a predicted level to probe first (then its neighbour). `known`:
    verdicts already measured (e.g. the level an intervention was shown to pass at)."""
    b = Boundary(levels)
    lo, hi = -1, levels  # lo: highest level known not to pass; hi: lowest level known to pass

    def run(i: int) -> str:
        v = probe(i)
        b.trials += 1
        b.verdicts.setdefault(i, []).append(v)
        return v

    for i, v in sorted((known or {}).items()):
        b.verdicts.setdefault(i, []).append(v)
        if v == "PASS":
            hi = min(hi, i)
        else:
            lo = max(lo, i)
    if start is not None and lo < start < hi:
        if run(start) == "PASS":
            hi = start
            if start - 1 > lo:
                if run(start - 1) == "PASS":
                    hi = start - 1
                else:
                    lo = start - 1
        else:
            lo = start
            if start + 1 < hi:
                if run(start + 1) == "PASS":
                    hi = start + 1
                else:
                    lo = start + 1
    while True:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if run(mid) == "PASS":
                hi = mid
            else:
                lo = mid
        if hi >= levels:
            break  # nothing passes in range
        passes = [v for v in b.verdicts.get(hi, []) if v == "PASS"]
        failed = False
        while len(passes) < repetitions:
            v = run(hi)
            if v != "PASS":
                b.contradictions.append(f"level {hi} passed then gave {v} on repetition {len(passes) + 1}")
                failed = True
                break
            passes.append(v)
        if not failed:
            break
        # Not reproducible: treat it as not passing and search above it.
        lo = hi
        hi = next((i for i in sorted(b.verdicts) if i > lo and "PASS" in b.verdicts[i]
                   and all(x == "PASS" for x in b.verdicts[i])), levels)
    for i, vs in b.verdicts.items():
        if i < lo and "PASS" in vs:
            b.contradictions.append(f"level {i} passed below a level that did not")
    if hi < levels:
        b.min_pass = hi
        b.adjacent_fail = hi - 1 if hi - 1 >= 0 else None
        if b.adjacent_fail is not None and b.adjacent_fail not in b.verdicts:
            b.adjacent_fail = None  # never measured (only possible when `known` placed it)
    return b
