"""``tfest_kit.run_config(cpu_replicas=N)``: float32 replicas on the CPU's cores.

In the test process TensorFlow's intra-op pool exists already (``tf_thread_pools_made``),
so ``cpu_replicas`` warns that its one-thread-per-op setting cannot take effect; the
arithmetic checked here does not depend on it. ``test_a_fresh_process_gets_one_thread_per_op``
checks the thread side.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import tfest_kit
import tfest_kit.model_fn
from tests.conftest import captured_tf_log, run_program
from tfest_kit import serving, tpu
from tfest_kit._tf import tf, tf2

pytestmark = pytest.mark.usefixtures("tf_thread_pools_made")

_X = np.random.RandomState(0).normal(size=(64, 4)).astype(np.float32)
_Y = np.random.RandomState(1).randint(0, 3, 64).astype(np.int32)


def _model_fn(seen):
    def model_fn(features, labels, mode, params):
        seen.append((mode, params.get("batch_size")))
        logits = tf.layers.dense(features["x"], 3, kernel_initializer=tf.ones_initializer())
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tpu.TPUEstimatorSpec(mode, predictions={"logits": logits})
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdamOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


def _input_fn(params):
    data = tf.data.Dataset.from_tensor_slices(({"x": _X}, _Y))
    return data.batch(params["batch_size"], drop_remainder=True).repeat()


def _trained(model_dir, cpu_replicas, steps=4):
    seen = []
    config = tfest_kit.run_config(
        model_dir=model_dir, cpu_replicas=cpu_replicas, log_step_count_steps=1
    )
    est = tpu.TPUEstimator(
        _model_fn(seen),
        config=config,
        train_batch_size=16,
        eval_batch_size=16,
        predict_batch_size=8,
    )
    with captured_tf_log() as lines:
        est.train(_input_fn, max_steps=steps)
    losses = [float(m[1]) for m in map(re.compile(r"^loss = (\S+), step").match, lines) if m]
    return est, seen, losses


@pytest.mark.slow
def test_two_replicas_train_the_same_model_as_one_copy(tmp_path):
    # Adam's four steps on the same 16 examples per step: the two replicas (8 each, their
    # gradients averaged) reach the variables and print the losses one copy does.
    one, seen_one, losses_one = _trained(str(tmp_path / "one"), None)
    two, seen_two, losses_two = _trained(str(tmp_path / "two"), 2)
    assert seen_one == [("train", 16)]
    assert seen_two == [("train", 8), ("train", 8)]  # each replica's share, as on TPU cores
    for name in ("dense/kernel", "dense/bias"):
        np.testing.assert_allclose(
            two.get_variable_value(name), one.get_variable_value(name), rtol=1e-5, atol=1e-6
        )
    assert not np.allclose(two.get_variable_value("dense/kernel"), 1.0)  # it trained
    assert len(losses_two) == 4 and losses_two == pytest.approx(losses_one, rel=1e-6)
    assert two.get_variable_value("global_step") == 4
    # Evaluation, prediction and export run one copy from the replicas' checkpoint.
    metrics_one = one.evaluate(_input_fn, steps=2)
    metrics_two = two.evaluate(_input_fn, steps=2)
    assert metrics_two["loss"] == pytest.approx(metrics_one["loss"], rel=1e-5)
    predictions = next(two.predict(lambda params: _input_fn(params).map(lambda f, _: f)))
    assert predictions["logits"].shape == (3,)
    receiver = serving.raw_receiver({"x": (tf.float32, [4])})
    exported = two.export_saved_model(str(tmp_path / "export"), receiver)
    assert tf.io.gfile.exists(exported)


@pytest.mark.slow
def test_the_model_fn_builders_adamw_and_warmup_train_replicas_like_one_copy(tmp_path):
    # BERT's recipe through tfest_kit.model_fn: AdamWeightDecay with warm-up, the global step
    # incremented by the builder (that optimizer leaves it alone). Once per step, not per
    # replica, and the same variables as one copy.
    def network(features, mode, params):
        return tf.layers.dense(features["x"], 3, kernel_initializer=tf.ones_initializer())

    def trained(name, cpu_replicas):
        model_fn = tfest_kit.model_fn.classifier(
            network, 3, optimizer="adamw", learning_rate=0.1, warmup_steps=2, tpu_spec=True
        )
        config = tfest_kit.run_config(model_dir=str(tmp_path / name), cpu_replicas=cpu_replicas)
        est = tpu.TPUEstimator(model_fn, config=config, train_batch_size=16)
        est.train(_input_fn, max_steps=3)
        return est

    one, two = trained("one", None), trained("two", 2)
    assert two.get_variable_value("global_step") == 3
    np.testing.assert_allclose(
        two.get_variable_value("dense/kernel"),
        one.get_variable_value("dense/kernel"),
        rtol=1e-5,
        atol=1e-6,
    )


def test_the_global_batch_must_divide_among_the_replicas(model_dir):
    config = tfest_kit.run_config(model_dir=model_dir, cpu_replicas=2)
    with pytest.raises(
        ValueError, match=r"`train_batch_size` must be a multiple of the 2 replicas"
    ):
        tpu.TPUEstimator(_model_fn([]), config=config, train_batch_size=15)
    # Only training is split; evaluation and prediction run one copy.
    tpu.TPUEstimator(_model_fn([]), config=config, train_batch_size=16, eval_batch_size=15)


def test_run_config_sets_a_mirrored_strategy_over_cpu_devices():
    config = tfest_kit.run_config(cpu_replicas=3, threads=(4, 0))
    strategy = config.train_distribute
    assert isinstance(strategy, tf2.distribute.MirroredStrategy)
    assert strategy.num_replicas_in_sync == 3
    assert config.session_config.device_count["CPU"] == 3
    assert config.session_config.intra_op_parallelism_threads == 1
    assert config.session_config.inter_op_parallelism_threads == 4
    assert config.eval_distribute is None
    # One replica is no replica.
    plain = tfest_kit.run_config(cpu_replicas=1)
    assert plain.train_distribute is None and "CPU" not in plain.session_config.device_count


def test_bad_cpu_replicas_settings_are_named():
    for kwargs, message in [
        ({"cpu_replicas": 0}, r"`cpu_replicas` must be a positive int or None"),
        ({"cpu_replicas": "2"}, r"`cpu_replicas` must be a positive int or None"),
        (
            {"cpu_replicas": 2, "train_distribute": tf2.distribute.MirroredStrategy(["/cpu:0"])},
            r"Give `cpu_replicas` or `train_distribute`, not both",
        ),
        ({"cpu_replicas": 2, "threads": 2}, r"make it 1.*threads=2"),
    ]:
        with pytest.raises(ValueError, match=message):
            tfest_kit.run_config(**kwargs)


def test_cpu_replicas_are_refused_in_a_cluster(monkeypatch):
    monkeypatch.setenv(
        "TF_CONFIG",
        '{"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2223"]},'
        ' "task": {"type": "chief", "index": 0}}',
    )
    with pytest.raises(ValueError, match=r"TF_CONFIG describes a cluster.*multi_worker_strategy"):
        tfest_kit.run_config(cpu_replicas=2)


_FRESH_PROGRAM = """
import sys
import tfest_kit
from tfest_kit import logs, tpu
from tfest_kit._tf import tf, tf2
from tests.test_cpu_replicas import _input_fn, _model_fn

logs.setup()
config = tfest_kit.run_config(model_dir=sys.argv[1], cpu_replicas=2, log_step_count_steps=2)
est = tpu.TPUEstimator(_model_fn([]), config=config, train_batch_size=16)
est.train(_input_fn, max_steps=2)
est.train(_input_fn, max_steps=4)
print("INTRA", tf2.config.threading.get_intra_op_parallelism_threads(), flush=True)
"""


@pytest.mark.slow
def test_a_fresh_process_gets_one_thread_per_op(model_dir, tmp_path):
    script = tmp_path / "fresh.py"
    script.write_text(_FRESH_PROGRAM)
    proc = run_program([str(script), model_dir], timeout=180)
    assert "INTRA 1" in proc.stdout, proc.stdout
    log = proc.stderr
    assert "cannot take effect" not in log, log  # set before TensorFlow made its pool
    assert "preserve tf.data options" not in log, log
    assert re.search(r"loss = \S+, step = 4 .*examples/sec", log), log
