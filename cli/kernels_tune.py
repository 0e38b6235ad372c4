"""`luma kernels tune`: measure again which int8 GEMM path `auto` runs per shape class here."""

from __future__ import annotations

import click

from luma.cli.output import format_option, print_rows
from luma.cli.project import NONE, project
from luma.errors import TensorError


def _shape(text: str) -> tuple[int, int]:
    try:
        k, n = (int(v) for v in text.split(","))
    except ValueError:
        raise click.BadParameter(f"expected K,N (two whole numbers), got {text!r}") from None
    if not (1 <= k <= 1 << 17 and 1 <= n <= 1 << 17):
        raise click.BadParameter(f"K and N must be from 1 to 131072, got {text!r}")
    return k, n


@click.command()
@click.option("--shapes", "shapes", multiple=True, metavar="K,N",
              help="A layer shape to measure (repeatable); default: 1024,1024 and 4096,4096.")
@click.option("--mode", type=click.Choice(["dynamic", "weight-only", "both"]), default="both", show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Torch threads (choices are kept per thread count).")
@format_option(choices=("table", "json"))
@project(NONE)  # the choices are the machine's ($LUMA_KERNEL_CACHE), not a project's
def tune(shapes: tuple[str, ...], mode: str, threads: int, fmt: str) -> None:
    """Measure the int8 GEMM paths per shape class again and keep the fastest in the kernel cache."""
    parsed = [_shape(s) for s in shapes]
    import torch  # the kernels extra: `--help` works without it

    from luma.kernels import gemm_tuning  # torch (the kernels extra): `--help` works without it

    modes = ("dynamic", "weight-only") if mode == "both" else (mode,)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rows = gemm_tuning.tune(parsed or gemm_tuning.COMMON_SHAPES, modes,
                                progress=lambda msg: click.echo(f"measuring {msg}", err=True))
    except RuntimeError as exc:  # torch kernels report missing support this way
        raise TensorError(f"tuning failed: {exc}") from None
    finally:
        torch.set_num_threads(old)
    click.echo(f"choices kept in {gemm_tuning.TABLE.path}", err=True)
    if fmt == "json":
        print_rows(rows, [], "json")
        return
    paths = sorted({p for r in rows for p in r["times_s"]})
    table = [{**{c: r[c] for c in ("mode", "m_bucket", "m", "k", "n", "choice")},
              **{p: (f"{r['times_s'][p] * 1e3:.3f} ms" if p in r["times_s"] else "-") for p in paths}} for r in rows]
    print_rows(table, ["mode", "m_bucket", "m", "k", "n", "choice", *paths], "table",
               title=f"int8 GEMM choice per shape class ({threads} thread(s); min time of each path)")
