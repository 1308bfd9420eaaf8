"""tfest_kit.run_config: an official RunConfig whose session_config carries the settings."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import tfest_kit
from tests.conftest import bfloat16_is_emulated, run_program
from tfest_kit._tf import estimator, tf, tf2


@pytest.fixture(autouse=True, scope="module")
def _thread_pools_made():
    # The configs built here would otherwise size this test process's thread pools (threads=1
    # would slow every later test); their effect is tested in a process of its own.
    tf2.config.list_logical_devices()


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
        ({"session_config": {"a": 1}}, TypeError, "`session_config`"),
        ({"mixed_precision": "float16"}, ValueError, "enable_mixed_precision_graph_rewrite"),
        ({"mixed_precision": "mixed_bfloat16"}, ValueError, "'bfloat16'"),
        ({"mixed_precision": True}, ValueError, "Got: True"),
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


def test_a_model_dir_under_home_is_expanded(tmp_path, monkeypatch):
    # RunConfig keeps "~/run" as is: Estimator made a directory named "~" in the cwd.
    monkeypatch.setenv("HOME", str(tmp_path))
    assert tfest_kit.run_config(model_dir="~/run").model_dir == str(tmp_path / "run")


def test_runconfigs_own_names_and_nones_are_taken(tmp_path):
    # RunConfig's tf_random_seed was reported as "an argument RunConfig does not take", and
    # the None that RunConfig documents for these two counts was refused.
    assert tfest_kit.run_config(tf_random_seed=3).tf_random_seed == 3
    assert tfest_kit.run_config(seed=3, tf_random_seed=3).tf_random_seed == 3
    with pytest.raises(ValueError, match=r"seed=1.*tf_random_seed=2"):
        tfest_kit.run_config(seed=1, tf_random_seed=2)
    config = tfest_kit.run_config(
        model_dir=str(tmp_path),
        keep_checkpoint_max=None,
        log_step_count_steps=None,
        save_checkpoints_steps=1,
    )
    assert config.keep_checkpoint_max is None and config.log_step_count_steps is None
    x = np.random.RandomState(0).rand(64, 3).astype(np.float32)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, x[:, :1])).repeat().batch(16)

    estimator.Estimator(_model_fn, config=config).train(input_fn, steps=7)
    # None keeps every checkpoint (the `checkpoint` file then lists only the latest).
    assert len(list(tmp_path.glob("model.ckpt-*.index"))) > 5


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


def test_mixed_precision_sets_onednn_bfloat16_rewrite_only_when_asked():
    rewrite = tfest_kit.run_config().session_config.graph_options.rewrite_options
    assert rewrite.auto_mixed_precision_onednn_bfloat16 == rewrite.DEFAULT
    base = tf.ConfigProto(intra_op_parallelism_threads=1)
    proto = tfest_kit.session_config(mixed_precision="bfloat16", base=base)
    rewrite = proto.graph_options.rewrite_options
    assert rewrite.auto_mixed_precision_onednn_bfloat16 == rewrite.ON
    assert proto.intra_op_parallelism_threads == 1
    assert not base.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16


class _PartitionGraphs(estimator.SessionRunHook):
    """Records the graphs TensorFlow actually ran (after Grappler's rewrites) on one step."""

    def __init__(self):
        self.graphs = None

    def before_run(self, run_context):
        if self.graphs is not None:
            return None
        return estimator.SessionRunArgs(None, options=tf.RunOptions(output_partition_graphs=True))

    def after_run(self, run_context, run_values):
        if self.graphs is None:
            self.graphs = list(run_values.run_metadata.partition_graphs)


def _bfloat16_nodes(graphs):
    bfloat16 = tf.bfloat16.as_datatype_enum
    return [n.op for g in graphs for n in g.node if n.attr["T"].type == bfloat16]


@pytest.mark.skipif(
    bfloat16_is_emulated(),
    reason="oneDNN off or no bfloat16 instructions on this CPU",
)
def test_bfloat16_estimator_trains_in_bfloat16_and_saves_float32(tmp_path):
    rng = np.random.RandomState(0)
    x = rng.rand(256, 8).astype(np.float32)
    y = (x[:, :4].sum(axis=1) > x[:, 4:].sum(axis=1)).astype(np.int32)

    def dense(x, units, name):
        kernel = tf.get_variable(f"{name}/kernel", [x.shape[-1], units])
        return tf.matmul(x, kernel) + tf.get_variable(f"{name}/bias", [units], tf.float32)

    def model_fn(features, labels, mode):
        logits = dense(tf.nn.relu(dense(features["x"], 32, "hidden")), 2, "logits")
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdamOptimizer(0.01).minimize(
            loss, global_step=tf.train.get_global_step()
        )
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(32)

    def trained(name, mixed_precision):
        config = tfest_kit.run_config(
            model_dir=str(tmp_path / name), seed=0, mixed_precision=mixed_precision
        )
        est = estimator.Estimator(model_fn, config=config)
        graphs = _PartitionGraphs()
        est.train(input_fn, steps=200, hooks=[graphs])
        return est, graphs.graphs

    est, graphs = trained("bf16", "bfloat16")
    assert any("MatMul" in op for op in _bfloat16_nodes(graphs))  # _MklMatMul, fused …
    loss = est.evaluate(input_fn, steps=8)["loss"]
    float32_est, float32_graphs = trained("fp32", None)
    assert _bfloat16_nodes(float32_graphs) == []
    float32_loss = float32_est.evaluate(input_fn, steps=8)["loss"]
    # It learns as well as float32 does (both start near ln 2 = 0.69).
    assert loss < 0.3 and abs(loss - float32_loss) < 0.05
    # Variables, and so checkpoints and exports, stay float32.
    reader = tf.train.load_checkpoint(str(tmp_path / "bf16"))
    dtypes = reader.get_variable_to_dtype_map()
    kernels = [name for name in dtypes if name.endswith("kernel")]
    assert kernels and all(dtypes[name] == tf.float32 for name in kernels)


def test_session_config_in_a_cluster_keeps_device_filters(monkeypatch, tf_log_lines):
    # For tpu.RunConfig(session_config=...), which would otherwise run without them.
    cluster = {"chief": ["127.0.0.1:2224"], "worker": ["127.0.0.1:2225"], "ps": ["127.0.0.1:2226"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})
    )
    official = estimator.RunConfig().session_config.device_filters
    assert official
    del tf_log_lines[:]
    assert tfest_kit.session_config(threads=1).device_filters == official
    # The RunConfig it reads them from is not announced: the user's own RunConfig does that.
    assert not [line for line in tf_log_lines if "TF_CONFIG" in line]
    tfest_kit.run_config(threads=1)
    assert len([line for line in tf_log_lines if "TF_CONFIG environment variable" in line]) == 1


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_threads_size_the_pools_estimator_training_uses(tmp_path):
    # Estimator.train runs an op before its Session exists, and that op made the process's
    # intra-op pool with the default size: the ConfigProto's count changed nothing.
    counts = {}
    for intra in (1, 7):
        proc = run_program(
            ["tests/programs/thread_pools.py", str(tmp_path / str(intra)), str(intra)]
        )
        [line] = [line for line in proc.stdout.splitlines() if line.startswith("THREADS ")]
        counts[intra] = int(line.split()[1])
        # The second config's count cannot take effect any more: a warning says so.
        assert f"intra_op={intra + 1}" in proc.stderr
        assert proc.stderr.count("cannot take effect") == 1  # not for the pool's own size
        assert "before TensorFlow runs anything" in proc.stderr
    assert counts[7] - counts[1] == 6, counts


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        # RunConfig's own message named no argument: "'>=' not supported between 'str' and 'int'".
        ({"save_summary_steps": "10"}, ValueError, "`save_summary_steps`"),
        ({"session_creation_timeout_secs": "60"}, ValueError, "`session_creation_timeout_secs`"),
        ({"keep_checkpoint_every_n_hours": 0}, ValueError, "`keep_checkpoint_every_n_hours`"),
        # 0 saved no checkpoint at all, without a word.
        ({"save_checkpoints_secs": 0}, ValueError, "`save_checkpoints_secs`"),
        # Accepted, it failed inside train(): "'str' object has no attribute 'extended'".
        ({"train_distribute": "mirrored"}, TypeError, "`train_distribute`"),
        ({"xla": 1}, TypeError, "Got: 1 (int)"),
    ],
)
def test_runconfig_arguments_are_named_before_any_work(kwargs, error, fragment):
    with pytest.raises(error) as info:
        tfest_kit.run_config(**kwargs)
    assert fragment in str(info.value)


