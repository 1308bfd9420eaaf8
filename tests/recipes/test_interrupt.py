"""The recipes' shared start and end: model_dir first, Ctrl-C and expected errors in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from recipes import _previous_run as previous_run
from recipes._interrupt import Run, UsageError
from tests.conftest import ROOT
from tfest_kit._tf import tf, tf2


def _checkpoint(directory, step):
    tf2.train.Checkpoint(v=tf2.Variable(1.0)).write(os.path.join(directory, f"model.ckpt-{step}"))
    tf.train.update_checkpoint_state(str(directory), os.path.join(directory, f"model.ckpt-{step}"))


def test_ctrl_c_outside_training_and_expected_errors_are_one_line(tmp_path, capsys):
    run = Run("some_recipe")

    def interrupted():
        raise KeyboardInterrupt

    # Before the model_dir is chosen, nothing is written: nothing to resume.
    assert run.main(interrupted) == 130
    assert capsys.readouterr().err == "some_recipe: interrupted\n"

    # A recipe whose models each have a sub-directory names them too (inspect / plot read those).
    run.announce(str(tmp_path), [str(tmp_path / "a"), str(tmp_path / "b")])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"model_dir: {tmp_path}" and len(out) == 2, out
    assert out[1].startswith("checkpoints") and f"{tmp_path / 'a'}, {tmp_path / 'b'}" in out[1]
    run.announce(str(tmp_path))
    assert capsys.readouterr().out == f"model_dir: {tmp_path}\n"
    assert run.main(interrupted) == 130
    assert capsys.readouterr().err == (
        f"some_recipe: interrupted; to resume, rerun with --model_dir={tmp_path} (and the same "
        "flags)\n"
    )
    _checkpoint(tmp_path, 40)
    assert run.main(interrupted) == 130
    assert "interrupted (last checkpoint: step 40); to resume" in capsys.readouterr().err
    # A cluster's other task saves nothing: the newest checkpoint is not its step.
    run.say_interrupted(40, 100, saves=False)
    assert capsys.readouterr().out == (
        f"interrupted; to resume, rerun with --model_dir={tmp_path} (and the same flags)\n"
    )

    class Offline(Exception):
        pass

    def offline():
        raise Offline("no network")

    assert run.main(offline, errors=(Offline,)) == 1
    assert capsys.readouterr().err == "some_recipe: error: no network\n"

    def refused():
        raise previous_run.PreviousRunError("--model_dir X holds a run of recipe other")

    assert run.main(refused) == 1  # always an expected error
    assert capsys.readouterr().err.startswith("some_recipe: error: --model_dir X holds")


class _CtrlC(tf.train.SessionRunHook):
    """Sends this process SIGINT after the 3rd step, as Ctrl-C would."""

    def __init__(self):
        self.steps = 0

    def after_run(self, run_context, run_values):
        self.steps += 1
        if self.steps == 3:
            signal.raise_signal(signal.SIGINT)


def test_ctrl_c_in_training_saves_a_checkpoint_and_says_how_to_resume(tmp_path, capsys):
    def model_fn(features, labels, mode):
        weight = tf.get_variable("w", [1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(features["x"] * weight - labels))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.train.get_global_step()
        )
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():
        x = np.ones([8, 1], np.float32)
        return tf2.data.Dataset.from_tensors(({"x": x}, x)).repeat()

    model_dir = str(tmp_path / "model")
    estimator = tf.estimator.Estimator(model_fn, model_dir=model_dir)
    run = Run("some_recipe")
    run.announce(model_dir)
    assert run.train(estimator, input_fn, 1000, [_CtrlC()], name="the model") is True
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"model_dir: {model_dir}",
        "training the model from step 0 to 1000",
        "interrupted at step 3/1000 of the model; checkpoint saved. To resume, rerun with "
        f"--model_dir={model_dir} (and the same flags)",
    ]
    assert estimator.latest_checkpoint().endswith("model.ckpt-3")
    # The signal handler is put back: a second run trains on to the end, and says it resumes.
    assert run.train(estimator, input_fn, 5) is False
    assert estimator.latest_checkpoint().endswith("model.ckpt-5")
    assert capsys.readouterr().out == "training from step 3 to 5\n"
    # Nothing left to train: said in one line (the recipes used to say nothing, or "training
    # LinearClassifier"), and nothing is trained.
    assert run.train(estimator, input_fn, 4, name="the model", more="raise --n") is False
    assert capsys.readouterr().out == (
        f"the model already trained to step 5 in {model_dir}; raise --n\n"
    )
    assert estimator.latest_checkpoint().endswith("model.ckpt-5")

    # A garbled `checkpoint` state file: train_and_evaluate resumes from model.ckpt-5, and the
    # lines say so, also when that step has reached max_steps (read before the recovery, the
    # state file said step 0).
    def eval_input_fn():
        x = np.ones([8, 1], np.float32)
        return tf2.data.Dataset.from_tensors(({"x": x}, x))

    state = os.path.join(model_dir, "checkpoint")
    for max_steps, line in (
        (5, f"already trained to step 5 in {model_dir}; raise --steps to train more"),
        (6, "training from step 5 to 6"),
    ):
        with open(state, "w") as f:
            f.write("garbled {{{")
        metrics = run.train_and_evaluate(estimator, input_fn, eval_input_fn, max_steps)
        assert metrics["global_step"] == max_steps
        assert capsys.readouterr().out == line + "\n"


def _ctrl_c_as_in_a_terminal():
    # A job started in the background by a non-interactive shell (a CI runner) inherits SIGINT
    # ignored, and Python then installs no handler: these children start as a terminal's do.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_while_a_recipe_imports_tensorflow_is_one_line(tmp_path):
    # Before main runs, KeyboardInterrupt came out of the import machinery: a 50-line traceback.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "recipes.iris_custom_estimator", f"--model_dir={tmp_path}"]
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    time.sleep(1.0)  # importing TensorFlow takes seconds
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert err == "iris_custom_estimator: interrupted\n", err
    assert out == "" and proc.returncode == -signal.SIGINT
    assert not os.listdir(tmp_path)


def test_ctrl_c_an_extension_module_turned_into_an_import_error_is_one_line(monkeypatch, capsys):
    # pybind11 (SciPy's HiGHS) raises "ImportError: initialization failed" from the
    # KeyboardInterrupt that arrived while it initialised: a 40-line traceback before.
    import recipes

    monkeypatch.setattr(recipes, "running_recipe", lambda: "iris_custom_estimator")
    monkeypatch.setattr(recipes, "ctrl_c_pressed", True)
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise ImportError("initialization failed") from interrupt
    except ImportError as error:
        recipes._one_line_for_ctrl_c(ImportError, error, error.__traceback__)
    assert capsys.readouterr().err == "iris_custom_estimator: interrupted\n"
    # Without a Ctrl-C pressed, the error is the recipe's own: its traceback is printed.
    monkeypatch.setattr(recipes, "ctrl_c_pressed", False)
    error = ImportError("initialization failed")
    error.__cause__ = KeyboardInterrupt()
    recipes._one_line_for_ctrl_c(ImportError, error, None)
    assert "ImportError: initialization failed" in capsys.readouterr().err


def test_ctrl_c_that_an_import_swallowed_still_stops_the_recipe_before_main():
    # Cython writes a KeyboardInterrupt raised inside an extension's import as "Exception
    # ignored in ..." and goes on: the recipe trained to the end.
    swallowed_then_main = (
        "import importlib.machinery, os, signal, sys, types\n"
        "import recipes\n"
        "from recipes import _flags\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "except KeyboardInterrupt:\n"
        "    pass\n"
        "recipe = types.ModuleType('recipes.some_recipe')\n"
        "recipe.__spec__ = importlib.machinery.ModuleSpec('recipes.some_recipe', None)\n"
        "sys.modules['__main__'] = recipe  # as python -m recipes.some_recipe\n"
        "_flags.run(lambda argv: print('main ran'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", swallowed_then_main],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    assert proc.stderr == "some_recipe: interrupted\n", proc.stderr
    assert proc.stdout == "" and proc.returncode == -signal.SIGINT


def test_in_a_cluster_a_task_needs_model_dir_writes_its_own_data_and_only_the_chief_records(
    tmp_path, monkeypatch
):
    cluster = {"chief": ["localhost:1"], "worker": ["127.0.0.1:2"], "ps": ["localhost:3"]}

    def task(task_type, cluster=cluster):
        tf_config = {"cluster": cluster, "task": {"type": task_type, "index": 0}}
        monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
        return Run("some_recipe")

    # On several machines each task would make a temporary directory of its own.
    with pytest.raises(UsageError, match="task worker:0 .* every task needs the same --model_dir"):
        task("worker", {"chief": ["host0:1"], "worker": ["host1:1"]}).choose_model_dir(None)
    # On this machine (python -m tfest_kit.cluster) every task derives the same one.
    default = task("worker").choose_model_dir(None)
    assert task("chief").choose_model_dir(None) == default
    assert os.path.basename(default).startswith("some_recipe_cluster_")
    model_dir = str(tmp_path / "run")
    worker = task("worker")
    assert worker.choose_model_dir(model_dir) == model_dir and not worker.is_chief
    worker.check_and_record(model_dir, {"seed": 0})
    assert os.listdir(model_dir) == []  # created, the record left to the chief
    assert worker.data_dir(model_dir) == os.path.join(model_dir, "data", "worker_0")
    chief = task("chief")
    chief.choose_model_dir(model_dir)
    # The chief alone takes the writer lock (as train_and_evaluate does), before it writes.
    assert chief.main(lambda: chief.check_and_record(model_dir, {"seed": 0})) is None
    assert sorted(os.listdir(model_dir)) == [".tfest_kit.lock", "some_recipe_flags.json"]
    assert chief.is_chief and chief.data_dir(model_dir) == os.path.join(model_dir, "data")

    monkeypatch.delenv("TF_CONFIG")
    single = Run("some_recipe")
    assert os.path.basename(single.choose_model_dir(None)).startswith("some_recipe_")
    assert single.is_chief
