"""`luma.kb.records.template`: every kind's skeleton is valid against its model, shows every field
of its model (filled in or commented out), and says what each clause needs observed."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import BaseModel

from luma.kb.records import judge
from luma.kb.records.documents import parse_yaml
from luma.kb.records.kinds import BY_NAME, COMMAND_ONLY, FILE_KINDS
from luma.kb.records.loader import validate_document
from luma.kb.records.template import _model_of, describe, template
from luma.kb.records.template_examples import EXAMPLES, example

KINDS = [k for k in FILE_KINDS if k not in COMMAND_ONLY]


def test_every_kind_a_file_may_hold_has_an_example():
    assert sorted(EXAMPLES) == sorted(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_yaml_and_json_templates_are_the_example_record(kind):
    want = validate_document(example(kind), kind).content_hash
    docs = [d for d in parse_yaml(template(kind), kind) if d is not None]
    assert len(docs) == 1
    assert validate_document(docs[0], kind).content_hash == want
    assert validate_document(json.loads(template(kind, "json")), kind).content_hash == want


def _fields(model: type[BaseModel], doc, path: str = ""):
    """(path, name) of every field of `model` and of the blocks `doc` fills in."""
    for name, info in model.model_fields.items():
        yield path, name
        sub, value = _model_of(info.annotation), (doc or {}).get(name) if isinstance(doc, dict) else None
        if sub is not None and isinstance(value, dict) and name != "dimensions":
            yield from _fields(sub, value, f"{path}{name}.")
        elif sub is not None and isinstance(value, list) and value and isinstance(value[0], dict):
            yield from _fields(sub, value[0], f"{path}{name}[0].")


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_of_the_model_is_shown_filled_in_or_commented_out(kind):
    text = template(kind)
    model = BY_NAME[kind].model_class()
    for path, name in _fields(model, example(kind)):
        assert re.search(rf"(^|[\s{{,#-]){re.escape(name)}:", text, re.M), f"{kind}: {path}{name} is not shown"


@pytest.mark.parametrize("kind", ["pex-chain", "pex-trial"])
def test_every_field_of_a_pex_record_is_explained_not_only_typed(kind):
    model = BY_NAME[kind].model_class()
    for path, name in _fields(model, example(kind)):
        owner = model
        for part in filter(None, path.rstrip(".").split(".")):
            owner = _model_of(owner.model_fields[part.removesuffix("[0]")].annotation)
        assert not describe(owner, name).startswith("["), f"{kind}: {path}{name} has only its type"


def test_each_clause_and_observation_says_what_ingest_needs():
    text = template("pex-chain")
    clause = next(line for line in text.splitlines() if "metric: p95_ttft, op:" in line)
    assert "p95_ttft.ci_low" in clause and "p95_ttft.samples" in clause
    assert f"at least {judge.min_requests(0.95)} requests" in clause
    samples = next(line for line in text.splitlines() if "metric: p95_ttft.samples" in line)
    assert "at least 72" in samples and "INCONCLUSIVE" in samples
    assert "luma runner sign FILE" in text


def test_numbers_in_exponent_form_stay_numbers_in_yaml_1_1_and_1_2():
    # 5e-06 would be text to a YAML 1.1 reader; the loader refuses the ambiguity outright.
    assert "5.0e-06" in template("pilot-decision")
