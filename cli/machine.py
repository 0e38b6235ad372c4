"""`luma machine list|show`: the shipped catalog (vendor claims) and the machines recorded in this
project's KB."""

from __future__ import annotations

import json

import click

from luma.cli.output import console as output_console
from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, OPTIONAL, project, settings
from luma.errors import UnknownName
from luma.kb.records.machine_catalog import catalog, load_machine, read_machine, stored_machines


def _summary(rec, where: str) -> dict:
    """One row of `luma machine list`: the figures a sizing question reads first."""
    def get(fn, *args, scale=1.0):
        try:
            return float(f"{fn(*args) / scale:.6g}")
        except UnknownName:  # a figure the record does not state is an empty cell
            return None

    tiers = [m.tier for m in rec.memory]
    tier = "hbm" if "hbm" in tiers else ("host" if "host" in tiers else (tiers[0] if tiers else None))
    return {
        "name": rec.name, "evidence_class": rec.evidence_class, "architecture": rec.architecture.name,
        "kind": rec.architecture.kind, "where": where,
        "fp32_tflops": get(rec.compute_flops, "fp32", scale=1e12),
        "bf16_tflops": get(rec.compute_flops, "bf16", scale=1e12),
        "fp16_tflops": get(rec.compute_flops, "fp16", scale=1e12),
        "int8_tops": get(rec.compute_flops, "int8", scale=1e12),
        "memory_tier": tier,
        "memory_gb": get(rec.memory_capacity, tier, scale=1e9) if tier else None,
        "memory_bw_gbs": get(rec.memory_bandwidth, tier, scale=1e9) if tier else None,
        "tdp_w": rec.power_w,
        "source": rec.source.url if rec.source else None,
    }


_LIST_COLUMNS = ["name", "evidence_class", "kind", "where", "fp32_tflops", "bf16_tflops", "fp16_tflops", "int8_tops",
                 "memory_tier", "memory_gb", "memory_bw_gbs", "tdp_w"]


#: Table headers of `list` (json and csv keep the longer keys, which carry the units).
_TABLE_HEADS = {"name": "name", "evidence_class": "evidence", "where": "where", "fp32_tflops": "fp32",
                "bf16_tflops": "bf16", "fp16_tflops": "fp16", "int8_tops": "int8", "memory_tier": "memory",
                "memory_gb": "GB", "memory_bw_gbs": "GB/s", "tdp_w": "W"}


@click.command("list")
@format_option()
@project(OPTIONAL)
def list_cmd(fmt) -> None:
    """The shipped catalog (vendor claims) and the machines recorded in this project's KB."""
    rows = [_summary(read_machine(path), "catalog") for _, path in sorted(catalog().items())]
    latest = {}
    for content_hash, rec in stored_machines(settings()):
        latest[rec.name] = (content_hash, rec)  # oldest first: the last one of a name wins
    catalog_names = {r["name"] for r in rows}
    for name, (content_hash, rec) in sorted(latest.items()):
        if name in catalog_names and rec.evidence_class == "vendor-claim":
            continue  # the shipped entry, ingested into this project
        rows.append(_summary(rec, f"kb:{content_hash[:10]}"))
    if fmt == "table":
        _print_list(rows)
    else:
        print_rows(rows, _LIST_COLUMNS + ["architecture", "source"], fmt)


def _print_list(rows: list[dict]) -> None:
    """The list as a compact table; names never wrap (they are what `show` takes). On a narrow
    terminal the less used columns go and a `*` marks machines recorded in this project."""
    from rich import box
    from rich.table import Table

    console = output_console()
    heads = dict(_TABLE_HEADS)
    narrow = console.width < 110
    if narrow:
        for key in ("where", "fp16_tflops", "memory_tier"):
            heads.pop(key)
    table = Table(title="machines (per device; TFLOP/s, TOP/s, GB, GB/s, W)", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True, caption="* recorded in this project's KB" if narrow else None)
    for key, head in heads.items():
        left = key in ("name", "evidence_class", "where", "memory_tier")
        table.add_column(head, no_wrap=key == "name", overflow="fold", justify="left" if left else "right")
    for row in rows:
        cells = {k: "" if row[k] is None else f"{row[k]:,.4g}" if isinstance(row[k], float) else str(row[k])
                 for k in heads}
        if narrow:
            cells["evidence_class"] = cells["evidence_class"].removesuffix("-claim")
            cells["name"] += " *" if row["where"] != "catalog" else ""
        table.add_row(*cells.values())
    console.print(table)


@click.command("show")
@click.argument("name")
@format_option(choices=("table", "json"))
@project(NONE)
def show_cmd(name, fmt) -> None:
    """One machine's figures: a machine in this project's KB (the latest of that name), a
    shipped catalog entry, or a machine record file."""
    rec = load_machine(name, settings())
    if fmt == "json":
        click.echo(json.dumps(rec.model_dump(mode="json", exclude_none=True), indent=2))
        return
    about = [("name", rec.name), ("evidence class", rec.evidence_class),
             ("architecture", f"{rec.architecture.name} — {rec.architecture.kind}, {rec.architecture.vendor}"),
             ("devices per node", rec.count)]
    if rec.source:
        about.append(("source", f"{rec.source.title} <{rec.source.url}>"
                      + (f", retrieved {rec.source.retrieved}" if rec.source.retrieved else "")))
    if rec.price:
        about.append(("price", f"{rec.price.value:g} {rec.price.unit}"))
    p = rec.provenance
    about.append(("provenance", ", ".join(str(x) for x in (p.tool, p.host, p.started, p.git_revision) if x)))
    print_rows([{"item": k, "value": v} for k, v in about], ["item", "value"], "table", title=f"machine {rec.name}")
    print_figures(rec)
    for note in rec.notes:
        click.echo(f"- {note}")


_SI_SHORT = {"FLOP / second": "FLOP/s", "byte": "B", "byte / second": "B/s", "second": "s", "watt": "W"}


def print_figures(rec) -> None:
    rows = []
    for row in rec.figures():
        label = row["section"] + ("" if row["dense"] in (None, True) else " (sparse)")
        rows.append({"figure": label, "of": row["key"], "cores": row["cores"],
                     "stated": f"{row['value']:g} {row['unit']}",
                     "SI": f"{row['si']:.4g} {_SI_SHORT.get(row['si_unit'], row['si_unit'])}",
                     "method": row["method"]})
    print_rows(rows, ["figure", "of", "cores", "stated", "SI", "method"], "table",
               title=f"{rec.name}: {rec.evidence_class} figures, per device")
