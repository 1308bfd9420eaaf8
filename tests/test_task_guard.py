"""Estimator.train / evaluate called directly on a TF_CONFIG cluster task: one clear error.

TensorFlow's own message (against a plain Estimator) shows a RunConfig repr; tfest_kit's
Estimators (tpu.TPUEstimator off a TPU, keras_bridge.to_estimator's) name the task and
tfest_kit.train_and_evaluate, and still train where train_and_evaluate calls them.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfest_kit import tpu, training
from tfest_kit._tf import estimator, tf, tf2
from tfest_kit.cluster import free_ports
from tfest_kit.keras_bridge import to_estimator

X = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)


def _set_task(monkeypatch, task_type, cluster=None):
    chief, ps = (f"localhost:{port}" for port in free_ports(2))
    cluster = cluster or {"chief": [chief], "ps": [ps]}
    tf_config = {"cluster": cluster, "task": {"type": task_type, "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))


def _model_fn(features, labels, mode, params=None):
    logits = tf.layers.dense(features["x"], 2, name="logits")
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn(params=None):
    batch = (params or {}).get("batch_size", 8)
    return tf2.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(batch)


def _eval_input_fn(params=None):
    return tf2.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(8)


def _tpu_estimator(model_dir):
    return tpu.TPUEstimator(
        _model_fn, model_dir=str(model_dir), use_tpu=False, train_batch_size=8, eval_batch_size=8
    )


def _keras_estimator(model_dir):
    keras = tf2.keras
    model = keras.Sequential([keras.layers.Dense(2, input_shape=(4,), name="x")])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return to_estimator(model, str(model_dir))


def _says_the_task_and_the_fix(error, task, method):
    message = str(error.value)
    assert f"Estimator.{method}" in message and f"task {task}" in message, message
    assert "tfest_kit.train_and_evaluate" in message, message
    assert "RunConfig object" not in message, message


@pytest.mark.parametrize("task_type", ["ps", "evaluator"])
def test_train_on_a_ps_or_evaluator_task_names_the_task(tmp_path, monkeypatch, task_type):
    _set_task(monkeypatch, task_type)
    # TensorFlow's message: the RunConfig's repr, no task.
    plain = estimator.Estimator(_model_fn, model_dir=str(tmp_path / "plain"))
    with pytest.raises(ValueError, match="Train has been called wrong configuration") as raw:
        plain.train(_input_fn, max_steps=1)
    assert "RunConfig object at 0x" in str(raw.value)
    for make in (_tpu_estimator, _keras_estimator):
        est = make(tmp_path / make.__name__)
        with pytest.raises(ValueError) as ours:
            est.train(_input_fn, max_steps=1)
        _says_the_task_and_the_fix(ours, f"{task_type}:0", "train")
        assert est.latest_checkpoint() is None


def test_evaluate_on_a_ps_task_names_the_task(tmp_path, monkeypatch):
    _set_task(monkeypatch, "ps")
    for make in (_tpu_estimator, _keras_estimator):
        with pytest.raises(ValueError) as ours:
            make(tmp_path / make.__name__).evaluate(_eval_input_fn)
        _says_the_task_and_the_fix(ours, "ps:0", "evaluate")


def test_train_on_a_chief_without_its_server_is_refused_instead_of_waiting(tmp_path, monkeypatch):
    # The official train would wait forever for the server at the chief's address.
    _set_task(monkeypatch, "chief")
    with pytest.raises(ValueError) as ours:
        _tpu_estimator(tmp_path).train(_input_fn, max_steps=1)
    _says_the_task_and_the_fix(ours, "chief:0", "train")
    assert "no server at grpc://localhost:" in str(ours.value)


def test_train_and_evaluate_still_trains_the_chief(tmp_path, monkeypatch):
    # It starts the chief's server before it calls train; the worker never runs.
    chief, worker = (f"localhost:{port}" for port in free_ports(2))
    _set_task(monkeypatch, "chief", {"chief": [chief], "worker": [worker]})
    est = _tpu_estimator(tmp_path)
    training.train_and_evaluate(est, _input_fn, _eval_input_fn, max_steps=3)
    assert est.latest_checkpoint().endswith("model.ckpt-3")
