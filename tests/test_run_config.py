"""tfest_kit.run_config: an official RunConfig whose session_config carries the settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tfest_kit
from tfest_kit._tf import estimator, tf


def _model_fn(features, labels, mode):
    weights = tf.get_variable("w", [3, 1])
    logits = tf.matmul(features["x"], weights)
    loss = tf.losses.mean_squared_error(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.train.get_global_step()
    )
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_defaults_are_official_runconfig():
    config = tfest_kit.run_config()
    assert type(config) is estimator.RunConfig
    proto = config.session_config
    assert proto.allow_soft_placement
    assert proto.inter_op_parallelism_threads == 0
    assert proto.intra_op_parallelism_threads == 0
    assert proto.graph_options.optimizer_options.global_jit_level == tf.OptimizerOptions.DEFAULT
    # Estimator's own default: one Grappler pass (TensorFlow's default of two is slower).
    rewrite = proto.graph_options.rewrite_options
    assert rewrite.meta_optimizer_iterations == rewrite.ONE
    # RunConfig's own default (time-based checkpoints) is kept.
    assert config.save_checkpoints_secs == 600
    assert config.save_checkpoints_steps is None


def test_settings_reach_runconfig_and_session_config(tmp_path):
    config = tfest_kit.run_config(
        model_dir=str(tmp_path),
        xla=True,
        threads=(1, 2),
        seed=7,
        save_checkpoints_steps=50,
        log_step_count_steps=10,
        keep_checkpoint_max=2,
        save_summary_steps=5,
    )
    assert config.model_dir == str(tmp_path)
    assert config.tf_random_seed == 7
    assert config.save_checkpoints_steps == 50
    assert config.save_checkpoints_secs is None
    assert config.log_step_count_steps == 10
    assert config.keep_checkpoint_max == 2
    assert config.save_summary_steps == 5
    proto = config.session_config
    assert proto.inter_op_parallelism_threads == 1
    assert proto.intra_op_parallelism_threads == 2
    assert proto.graph_options.optimizer_options.global_jit_level == tf.OptimizerOptions.ON_1


def test_int_threads_set_both_pools_and_base_config_is_copied():
    base = tf.ConfigProto(log_device_placement=True)
    config = tfest_kit.run_config(threads=3, session_config=base)
    assert config.session_config.inter_op_parallelism_threads == 3
    assert config.session_config.intra_op_parallelism_threads == 3
    assert config.session_config.log_device_placement
    assert not base.allow_soft_placement  # the caller's proto is left alone


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"threads": 0}, ValueError, "`threads`"),
        ({"threads": (1, -1)}, ValueError, "threads[1]"),
        ({"threads": "2"}, ValueError, "Got: '2'"),
        ({"xla": "yes"}, TypeError, "`xla`"),
        ({"seed": -1}, ValueError, "`seed`"),
        ({"save_checkpoints_steps": 0}, ValueError, "`save_checkpoints_steps`"),
        ({"save_checkpoints_steps": 5, "save_checkpoints_secs": 5}, ValueError, "not both"),
        ({"session_config": {"a": 1}}, TypeError, "ConfigProto"),
        ({"no_such_option": 1}, TypeError, "no_such_option"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, fragment):
    with pytest.raises(error) as info:
        tfest_kit.run_config(**kwargs)
    assert fragment in str(info.value)


def test_estimator_trains_with_it(tmp_path):
    config = tfest_kit.run_config(
        model_dir=str(tmp_path), threads=1, seed=0, save_checkpoints_steps=10
    )
    x = np.random.RandomState(0).rand(64, 3).astype(np.float32)
    y = x.sum(axis=1, keepdims=True)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(16)

    est = estimator.Estimator(_model_fn, config=config)
    est.train(input_fn, steps=20)
    assert est.get_variable_value("global_step") == 20
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("-20")


def test_settings_keep_estimators_own_session_defaults(tmp_path):
    config = tfest_kit.run_config(model_dir=str(tmp_path), threads=1)
    est = estimator.Estimator(_model_fn, config=config)
    # What a plain Estimator would have run with, plus the thread settings.
    plain = estimator.Estimator(_model_fn, model_dir=str(tmp_path)).config.session_config
    expected = tf.ConfigProto()
    expected.CopyFrom(plain)
    expected.inter_op_parallelism_threads = 1
    expected.intra_op_parallelism_threads = 1
    assert est.config.session_config == expected


@pytest.mark.parametrize("task_type", ["chief", "worker", "ps"])
def test_cluster_tasks_keep_runconfigs_device_filters(monkeypatch, task_type):
    cluster = {
        "chief": ["127.0.0.1:2220"],
        "worker": ["127.0.0.1:2221", "127.0.0.1:2222"],
        "ps": ["127.0.0.1:2223"],
    }
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": task_type, "index": 0}})
    )
    official = estimator.RunConfig().session_config
    config = tfest_kit.run_config(threads=2, xla=True)
    assert official.device_filters  # e.g. a worker talks to the ps tasks and itself only
    assert config.session_config.device_filters == official.device_filters
    assert config.session_config.intra_op_parallelism_threads == 2
    assert config.task_type == task_type


def test_malformed_tf_config_is_named(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["127.0.0.1:1"]} "task": {}}')
    with pytest.raises(ValueError, match="TF_CONFIG"):
        tfest_kit.run_config()
