"""Who may reach a runner fleet, without a cluster: Ray's token authentication on by default
(experiments/fleet/auth.py), a node on 127.0.0.1 started so that it stays there (loopback.py),
`luma runner join --dry-run` making nothing, and the trust line each join prints naming a runner
no other runner of the host is called (test_cluster.py checks the live cluster's ports)."""

from __future__ import annotations

import os
import re
import shlex
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from luma.cli.main import cli
from luma.errors import ConfigError
from luma.experiments.fleet import auth, loopback

TESTS = Path(__file__).resolve().parents[2]


def test_a_new_clusters_head_makes_a_private_token_and_turns_token_mode_on(tmp_path, monkeypatch):
    monkeypatch.setattr(auth, "ray_default_token", lambda: tmp_path / "no-ray-home" / "auth_token")
    with pytest.raises(ConfigError, match="no token for the Ray cluster.*RAY_AUTH_MODE=disabled"):
        auth.resolve(tmp_path, {}, create=False)  # a runner or campaign head without the head's token
    made = auth.resolve(tmp_path, {}, create=True)
    path = auth.token_file(tmp_path)
    assert made.on and made.made and made.env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path)}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(path.read_text()) == 64
    again = auth.resolve(tmp_path, {}, create=True)
    assert not again.made and again.env == made.env and path.read_text() == path.read_text()


@pytest.mark.parametrize("environ, env, token", [
    ({"RAY_AUTH_MODE": "disabled"}, {}, None),
    ({"RAY_AUTH_TOKEN": "s3cret"}, {"RAY_AUTH_MODE": "token"}, "RAY_AUTH_TOKEN"),
    ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/etc/ray/token"}, {"RAY_AUTH_MODE": "token"}, "/etc/ray/token"),
])
def test_the_users_own_ray_auth_variables_win(tmp_path, environ, env, token):
    got = auth.resolve(tmp_path, environ, create=True)
    assert got.env == env and got.token == token and not auth.token_file(tmp_path).exists()


@pytest.mark.parametrize("address, loop", [("127.0.0.1", True), ("127.0.0.1:6379", True), ("localhost:1", True),
                                           ("[::1]:6379", True), ("10.0.0.1:6379", False), ("node-7:6379", False),
                                           ("", False), (None, False)])
def test_loopback_addresses(address, loop):
    assert loopback.is_loopback(address) is loop


def test_keep_loopback_keeps_a_loopback_address_where_ray_would_replace_it():
    pytest.importorskip("ray")
    import subprocess
    import sys

    code = ("from ray._private import services as s; before = s.resolve_ip_for_localhost('127.0.0.1'); "
            "from luma.experiments.fleet.loopback import keep_loopback; keep_loopback(); "
            "print(before, s.resolve_ip_for_localhost('127.0.0.1'), s.resolve_ip_for_localhost('10.1.2.3'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    _, kept, other = out.stdout.split()
    assert (kept, other) == ("127.0.0.1", "10.1.2.3")


def _join(*args):
    run = CliRunner().invoke(cli, ["runner", "join", *args, "--no-block", "--dry-run"])
    return run, (shlex.split(run.stdout) if run.exit_code == 0 else [])


def test_a_dry_run_makes_no_key_and_no_token(luma_home):
    run, cmd = _join("--head", "--node-ip-address", "127.0.0.1")
    assert run.exit_code == 0, run.output
    assert not (luma_home / "keys").exists() and not (luma_home / "ledger.sqlite").exists()
    assert "luma-runner-key=(made on the first join)" in run.stderr


def test_a_node_on_loopback_starts_through_the_launcher_that_keeps_it_there(luma_home):
    _, head = _join("--head", "--node-ip-address", "127.0.0.1")
    assert head[1:4] == ["-m", "luma.experiments.fleet.loopback", "start"]
    assert head[head.index("--node-ip-address") + 1] == "127.0.0.1"
    _, runner = _join("127.0.0.1:6379")  # a loopback cluster: the node is on loopback too
    assert runner[1:3] == ["-m", "luma.experiments.fleet.loopback"] and "--node-ip-address" in runner
    _, remote = _join("10.0.0.1:6379")  # a real network: Ray's own CLI, Ray's choice of address
    assert Path(remote[0]).name == "ray" and "--node-ip-address" not in remote
    bad, _ = _join("10.0.0.1:6379", "--node-ip-address", "127.0.0.1")
    assert bad.exit_code == 2 and "can only join a cluster on this machine" in bad.output


def test_only_the_first_node_of_a_machine_runs_a_log_monitor(luma_home):
    # Ray: one log monitor per physical host. A node joining a cluster on 127.0.0.1 shares its
    # machine with the head, which has one; a node joining another machine's cluster needs its own.
    _, head = _join("--head", "--node-ip-address", "127.0.0.1")
    _, runner = _join("127.0.0.1:6379")
    _, remote = _join("10.0.0.1:6379")
    assert "--include-log-monitor=false" in runner
    assert not any(a.startswith("--include-log-monitor") for a in head + remote)


def test_each_runner_of_a_host_gets_its_own_suggested_trust_name(tmp_path, monkeypatch):
    for var in [v for v in os.environ if v.startswith("LUMA_")]:
        monkeypatch.delenv(var)
    lines = []
    for name in ("r1", "r2"):
        monkeypatch.setenv("LUMA_HOME", str(tmp_path / name))
        assert CliRunner().invoke(cli, ["runner", "keygen"]).exit_code == 0  # both user@host
        run, _ = _join("10.0.0.1:6379")
        lines.append(re.search(r"`(luma runner trust .*?)`", run.stderr).group(1))
    names = [shlex.split(line)[-1] for line in lines]
    assert names[0] != names[1]
    monkeypatch.setenv("LUMA_HOME", str(tmp_path / "head"))
    for line in lines:  # the head's project trusts both, exactly as printed
        run = CliRunner().invoke(cli, shlex.split(line)[1:])
        assert run.exit_code == 0, run.output


def test_no_test_stops_every_ray_process_of_the_user():
    offenders = [str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py")
                 if re.search(r"""["']stop["'],\s*["']--force["']|ray stop --force\b(?!,)""", p.read_text())
                 and p.name != "test_access.py"]
    assert offenders == []
