"""README's `tensorboard --logdir MODEL_DIR`: the installed TensorBoard starts and reads a run.

The lock files pin what it needs (TensorBoard 2.15 imports pkg_resources, which setuptools 82
removed; TensorFlow 2.21 no longer installs TensorBoard at all).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import tfest_kit
from tfest_kit import inputs, keras_bridge, model_fn
from tfest_kit._tf import estimator, tf, tf2
from tfest_kit.cluster import free_ports


@pytest.mark.slow
def test_tensorboard_serves_the_training_loss_of_a_model_dir(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    est = estimator.Estimator(
        model_fn.classifier(lambda features, mode, params: tf.layers.dense(features["x"], 2), 2),
        model_dir=str(tmp_path),
        config=estimator.RunConfig(save_summary_steps=5),
    )
    est.train(
        inputs.from_arrays({"x": x}, (x[:, 0] > 0).astype("int64"), num_epochs=None), steps=20
    )

    port = free_ports(1)[0]
    command = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    server = subprocess.Popen(
        [command, "--logdir", str(tmp_path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=.&tag=loss"
    try:
        deadline, points = time.monotonic() + 90, None
        while points is None and time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    points = json.load(response)
            except (urllib.error.URLError, ConnectionError):  # not listening, or not loaded yet
                time.sleep(1)
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert points, f"tensorboard gave no loss scalars; its output:\n{output}"
    steps = [step for _, step, _ in points]
    assert steps[0] == 1 and steps[-1] >= 15 and all(np.isfinite(v) for *_, v in points), points


def _steps_by_tag(directory: str) -> dict:
    steps = {}
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for event in tf.train.summary_iterator(path):
            for value in event.summary.value:
                steps.setdefault(value.tag, []).append(event.step)
    return steps


def _keras_model():
    model = tf2.keras.Sequential([tf2.keras.Input((4,), name="x"), tf2.keras.layers.Dense(2)])
    loss = tf2.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(tf2.keras.optimizers.legacy.SGD(0.1), loss)
    return model


def test_one_tag_per_quantity_and_the_last_step_summarised(tmp_path):
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    train_fn = inputs.from_arrays({"x": x}, (x[:, 0] > 0).astype("int64"), num_epochs=None)
    config = estimator.RunConfig(save_summary_steps=10)
    builder = estimator.Estimator(
        model_fn.classifier(lambda f, mode, params: tf.layers.dense(f["x"], 2), 2),
        str(tmp_path / "builder"),
        config,
    )
    eval_fn = inputs.from_arrays({"x": x}, (x[:, 0] > 0).astype("int64"), shuffle=False)
    tfest_kit.train_and_evaluate(builder, train_fn, eval_fn, max_steps=23)
    keras = keras_bridge.to_estimator(_keras_model(), model_dir=str(tmp_path / "keras"))
    keras.train(train_fn, steps=23)
    # Estimator writes every 10 steps from the first; the last one is added (through
    # train_and_evaluate and tfest_kit's estimators' train). SummarySaverHook's step can be one
    # early (10, 20): its fetch of the global step is not ordered with the step's increment.
    steps = _steps_by_tag(str(tmp_path / "builder"))
    assert sorted(steps) == ["learning_rate", "loss"] and steps["loss"] == steps["learning_rate"]
    assert steps["loss"][0] == 1 and steps["loss"][-1] == 23 and len(steps["loss"]) == 4, steps
    assert all(step in (10, 11, 20, 21) for step in steps["loss"][1:3]), steps
    assert _steps_by_tag(str(tmp_path / "keras"))["loss"][-1] == 23  # as the eval "loss"
    # The official converter logs the training loss as "loss_1" (Keras' name scope "loss").
    official = tf2.keras.estimator.model_to_estimator(
        _keras_model(), model_dir=str(tmp_path / "official"), config=config
    )
    official.train(train_fn, steps=3)
    assert "loss_1" in _steps_by_tag(str(tmp_path / "official"))
