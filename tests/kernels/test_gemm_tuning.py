"""The measured per-shape-class choice of `auto` (kernels/gemm_tuning.py): buckets, the on-disk
cache (atomic, per machine and torch, never trusted when corrupt or foreign) and the probe."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from luma.kernels import gemm_backend, gemm_tuning  # noqa: E402


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A choice table in tmp_path, and a probe that records its calls instead of timing."""
    monkeypatch.setattr(gemm_tuning, "TABLE", gemm_tuning.ChoiceTable(tmp_path))
    calls = []

    def measure(mode, m, k, n, paths=None, timer=None):
        calls.append((mode, m, k, n))
        return {"path": gemm_backend.candidates(mode)[0], "times_s": {}, "m": m, "k": k, "n": n}

    monkeypatch.setattr(gemm_tuning, "measure", measure)
    return gemm_tuning.TABLE, calls


@given(st.integers(1, 10**6))
def test_every_m_falls_in_one_bucket_whose_representative_is_in_it(m):
    label, rep = gemm_tuning.m_bucket(m)
    (lo, hi) = next((b[1], b[2]) for b in gemm_tuning.M_BUCKETS if b[0] == label)
    assert lo <= m and (hi is None or m <= hi) and lo <= rep and (hi is None or rep <= hi)


@given(st.integers(1, 1 << 20))
def test_size_classes_are_the_next_power_of_two(d):
    c = gemm_tuning.size_class(d)
    assert c >= d and c & (c - 1) == 0 and c < 2 * d


def test_a_class_is_measured_once_and_kept_on_disk(table):
    tab, calls = table
    assert gemm_tuning.choose("dynamic", 3, 1000, 500) == gemm_backend.candidates("dynamic")[0]
    gemm_tuning.choose("dynamic", 4, 1024, 512)  # same class: M 2-4, K 1024, N 512
    assert calls == [("dynamic", 4, 1000, 500)]
    data = json.loads(tab.path.read_text())
    assert data["identity"] == gemm_tuning.identity()
    assert list(data["choices"]) == [gemm_tuning.shape_key("dynamic", 3, 1000, 500)]
    gemm_tuning.reset(tab.folder)  # another process: reads the file, measures nothing
    gemm_tuning.choose("dynamic", 2, 1024, 512)
    assert len(calls) == 1 and not list(tab.folder.glob(".choices-*"))


@pytest.mark.parametrize("content", ["{not json", "[]", json.dumps({"identity": {"torch": "0.1"}, "choices": {}}),
                                     json.dumps({"identity": None, "choices": {"x": {"path": "int_mm"}}})])
def test_a_corrupt_or_foreign_file_is_ignored_and_rewritten(table, content):
    tab, calls = table
    tab.path.write_text(content)
    gemm_tuning.choose("weight-only", 1, 64, 64)
    assert len(calls) == 1
    assert json.loads(tab.path.read_text())["identity"] == gemm_tuning.identity()


def test_an_unwritable_cache_keeps_the_choice_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(gemm_tuning, "TABLE", gemm_tuning.ChoiceTable(blocker / "sub"))
    assert gemm_tuning.choose("dynamic", 1, 32, 32) in gemm_backend.candidates("dynamic")
    assert gemm_tuning.TABLE.get(gemm_tuning.shape_key("dynamic", 1, 32, 32)) is not None


def test_the_cache_follows_luma_kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMA_KERNEL_CACHE", str(tmp_path))
    assert gemm_tuning.ChoiceTable().path == tmp_path / gemm_tuning.FILE_NAME


@pytest.mark.parametrize("mode", ["dynamic", "weight-only"])
def test_the_probe_times_every_candidate_and_picks_the_fastest(mode):
    """A fake clock makes each path's call take a known time: the probe must pick the cheapest."""
    cost = {name: 1.0 + i for i, name in enumerate(reversed(gemm_backend.candidates(mode)))}
    clock = {"now": 0.0, "last": None}
    real = {name: gemm_backend.PATHS[name].run for name in cost}

    def timer():
        return clock["now"]

    patched = {}
    for name in cost:
        def run(*args, name=name, **kw):
            clock["now"] += cost[name]
            return real[name](*args, **kw)
        patched[name] = run
    mp = pytest.MonkeyPatch()
    for name, run in patched.items():
        mp.setitem(gemm_backend.PATHS, name, gemm_backend.GemmPath(**{**gemm_backend.PATHS[name].__dict__, "run": run}))
    try:
        entry = gemm_tuning.measure(mode, 4, 32, 24, timer=timer)
    finally:
        mp.undo()
    assert entry["path"] == min(cost, key=cost.get)
    assert set(entry["times_s"]) == set(cost)


def test_a_cached_choice_this_process_cannot_run_is_measured_again(monkeypatch):
    """A choice made where the native kernel built, read where it does not (no compiler on PATH
    now): measured again among what runs here, never a call into a missing library."""
    from luma.kernels import native

    key = gemm_tuning.shape_key("weight-only", 1, 64, 48)
    gemm_tuning.TABLE.put(key, {"path": "int8-native", "times_s": {}, "m": 1, "k": 64, "n": 48})
    monkeypatch.setattr(native, "library", lambda: None)
    chosen = gemm_tuning.choose("weight-only", 1, 64, 48)
    assert chosen != "int8-native" and chosen in gemm_backend.candidates("weight-only")
