"""Ctrl-C (issue 32, first hour): one `Error:` line and exit code 130 from any command (click's
`Aborted!` said nothing); a sprint says which trials it kept and that it made no chain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from click.testing import CliRunner

from luma.errors import Interrupted
from luma.cli.main import cli


def test_any_command_interrupted_prints_one_error_line(luma_home, monkeypatch):
    from luma.experiments.sprint import contract

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(contract, "shipped", interrupted)
    result = CliRunner().invoke(cli, ["sprint", "contracts"])
    assert result.exit_code == Interrupted.exit_code == 130
    assert result.output == "Error: interrupted\n"


def test_an_interrupted_sprint_says_what_it_kept(luma_home):
    # A terminal's foreground job takes Ctrl-C; a suite started in the background (`cmd &` in a
    # script) runs with SIGINT ignored, which the child would inherit: give it the default back.
    proc = subprocess.Popen([sys.executable, "-m", "luma.cli.main", "sprint", "run", "matvec-memory"],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    # Interrupt at the first kept trial: the sprint's 15 trials take ~3 s, and on a loaded host a
    # later trigger could arrive after the last one (the run then ends 0, not interrupted).
    while time.time() < deadline and not list((luma_home / "sprints").glob("*/trial-*.json")):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the whole foreground group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    folder = next((luma_home / "sprints").iterdir())
    kept = len(list(folder.glob("trial-*.json")))
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    trials = "trial" if kept == 1 else "trials"
    assert errors == [f"Error: interrupted: {kept} {trials} kept in {folder} (ingested), no chain"], err
    assert "Aborted!" not in err + out and "Traceback" not in err
    listed = json.loads(CliRunner().invoke(cli, ["sprint", "list", "--format", "json"]).stdout)
    assert [(r["path"], r["trials"], r["chain"]) for r in listed] == [(str(folder), kept, False)]
    assert "interrupted" in listed[0]["outcome"]
