"""Fixtures of the import tests: a fresh project with a trusted runner key, the target the trials
are placed at (the llama.cpp TinyLlama contract: p90 TTFT and p90 TPOT), and a writable copy of the
shipped MLPerf sample."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from luma.experiments.imports import mlperf_results


@pytest.fixture
def project(tmp_path):
    """Settings of a fresh project whose runner key `runner-a` is trusted."""
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.kb.operations.runner_keys import keygen
    from luma.settings import Settings

    settings = Settings.from_env(home=tmp_path / "home")
    with KnowledgeBase.open(settings) as kb:
        keygen(kb, "runner-a")
    return settings


@pytest.fixture
def where_at():
    """Trials at kv_cache=256 MiB of llamacpp-tinyllama-kv on a named CPU, the contract held at
    the given load (concurrency, output tokens; None: the contract's own)."""
    from luma.experiments.imports.placement import target

    def at(concurrency=None, max_new_tokens=None):
        return target("llamacpp-tinyllama-kv", ["kv_cache=256MiB"], architecture="AMD EPYC 7B13", kind="cpu",
                      vendor="AMD", concurrency=concurrency, max_new_tokens=max_new_tokens)
    return at


@pytest.fixture
def where(where_at):
    """The synthetic files' load: concurrency 1, 32 output tokens."""
    return where_at(1, 32)


@pytest.fixture
def mlperf_copy(tmp_path) -> Path:
    """The shipped MLPerf v4.1 sample, copied where a test may change it."""
    dest = tmp_path / "inference_results_v4.1"
    shutil.copytree(mlperf_results.sample_path(), dest)
    return dest
