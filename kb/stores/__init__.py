"""Quad-store backends, chosen by URL scheme through a registry (like mlflow's tracking stores).

* `oxigraph:/path/to/dir` — embedded Oxigraph on disk (the default, under LUMA_HOME)
* `memory:` — embedded Oxigraph in memory (tests, benchmarks)
* `http://…`, `https://…` — any SPARQL 1.1 endpoint
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from luma.errors import ConfigError
from luma.kb.stores.base import QuadStore

_REGISTRY: dict[str, Callable[[str], QuadStore]] = {}


def register(scheme: str, factory: Callable[[str], QuadStore]) -> None:
    """Register a backend factory for a URL scheme (third parties may add their own)."""
    _REGISTRY[scheme] = factory


def open_store(url: str) -> QuadStore:
    """Open the quad store a URL names."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    factory = _REGISTRY.get(scheme)
    if factory is None:
        raise ConfigError(
            f"no knowledge-base backend for {url!r} (schemes: {', '.join(sorted(_REGISTRY))})", source="LUMA_KB_URL"
        )
    return factory(url)


def _embedded(url: str) -> QuadStore:
    from luma.kb.stores.embedded import EmbeddedStore

    return EmbeddedStore(Path(url.split(":", 1)[1]))


def _memory(url: str) -> QuadStore:
    from luma.kb.stores.embedded import EmbeddedStore

    return EmbeddedStore(None)


def _endpoint(url: str) -> QuadStore:
    from luma.kb.stores.endpoint import EndpointStore

    return EndpointStore(url)


register("oxigraph", _embedded)
register("memory", _memory)
register("http", _endpoint)
register("https", _endpoint)
