"""README's `tensorboard --logdir MODEL_DIR`: the installed TensorBoard starts and reads a run.

The lock files pin what it needs (TensorBoard 2.15 imports pkg_resources, which setuptools 82
removed; TensorFlow 2.21 no longer installs TensorBoard at all).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from tfest_kit import inputs, model_fn
from tfest_kit._tf import estimator, tf
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
