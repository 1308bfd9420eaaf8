"""Each recipe as every task of a loopback cluster: the same command, one model trained.

``python -m tfest_kit.cluster --workers 1 --ps 1 --evaluator -- python -m recipes.NAME`` at a
short size (iris without --model_dir: every task derives the same one): the chief prints the
results, the worker and the evaluator end with ``Task … done``, the ps serves until the
launcher stops it, and every checkpoint is in the chief's model directories (one model per
directory, which the evaluator evaluated to its final step). bert_classifier has its own,
longer test in test_bert_classifier.py. mobilenet_cats_dogs is left out: it goes through the
same ``Run.train_and_evaluate`` as these four (to_estimator's Keras model is one more
Estimator there), its data and flags are tested on one process in
test_mobilenet_cats_dogs.py, and four MobileNetV2 processes cost a minute of suite time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from recipes._interrupt import checkpoint_step
from tests.conftest import run_program
from tfest_kit.training import latest_eval_metrics

pytestmark = pytest.mark.slow

# recipe -> (short-run flags, a line only the chief prints, checkpoint sub-directories and
# the evaluation's name)
_RECIPES = {
    "iris_custom_estimator": (["--steps=60"], "Test set accuracy:", [""], "eval"),
    "premade_estimators": (
        ["--steps=20", "--hidden_units=8", "--num_queries=2"],
        "Best by AUC:",
        ["linear", "dnn", "wide_deep"],
        "eval_test",
    ),
    "tfrecord_head": (["--steps=60", "--num_shards=2"], "Test accuracy:", [""], "eval"),
    "tpu_digits": (
        ["--steps=40", "--iterations_per_loop=20", "--metric_tensors=list"],
        "Predictor accuracy on 360 test images:",
        [""],
        "eval_list",
    ),
}


def _task_lines(output: str, task: str) -> list[str]:
    prefix = f"[{task}] "
    return [line[len(prefix) :] for line in output.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("recipe", sorted(_RECIPES))
def test_recipe_runs_unchanged_as_every_task_of_a_cluster(tmp_path, recipe):
    flags, chief_line, subdirs, eval_name = _RECIPES[recipe]
    steps = int(flags[0].split("=")[1])  # --steps=N
    model_dir = tmp_path / "run"
    # Without --model_dir every task (all on this machine) derives the same temporary one.
    given = [] if recipe == "iris_custom_estimator" else [f"--model_dir={model_dir}"]
    proc = run_program(
        [
            "-m", "tfest_kit.cluster", "--workers", "1", "--ps", "1", "--evaluator",
            "--timeout", "240", "--evaluator-grace", "60", "--",
            sys.executable, "-m", f"recipes.{recipe}", *given, *flags,
        ],
        timeout=300,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output and "exited with an error" not in output, output
    chief = _task_lines(output, "chief:0")
    if not given:
        model_dir = Path(
            next(x for x in chief if x.startswith("model_dir: "))[len("model_dir: ") :]
        )
        assert model_dir.name.startswith(f"{recipe}_cluster_"), model_dir
        assert f"model_dir: {model_dir}" in _task_lines(output, "worker:0"), output
    assert sum(line.startswith(chief_line) for line in chief) == 1, output
    assert any(line.startswith("SavedModel exported: ") for line in chief), output
    for task in ("worker:0", "evaluator:0", "ps:0"):
        text = "\n".join(_task_lines(output, task))
        assert text, output
        assert chief_line not in text and "SavedModel" not in text, f"{task}:\n{output}"
    # The ps serves from the start, without reading the data or building the model.
    assert _task_lines(output, "ps:0")[0].startswith("Task ps:0 serves the variables"), output
    for task in ("worker:0", "evaluator:0"):
        assert f"Task {task} done; the chief writes" in "\n".join(_task_lines(output, task))
    assert "training done; stopping the parameter servers" in output

    # One model per directory, trained by the cluster: the chief's checkpoints are the only
    # ones, and the evaluator evaluated the final one.
    expected = {str(model_dir / subdir).rstrip("/") for subdir in subdirs}
    holding = {os.path.dirname(p) for p in map(str, model_dir.rglob("checkpoint"))}
    assert holding == expected, holding
    for directory in expected:
        # Asynchronous ps training may overshoot by a step of the worker.
        final_step = checkpoint_step(directory)
        assert steps <= final_step <= steps + 1, (directory, final_step)
        evaluated = latest_eval_metrics(os.path.join(directory, eval_name))
        assert evaluated["global_step"] == final_step, (directory, evaluated)
    assert len([p for p in (model_dir / "export").iterdir() if p.name.isdigit()]) == 1
