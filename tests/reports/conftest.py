"""Fixtures shared by the Design-In report tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from luma.kb.knowledge_base import KnowledgeBase
from luma.rules.engine import Engine
from luma.settings import Settings


@pytest.fixture
def chain_home(luma_home, signed):
    """A project holding the given chain documents, signed, ingested and reasoned over."""

    def make(docs: list[dict]) -> Path:
        files = [signed(doc, f"chain-{n}.json") for n, doc in enumerate(docs)]
        with KnowledgeBase.open(Settings.from_env(home=luma_home)) as kb:
            kb.ingest(files, submitter="test")
            Engine(kb).run()
        return luma_home

    return make