def test_numpy_bool_xla_is_taken():
    proto = tfest_kit.run_config(xla=np.bool_(True)).session_config
    assert proto.graph_options.optimizer_options.global_jit_level == tf.OptimizerOptions.ON_1


def test_a_cluster_of_workers_only_needs_a_strategy(monkeypatch):
    # The official multi-worker Estimator set-up: workers only, MultiWorkerMirroredStrategy.
    cluster = {"worker": ["127.0.0.1:2221", "127.0.0.1:2222"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}})
    )
    with pytest.raises(ValueError, match=r"exactly one 'chief'.*train_distribute=tf\.distribute"):
        tfest_kit.run_config()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    # Only a training strategy makes it valid; RunConfig's own message named no fix.
    with pytest.raises(ValueError, match=r"exactly one 'chief'.*train_distribute=tf\.distribute"):
        tfest_kit.run_config(eval_distribute=strategy)
    config = tfest_kit.run_config(train_distribute=strategy, threads=2)
    official = estimator.RunConfig(train_distribute=strategy)
    assert (config.task_type, config.task_id) == (official.task_type, official.task_id)
    # No device filters: the strategy sets the cluster's devices up, as with RunConfig's own.
    assert not config.session_config.device_filters
    assert config.session_config.intra_op_parallelism_threads == 2
    # session_config() cannot know the strategy: it leaves the check to RunConfig.
    assert not tfest_kit.session_config().device_filters
