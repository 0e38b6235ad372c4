"""The pex-trial record's failure message (issue 32): the runner's words of a failed trial, one
line and bounded, only beside a failure cause; the committed JSON Schema says the same."""

from __future__ import annotations

import importlib.resources

import pytest

from luma.errors import RecordError
from luma.kb.records.loader import validate_document
from luma.kb.records.pex_trial import MESSAGE_CHARS, failure_message
from luma.kb.records.schema import schema_text
from luma.kb.records.template_examples import pex_trial


def _failed(**extra) -> dict:
    return {**pex_trial(), "evidence_class": "vendor-claim", "verdict": "FAIL", "failure_cause": "launch", **extra}


def test_a_failed_trial_carries_its_message():
    rec = validate_document(_failed(failure_message="MemoryError: Unable to allocate 59.6 MiB"), "t.json")
    assert rec.model.failure_message == "MemoryError: Unable to allocate 59.6 MiB"


@pytest.mark.parametrize("doc, words", [
    ({**pex_trial(), "evidence_class": "vendor-claim", "failure_message": "boom"}, "only a trial with a failure_cause"),
    (_failed(failure_message="two\nlines"), "failure_message"),
    (_failed(failure_message="x" * (MESSAGE_CHARS + 1)), "failure_message"),
    (_failed(failure_message="   "), "failure_message"),
])
def test_a_message_that_is_not_one_line_of_a_failure_is_refused(doc, words):
    with pytest.raises(RecordError, match=words):
        validate_document(doc, "t.json")


@pytest.mark.parametrize("text, line", [
    ("worker ended with signal 9:\n  Killed", "worker ended with signal 9: Killed"),
    ("  \n\t", None), (None, None), ("x" * 1000, "x" * (MESSAGE_CHARS - 1) + "…"),
])
def test_failure_message_makes_one_bounded_line(text, line):
    assert failure_message(text) == line
    if line:
        validate_document(_failed(failure_message=line), "t.json")


def test_the_committed_schema_is_the_models():
    committed = (importlib.resources.files("luma.ontology") / "pex-trial.schema.json").read_text()
    assert committed == schema_text("pex-trial")
