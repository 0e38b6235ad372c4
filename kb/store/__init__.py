"""Quad-store backends, chosen by URL scheme through a registry (like mlflow's tracking stores).

* `oxigraph:/path/to/dir` — embedded Oxigraph on disk (the default, under LUMA_HOME)
* `memory:` — embedded Oxigraph in memory (tests, benchmarks)
* `http://…`, `https://…` — any SPARQL 1.1 endpoint
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from luma.errors import ConfigError
from luma.kb.store.base import QuadStore
from luma.kb.store.embedded import EmbeddedStore

if TYPE_CHECKING:
    from luma.settings import Settings

#: A factory gets the URL and the command's settings (None: every default).
Factory = Callable[[str, "Settings | None"], QuadStore]
_REGISTRY: dict[str, Factory] = {}


def register(scheme: str, factory: Factory) -> None:
    """Register a backend factory for a URL scheme (third parties may add their own)."""
    _REGISTRY[scheme] = factory


def open_store(url: str, settings: "Settings | None" = None) -> QuadStore:
    """Open the quad store a URL names, with the settings it needs (an endpoint's paths)."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    factory = _REGISTRY.get(scheme)
    if factory is None:
        raise ConfigError(
            f"no knowledge-base backend for {url!r} (schemes: {', '.join(sorted(_REGISTRY))})", source="LUMA_KB_URL"
        )
    return factory(url, settings)


def _embedded(url: str, settings=None) -> QuadStore:
    return EmbeddedStore(Path(url.split(":", 1)[1]))


def _memory(url: str, settings=None) -> QuadStore:
    return EmbeddedStore(None)


def _endpoint(url: str, settings=None) -> QuadStore:
    # urllib.request (and ssl) cost start-up; only an http(s) URL needs them
    from luma.kb.store.endpoint import EndpointStore

    if settings is None:
        return EndpointStore(url)
    return EndpointStore(url, query_url=settings.kb_query_url, update_url=settings.kb_update_url,
                         store_url=settings.kb_store_url)


register("oxigraph", _embedded)
register("memory", _memory)
register("http", _endpoint)
register("https", _endpoint)
