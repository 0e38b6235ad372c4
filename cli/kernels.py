"""`luma kernels`: accuracy of the int8 family on real models, and its speed on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import WRITE, project, settings
from luma.errors import TensorError
from luma.kernels import evidence
from luma.kernels.evidence import save_and_ingest

GRANULARITIES = ("per-tensor", "per-channel")


def _bits(text: str) -> tuple[int, ...]:
    try:
        bits = tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated whole numbers, got {text!r}") from None
    bad = [b for b in bits if not 2 <= b <= 8]
    if not bits or bad:
        raise click.BadParameter(f"bit widths must be from 2 to 8, got {text!r}")
    return bits


@click.command()
@click.option("--model", "model_name", type=click.Choice(["digits", "minilm"]), required=True,
              help="digits: an MLP on scikit-learn's digits; minilm: the all-MiniLM-L6-v2 sentence transformer.")
@click.option("--bits", default="8,6,4", show_default=True, help="Comma-separated weight bit widths (2-8).")
@click.option("--granularity", type=click.Choice([*GRANULARITIES, "both"]), default="both", show_default=True)
@click.option("--mode", type=click.Choice(["dynamic", "weight-only"]), default="dynamic", show_default=True,
              help="dynamic: int8 activations too; weight-only: float activations.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--record/--no-record", default=True, show_default=True,
              help="Ingest the figures into the KB as measured kernel-result records.")
@format_option(choices=("table", "json"))
@project(WRITE, when=lambda p: p["record"])
def evaluate(model_name: str, bits: str, granularity: str, mode: str, seed: int, record: bool, fmt: str) -> None:
    """Accuracy of fp32 against quantized variants of a real model."""
    widths = _bits(bits)
    grans = GRANULARITIES if granularity == "both" else (granularity,)
    if model_name == "digits":
        from luma.kernels import digits  # torch (the kernels extra): `--help` works without it

        rows = digits.evaluate(widths, grans, mode, seed)
        columns = ["method", "granularity", "mode", "accuracy", "delta_pp", "weight_bytes"]
    else:
        from luma.kernels import minilm  # torch (the kernels extra): `--help` works without it

        rows = minilm.evaluate(widths, grans, mode)
        columns = ["method", "granularity", "mode", "mean_cosine", "min_cosine", "sentences_per_s", "weight_bytes"]
    print_rows(rows, columns, fmt, title=f"{model_name}: fp32 vs quantized")
    if record:
        artifact = (f"luma kernels evaluate --model {model_name} --bits {bits} --granularity {granularity} "
                    f"--mode {mode} --seed {seed}")
        _record(evidence.evaluation_records(model_name, rows, artifact), f"evaluate-{model_name}")


@click.command()
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Torch threads (1 keeps timings comparable on a shared machine).")
@click.option("--quick", is_flag=True, help="Small sizes only (a smoke run, not the figures).")
@click.option("--record/--no-record", default=True, show_default=True,
              help="Ingest the figures into the KB as measured kernel-result records.")
@format_option(choices=("table", "json"))
@project(WRITE, when=lambda p: p["record"])
def bench(threads: int, quick: bool, record: bool, fmt: str) -> None:
    """Quantize throughput vs copy bandwidth; int8 Linear vs fp32 and the peers."""
    from luma.kernels.int8_bench import run  # torch (the kernels extra): `--help` works without it

    try:
        result = run(threads, quick)
    except RuntimeError as exc:  # torch kernels report missing support this way
        raise TensorError(f"benchmark failed: {exc}") from None
    if record:
        artifact = f"luma kernels bench --threads {threads}" + (" --quick" if quick else "")
        _record(evidence.bench_records(result, artifact), "bench")
    if fmt == "json":
        click.echo(json.dumps(result, indent=2))
        return
    env = result["environment"]
    click.echo(f"{env.get('cpu_model')} · ISA {' '.join(env.get('isa') or [])} · torch {env.get('torch')} "
               f"({env.get('torch_cpu_capability')}) · {threads} thread(s) · rev {env.get('git_revision')}")
    pk = result["peak"]
    click.echo(f"peak: skipped ({pk['skipped']})" if "skipped" in pk else
               f"peak per core: int8 {pk['int8_macs_per_ns']:.1f} MAC/ns ({pk['int8_isa']}), fp32 "
               f"{pk['fp32_fmas_per_ns']:.1f} FMA/ns ({pk['fp32_isa']}), ratio {pk['ratio']:.2f}")
    print_rows([_fmt(r) for r in result["quantize"]], ["case", "values", "min_s", "median_s", "gb_per_s",
                                                         "fraction_of_copy"], "table", title="Quantize throughput")
    for k in dict.fromkeys(r["k"] for r in result["linear"]):
        print_rows([_fmt(r) for r in result["linear"] if r["k"] == k],
                   ["m", "case", "min_s", "median_s", "speedup_vs_fp32", "rel_error_vs_fp64"], "table",
                   title=f"Linear K = N = {k}")
    print_rows([_fmt(r) for r in result["summary"]], ["k", "m", "auto_path", "auto_speedup", "best_engine",
                                                        "auto_over_best_engine", "auto_over_peak_ratio",
                                                        "weight_only_speedup", "quantize_fraction_of_copy"],
               "table", title="Summary")


def _record(records: list[dict], kind: str) -> None:
    path, report = save_and_ingest(records, kind, settings())
    click.echo(f"recorded {len(report.added)} measured kernel results in the KB ({len(report.duplicates)} already "
               f"there); artifact {path}", err=True)


def _fmt(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if v is None:
            out[k] = "-"
        elif isinstance(v, float):
            seconds = k.endswith("_s") and not k.endswith("_per_s")  # gb_per_s is a rate, not a time
            out[k] = f"{v:.3e}" if k == "rel_error_vs_fp64" else (f"{v * 1e3:.3f} ms" if seconds else f"{v:.2f}")
        else:
            out[k] = v
    return out


@click.command()
@click.option("--model", "model_name", type=click.Choice(["digits", "minilm"]), default="minilm", show_default=True)
@click.option("--bits", default="8,6,4,3,2", show_default=True, help="Candidate weight bit widths per layer.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for pareto.png, pareto.svg and pareto.json (default: $LUMA_HOME/results/pareto-MODEL).")
@click.option("--record/--no-record", default=True, show_default=True,
              help="Ingest the front's points into the KB as measured kernel-result records.")
@format_option(choices=("table", "json"))
@project(WRITE, when=lambda p: p["record"] or p["out"] is None)
def pareto(model_name: str, bits: str, out: Path | None, record: bool, fmt: str) -> None:
    """Per-layer sensitivity on calibration data, then the accuracy-memory Pareto front (plot + data)."""
    from luma.kernels import mixed_precision as mp  # torch (the kernels extra): `--help` works without it

    out = out or settings().home / "results" / f"pareto-{model_name}"
    widths = _bits(bits)
    if model_name == "minilm":
        from luma.kernels import minilm  # torch (the kernels extra): `--help` works without it

        model = minilm.load(threads=1)
        ref_eval, ref_cal = minilm.embed(model), minilm.embed(model, minilm.CALIBRATION)

        def evaluation(m):
            return float(minilm.cosine(minilm.embed(m), ref_eval).mean())

        def calibration(m):
            return float(minilm.cosine(minilm.embed(m, minilm.CALIBRATION), ref_cal).mean())

        metric, title = "mean_cosine_to_fp32", "all-MiniLM-L6-v2: weight bits per layer (weight-only)"
    else:
        from luma.kernels import digits  # torch (the kernels extra): `--help` works without it

        data = digits.load()
        model = digits.train(data)
        cal_data = digits.DigitsData(data.x_train, data.y_train, data.x_train[:400], data.y_train[:400])

        def evaluation(m):
            return digits.accuracy(m, data)

        def calibration(m):
            return digits.accuracy(m, cal_data)

        metric, title = "accuracy", "digits MLP: weight bits per layer (weight-only)"
    study = mp.run(model, calibration, evaluation, metric, widths, progress=lambda msg: click.echo(msg, err=True))
    paths = mp.plot(study, out, title)
    rows = study.as_rows()
    (out / "pareto.json").write_text(json.dumps({"metric": metric, "fp32": study.fp32_score,
                                                 "fp32_weight_bytes": study.fp32_bytes,
                                                 "sensitivity": study.sensitivity, "points": rows}, indent=2))
    print_rows([r for r in rows if r["on_front"]], ["label", "weight_bytes", metric, "bits"], fmt,
               title=f"Pareto front ({len(study.front())} of {len(rows)} points)")
    click.echo(f"plot: {', '.join(str(p) for p in paths)}", err=True)
    if record:
        recs = evidence.pareto_records(model_name, study, f"luma kernels pareto --model {model_name} --bits {bits}")
        _record(recs, f"pareto-{model_name}")
