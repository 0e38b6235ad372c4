"""Reading a chain's facts from the KB, shared by the Resource Boundary Report's two readers
(boundary_data: the chain and its trials; boundary_outcomes: its diagnosis and frontier): SPARQL
with LUMA's prefixes, the verdict IRIs, and the levels of machine states."""

from __future__ import annotations

from dataclasses import dataclass

from luma.kb.vocab import LUMA, PROV, QUDT, RDFS
from luma.reports.fmt import dim_key, quantity

PREFIXES = (f"PREFIX luma: <{LUMA}>\nPREFIX prov: <{PROV}>\nPREFIX qudt: <{QUDT}>\nPREFIX rdfs: <{RDFS}>\n"
            "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n")
VERDICT = {LUMA + "Pass": "PASS", LUMA + "Fail": "FAIL", LUMA + "Inconclusive": "INCONCLUSIVE"}


@dataclass(frozen=True)
class Level:
    """A level of one dimension: canonical value and unit IRI, or a category."""

    value: float | None = None
    unit: str | None = None
    category: str | None = None

    def text(self) -> str:
        return self.category if self.category is not None else quantity(self.value, self.unit)

    def order(self) -> tuple:
        return (0, self.value, "") if self.value is not None else (1, 0.0, self.category or "")


def query_rows(kb, body: str) -> list[dict[str, str]]:
    return kb.store.select(PREFIXES + body)


def levels_by_subject(rows, key: str = "s") -> dict[str, dict[str, Level]]:
    out: dict[str, dict[str, Level]] = {}
    for r in rows:
        level = Level(float(r["v"]), r["u"]) if "v" in r else Level(category=r.get("cat"))
        out.setdefault(r[key], {})[dim_key(r["dim"])] = level
    return out


LEVEL_PATTERN = """?s luma:level ?l . ?l luma:dimension ?dim .
      OPTIONAL { ?l qudt:numericValue ?v ; qudt:unit ?u } OPTIONAL { ?l luma:category ?cat }"""
