"""Campaign files, their units and plans, and a runner's labels -- no cluster needed
(tests/experiments/fleet/test_cluster.py runs campaigns on a real local Ray cluster)."""

from __future__ import annotations

import json
import shlex

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from luma.errors import ConfigError
from luma.experiments.fleet import campaign, labels, planner

BASE = """name = "two-classes"
trial_budget = 200
trial_seconds = 2

[[contracts]]
contract = "matvec-memory"

[[contracts]]
contract = "digits-compute"
repetitions = 2

[architectures.avx512]
labels = { "luma-isa" = "avx512-vnni" }
machines = 3

[architectures.avx2]
labels = { "luma-isa" = "avx2", "lab" = "b" }
machines = 1
"""


def _file(tmp_path, text=BASE, name="c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_units_are_contracts_times_dimensions_times_classes(tmp_path):
    c = campaign.load(_file(tmp_path))
    assert sorted(u.key for u in c.units) == sorted(
        f"{k}-{cls}" for k in ("matvec-memory-host_memory", "digits-classifier-compute-compute") for cls in ("avx512", "avx2"))
    u = next(u for u in c.units if u.key == "digits-classifier-compute-compute-avx2")
    assert u.repetitions == 2 and u.levels and u.trial_seconds == 2
    spec = u.spec(c.id)
    assert spec["sprint_id"] == f"{c.id}--digits-classifier-compute-compute-avx2" and spec["contract"]["name"] == "digits-classifier-compute"
    json.dumps(spec)  # plain data: it crosses the cluster
    assert c.id.startswith("two-classes-") and c.id == campaign.load(_file(tmp_path)).id
    assert c.id != campaign.load(_file(tmp_path, BASE.replace("= 200", "= 201"), "d.toml")).id


def test_a_unit_may_run_at_most_what_the_sprint_command_says(tmp_path):
    from luma.experiments.sprint.run import sprint_trials
    from luma.experiments.sprint import pex as sprint

    c = campaign.load(_file(tmp_path))
    for u in c.units:
        plan = sprint.plan(u.contract, u.dimension, list(u.levels), u.intervention, u.repetitions)
        assert u.max_trials() == sprint_trials(plan)


@pytest.mark.parametrize("edit, field, words", [
    (("name = \"two-classes\"", "name = \"Two Classes\""), "name", "a slug"),
    (("trial_budget = 200", "trial_budget = 10"), "trial_budget", "may need up to"),
    (("contract = \"matvec-memory\"", "contract = \"no-such\""), "contracts[0].contract", "no contract file"),
    (("\"luma-isa\" = \"avx2\"", "\"luma-isa\" = \"avx 2\""), "architectures.avx2.labels", "not a Ray node label"),
    (("\"lab\" = \"b\"", "\"ray.io/node-id\" = \"b\""), "architectures.avx2.labels", "Ray's own"),
    (("\"lab\" = \"b\"", "\"luma-runner-key\" = \"b\""), "architectures.avx2.labels", "set by `luma runner join`"),
    (("repetitions = 2", "repetitions = 2\ndimensions = [\"warp_drive\"]"), "contracts[1].dimensions",
     "unknown or unenforceable dimension"),
    (("repetitions = 2", "repetitions = 2\nlevels = [\"1 core\", \"many\"]"), "contracts[1].levels", ""),
    (("repetitions = 2", "colour = \"red\""), "contracts[1].colour", "Extra inputs"),
    (("[architectures.avx2]", "[architectures.AVX2]"), "architectures", "not a slug"),
])
def test_bad_campaign_files_name_the_field(tmp_path, edit, field, words):
    with pytest.raises(ConfigError) as err:
        campaign.load(_file(tmp_path, BASE.replace(*edit)))
    assert err.value.field == field and words in err.value.message and err.value.source.endswith("c.toml")


def test_the_same_contract_twice_is_refused(tmp_path):
    text = BASE.replace('contract = "digits-compute"\nrepetitions = 2', 'contract = "matvec-memory"')
    with pytest.raises(ConfigError, match="appears twice"):
        campaign.load(_file(tmp_path, text))


def test_a_contract_file_next_to_the_campaign_is_found(tmp_path):
    from luma.experiments.sprint import contract

    (tmp_path / "mine.toml").write_text(contract.shipped()["matvec-memory"].read_text().replace(
        'name = "matvec-memory"', 'name = "mine"'))
    c = campaign.load(_file(tmp_path, BASE.replace('"matvec-memory"', '"mine.toml"')))
    assert {u.contract.name for u in c.units} == {"mine", "digits-classifier-compute"}


def test_the_plan_places_whole_sprints_longest_first_per_class(tmp_path):
    c = campaign.load(_file(tmp_path))
    out = planner.plan(c)
    rows = {r["class"]: r for r in out["classes"]}
    per_unit = {u.key: u.max_trials() * 2 for u in c.units}
    a = sorted((v for k, v in per_unit.items() if k.endswith("-avx512")), reverse=True)
    assert rows["avx512"]["wall_s"] == max(a) and rows["avx512"]["serial_s"] == sum(a)  # 2 sprints, 3 machines
    assert rows["avx2"]["wall_s"] == rows["avx2"]["serial_s"]  # 1 machine: one after the other
    assert out["total"]["wall_s"] == max(r["wall_s"] for r in rows.values())
    assert out["total"]["max_trials"] == c.max_trials() <= c.spec.trial_budget
    gone = planner.plan(c, {"avx512": 2})  # as a cluster reports it: no avx2 runner alive
    assert {r["class"]: r["note"] for r in gone["classes"]}["avx2"] == "no machine of this class"
    assert gone["total"]["wall_s"] is None


def test_the_plan_tells_an_untrusted_machine_from_no_machine(tmp_path):
    c = campaign.load(_file(tmp_path))
    notes = {r["class"]: r for r in planner.plan(c, {"avx512": 2, "avx2": 0}, {"avx512": 1, "avx2": 2})["classes"]}
    assert notes["avx2"]["machines"] == 0 and notes["avx2"]["untrusted"] == 2
    assert notes["avx2"]["note"].startswith("2 runners of this class not trusted here") and "luma runner trust" in \
        notes["avx2"]["note"]
    assert notes["avx512"]["note"].startswith("1 more runner of this class not trusted here")
    none = planner.plan(c, {"avx512": 2, "avx2": 0}, {"avx512": 0, "avx2": 0})["classes"]
    assert [r["note"] for r in none if r["class"] == "avx2"] == ["no machine of this class"]


def test_a_node_ray_still_lists_alive_but_whose_manager_is_gone_counts_as_died():
    import socket

    from luma.experiments.fleet import attempts

    up = socket.create_server(("127.0.0.1", 0))  # a node manager that still listens
    closed = socket.create_server(("127.0.0.1", 0))
    gone_port = closed.getsockname()[1]
    closed.close()  # one killed: its port refuses
    try:
        listed = [{"NodeID": name, "Alive": True, "NodeManagerAddress": "127.0.0.1", "NodeManagerPort": port}
                  for name, port in (("up", up.getsockname()[1]), ("gone", gone_port), ("unasked", gone_port))]
        alive = {"up", "gone", "unasked"}
        # Only the suspects (earlier attempts' nodes) are asked; the rest keep Ray's word.
        assert attempts.answering(listed, alive, {"up", "gone"}) == {"up", "unasked"}
        seen = [{"node": "gone", "host": "h1"}, {"node": "up", "host": "h2"}]
        described = attempts.describe(seen, attempts.answering(listed, alive, {"gone"}))
        assert described["retried_after"][0]["ended"] == "died"
    finally:
        up.close()


def test_a_unit_run_twice_names_the_node_that_died():
    from luma.experiments.fleet import attempts

    seen = [{"node": "a" * 56, "host": "h1"}, {"node": "b" * 56, "host": "h2"}]
    out = attempts.describe(seen, alive={"b" * 56})
    assert out == {"attempts": 2, "retried_after": [{"node": "a" * 12, "host": "h1", "ended": "died"}]}
    assert attempts.note_text(out) == f"run 2 times; node {'a' * 12} on h1 died"
    assert attempts.describe(seen[1:], alive={"b" * 56}) == {"attempts": 1}
    assert attempts.note_text({"attempts": 1}) is None and attempts.describe([], set()) == {"attempts": None}


@given(st.lists(st.floats(0.1, 100), max_size=30), st.integers(1, 8))
def test_lpt_is_between_the_lower_bounds_and_four_thirds_of_them(jobs, machines):
    span = campaign.lpt_makespan(jobs, machines)
    lower = max([sum(jobs) / machines, *jobs]) if jobs else 0.0
    assert lower - 1e-9 <= span <= lower * 4 / 3 + max(jobs, default=0) + 1e-9
    assert span <= sum(jobs) + 1e-9


def test_a_hundred_machines_and_twenty_contracts_plan(tmp_path):
    """The size the issue names; `luma campaign plan` prints it (its time: docs/fleet.md)."""
    from luma.cli.main import cli
    from luma.experiments.sprint import contract

    body = ["name = \"big\"", "trial_budget = 100000"]
    for i in range(20):
        (tmp_path / f"c{i}.toml").write_text(contract.shipped()["matvec-memory"].read_text().replace(
            'name = "matvec-memory"', f'name = "c{i}"'))
        body += ["[[contracts]]", f"contract = \"c{i}.toml\""]
    for k, n in (("avx512", 40), ("avx2", 30), ("neon", 20), ("gpu", 10)):
        body += [f"[architectures.{k}]", f"labels = {{ \"luma-isa\" = \"{k}\" }}", f"machines = {n}"]
    path = _file(tmp_path, "\n".join(body))
    run = CliRunner().invoke(cli, ["campaign", "plan", str(path), "--format", "json"])
    assert run.exit_code == 0, run.output
    out = json.loads(run.stdout)
    assert out["total"]["machines"] == 100 and out["total"]["sprints"] == 80
    assert all(r["wall_s"] for r in out["classes"])


def test_the_plan_command_prints_a_table_and_bad_files_are_one_line(tmp_path):
    from luma.cli.main import cli

    ok = CliRunner().invoke(cli, ["campaign", "plan", str(_file(tmp_path))])
    assert ok.exit_code == 0 and "avx512" in ok.output and "all" in ok.output
    bad = CliRunner().invoke(cli, ["campaign", "plan", str(_file(tmp_path, BASE.replace("= 200", "= 1"), "b.toml"))])
    assert bad.exit_code == 1 and "trial_budget" in bad.output and "Traceback" not in bad.output
    missing = CliRunner().invoke(cli, ["campaign", "plan", str(tmp_path / "nope.toml")])
    assert missing.exit_code == 1 and "no such campaign file" in missing.output


def test_runner_labels_come_from_the_machine():
    assert labels.isa(["avx2", "avx512f", "avx512_vnni"], "x86_64") == "avx512-vnni"
    assert labels.isa(["avx2", "fma"], "x86_64") == "avx2"
    assert labels.isa(["asimd"], "aarch64") == "arm64-neon"
    assert labels.isa([], "riscv64") == "riscv64"
    here = labels.detect()
    assert here["luma-isa"] and int(here["luma-cpus"]) >= 1 and here["luma-accelerator"] in ("none",) or \
        here["luma-accelerator"].startswith("nvidia-")
    assert all(campaign.LABEL_KEY.match(k) and campaign.LABEL_VALUE.match(v) for k, v in here.items())


@pytest.mark.parametrize("pair, words", [("noequals", "not a node label"), ("a b=c", "not a node label"),
                                         ("luma-runner-key=x", "set by LUMA"), ("ray.io/x=y", "not a node label")])
def test_bad_own_labels_are_refused(pair, words):
    with pytest.raises(ConfigError, match=words):
        labels.parse([pair])


def test_join_shows_labels_key_and_the_ray_command(luma_home):
    from luma.cli.main import cli

    run = CliRunner().invoke(cli, ["runner", "join", "10.0.0.1:6379", "--label", "lab=a", "--no-block", "--dry-run"])
    assert run.exit_code == 0, run.output
    assert "no runner key in this project yet" in run.stderr and "lab=a" in run.stderr
    cmd = shlex.split(run.stdout)
    assert cmd[1:4] == ["start", "--address", "10.0.0.1:6379"] and "--block" not in cmd
    lab = cmd[cmd.index("--labels") + 1]
    assert "luma-runner-key=" in lab and "lab=a" in lab and "luma-isa=" in lab
    assert json.loads(cmd[cmd.index("--resources") + 1]) == {labels.SLOT: 1}
    usage = CliRunner().invoke(cli, ["runner", "join", "--dry-run"])
    assert usage.exit_code == 2 and "--head" in usage.output


def test_status_and_cancel_of_a_campaign_this_project_never_ran_are_one_line(luma_home):
    from luma.cli.main import cli

    assert CliRunner().invoke(cli, ["kb", "init"]).exit_code == 0
    for args in (["campaign", "status", "nope-12345678"], ["campaign", "cancel", "nope-12345678"]):
        run = CliRunner().invoke(cli, args)
        assert run.exit_code == 1 and "no campaign 'nope-12345678'" in run.output and "known: none" in run.output
    listing = CliRunner().invoke(cli, ["campaign", "status", "--format", "json"])
    assert listing.exit_code == 0 and json.loads(listing.stdout) == []
