"""`luma runner join`: make this machine a runner of a Ray cluster (experiments/fleet/)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click

from luma.cli.project import WRITE, project, settings
from luma.errors import ConfigError, LumaError
from luma.experiments.fleet import auth, labels as node_labels, loopback
from luma.experiments.fleet.labels import SLOT, ray_labels
from luma.kb.operations.runner_keys import project_signer, suggested_name
from luma.kb.trust import attestation


def ray_executable() -> list[str]:
    """The `ray` command of this Python environment (Ray's own CLI starts and joins nodes)."""
    here = Path(sys.executable).parent / "ray"
    found = str(here) if here.is_file() else shutil.which("ray")
    if not found:
        raise ConfigError("Ray is not installed here: pip install 'luma[fleet]'", field="ray")
    return [found]


def start_command(address: str | None, labels: dict[str, str], *, head: bool, port: int, node_ip: str | None,
                  block: bool, cpus: int | None) -> list[str]:
    """The `ray start` command line of a runner node; a node on 127.0.0.1 starts through
    `luma.experiments.fleet.loopback`, which keeps Ray's servers on that address."""
    cmd = ([sys.executable, "-m", loopback.__name__] if loopback.is_loopback(node_ip) else ray_executable())
    cmd.append("start")
    if head:
        cmd += ["--head", "--port", str(port), "--include-dashboard=false"]
    else:
        cmd += ["--address", address]
        if loopback.is_loopback(address):
            # The cluster's head runs on this machine, and with it a log monitor: Ray wants one per
            # physical host (a second duplicates the logs), and each polls every 0.1 s — on a small
            # host that is CPU time a trial running on every core would count as another tenant's.
            cmd.append("--include-log-monitor=false")
    cmd += ["--labels", ray_labels(labels), "--resources", json.dumps({SLOT: 1}), "--disable-usage-stats"]
    if cpus is not None:
        cmd += ["--num-cpus", str(cpus)]
    if node_ip:
        cmd += ["--node-ip-address", node_ip]
    if block:
        cmd.append("--block")
    return cmd


@click.command("join")
@click.argument("address", required=False)
@click.option("--head", "as_head", is_flag=True, help="Start a new cluster with this machine as its first runner "
                                                      "(no ADDRESS).")
@click.option("--port", type=click.IntRange(1, 65535), default=6379, show_default=True,
              help="With --head: the port the cluster listens on.")
@click.option("--label", "extra", multiple=True, metavar="KEY=VALUE",
              help="A label of your own (e.g. class=lab-a), beside the ones read from the machine.")
@click.option("--node-ip-address", "node_ip", help="The address other machines reach this one at (default: Ray's "
                                                   "choice; 127.0.0.1: this machine only, every port on it).")
@click.option("--cpus", type=click.IntRange(0, 4096), help="Logical CPUs to offer Ray (default: all).")
@click.option("--block/--no-block", default=True, show_default=True,
              help="Stay in the foreground until stopped (--no-block: start the node and return).")
@click.option("--dry-run", is_flag=True, help="Print the labels and the `ray start` command; start nothing, "
                                              "make no key or token.")
@project(WRITE)
def join_cmd(address, as_head, port, extra, node_ip, cpus, block, dry_run) -> None:
    """Join the Ray cluster at ADDRESS as a LUMA runner: this machine's labels (ISA, CPUs,
    memory, accelerator; your --label ones), its runner key's fingerprint, and one runner slot,
    so campaigns place one sprint at a time here. The runner key (made and trusted in this
    project on first use) signs every record this machine measures; the head's project must
    trust it (`luma runner trust KEY.pub`) before it gets work. Ray's token authentication is on
    (docs/fleet.md: the token, and RAY_AUTH_MODE=disabled)."""
    if bool(address) == as_head:
        raise click.UsageError("give the cluster's ADDRESS, or --head to start a new cluster (not both)")
    if address and loopback.is_loopback(address) and not node_ip:
        node_ip = "127.0.0.1"  # Ray would advertise the network address, which a loopback cluster never answers
    if address and loopback.is_loopback(node_ip) and not loopback.is_loopback(address):
        raise click.BadParameter(f"a node on {node_ip} can only join a cluster on this machine (127.0.0.1:PORT), "
                                 f"not {address}", param_hint="'--node-ip-address'")
    own = node_labels.parse(extra)
    s = settings()
    signer = project_signer(s, create=not dry_run)
    fingerprint = signer.fingerprint if signer else "(made on the first join)"
    lab = {**node_labels.detect(), **own, node_labels.KEY_LABEL: fingerprint}
    cmd = start_command(address, lab, head=as_head, port=port, node_ip=node_ip, block=block, cpus=cpus)
    if signer:
        pub = attestation.keys_dir(s.home) / f"{signer.name}.pub"
        click.echo(f"runner key {signer.name} ({signer.fingerprint}); the head's project trusts it with "
                   f"`luma runner trust {pub} --name {suggested_name(signer.name, signer.fingerprint)}`", err=True)
    else:
        click.echo("no runner key in this project yet: the first join makes one (a dry run makes none)", err=True)
    click.echo("labels: " + ", ".join(f"{k}={v}" for k, v in sorted(lab.items())), err=True)
    if dry_run:
        click.echo(shlex.join(cmd))
        return
    given = auth.resolve(s.home, os.environ, create=as_head)
    if given.on:
        click.echo(f"Ray token authentication: on, token {given.token}" + (" (made now: copy it to every runner "
                   "and the campaign head, docs/fleet.md)" if given.made else ""), err=True)
    else:
        click.echo("Ray token authentication: off (RAY_AUTH_MODE is set): anyone who reaches the cluster's ports "
                   "can run code on it", err=True)
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, env={**os.environ, **given.env})
    if done.returncode != 0:
        raise LumaError(f"ray start exited with {done.returncode}", source="luma runner join")
