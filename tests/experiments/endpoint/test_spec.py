"""Endpoint contracts (`[service] kind = "openai-endpoint"`): every mistake is a ConfigError
naming the file and field, before any server starts; the sprint's plan refuses dimensions no
hook sets."""

from __future__ import annotations

import json
import tomllib

import pytest

from luma.errors import ConfigError
from luma.experiments.sprint import contract, pex as sprint
from luma.experiments.sprint.contract import shipped

BASE = shipped()["llamacpp-minilm-memory"]


def _write(tmp_path, edit) -> str:
    data = tomllib.loads(BASE.read_text())
    edit(data)
    import json

    def toml(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f'"{k}" = {toml(x)}' for k, x in v.items()) + "}"
        return json.dumps(v)

    lines = []
    for k, v in data.items():
        if not isinstance(v, (dict, list)) or (isinstance(v, list) and v and not isinstance(v[0], dict)):
            lines.append(f"{k} = {toml(v)}")
    for k, v in data.items():
        if isinstance(v, dict):
            lines.append(f"[{k}]")
            lines += [f'"{kk}" = {toml(vv)}' for kk, vv in v.items()]
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for row in v:
                lines.append(f"[[{k}]]")
                lines += [f'"{kk}" = {toml(vv)}' for kk, vv in row.items()]
    path = tmp_path / "c.toml"
    path.write_text("\n".join(lines))
    return str(path)


def test_the_shipped_llama_cpp_contract_plans():
    c = contract.load("llamacpp-minilm-memory")
    assert c.service == "openai-endpoint" and c.endpoint.engine == "llama.cpp"
    p = sprint.plan(c)
    assert (p.baseline, p.variant, p.dimension) == ("f16", "q8_0", "host_memory")
    assert p.contract.record_contract()["name"] == "llamacpp-minilm-memory"


@pytest.mark.parametrize("edit, field, words", [
    (lambda d: d["service"].update(kind="grpc"), "service.kind", "describes an 'openai-endpoint' service"),
    (lambda d: d["service"].update(launch=["x", "{prot}"]), "service", "unknown placeholder {prot}"),
    (lambda d: d["service"].update(launch=["x", "--model", "{model}"]), "service", "must listen on {port}"),
    (lambda d: d["service"].update(baseline="f32"), "service", "baseline: 'f32' is not one of the variants"),
    (lambda d: d["service"]["interventions"].update({"int8-weights": "q4"}), "service", "'q4' is not one of"),
    (lambda d: d["service"].pop("launch"), "service", "give a launch command template, or the base_url"),
    (lambda d: d["service"]["variants"]["f16"].update(model="x/y"), "service", "either a `file`"),
    (lambda d: d["service"].update(quality="none"), "clauses", "scores no quality"),
    (lambda d: d["service"].update(api="rerank"), "service.api", "embeddings"),
    (lambda d: d["clauses"].append({"metric": "p95_ttft", "op": "<=", "value": 1, "unit": "s"}), "clauses",
     "needs a generative service"),
])
def test_bad_endpoint_contracts_name_the_field(tmp_path, edit, field, words):
    with pytest.raises(ConfigError) as exc:
        contract.load(_write(tmp_path, edit))
    assert words in str(exc.value) and (exc.value.field or "").startswith(field.split(".")[0])


def test_service_string_without_its_table_is_refused(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('name = "x"\nservice = "openai-endpoint"\n[[clauses]]\nmetric = "throughput"\nop = ">="\n'
                    'value = 1\nunit = "1/s"\n')
    with pytest.raises(ConfigError, match="is a \\[service\\] table"):
        contract.load(str(path))


@pytest.mark.parametrize("dimension, levels, words", [
    ("kv_cache", ["512 token", "1024 token"], "no hook of its [service] table sets kv_cache"),
    ("runtime", ["avx2", "default"], "has no runtime"),
])
def test_dimensions_no_hook_sets_are_refused(dimension, levels, words):
    c = contract.load("llamacpp-minilm-memory")
    with pytest.raises(ConfigError) as exc:
        sprint.plan(c, dimension, levels)
    assert words in str(exc.value)


def test_accelerators_this_host_lacks_are_refused(monkeypatch):
    from luma.experiments.endpoint import gpu

    monkeypatch.setattr(gpu, "count", lambda: 1)
    c = contract.load("llamacpp-minilm-memory")
    with pytest.raises(ConfigError, match="2 accelerators asked, this host has 1 NVIDIA GPU"):
        sprint.plan(c, "accelerator_count", ["1 accelerator", "2 accelerator"])


def test_kv_levels_in_tokens_reach_an_endpoint_but_not_the_in_process_decoder(tmp_path):
    path = _write(tmp_path, lambda d: d["service"]["launch"].extend(["--n_ctx", "{kv_cache}"]))
    p = sprint.plan(contract.load(path), "kv_cache", ["1024 token", "512 token"])
    assert [lv.value for lv in p.levels] == [512, 1024]
    with pytest.raises(ConfigError, match="mix units"):
        sprint.plan(contract.load(path), "kv_cache", ["1024 token", "1 MiB"])
    with pytest.raises(ConfigError, match="sizes its KV cache in bytes"):
        sprint.plan(contract.load("decoder-kv"), "kv_cache", ["512 token", "1024 token"])


def test_a_running_server_cannot_be_swept(tmp_path):
    def edit(d):
        d["service"].pop("launch")
        d["service"]["base_url"] = "http://127.0.0.1:8000"
    c = contract.load(_write(tmp_path, edit))
    with pytest.raises(ConfigError, match="no launch command"):
        sprint.plan(c)


@pytest.mark.parametrize("name", ["llamacpp-minilm-memory", "matvec-memory"])
def test_a_dumped_contract_reads_back_as_itself(name):
    """`luma sprint requalify` re-reads a sprint folder's contract_spec (the model's dump)."""
    c = contract.load(name)
    again = contract.Contract.model_validate(json.loads(json.dumps(c.model_dump(mode="json"))))
    assert again == c


def test_an_endpoint_beside_an_in_process_service_is_refused():
    data = contract.load("matvec-memory").model_dump(mode="json")
    data["endpoint"] = contract.load("llamacpp-minilm-memory").endpoint.model_dump(mode="json")
    with pytest.raises(Exception, match="only an openai-endpoint service has one"):
        contract.Contract.model_validate(data)
