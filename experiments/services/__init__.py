"""The services a PEX sprint qualifies, by name (see `base.Service`)."""

from __future__ import annotations

from luma.errors import UnknownName

#: service name -> "module:Class", imported only when asked for (each pulls in torch).
SERVICES = {
    "embedding": "luma.experiments.services.embedding:EmbeddingService",
    "classifier": "luma.experiments.services.classifier:ClassifierService",
    "decoder": "luma.experiments.services.decoder:DecoderService",
    "matvec": "luma.experiments.services.matvec:MatvecService",
}


def get(name: str):
    """A fresh instance of the named service."""
    import importlib

    if name not in SERVICES:
        raise UnknownName(f"unknown service {name!r} (known: {', '.join(sorted(SERVICES))})", field="service")
    module, _, cls = SERVICES[name].partition(":")
    return getattr(importlib.import_module(module), cls)()
