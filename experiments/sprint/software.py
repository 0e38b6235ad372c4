"""The software configuration a trial or a boundary was measured with (the record's
`software` block, kb/records/pex_chain.SoftwareConfig): service variant, service-side settings,
the model artifact's hash and the library versions. The closed loop compares configurations by
their key: a boundary measured under one configuration goes stale when a newer chain of the same
workload, architecture and contract ran under another (rules/)."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

#: Library versions that decide what a service computes (the environment block has the rest).
_LIBRARIES = ("python", "numpy", "torch", "torch_cpu_capability")


def artifact_hash(path: Path) -> str | None:
    """SHA-256 of an artifact file, or of a folder's files (relative path and bytes, in order);
    None when there is nothing there. A file's hash is kept by path, size and modification time:
    every trial record and the chain of a sprint cite the same artifacts."""
    path = Path(path)
    if path.is_file():
        st = path.stat()
        return _file_hash(str(path), st.st_size, st.st_mtime_ns)
    return _hash(path)


@lru_cache(maxsize=64)
def _file_hash(path: str, size: int, mtime_ns: int) -> str | None:
    return _hash(Path(path))


def _hash(path: Path) -> str | None:
    digest = hashlib.sha256()
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
    else:
        return None
    for f in files:
        if path.is_dir():
            digest.update(f.relative_to(path).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def libraries(environment: dict) -> dict[str, str]:
    """The versions that decide a result, from an environment block."""
    return {k: str(environment[k]) for k in _LIBRARIES if environment.get(k) not in (None, "")}


def software_config(contract, variant: str, artifact: Path | None, environment: dict) -> dict:
    """The `software` block of a record: `contract`'s service and its service-side settings
    (batching), `variant`, the artifact's hash and the library versions of `environment`."""
    ep = contract.endpoint
    if ep is not None:  # the engine decides what is computed: its name, API and the variant's flags
        settings = {"engine": ep.engine, "api": ep.api}
        if ep.variants[variant].args:
            settings["args"] = " ".join(ep.variants[variant].args)
        libs = {"python": str(environment["python"])} if environment.get("python") else {}
    else:
        settings = {"max_batch": contract.load.max_batch}
        libs = libraries(environment)
    out = {"service": contract.service, "variant": variant, "settings": settings, "libraries": libs}
    digest = artifact_hash(artifact) if artifact is not None else None
    if digest:
        out["artifact"] = digest
    return out
