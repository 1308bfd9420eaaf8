"""The bridge that runs the unmodified tensorflow-estimator 2.15 on TensorFlow >= 2.16.

On each stack: every name in ``_estimator_bridge.SUPPLIED`` resolves; on TensorFlow >= 2.16 it
is the bridge's (TensorFlow's own package lacks it), on 2.15 it is TensorFlow's own.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

import numpy as np
import pytest

from tests.conftest import run_program
from tfest_kit import _estimator_bridge
from tfest_kit._tf import TF_VERSION, estimator, tf, tf2
from tfest_kit.cluster import free_ports

BRIDGED = _estimator_bridge.needed(TF_VERSION)
MODULES = [name for name in _estimator_bridge.SUPPLIED if ":" not in name]


def _in_tensorflows_own_files(module_name: str) -> bool:
    """Whether the installed TensorFlow package itself ships ``module_name``."""
    relative = module_name.split(".", 1)[1].replace(".", os.sep) + ".py"
    return os.path.exists(os.path.join(os.path.dirname(tf2.__file__), relative))


@pytest.mark.parametrize("name", MODULES)
def test_each_supplied_module_is_tensorflows_own_or_the_bridges(name):
    module = importlib.import_module(name)
    assert sys.modules[name] is module
    supplied = "Supplied by tfest_kit" in (module.__doc__ or "")
    # The bridge supplies exactly what this TensorFlow lacks: on 2.15 nothing, on 2.21 all.
    assert supplied is not _in_tensorflows_own_files(name)
    assert supplied is BRIDGED or TF_VERSION.startswith(("2.16.", "2.17.", "2.18.", "2.19."))
    # What tensorflow_estimator reads of each, whichever stack supplies it.
    wanted = {
        "estimator_training": [
            "init_run_config",
            "should_run_distribute_coordinator",
            "train_and_evaluate",
            "estimator_train",
            "estimator_evaluate",
        ],
        "session_support": ["GracefulShutdownHook", "ResetComputation", "start_worker_watchdog"],
        "tpu_embedding": ["AdagradParameters", "AdamParameters", "FtrlParameters"],
    }.get(name.rsplit(".", 1)[1], [])
    assert all(callable(getattr(module, attr)) for attr in wanted)


def test_the_estimator_api_name_and_namespaces():
    from tensorflow.python.util import tf_export
    from tensorflow_estimator.python.estimator.api._v1 import estimator as v1
    from tensorflow_estimator.python.estimator.api._v2 import estimator as v2

    assert tf_export.ESTIMATOR_API_NAME == "estimator"
    assert "estimator" in tf_export.API_ATTRS
    assert tf2.estimator is v2 or tf2.estimator.Estimator is v2.Estimator
    assert tf.estimator.Estimator is v1.Estimator is estimator.Estimator
    assert tf2.compat.v1.estimator.tpu.TPUEstimator is v1.tpu.TPUEstimator


def test_needed_only_from_216():
    assert not _estimator_bridge.needed("2.15.1")
    assert _estimator_bridge.needed("2.16.0") and _estimator_bridge.needed("2.21.0")


@pytest.mark.skipif(not BRIDGED, reason="TensorFlow 2.15 has its own TPU embeddings")
def test_tpu_embedding_without_tensorflow_215_is_a_clear_error():
    with pytest.raises(NotImplementedError, match=r"(?s)TPU.*2\.15.*STACK=2\.15"):
        tf.tpu.experimental.AdagradParameters(learning_rate=0.1)
    from tensorflow.python.tpu import tpu_embedding

    with pytest.raises(NotImplementedError, match="TPU embeddings"):
        tpu_embedding.TPUEmbedding  # noqa: B018  (any use, not an AttributeError)


def test_estimator_trains_through_tf_estimator(tmp_path):
    # What an existing program writes: tf.estimator.*, after import tfest_kit.
    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [2, 1])
        prediction = tf.matmul(features["x"], w)
        loss = tf.losses.mean_squared_error(labels, prediction)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.train.get_global_step()
        )
        return tf2.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    x = np.random.default_rng(0).normal(size=(64, 2)).astype("float32")
    y = x @ np.array([[1.0], [-2.0]], "float32")

    def input_fn():
        return tf2.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(16)

    est = tf2.estimator.Estimator(model_fn, str(tmp_path))
    first = est.evaluate(input_fn, steps=2)["loss"]
    est.train(input_fn, max_steps=60)
    assert est.evaluate(input_fn, steps=2)["loss"] < first / 10


@pytest.mark.slow
def test_multi_worker_strategy_through_run_config_uses_the_distribute_coordinator(tmp_path):
    # RunConfig(train_distribute=MultiWorkerMirroredStrategy()) under TF_CONFIG: Estimator
    # hands train_and_evaluate to estimator_training (the bridge's on TensorFlow >= 2.16).
    port = free_ports(1)[0]
    tf_config = {
        "cluster": {"worker": [f"localhost:{port}"]},
        "task": {"type": "worker", "index": 0},
    }
    proc = run_program(
        ["tests/programs/coordinator_train.py", str(tmp_path / "model")],
        env={"TF_CONFIG": json.dumps(tf_config)},
        timeout=240,
    )
    out = proc.stdout + proc.stderr
    assert "Distribute Coordinator with INDEPENDENT_WORKER mode" in out, out
    [(before, after)] = [line.split()[1:] for line in proc.stdout.splitlines() if "LOSS" in line]
    assert float(after) < float(before) / 10, out
    assert "STEP 40" in proc.stdout, out
