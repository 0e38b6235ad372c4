"""`luma import FORMAT FILE…`: other tools' benchmark result files as pex-trial records, judged by
LUMA's own rules (experiments/imports/importer.py); one command per format, same options."""

from __future__ import annotations

from pathlib import Path

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import WRITE, project, settings as command_settings
from luma.experiments.imports.formats import FORMATS
from luma.experiments.imports.importer import import_files
from luma.experiments.imports.placement import KINDS, target

COLUMNS = ["file", "sequence", "evidence_class", "verdict", "failure_cause", "completed", "failed"]


def _command(fmt: str, doc: str) -> click.Command:
    @click.command(fmt, help=doc)
    @click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
    @click.option("--contract", "contract_ref", required=True, help="A shipped contract's name or a TOML path.")
    @click.option("--state", "state_items", multiple=True, metavar="DIM=LEVEL",
                  help="The machine state the tool ran at (repeatable), over the contract's [state].")
    @click.option("--variant", help="The software variant (default: the contract's baseline).")
    @click.option("--concurrency", type=click.IntRange(1, 1024),
                  help="Judge at this concurrency (the run's), as the contract <name>-c<N>; without it a run at "
                       "another concurrency than the contract's is refused.")
    @click.option("--max-new-tokens", type=click.IntRange(1, 1 << 20),
                  help="Judge at this output length (the run's), as the contract <name>-out<N>.")
    @click.option("--architecture", help="The machine the tool ran on (with --architecture-kind and --vendor).")
    @click.option("--architecture-kind", "kind", type=click.Choice(KINDS))
    @click.option("--vendor")
    @click.option("--here", is_flag=True, help="The tool ran on this host: its architecture and environment.")
    @click.option("--key", help="Runner key of $LUMA_HOME/keys/ that signs measured records (default: the "
                                "project's signing key).")
    @click.option("--sprint", help="Sprint name the trials are filed under (default: from the files' hashes).")
    @click.option("--tool-version", help="The tool's version, when its file does not say.")
    @click.option("--no-ingest", is_flag=True, help="Write the records to --out instead of ingesting them.")
    @click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the records (JSON Lines).")
    @format_option()
    @project(WRITE, when=lambda p: not p["no_ingest"])
    def cmd(files, contract_ref, state_items, variant, concurrency, max_new_tokens, architecture, kind, vendor, here, key, sprint, tool_version,
            no_ingest, out, fmt):
        # Usage mistakes are the CLI's: the library below names fields, never flags.
        if here and architecture:
            raise click.UsageError("--here and --architecture both name the architecture: give one")
        if not here and not architecture:
            raise click.UsageError("which machine did the tool run on? --architecture NAME --architecture-kind KIND "
                                   "--vendor V, or --here for this host")
        if architecture and (kind is None or not vendor):
            raise click.UsageError("--architecture needs --architecture-kind and --vendor")
        if no_ingest and out is None:
            raise click.UsageError("--no-ingest needs --out FILE (where the records go)")
        if not state_items:
            raise click.UsageError("no state: give the machine state the tool ran at (--state DIM=LEVEL)")
        settings = command_settings()
        where = target(contract_ref, list(state_items), settings=settings, variant=variant,
                       architecture=architecture, kind=kind, vendor=vendor, here=here, concurrency=concurrency,
                       max_new_tokens=max_new_tokens)
        many = len(files) > 1

        def progress(path: Path) -> None:
            if many:
                click.echo(f"read {path.name}", err=True)

        result = import_files(settings, fmt_name, list(files), where, key=key, sprint=sprint,
                              tool_version=tool_version, ingest=not no_ingest, out=out, progress=progress)
        for w in result.warnings:
            click.echo(f"warning: {w}", err=True)
        rows = result.rows()
        if fmt == "table":  # one cell per clause: LUMA's figure / the tool's, in ms
            clauses = sorted({k[5:] for r in rows for k in r if k.startswith("luma_") and k.count("_") == 2})
            for r in rows:
                for c in clauses:
                    mine, theirs = r.get(f"luma_{c}"), r.get(f"tool_{c}")
                    r[c] = " / ".join("-" if v is None else f"{v * 1e3:.4g}" if "_" in c else f"{v:.4g}"
                                      for v in (mine, theirs))
            print_rows(rows, COLUMNS + clauses + ["reason"], fmt, title=f"sprint {result.sprint} (clauses: LUMA / "
                                                                          "the tool, ms)")
        else:
            extra = sorted({k for r in rows for k in r if k.startswith(("luma_", "tool_"))})
            print_rows(rows, COLUMNS + extra + ["reason"], fmt)
        if fmt == "table":
            done = f"ingested {result.ingested}" if not no_ingest else f"wrote {len(result.records)}"
            click.echo(f"{done} record(s) of sprint {result.sprint}" +
                       (f" to {result.written}" if result.written else ""), err=True)

    fmt_name = fmt
    return cmd


_DOC = ("Import {tool} results as pex-trial records judged by LUMA. FILE: {file}. With per-request "
        "samples a record is measured (signed by --key, re-judged at ingest); from a summary alone it is "
        "vendor-claim, with the reason. A file with failed requests is a FAIL (cause error); a file whose samples "
        "disagree with its own summary is refused whole, and nothing is written on any refusal.")

vllm_bench_cmd = _command("vllm-bench", _DOC.format(tool="vLLM `vllm bench serve`", file=FORMATS["vllm-bench"].file))
aiperf_cmd = _command("aiperf", _DOC.format(tool="NVIDIA AIPerf / GenAI-Perf", file=FORMATS["aiperf"].file))
sglang_bench_cmd = _command("sglang-bench", _DOC.format(tool="SGLang `bench_serving`",
                                                        file=FORMATS["sglang-bench"].file))
mlperf_loadgen_cmd = _command("mlperf-loadgen", _DOC.format(tool="MLPerf LoadGen",
                                                            file=FORMATS["mlperf-loadgen"].file))
llama_bench_cmd = _command("llama-bench", _DOC.format(tool="llama.cpp `llama-bench`", file=FORMATS["llama-bench"].file))
