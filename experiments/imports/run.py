"""What every format's parser returns: one benchmark run of an outside tool (`ToolRun`) -- the
tool and its settings, its per-request samples in seconds when its file holds them, and the
tool's own summary figures, kept apart so LUMA's statistics can be set beside the tool's."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

#: Per-request sample kinds, all in seconds: what a clause `pNN_<kind>` is judged on (`itl` is
#: every inter-token gap of every request, flattened; it is kept, not judged: contracts judge tpot).
KINDS = ("ttft", "tpot", "latency", "itl")


@dataclass(frozen=True)
class SourceFile:
    """A file a run was read from: its name (never its folders), SHA-256 and size."""

    path: Path
    sha256: str
    bytes: int

    @classmethod
    def of(cls, path: Path, data: bytes) -> "SourceFile":
        return cls(Path(path), hashlib.sha256(data).hexdigest(), len(data))

    def record(self) -> dict:
        return {"name": self.path.name, "sha256": self.sha256, "bytes": self.bytes}


@dataclass
class ToolRun:
    """One run of a benchmark tool as its file(s) record it.

    `samples[kind]` holds the completed requests' values in seconds, or is absent when the file
    has no per-request values of that kind (summary only). `printed` holds the tool's own
    figures, in the case.json shape: {"ttft_ms": {"p50": …, "mean": …}, "completed": n, …}.
    """

    tool: str
    files: list[SourceFile]
    version: str | None = None
    #: Why the version is None (the file does not say), so the record can state it.
    version_reason: str | None = None
    command: list[str] = field(default_factory=list)
    model: str | None = None
    concurrency: int | None = None
    #: The output length (tokens) the tool asked each request for, when its file records it.
    output_len: int | None = None
    request_rate: float | None = None
    duration_s: float | None = None
    completed: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=dict)
    input_lens: list[int] | None = None
    output_lens: list[int] | None = None
    #: Figures the tool itself printed or saved (its percentile definition, its units).
    printed: dict = field(default_factory=dict)
    #: The tool's percentile definition, in words (docs and the result table say it).
    percentile_definition: str = "linear interpolation between order statistics (numpy.percentile)"
    #: Request throughput (1/s) and output-token throughput (token/s) over the tool's duration.
    throughput: float | None = None
    token_throughput: float | None = None
    #: Why a kind has no samples, when the format never holds them (e.g. "summary only").
    summary_reason: str | None = None
    #: Which run of a file holding several (SGLang appends one line per run): 0 otherwise.
    index: int = 0

    @property
    def label(self) -> str:
        name = self.files[0].path.name if self.files else self.tool
        return f"{name}#{self.index + 1}" if self.index else name

    def has_samples(self, kind: str) -> bool:
        return kind in self.samples
