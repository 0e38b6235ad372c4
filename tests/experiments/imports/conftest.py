"""Fixtures of the import tests: a fresh project with a trusted runner key, and the target the
trials are placed at (the llama.cpp TinyLlama contract: p90 TTFT and p90 TPOT)."""

from __future__ import annotations

import pytest


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
def where():
    """Trials at kv_cache=256 MiB of llamacpp-tinyllama-kv on a named CPU."""
    from luma.experiments.imports.placement import target

    return target("llamacpp-tinyllama-kv", ["kv_cache=256MiB"], architecture="AMD EPYC 7B13", kind="cpu",
                  vendor="AMD")
