"""Both ways Estimators distribute, on loopback, through ``python -m tfest_kit.cluster``.

Each run: tfest_kit.train_and_evaluate with an evaluator task, early stopping (which must end
training long before max_steps) and the best exporter (tests/programs/cluster_train.py).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_program
from tfest_kit._tf import tf

pytestmark = pytest.mark.slow

PROGRAM = "tests/programs/cluster_train.py"
MAX_STEPS = 100000  # never reached: early stopping ends training
TASKS = ("chief:0", "worker:0", "ps:0", "evaluator:0")


def _lines(output: str, task: str) -> list[str]:
    prefix = f"[{task}] "
    return [line[len(prefix) :] for line in output.splitlines() if line.startswith(prefix)]


def _result(output: str, task: str) -> dict:
    found = [
        json.loads(x[len("RESULT ") :]) for x in _lines(output, task) if x.startswith("RESULT ")
    ]
    assert found, f"no RESULT from {task}:\n{output}"
    return found[-1]


def _run_cluster(model_dir: str, *launcher_args: str, program_args=()) -> str:
    proc = run_program(
        [
            "-m",
            "tfest_kit.cluster",
            *launcher_args,
            "--evaluator",
            "--timeout",
            "240",
            "--evaluator-grace",
            "8",
            "--",
            sys.executable,
            PROGRAM,
            f"--model_dir={model_dir}",
            f"--max_steps={MAX_STEPS}",
            *program_args,
        ],
        timeout=300,
    )
    return proc.stdout + proc.stderr


def _check_training_outcome(output: str, model_dir: str) -> None:
    # The worker joined the chief's training, and early stopping ended it for both.
    assert "WORKER_SEEN True" in "\n".join(_lines(output, "chief:0")), output
    assert "JOINED" in _lines(output, "worker:0"), output
    for task in ("chief:0", "worker:0"):
        assert any(
            "Requesting early stopping" in x or "Early stopping requested" in x
            for x in _lines(output, task)
        ), f"{task} did not stop early:\n{output}"
    step = tf.train.load_checkpoint(model_dir).get_tensor("global_step")
    assert 0 < step < MAX_STEPS
    # The evaluator evaluated checkpoints, and the best exporter wrote a SavedModel whose
    # recorded loss is the lowest evaluated one.
    evaluated = [
        (int(m.group(1)), float(m.group(2)))
        for m in (
            re.search(r"Saving dict for global step (\d+): .*loss = ([0-9.e+-]+)", x)
            for x in _lines(output, "evaluator:0")
        )
        if m
    ]
    assert len(evaluated) >= 2, output
    export_base = os.path.join(model_dir, "export", "best")
    exports = sorted(e for e in os.listdir(export_base) if e.isdigit())
    assert exports, output
    newest = os.path.join(export_base, exports[-1])
    assert os.path.exists(os.path.join(newest, "saved_model.pb"))
    with open(os.path.join(newest, "assets.extra", "tfest_kit_eval_metrics.json")) as f:
        exported_loss = json.load(f)["eval_result"]["loss"]
    assert exported_loss == pytest.approx(min(loss for _, loss in evaluated), rel=1e-5)
    # Every training task returned the metrics the evaluator wrote, and none failed (the
    # launcher's exit status is the chief's alone).
    for task in ("chief:0", "worker:0"):
        assert _result(output, task)["metrics"]["global_step"] in {s for s, _ in evaluated}
    assert not [x for x in output.splitlines() if "[launcher]" in x and "exited with" in x], output
    assert "training done; stopping the parameter servers" in output


def _check_evaluator_ended_by_itself(output: str, model_dir: str) -> None:
    # After the early stop, not at max_steps: the official evaluator would wait forever.
    step = tf.train.load_checkpoint(model_dir).get_tensor("global_step")
    assert f"Training stopped early at global step {step}, which is evaluated" in output, output
    # The final exporter made the final export, of the checkpoint training ended with.
    assert (
        f"Training stopped early at global step {step}: exporter 'final' makes the final export"
        in "\n".join(_lines(output, "evaluator:0"))
    ), output
    final_base = os.path.join(model_dir, "export", "final")
    final = max(e for e in os.listdir(final_base) if e.isdigit())  # newest: a run may resume
    exported = tf.train.load_checkpoint(os.path.join(final_base, final, "variables", "variables"))
    trained = tf.train.load_checkpoint(model_dir)
    for name in ("w", "b"):
        assert (exported.get_tensor(name) == trained.get_tensor(name)).all(), name
    assert "the evaluator still runs" not in output, output


def test_multi_worker_mirrored_strategy(tmp_path):
    model_dir = str(tmp_path / "model")
    output = _run_cluster(model_dir, "--workers", "1", program_args=["--strategy=mwms"])
    # Each worker holds a mirrored copy, and the strategy really spans both tasks.
    chief = "\n".join(_lines(output, "chief:0"))
    assert "VARIABLE_DEVICE w /job:chief/replica:0/task:0/device:CPU:0" in chief, output
    assert "num_workers = 2" in chief, output
    assert "VARIABLE_DEVICE w /job:worker/" in "\n".join(_lines(output, "worker:0")), output
    assert "group_size = 2" in chief, output
    _check_training_outcome(output, model_dir)


def test_a_worker_whose_session_fails_under_mwms_is_named_not_left_waiting(tmp_path):
    # TensorFlow's recovery gave the worker a new session from the newest checkpoint while the
    # chief waited in its step: both waited forever, with no message.
    model_dir = str(tmp_path / "model")
    proc = run_program(
        [
            "-m", "tfest_kit.cluster", "--workers", "1", "--timeout", "100", "--",
            sys.executable, PROGRAM, f"--model_dir={model_dir}", "--max_steps=200",
            "--strategy=mwms", "--fail_worker_at=13",
        ],
        timeout=130,  # a hang fails here
        check_exit=None,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "within 100" not in output, output  # the launcher's timeout
    assert "[launcher] worker:0 exited with 1; stopping every task" in output, output
    error = [x for x in _lines(output, "worker:0") if x.startswith("tfest_kit")]
    assert error and "MultiWorkerMirroredStrategy" in error[-1], output
    assert "Restart every task" in error[-1] and "newest checkpoint" in error[-1], output


def test_parameter_server_training_and_resuming_its_model_dir(tmp_path):
    # Early stopping's flag is not saved with the model, so a model_dir trained on one machine
    # resumes on a cluster ("Key signal_early_stopping/STOP not found in checkpoint" before),
    # and after an early stop the next run's workers train instead of stopping at once.
    model_dir = str(tmp_path / "model")
    run_program([PROGRAM, f"--model_dir={model_dir}", "--max_steps=20", "--wait_at=-1"])
    assert tf.train.load_checkpoint(model_dir).get_tensor("global_step") == 20

    output = _run_cluster(model_dir, "--workers", "1", "--ps", "1", program_args=["--wait_at=25"])
    # Variables live on the ps task, for the chief's graph and the worker's alike.
    for task in ("chief:0", "worker:0"):
        devices = dict(x.split()[1:] for x in _lines(output, task) if x.startswith("VARIABLE_DEV"))
        assert devices == {"w": "/job:ps/task:0", "b": "/job:ps/task:0"}, output
    assert _lines(output, "ps:0"), output
    building = [t for t in TASKS if any("building the graph" in x for x in _lines(output, t))]
    assert building == ["chief:0", "worker:0"], output  # not the ps or the evaluator
    _check_training_outcome(output, model_dir)
    _check_evaluator_ended_by_itself(output, model_dir)
    assert os.path.exists(os.path.join(model_dir, "stopped_early.json"))
    reader = tf.train.load_checkpoint(model_dir)
    assert not any("signal_early_stopping" in name for name in reader.get_variable_to_shape_map())
    stopped = int(reader.get_tensor("global_step"))

    os.remove(os.path.join(model_dir, "worker0-joined"))
    output = _run_cluster(
        model_dir,
        "--workers",
        "1",
        "--ps",
        "1",
        program_args=[
            f"--max_steps={stopped + 60}",
            "--patience_steps=1000000",
            f"--wait_at={stopped + 5}",
        ],
    )
    assert "WORKER_SEEN True" in "\n".join(_lines(output, "chief:0")), output
    for task in ("chief:0", "worker:0"):
        assert not any("early stopping" in x.lower() for x in _lines(output, task)), output
    # Asynchronous training: the worker's last step may land after the chief's check.
    final_step = tf.train.load_checkpoint(model_dir).get_tensor("global_step")
    assert stopped + 60 <= final_step <= stopped + 62
    # The evaluator ignored the earlier run's early stop and ended at max_steps, and the
    # chief deleted that run's record.
    assert "Exiting evaluation, global_step=" in "\n".join(_lines(output, "evaluator:0")), output
    assert "which is evaluated" not in output, output
    assert not os.path.exists(os.path.join(model_dir, "stopped_early.json"))


def test_a_worker_whose_chief_is_not_there_says_what_it_waits_for(tmp_path):
    # TensorFlow waits for the chief to initialise the variables (for 2 hours): the worker's
    # progress lines said "still creating the session" and named no task.
    ports = []
    for _ in range(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    chief, worker, ps = (f"127.0.0.1:{port}" for port in ports)
    cluster = {"chief": [chief], "worker": [worker], "ps": [ps]}
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    args = [sys.executable, PROGRAM, f"--model_dir={tmp_path}"]
    with subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        try:
            said = next((line for line in proc.stdout if "creating the session" in line), "")
        finally:
            proc.kill()
    assert f"waiting for chief {chief} and ps {ps} (TF_CONFIG)" in said, said


# The launcher's rule for every task type (a worker or chief that dies too) is
# test_cluster.py's, with stand-in tasks; here, with real TensorFlow tasks, the deaths whose
# effect on the others is TensorFlow's: a chief blocked on a lost ps (at start and mid-run) must
# not be named as a second failure, and training goes on without the evaluator.
@pytest.mark.parametrize("fault, task", [("crash", "ps"), ("kill", "ps"), ("kill", "evaluator")])
def test_a_task_that_dies_is_named_and_the_launcher_ends(tmp_path, fault, task):
    # Before: a dead ps left the chief and the launcher waiting forever, and a dead worker or
    # evaluator ended in exit status 0 and "training done".
    model_dir = str(tmp_path / "model")
    survives = task == "evaluator"  # training goes on to max_steps (no eval, no early stop)
    status = 128 + 9 if fault == "kill" and not survives else 1
    proc = run_program(
        [
            "-m", "tfest_kit.cluster", "--workers", "1", "--ps", "1", "--evaluator",
            "--timeout", "150", "--evaluator-grace", "8", "--",
            sys.executable, PROGRAM, f"--model_dir={model_dir}", "--max_steps=60",
            "--wait_at=-1", "--step_sleep=0.05", f"--{fault}_task={task}",
        ],
        timeout=180,  # a hang fails here
        check_exit=status,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    how = "was killed by signal 9;" if fault == "kill" else "exited with 1"
    said = [
        x
        for x in output.splitlines()
        if x.startswith("[launcher]") and ("exited with" in x or "was killed by" in x)
    ]
    named = [x for x in said if x.startswith(f"[launcher] {task}:0 {how}")]
    assert len(named) == 1 and len(said) == 1, output
    if survives:
        assert "training goes on" in named[0], output
        assert _result(output, "chief:0") and _result(output, "worker:0")
        assert "training done" in output
    else:
        assert "stopping every task" in named[0] and "training done" not in output, output
