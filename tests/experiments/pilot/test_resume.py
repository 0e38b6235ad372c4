"""`luma pilot run --resume` keeps every option of the run it continues (issue 32: a run started
with --no-baselines ran both baselines when resumed)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from luma.cli.main import cli
from luma.experiments.pilot import run as pilot_run
from luma.experiments.pilot.resume import prepare_resume

from .test_pilot_run import library, trace_file  # noqa: F401  (fixtures)


def _started(pilot_contract, trace_file, **flags) -> str:
    """A run folder as `luma pilot run` leaves it once it has started (run.json), killed there."""
    from luma.settings import Settings

    project = Settings.from_env()
    ctx = pilot_run.prepare(project, str(pilot_contract), trace_ref=str(trace_file), seed=7)
    ctx.baselines, ctx.record = flags.get("baselines", True), flags.get("record", True)
    folder = pilot_run.folder_of(project, ctx.run_id)
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(pilot_run.run_config(ctx)))
    return ctx.run_id


def test_run_json_keeps_the_baselines_and_record_flags_and_resume_honours_them(library, trace_file, pilot_contract,
                                                                                 luma_home, monkeypatch):
    from luma.settings import Settings

    run_id = _started(pilot_contract, trace_file, baselines=False, record=False)
    cfg = json.loads((luma_home / "pilots" / run_id / "run.json").read_text())
    assert cfg["baselines"] is False and cfg["record"] is False
    ctx = prepare_resume(Settings.from_env(), run_id)
    assert (ctx.baselines, ctx.record, ctx.seed) == (False, False, 7)
    seen = {}

    def fake_run(ctx, project, **kw):  # the pilot itself is not what this test is about
        seen.update(kw)
        raise SystemExit(0)

    monkeypatch.setattr(pilot_run, "run", fake_run)
    out = CliRunner().invoke(cli, ["pilot", "run", "--resume", run_id])
    assert out.exit_code == 0, out.output
    assert seen["baselines"] is False and seen["record"] is False and seen["resume"] is True


def test_an_option_that_contradicts_the_run_is_a_usage_error(library, trace_file, pilot_contract, luma_home):
    run_id = _started(pilot_contract, trace_file, baselines=False)
    out = CliRunner().invoke(cli, ["pilot", "run", "--resume", run_id, "--baselines", "--seed", "3"])
    assert out.exit_code == 2 and "--baselines" in out.output and "--seed" in out.output
    same = CliRunner().invoke(cli, ["pilot", "run", "--resume", run_id, "--no-baselines", "--seed", "8"])
    assert same.exit_code == 2 and "--no-baselines" not in same.output and "--seed" in same.output
