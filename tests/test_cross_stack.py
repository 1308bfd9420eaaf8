"""Models move between stacks: what TF 2.15 wrote works on TF 2.21, and the other way round.

``tests/data/cross_stack/tf2.15/`` and ``tf2.21/`` hold, per stack, a few-step checkpoint and a
SavedModel of each model of ``tests/data/cross_stack/make.py`` (which writes them: run it with
each venv) and the predictions the writing stack made. Whichever stack runs these tests reads
the fixtures of both: the checkpoint's variable names and shapes are the ones this stack's model
writes, training resumes from it, and the export answers as it did where it was written, through
``serving.Predictor`` and TensorFlow's own ``saved_model_cli``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.data.cross_stack import make
from tfest_kit import serving
from tfest_kit._tf import tf

STACKS = ("tf2.15", "tf2.21")
CASES = [(stack, model) for stack in STACKS for model in make.MODELS]
RESUME_STEPS = 3
# Each saved_model_cli call imports TensorFlow (4-7 s): it reads the other stack's exports only
# (the Predictor reads them all; this stack's CLI on its own exports is TensorFlow's business).
OTHER_STACK_CASES = [case for case in CASES if case[0] != make.stack_name()]


def _fixture(stack: str, model: str) -> Path:
    return make.HERE / stack / model


def _expected(stack: str, model: str) -> dict:
    return json.loads((_fixture(stack, model) / "expected.json").read_text())


def _variables(checkpoint: str) -> dict[str, list[int]]:
    return {name: list(shape) for name, shape in tf.train.list_variables(checkpoint)}


def _differences(got: dict, want: dict) -> str:
    lines = [
        f"  only in the checkpoint: {name} {got[name]}" for name in sorted(set(got) - set(want))
    ]
    lines += [
        f"  only in this stack's: {name} {want[name]}" for name in sorted(set(want) - set(got))
    ]
    lines += [
        f"  {name}: {got[name]} in the checkpoint, {want[name]} in this stack's"
        for name in sorted(set(got) & set(want))
        if got[name] != want[name]
    ]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def built_variables(tmp_path_factory) -> dict[str, dict[str, list[int]]]:
    """model -> the variables (name -> shape) this stack's model writes in its checkpoint."""
    built = {}
    for model, estimator_fn in make.MODELS.items():
        est = estimator_fn(str(tmp_path_factory.mktemp(model) / "model"))
        est.train(make.input_fn(), steps=1)
        built[model] = _variables(est.model_dir)
    return built


def test_there_are_fixtures_of_both_stacks():
    for stack, model in CASES:
        expected = _expected(stack, model)
        assert "tf" + ".".join(expected["tensorflow"].split(".")[:2]) == stack, (stack, model)
        checkpoint = tf.train.latest_checkpoint(str(_fixture(stack, model) / "checkpoint"))
        assert checkpoint, f"{stack}/{model}: no checkpoint"
        np.testing.assert_array_equal(expected["serving_inputs"], make.X_SERVE)


@pytest.mark.parametrize("model", list(make.MODELS))
def test_both_stacks_wrote_the_same_variable_names_and_shapes(model):
    first, second = (_expected(stack, model)["variables"] for stack in STACKS)
    assert first == second, f"{STACKS[0]} vs {STACKS[1]}:\n{_differences(first, second)}"


@pytest.mark.parametrize("model", list(make.MODELS))
def test_both_stacks_trained_to_the_same_predictions(model):
    # The same seed, data and steps: Keras' initializers seeded from tf_random_seed
    # (model_fn.classifier) or by their own seed (the Keras model) start from the same weights.
    first, second = (_expected(stack, model) for stack in STACKS)
    np.testing.assert_allclose(
        first["predictions"], second["predictions"], rtol=1e-4, atol=1e-6, err_msg=model
    )


@pytest.mark.parametrize("stack, model", CASES)
def test_checkpoint_has_the_variables_this_stack_builds(stack, model, built_variables):
    stored = _variables(str(_fixture(stack, model) / "checkpoint"))
    assert stored == _expected(stack, model)["variables"]
    assert stored == built_variables[model], (
        f"{stack}'s {model} checkpoint differs from what this stack ({make.stack_name()}) "
        f"writes:\n{_differences(stored, built_variables[model])}"
    )


@pytest.mark.parametrize("stack, model", CASES)
def test_training_resumes_from_the_checkpoint(stack, model, tmp_path):
    expected = _expected(stack, model)
    model_dir = tmp_path / "model"
    shutil.copytree(_fixture(stack, model) / "checkpoint", model_dir)
    est = make.MODELS[model](str(model_dir))

    restored = est.evaluate(make.input_fn(repeat=False))
    assert restored["global_step"] == expected["global_step"]
    # The same weights: the loss the writing stack measured on the same data.
    assert restored["loss"] == pytest.approx(expected["eval_loss"], rel=1e-5, abs=1e-6)

    est.train(make.input_fn(), steps=RESUME_STEPS)
    resumed = est.evaluate(make.input_fn(repeat=False))
    assert resumed["global_step"] == expected["global_step"] + RESUME_STEPS
    assert math.isfinite(resumed["loss"])
    assert resumed["loss"] != pytest.approx(restored["loss"], rel=1e-6)  # it trained
    assert _variables(str(model_dir)) == expected["variables"]


@pytest.mark.parametrize("stack, model", CASES)
def test_predictor_answers_as_on_the_writing_stack(stack, model):
    expected = _expected(stack, model)
    with serving.Predictor(str(_fixture(stack, model) / "export")) as predictor:
        assert list(predictor.inputs) == ["x"]
        answer = predictor({"x": make.X_SERVE})
    np.testing.assert_allclose(
        answer[expected["output"]], expected["predictions"], rtol=1e-5, atol=1e-6
    )


def _saved_model_cli(*args: str) -> subprocess.CompletedProcess:
    """This TensorFlow's ``saved_model_cli ARGS…``; fails with its whole output on an error."""
    script = Path(sys.executable).parent / "saved_model_cli"
    command = (
        [str(script)]
        if script.exists()
        else [sys.executable, "-m", "tensorflow.python.tools.saved_model_cli"]
    )
    proc = subprocess.run(
        [*command, *args],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "-1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"`saved_model_cli {' '.join(args)}` exited {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
    return proc


@pytest.mark.parametrize("stack, model", OTHER_STACK_CASES)
def test_saved_model_cli_shows_the_other_stacks_signature(stack, model):
    expected = _expected(stack, model)
    shown = _saved_model_cli("show", "--dir", str(_fixture(stack, model) / "export"), "--all")
    assert "signature_def['serving_default']" in shown.stdout, shown.stdout
    assert "inputs['x']" in shown.stdout, shown.stdout
    assert f"outputs['{expected['output']}']" in shown.stdout, shown.stdout


@pytest.mark.parametrize("stack, model", OTHER_STACK_CASES)
def test_saved_model_cli_runs_the_other_stacks_export(stack, model, tmp_path):
    expected = _expected(stack, model)
    np.save(tmp_path / "x.npy", make.X_SERVE)
    _saved_model_cli(
        "run",
        "--dir",
        str(_fixture(stack, model) / "export"),
        "--tag_set",
        "serve",
        "--signature_def",
        "serving_default",
        "--inputs",
        f"x={tmp_path / 'x.npy'}",
        "--outdir",
        str(tmp_path / "out"),
    )
    np.testing.assert_allclose(
        np.load(tmp_path / "out" / f"{expected['output']}.npy"),
        expected["predictions"],
        rtol=1e-5,
        atol=1e-6,
    )
