"""The host lock of a run on several workers (tests/workers.py): a test that needs the host alone
overlaps no other test, and workers that ask for it at once never wait on each other for good."""

from __future__ import annotations

import multiprocessing
import random
import time
from pathlib import Path

from tests.workers import HostLock


def _worker(folder: str, out: str, seed: int, rounds: int) -> None:
    """Tests as a worker runs them: some alone, some shared, some shared with a part alone."""
    lock, rng = HostLock(Path(folder)), random.Random(seed)
    with open(out, "w") as fh:
        for _ in range(rounds):
            kind = rng.choice(["alone", "shared", "part"])
            with lock.held(alone=kind == "alone"):
                t0 = time.monotonic()
                time.sleep(rng.uniform(0, 0.004))
                if kind == "part":
                    # While it waits to be alone it holds nothing: its shared spans are before and after.
                    fh.write(f"shared {t0} {time.monotonic()}\n")
                    with lock.alone():
                        a0 = time.monotonic()
                        time.sleep(rng.uniform(0, 0.004))
                        fh.write(f"alone {a0} {time.monotonic()}\n")
                    t0 = time.monotonic()
                    time.sleep(rng.uniform(0, 0.002))
                fh.write(f"{'alone' if kind == 'alone' else 'shared'} {t0} {time.monotonic()}\n")


def test_a_test_alone_overlaps_no_other_and_no_worker_waits_for_good(tmp_path):
    ctx = multiprocessing.get_context("fork")  # the workers need only this module, as it is
    procs, outs = [], []
    for i in range(3):
        outs.append(tmp_path / f"worker-{i}.txt")
        procs.append(ctx.Process(target=_worker, args=(str(tmp_path), str(outs[-1]), i, 60)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    stuck = [p.pid for p in procs if p.is_alive()]
    for p in procs:
        p.kill()
    assert not stuck, f"workers {stuck} waited for the lock for good"
    spans = [(i, *line.split()) for i, out in enumerate(outs) for line in out.read_text().splitlines()]
    spans = [(i, kind, float(a), float(b)) for i, kind, a, b in spans]
    assert sum(kind == "alone" for _, kind, _, _ in spans) > 30
    for i, kind, a, b in spans:
        if kind != "alone":
            continue
        others = [(j, k, c, d) for j, k, c, d in spans if j != i and c < b and a < d]
        assert not others, (i, a, b, others[:3])
