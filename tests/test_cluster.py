"""TF_CONFIG validation and the local cluster launcher (small non-TensorFlow child programs)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT
from tfest_kit import cluster
from tfest_kit.cluster import LocalCluster

CLUSTER = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"], "ps": ["h:1"]}


def _config(task_type="worker", index=0, cluster_dict=None):
    return {"cluster": cluster_dict or CLUSTER, "task": {"type": task_type, "index": index}}


# -- validate_tf_config ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        _config("chief", 0),
        _config("worker", 1),
        _config("ps", 0),
        _config("evaluator", 0),
        {"cluster": {"master": ["h:1"], "worker": ["h:2"]}, "task": {"type": "master", "index": 0}},
        {"cluster": {"chief": ["[::1]:2222"]}, "task": {"type": "chief", "index": 0}},
        {"cluster": {"chief": ["h:65535"]}, "task": {"type": "chief", "index": 0}},
        {"task": {"type": "worker", "index": 0}},
        {"cluster": {}, "task": {"type": "worker", "index": 0}, "environment": "cloud"},
    ],
)
def test_valid_configs_pass_and_round_trip(value):
    assert cluster.validate_tf_config(value) == value
    assert cluster.validate_tf_config(json.dumps(value)) == value


def test_unset_means_single_process_and_set_but_empty_is_an_error(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert cluster.validate_tf_config() == {}
    assert cluster.validate_tf_config("") == {}
    monkeypatch.setenv("TF_CONFIG", "  ")  # RunConfig() raised a bare JSONDecodeError
    with pytest.raises(ValueError, match="TF_CONFIG is set but empty: unset it"):
        cluster.validate_tf_config()
    monkeypatch.setenv("TF_CONFIG", json.dumps(_config("ps", 0)))
    assert cluster.validate_tf_config()["task"] == {"type": "ps", "index": 0}


def test_string_index_is_normalised_like_runconfig_does():
    config = cluster.validate_tf_config(
        {"cluster": CLUSTER, "task": {"type": "worker", "index": "1"}}
    )
    assert config["task"]["index"] == 1


@pytest.mark.parametrize(
    "value, expected",
    [
        ('{"cluster": {"chief": ["h:1"]}, "task": {"type": "chief" "index": 0}}', "not valid JSON"),
        ("{'cluster': {}}", "line 1 column 2"),
        ("[1, 2]", "must be a JSON object"),
        (_config("wrker", 0), "task.type must be one of ['chief', 'worker', 'ps', 'evaluator']"),
        (_config("worker", 2), "task.index must be an index into cluster.worker, which has 2"),
        (_config("worker", -1), "task.index"),
        (_config("worker", 1.5), "task.index"),
        (_config("worker", True), "task.index"),
        (_config("chief", 0, {"worker": ["h:1"], "ps": ["h:2"]}), "exactly one 'chief'"),
        (_config("chief", 0, {"chief": ["h:1", "h:2"]}), "exactly one 'chief'"),
        (_config("chief", 0, {"chief": ["h:1"], "evaluator": ["h:2"]}), "only a 'task'"),
        (_config("chief", 0, {"chief": ["h:1"], "workers": ["h:2"]}), "task type 'workers'"),
        (_config("chief", 0, {"chief": ["h:1"], "worker": ["h:x2"]}), "cluster.worker must hold"),
        (_config("chief", 0, {"chief": ["h"]}), 'must hold "host:port" strings. Got: h'),
        (_config("chief", 0, {"chief": ["h:\u00b2"]}), "cluster.chief must hold"),
        (_config("worker", 0, {"chief": ["h:1"], "worker": []}), "which has 0 task(s)"),
        (_config("chief", 0, {"chief": [2222]}), 'must hold "host:port" strings'),
        (
            _config("worker", 0, {"chief": ["h:1"], "worker": ["h:2", "h:99999"]}),
            "cluster.worker[1] port not in 1-65535",
        ),
        (_config("chief", 0, {"chief": ["[::1]:0"]}), "not in 1-65535. Got: [::1]:0"),
        (_config("chief", 0, {"chief": "h:1"}), "must be a list"),
        (_config("chief", 0, {"chief": ["h:1"], "worker": ["h:1"]}), "one address to two tasks"),
        (_config("ps", 0, {"chief": ["h:1"]}), "task.type must be one of ['chief', 'evaluator']"),
        ({"cluster": CLUSTER}, "no 'task'"),
        ({"cluster": CLUSTER, "task": {"type": "worker"}}, "task.index"),
        ({"cluster": CLUSTER, "task": "worker"}, "'task' must be an object"),
        ({"clusters": CLUSTER, "task": {"type": "worker", "index": 0}}, "keys ['clusters']"),
        (
            {"cluster": ["h:1"], "task": {"type": "worker", "index": 0}},
            "'cluster' must be an object",
        ),
        ({"task": {"type": "chief", "index": 0}}, "without a 'cluster'"),
    ],
)
def test_bad_configs_raise_value_error_naming_the_problem(value, expected):
    with pytest.raises(ValueError) as info:
        cluster.validate_tf_config(value)
    assert expected in str(info.value)


def test_a_cluster_of_workers_only_is_for_a_strategy():
    # TensorFlow's multi-worker tutorial: MultiWorkerMirroredStrategy, no chief.
    workers = {"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": "worker", "index": 1}}
    with pytest.raises(ValueError, match=r"exactly one 'chief'.*MultiWorkerMirroredStrategy"):
        cluster.validate_tf_config(workers)
    assert cluster.validate_tf_config(workers, workers_only_allowed=True) == workers
    # A ps task still needs a chief, strategy or not.
    with_ps = {"cluster": {"worker": ["h:1"], "ps": ["h:2"]}, "task": {"type": "ps", "index": 0}}
    with pytest.raises(ValueError, match="exactly one 'chief'"):
        cluster.validate_tf_config(with_ps, workers_only_allowed=True)


def test_bad_env_var_is_reported(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["h:1"]}, "task": ')
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        cluster.validate_tf_config()


def test_wrong_argument_type_is_a_type_error():
    with pytest.raises(TypeError, match="Got: int 3"):
        cluster.validate_tf_config(3)


def test_tf_config_matches_what_runconfig_reads(monkeypatch):
    from tfest_kit._tf import estimator

    spec = cluster.cluster_spec(workers=2, ps=1)
    for task_type, index in [("chief", 0), ("worker", 1), ("ps", 0), ("evaluator", 0)]:
        monkeypatch.setenv("TF_CONFIG", json.dumps(cluster.tf_config(spec, task_type, index)))
        config = estimator.RunConfig()
        assert (config.task_type, config.task_id) == (task_type, index)
        if task_type != "evaluator":
            assert config.num_ps_replicas == 1
            assert config.num_worker_replicas == 3
            assert config.is_chief == (task_type == "chief")


# -- cluster_spec / free_ports --------------------------------------------------------------


def test_cluster_spec_uses_distinct_free_loopback_ports():
    spec = cluster.cluster_spec(workers=3, ps=2)
    assert sorted(spec) == ["chief", "ps", "worker"]
    assert (len(spec["chief"]), len(spec["worker"]), len(spec["ps"])) == (1, 3, 2)
    addresses = [a for v in spec.values() for a in v]
    assert len(set(addresses)) == 6
    assert all(a.startswith("127.0.0.1:") for a in addresses)
    assert list(cluster.cluster_spec()) == ["chief"]


@pytest.mark.parametrize(
    "kwargs, expected",
    [({"workers": -1}, "`workers`"), ({"ps": "1"}, "`ps`")],
)
def test_cluster_spec_rejects_bad_counts(kwargs, expected):
    with pytest.raises(ValueError, match=expected):
        cluster.cluster_spec(**kwargs)


# -- LocalCluster ---------------------------------------------------------------------------

# Child programs: print the task, then behave by task type.
_SHOW = "import json, os; c = json.loads(os.environ['TF_CONFIG']); t = c['task']; "
_PRINT = "print(f\"I am {t['type']}:{t['index']} pid={os.getpid()}\", flush=True); "


def _child(behaviour: str) -> list[str]:
    return [sys.executable, "-c", _SHOW + _PRINT + "import sys, time\n" + behaviour]


def _all_dead(pids: list[int], timeout: float = 5) -> bool:
    """True once none of ``pids`` runs (SIGKILL is delivered asynchronously)."""
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def _pids(text: str) -> list[int]:
    return [int(w.split("=")[1]) for w in text.split() if w.startswith("pid=")]


def _wait_for(out: io.StringIO, text: str, count: int = 1, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while out.getvalue().count(text) < count:
        assert time.monotonic() < deadline, f"no {count}x {text!r} in:\n{out.getvalue()}"
        time.sleep(0.05)


def test_run_prefixes_lines_gives_each_task_its_tf_config_and_stops_ps():
    out = io.StringIO()
    # ps and evaluator would block forever; workers and the chief finish.
    behaviour = "time.sleep(3600) if t['type'] == 'ps' else print('line two', flush=True)"
    local = LocalCluster(_child(behaviour), workers=2, ps=1, evaluator=True, output=out)
    start = time.monotonic()
    assert local.run(timeout=60) == 0
    assert time.monotonic() - start < 30
    text = out.getvalue()
    for name in ["chief:0", "worker:0", "worker:1", "ps:0", "evaluator:0"]:
        assert f"[{name}] I am {name} pid=" in text
        assert f"[{name}] line two" in text or name == "ps:0"
    assert "stopping the parameter servers" in text
    assert _all_dead(_pids(text))
    assert local.tf_config("worker", 1)["cluster"] == local.cluster


def test_chief_failure_stops_everyone_and_is_the_exit_status():
    out = io.StringIO()
    behaviour = "time.sleep(0.5); sys.exit(3) if t['type'] == 'chief' else time.sleep(3600)"
    local = LocalCluster(_child(behaviour), workers=1, ps=1, output=out)
    start = time.monotonic()
    assert local.run(timeout=60) == 3
    assert time.monotonic() - start < 20
    assert "chief:0 exited with 3; stopping every task" in out.getvalue()
    assert _all_dead(_pids(out.getvalue()))


def test_the_chiefs_last_lines_come_before_the_verdict():
    # The launcher wrote "chief:0 exited ..." while the chief's last lines (where a traceback
    # would be) were still on their way through its output thread.
    class SlowTerminal(io.StringIO):
        def write(self, text):
            time.sleep(0.001)  # a terminal or pipe slower than the chief's last burst
            return super().write(text)

    out = SlowTerminal()
    behaviour = (
        "print('\\n'.join(f'last {i}' for i in range(1000)), flush=True)\n"
        "sys.exit(3) if t['type'] == 'chief' else time.sleep(3600)"
    )
    local = LocalCluster(_child(behaviour), workers=0, ps=0, output=out)
    assert local.run(timeout=60) == 3
    text = out.getvalue()
    assert text.index("[chief:0] last 999") < text.index("chief:0 exited with 3"), text[-2000:]


def test_chief_killed_by_signal_and_timeout_statuses():
    kill_self = "import signal; os.kill(os.getpid(), signal.SIGKILL)"
    local = LocalCluster(_child(kill_self), output=io.StringIO())
    assert local.run(timeout=60) == 128 + signal.SIGKILL
    local = LocalCluster(_child("time.sleep(3600)"), output=io.StringIO())
    assert local.run(timeout=1) == 124


def test_evaluator_gets_a_bounded_grace_period():
    out = io.StringIO()
    behaviour = "time.sleep(3600) if t['type'] == 'evaluator' else None"
    local = LocalCluster(_child(behaviour), evaluator=True, output=out)
    start = time.monotonic()
    # Before: exit 0 with the final evaluation (and export) not run, after a silent wait.
    assert local.run(timeout=60, evaluator_grace_secs=1) == 1
    assert time.monotonic() - start < 20
    text = out.getvalue()
    assert "waiting up to 1s for the evaluator" in text
    assert "evaluator:0 still running 1s after the chief" in text
    assert "--evaluator-grace" in text and "stopping, exit 1" in text


@pytest.mark.parametrize("task", ["ps", "worker", "evaluator"])
@pytest.mark.parametrize("death", ["sys.exit(3)", "os.kill(os.getpid(), 9)"])
def test_a_failed_task_is_named_and_stops_the_cluster_unless_an_evaluator(task, death):
    # Before: a worker or evaluator that died left the exit status 0, and a dead ps left the
    # launcher waiting for a chief that waits for the ps forever.
    out = io.StringIO()
    trains = "time.sleep(2)" if task == "evaluator" else "time.sleep(3600)"
    behaviour = (
        f"if t['type'] == {task!r}: time.sleep(0.5); {death}\n"
        f"{trains} if t['type'] in ('chief', 'worker') else time.sleep(3600)"
    )
    local = LocalCluster(_child(behaviour), workers=1, ps=1, evaluator=True, output=out)
    start = time.monotonic()
    status = local.run(timeout=60, worker_grace_secs=5, evaluator_grace_secs=1)
    assert time.monotonic() - start < 20
    text = out.getvalue()
    how = "exited with 3" if death.startswith("sys") else "was killed by signal 9;"
    lines = [x for x in text.splitlines() if x.startswith(f"[launcher] {task}:0 {how}")]
    assert len(lines) == 1, text
    if task == "evaluator":  # said at once; training finishes, then a failed exit
        assert status == 1, text
        assert "training goes on" in lines[0] and "training done" in text
    else:
        assert status == (3 if death.startswith("sys") else 128 + 9), text
        assert "stopping every task" in lines[0] and "training done" not in text
    assert _all_dead(_pids(text))


def test_stop_kills_grandchildren_and_tasks_ignoring_sigterm():
    out = io.StringIO()
    behaviour = (
        "import signal, subprocess; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "p = subprocess.Popen(['sleep', '3600']); print(f'grandchild pid={p.pid}', flush=True); "
        "time.sleep(3600)"
    )
    with LocalCluster(_child(behaviour), workers=1, output=out) as local:
        local.start()
        _wait_for(out, "grandchild pid=", count=2)
        pids = _pids(out.getvalue())
        assert len(pids) == 4
        local.stop(grace_secs=0.5)
    assert "ignored SIGTERM" in out.getvalue()
    assert _all_dead(pids)


def test_stop_leaves_the_parameter_servers_until_the_other_tasks_exit(tmp_path):
    # A chief saving a checkpoint on SIGTERM (PreemptionHook) reads its variables from the
    # ps: stopped together, the save failed ("Socket closed") and the chief hung in recovery.
    out = io.StringIO()
    pid_file = tmp_path / "ps.pid"
    behaviour = f"""
