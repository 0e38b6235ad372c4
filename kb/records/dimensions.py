"""The resource-dimension vocabulary, read from the ontology (so it is extensible as data).

The packaged `ontology/dimensions.ttl` defines the fixed vocabulary; Turtle files in
`$LUMA_HOME/ontology/` may add dimensions of the same form.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyoxigraph as ox

from luma.errors import ConfigError
from luma.kb.vocab import DIM, LUMA, RDF

_TYPE = ox.NamedNode(RDF + "type")
_DIMENSION = ox.NamedNode(LUMA + "ResourceDimension")


@dataclass(frozen=True)
class Dimension:
    """One resource dimension: its IRI, record key, accepted units and parent."""

    iri: str
    key: str | None
    accepts_units: tuple[str, ...]
    categorical: bool
    broader: str | None


def ontology_files(home: Path | None = None) -> list[tuple[str, bytes]]:
    """(name, Turtle bytes) of the packaged ontology files, then the project's extensions."""
    root = importlib.resources.files("luma.ontology")
    files = sorted((p.name, p.read_bytes()) for p in root.iterdir() if p.name.endswith(".ttl"))
    if home is not None and (home / "ontology").is_dir():
        files += sorted((str(p), p.read_bytes()) for p in (home / "ontology").glob("*.ttl"))
    return files


@lru_cache(maxsize=8)
def _index(home: Path | None) -> dict[str, Dimension]:
    props: dict[str, dict[str, list]] = {}
    for name, data in ontology_files(home):
        try:
            triples = list(ox.parse(data, ox.RdfFormat.TURTLE, base_iri=DIM))
        except SyntaxError as exc:
            raise ConfigError(f"ontology file does not parse: {exc}", source=name) from None
        typed = {t.subject.value for t in triples if t.predicate == _TYPE and t.object == _DIMENSION}
        for t in triples:
            if t.subject.value in typed:
                props.setdefault(t.subject.value, {}).setdefault(t.predicate.value, []).append(t.object.value)
    dims = {}
    for iri, p in props.items():
        key = (p.get(LUMA + "recordKey") or [None])[0]
        dims[iri] = Dimension(
            iri=iri,
            key=key,
            accepts_units=tuple(sorted(p.get(LUMA + "acceptsUnit", []))),
            categorical=(p.get(LUMA + "categorical") or ["false"])[0] == "true",
            broader=(p.get(LUMA + "broader") or [None])[0],
        )
    return dims


def all_dimensions(home: Path | None = None) -> dict[str, Dimension]:
    """Every dimension (abstract parents included), by IRI."""
    return _index(home)


def record_dimensions(home: Path | None = None) -> dict[str, Dimension]:
    """The dimensions usable in records, by record key."""
    return {d.key: d for d in _index(home).values() if d.key}
