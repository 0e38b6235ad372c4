"""The services a PEX sprint qualifies, by name (see `base.Service`)."""

from __future__ import annotations

from luma.errors import ContractError, UnknownName

#: service name -> "module:Class", imported only when asked for (each pulls in torch).
SERVICES = {
    "embedding": "luma.experiments.services.embedding:EmbeddingService",
    "classifier": "luma.experiments.services.classifier:ClassifierService",
    "decoder": "luma.experiments.services.decoder:DecoderService",
    "matvec": "luma.experiments.services.matvec:MatvecService",
}


def get(name: str):
    """A fresh instance of the named in-process service (an endpoint service needs its contract:
    `for_contract`)."""
    import importlib

    if name == "openai-endpoint":
        raise ContractError("an openai-endpoint service is described by its contract's [service] table; "
                            "this command serves the in-process services only", field="service")
    if name not in SERVICES:
        raise UnknownName(f"unknown service {name!r} (known: {', '.join(sorted(SERVICES))})", field="service")
    module, _, cls = SERVICES[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


def for_contract(contract):
    """The service of `contract`: the named in-process one, or the endpoint its [service] table
    describes."""
    if contract.endpoint is not None:
        # the endpoint side pulls pint and pyoxigraph: kept out of the trial worker's measured footprint
        from luma.experiments.endpoint.service import EndpointService

        return EndpointService(contract.endpoint)
    return get(contract.service)