if t['type'] == 'ps':
    open({str(pid_file)!r}, 'w').write(str(os.getpid()))
    time.sleep(3600)
import signal
def on_term(*args):
    time.sleep(0.5)  # the time a checkpoint takes
    with open(f"/proc/{{open({str(pid_file)!r}).read()}}/stat") as f:
        alive = f.read().split(")")[-1].split()[0] != "Z"
    print(f"ps alive after SIGTERM: {{alive}}", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("handler set", flush=True)
time.sleep(3600)
"""
    with LocalCluster(_child(behaviour), workers=1, ps=1, output=out) as local:
        local.start()
        _wait_for(out, "handler set", count=2)
        _wait_for(out, "I am ps:0")
        local.stop(grace_secs=5)
    assert out.getvalue().count("ps alive after SIGTERM: True") == 2, out.getvalue()
    assert "ignored SIGTERM" not in out.getvalue()
    assert _all_dead(_pids(out.getvalue()))


def test_a_task_can_be_killed_and_restarted_with_the_same_tf_config():
    out = io.StringIO()
    with LocalCluster(_child("time.sleep(3600)"), workers=1, output=out) as local:
        local.start()
        _wait_for(out, "[worker:0] I am worker:0")
        first = local.process("worker", 0)
        local.signal_task("worker", 0, signal.SIGKILL)
        assert local.wait_task("worker", 0, timeout=10) == -signal.SIGKILL
        second = local.start_task("worker", 0)
        assert second.pid != first.pid
        assert local.wait_task("worker", 0, timeout=0.2) is None
        _wait_for(out, "[worker:0] I am worker:0", count=2)
    with pytest.raises(ValueError, match="task.type must be one of"):
        local.start_task("ps", 0)


def test_empty_command_is_rejected():
    with pytest.raises(ValueError, match="non-empty list"):
        LocalCluster([])
    with pytest.raises(ValueError, match="non-empty list"):
        LocalCluster("python train.py")


# -- the command line -----------------------------------------------------------------------


def test_cli_exits_with_the_chief_status_and_prefixes_output(capsys, tmp_path):
    marker = tmp_path / "worker-started"
    behaviour = (
        f"marker = {str(marker)!r}\n"
        "if t['type'] == 'worker': open(marker, 'w').close()\n"
        "else:\n"
        "    while not os.path.exists(marker): time.sleep(0.05)\n"
        "    sys.exit(7)\n"
    )
    status = cluster.main(["--workers", "1", "--timeout", "60", "--", *_child(behaviour)])
    out = capsys.readouterr().out
    assert status == 7, out
    assert "[chief:0] I am chief:0" in out
    assert "[worker:0] I am worker:0" in out
    assert '"task": {"type": "worker", "index": 0}' in out


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--workers", "1"], "after `--`"),
        (["--chief", "2", "--", "true"], "--chief: invalid choice: 2"),
        (["--workers", "-1", "--", "true"], "`workers` must be an int >= 0"),
        # Accepted before: a negative grace, and a timeout that stopped the chief at once.
        (["--evaluator-grace", "-5", "--", "true"], "must be a number of seconds >= 0"),
        (["--worker-grace", "x", "--", "true"], "invalid _seconds value: 'x'"),
        (["--timeout", "0", "--", "true"], "--timeout 0 would stop the chief at once"),
    ],
)
def test_cli_usage_errors(capsys, argv, expected):
    with pytest.raises(SystemExit) as info:
        cluster.main(argv)
    assert info.value.code == 2
    assert expected in capsys.readouterr().err


@pytest.mark.slow
def test_cli_ctrl_c_stops_every_task():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tfest_kit.cluster", "--workers", "1", "--ps", "1", "--"]
    launcher = subprocess.Popen(
        [*command, *_child("time.sleep(3600)")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    try:
        deadline = time.monotonic() + 90
        while len(_pids("\n".join(lines))) < 3 and time.monotonic() < deadline:
            lines.append(launcher.stdout.readline())
        pids = _pids("\n".join(lines))
        assert len(pids) == 3, "".join(lines)
        launcher.send_signal(signal.SIGINT)
        rest, _ = launcher.communicate(timeout=30)
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + signal.SIGINT, "".join(lines) + rest
    assert "SIGINT: stopping every task" in rest
    assert _all_dead(pids)
