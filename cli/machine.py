"""`luma machine`: machine parameter records (measured on this host, or vendor claims shipped)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import click

from luma import names
from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, OPTIONAL, WRITE, project

_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


@click.group()
def machine() -> None:
    """Machine parameter records: measure this host, list and show machines."""


def _core_counts(ctx, param, text: str | None) -> list[int] | None:
    """`--cores 1,2` -> [1, 2], checked against the CPUs this process may use (usage error otherwise)."""
    if text is None:
        return None
    import os

    try:
        counts = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise click.BadParameter(f"comma-separated whole numbers, got {text!r}") from None
    usable = len(os.sched_getaffinity(0))
    if not counts or counts[0] < 1 or counts[-1] > usable:
        raise click.BadParameter(f"core counts must be from 1 to {usable} (the CPUs this process may use), got {text!r}")
    return counts


def _name(ctx, param, text: str | None) -> str | None:
    if text is not None and not _SLUG.match(text):
        raise click.BadParameter(f"a slug: lower-case letters, digits, '.', '_' or '-' (at most 64), got {text!r}")
    return text


@machine.command("characterize")
@click.option("--quick", is_flag=True, help="Short windows and small products (~15 s); the default takes ~1 minute.")
@click.option("--cores", callback=_core_counts, help="Core counts to measure, e.g. '1,2' (default: 1 to all usable).")
@click.option("--name", callback=_name, help="The machine's name (default: CPU model and core count, e.g. amd-epyc-2c).")
@click.option("--ingest/--no-ingest", default=True, show_default=True,
              help="Record the machine in the ledger and KB of LUMA_HOME.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the record to this file.")
@format_option(choices=("table", "json"))
@project(WRITE, when=lambda p: p["ingest"])
def characterize_cmd(quick, cores, name, ingest, out, fmt) -> None:
    """Measure this host (memory bandwidth, fp32/bf16/int8 matmul throughput per core count,
    usable memory) and record it as a measured machine record, signed with the project's runner
    key (made on first use; with --no-ingest only a key the project has signs it)."""
    from luma.cli.progress import Tracker
    from luma.experiments.characterize import characterize, usable_cpus
    from luma.extras import require
    from luma.kb.records.loader import validate_document
    from luma.kb.operations.runner_keys import project_signer
    from luma.cli.project import settings as command_settings

    require("kernels", "luma machine characterize")  # its matmul probes run torch in child processes
    counts = cores or list(range(1, len(usable_cpus()) + 1))
    plan = [("bandwidth", float(k)) for k in counts] + [("matmul", float(k)) for k in counts]
    with Tracker("machine characterize", plan, unit="probe") as progress:
        doc = characterize(quick=quick, cores=cores, name=name, progress=progress)
    # A key is made only for a record that goes into the project; --no-ingest signs with one it has.
    signer = project_signer(command_settings(), create=ingest)
    if signer is not None:
        doc = signer.sign(doc, "luma machine characterize")
    rec = validate_document(doc, "luma machine characterize").model
    text = json.dumps(doc, indent=1) + "\n"
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    recorded = None
    if ingest:
        recorded = _ingest(rec.name, text)
    if fmt == "json":
        click.echo(json.dumps(rec.model_dump(mode="json", exclude_none=True), indent=2))
    else:
        _print_figures(rec)
    if recorded:
        click.echo(f"recorded measured machine {rec.name} in the KB ({recorded})", err=True)


def _ingest(name: str, text: str) -> str:
    """Write the record under $LUMA_HOME/machines/ and ingest it; return the file's path."""
    from luma.experiments.characterize import TOOL
    from luma.kb.knowledge_base import KnowledgeBase
    from luma.cli.project import settings as command_settings

    settings = command_settings()
    folder = settings.home / "machines"
    # The record's name is a checked slug; the path is checked too, as every path built from a name.
    path = names.child(settings.home, folder, f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{name}.json",
                       field="name")
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    with KnowledgeBase.open(settings) as kb:
        kb.ingest([path], submitter=TOOL)
    return str(path)


def _summary(rec, where: str) -> dict:
    """One row of `luma machine list`: the figures a sizing question reads first."""
    from luma.errors import UnknownName

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


@machine.command("list")
@format_option()
@project(OPTIONAL)
def list_cmd(fmt) -> None:
    """The shipped catalog (vendor claims) and the machines recorded in this project's KB."""
    from luma.cli.project import settings
    from luma.kb.records.machine_catalog import catalog, read_machine, stored_machines

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
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False)
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


@machine.command("show")
@click.argument("name")
@format_option(choices=("table", "json"))
@project(NONE)
def show_cmd(name, fmt) -> None:
    """One machine's figures: a machine in this project's KB (the latest of that name), a
    shipped catalog entry, or a machine record file."""
    from luma.kb.records.machine_catalog import load_machine
    from luma.cli.project import settings as command_settings

    rec = load_machine(name, command_settings())
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
    _print_figures(rec)
    for note in rec.notes:
        click.echo(f"- {note}")


_SI_SHORT = {"FLOP / second": "FLOP/s", "byte": "B", "byte / second": "B/s", "second": "s", "watt": "W"}


def _print_figures(rec) -> None:
    rows = []
    for row in rec.figures():
        label = row["section"] + ("" if row["dense"] in (None, True) else " (sparse)")
        rows.append({"figure": label, "of": row["key"], "cores": row["cores"],
                     "stated": f"{row['value']:g} {row['unit']}",
                     "SI": f"{row['si']:.4g} {_SI_SHORT.get(row['si_unit'], row['si_unit'])}",
                     "method": row["method"]})
    print_rows(rows, ["figure", "of", "cores", "stated", "SI", "method"], "table",
               title=f"{rec.name}: {rec.evidence_class} figures, per device")
