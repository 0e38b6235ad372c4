"""Public spec sheets of current accelerators and CPUs as vendor-claim machine records.

One JSON file per machine, named after the record's `name`; each names its source document.
Dense figures only; a figure the sheet does not state (or states ambiguously) is left out.
`luma machine list|show` read them; `luma kb ingest experiments/machines/NAME.json` adds one
to a project's KB. The lookup API is `luma.kb.records.machine_catalog.load_machine` and `catalog`.
"""

from luma.kb.records.machine_catalog import catalog, load_machine

__all__ = ["catalog", "load_machine"]
