"""iterations_per_loop off a TPU: N training steps in one Session.run, the numbers of N runs."""

from __future__ import annotations

import glob
import os
import re
import signal

import numpy as np
import pytest

from tests.conftest import bfloat16_is_emulated, captured_tf_log, run_program
from tfest_kit import hooks, tpu
from tfest_kit._tf import tf

BATCH = 8
X = np.random.RandomState(0).normal(size=(200, 4)).astype(np.float32)
Y = (X[:, 0] + X[:, 1] > 0).astype(np.int32)


def _input_fn(params):
    epochs = params.get("epochs")  # None: endless
    ds = tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat(epochs)
    return ds.batch(params["batch_size"], drop_remainder=True)


def _model_fn(features, labels, mode, params):
    # Seeded initializers: a loop's own ops shift the op-level seeds a graph seed gives.
    hidden = tf.layers.dense(
        features["x"], 8, tf.nn.relu, kernel_initializer=tf.glorot_uniform_initializer(seed=1)
    )
    logits = tf.layers.dense(hidden, 2, kernel_initializer=tf.glorot_uniform_initializer(seed=2))
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    correct = tf.equal(tf.argmax(logits, 1, output_type=tf.int32), labels)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    tf.summary.scalar("train_accuracy", accuracy)
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
    training_hooks = params.get("hooks_of", lambda tensors: [])({"accuracy": accuracy})
    host_call = None
    if params.get("host_call"):
        step = tf.reshape(tf.train.get_global_step(), [1])

        def host_fn(step, loss):
            from tensorflow.python.ops import summary_ops_v2 as summary

            writer = summary.create_file_writer(params["summary_dir"])
            with writer.as_default(), summary.always_record_summaries():
                summary.scalar("host_loss", loss[0], step=step[0])
                return summary.all_v2_summary_ops()

        host_call = (host_fn, [step, tf.reshape(loss, [1])])
    init_checkpoint = params.get("init_checkpoint")

    def scaffold_fn():
        if init_checkpoint:
            tf.train.init_from_checkpoint(init_checkpoint, {"dense/": "dense/"})
        return tf.train.Scaffold()

    return tpu.TPUEstimatorSpec(
        mode,
        loss=loss,
        train_op=train_op,
        host_call=host_call,
        scaffold_fn=scaffold_fn,
        training_hooks=training_hooks,
    )


def _train(
    model_dir, per_loop, max_steps=45, hooks=(), input_fn=_input_fn, session_config=None, **params
):
    config = tpu.RunConfig(
        model_dir=str(model_dir),
        session_config=session_config,
        log_step_count_steps=10,
        save_summary_steps=10,
        save_checkpoints_steps=20,
        keep_checkpoint_max=10,
        tpu_config=tpu.TPUConfig(iterations_per_loop=per_loop),
    )
    params.setdefault("summary_dir", str(model_dir))
    est = tpu.TPUEstimator(
        _model_fn, config=config, params=params, use_tpu=False, train_batch_size=BATCH
    )
    with captured_tf_log() as lines:
        est.train(input_fn, max_steps=max_steps, hooks=list(hooks))
    return est, lines


def _weights(est):
    names = [n for n in est.get_variable_names() if n.startswith("dense")]
    return {n: est.get_variable_value(n) for n in names}


def _loss_lines(lines):
    found = (re.match(r"loss = (\S+), step = (\d+)", line) for line in lines)
    return {int(m.group(2)): float(m.group(1)) for m in found if m}


def _checkpoint_steps(model_dir):
    state = tf.train.get_checkpoint_state(str(model_dir))
    return sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths)


def _scalars(model_dir, tag):
    steps = []
    for path in glob.glob(os.path.join(str(model_dir), "events.out.tfevents.*")):
        for event in tf.train.summary_iterator(path):
            steps += [event.step for v in event.summary.value if v.tag == tag]
    return sorted(steps)


class _RunCounter(tf.train.SessionRunHook):
    def __init__(self):
        self.runs = 0

    def after_run(self, run_context, run_values):
        self.runs += 1


@pytest.fixture(scope="module")
def one_and_ten(tmp_path_factory):
    """The same model trained 45 steps one step per run and in loops of 10 (the last of 5)."""
    runs = {}
    for per_loop in (1, 10):
        model_dir = tmp_path_factory.mktemp(f"loop{per_loop}")
        counter = _RunCounter()
        est, lines = _train(model_dir, per_loop, hooks=[counter], host_call=True)
        runs[per_loop] = (est, lines, counter.runs, model_dir)
    return runs


def test_a_loop_gives_the_weights_and_losses_of_one_step_per_run(one_and_ten):
    (one, one_lines, _, _), (ten, ten_lines, _, _) = one_and_ten[1], one_and_ten[10]
    assert ten.get_variable_value("global_step") == 45  # the last loop cut short
    for name, value in _weights(one).items():
        np.testing.assert_allclose(_weights(ten)[name], value, rtol=1e-5, atol=1e-6)
    losses_one, losses_ten = _loss_lines(one_lines), _loss_lines(ten_lines)
    assert sorted(losses_ten) == [10, 20, 30, 40, 45], ten_lines
    for step in (10, 20, 30, 40, 45):  # the last step's loss, as on a TPU
        assert losses_ten[step] == pytest.approx(losses_one[step], rel=1e-5)


def test_a_loop_is_one_session_run_and_checkpoints_land_on_schedule(one_and_ten):
    (_, _, runs_one, dir_one), (_, _, runs_ten, dir_ten) = one_and_ten[1], one_and_ten[10]
    assert runs_one == 45
    assert runs_ten == 5  # 10, 20, 30, 40, 45
    assert _checkpoint_steps(dir_ten) == _checkpoint_steps(dir_one) == [0, 20, 40, 45]


def test_host_call_runs_for_every_step_and_v1_summaries_keep_their_tags(one_and_ten):
    _, _, _, model_dir = one_and_ten[10]
    # Each step's host_call, as a TPU's outfeed gives it: 45 steps, one record each.
    assert len(_scalars(model_dir, "host_loss")) == 45
    # A tf.summary in model_fn: its tag as without a loop, written at a loop's end.
    steps = _scalars(model_dir, "train_accuracy")
    assert steps and set(steps) <= {10, 20, 30, 40, 45}, steps
    assert _scalars(model_dir, "loss"), "Estimator's loss summary"


def test_an_input_that_ends_inside_a_loop_ends_training_at_its_last_full_step(tmp_path):
    # 200 examples, batch 8: 25 steps; loops of 10 end at 10, 20 and, inside the third, 25.
    one, _ = _train(tmp_path / "one", 1, max_steps=None, epochs=1)
    ten, _ = _train(tmp_path / "ten", 10, max_steps=None, epochs=1)
    assert ten.get_variable_value("global_step") == one.get_variable_value("global_step") == 25
    for name, value in _weights(one).items():
        np.testing.assert_allclose(_weights(ten)[name], value, rtol=1e-5, atol=1e-6)
    assert _checkpoint_steps(tmp_path / "ten")[-1] == 25


def test_warm_start_from_scaffold_fn_in_a_loop(tmp_path):
    # BERT's pattern: init_from_checkpoint in scaffold_fn, called outside the loop.
    start, _ = _train(tmp_path / "start", 1, max_steps=3)
    init = start.latest_checkpoint()
    one, _ = _train(tmp_path / "one", 1, max_steps=12, init_checkpoint=init)
    ten, _ = _train(tmp_path / "ten", 5, max_steps=12, init_checkpoint=init)
    for name, value in _weights(one).items():
        np.testing.assert_allclose(_weights(ten)[name], value, rtol=1e-5, atol=1e-6)
    assert not np.allclose(_weights(ten)["dense/kernel"], _weights(start)["dense/kernel"])


def test_a_hook_fetching_a_tensor_inside_the_loop_is_told_the_fix(tmp_path):
    def logging_hook(tensors):
        return [tf.train.LoggingTensorHook(tensors, every_n_iter=1)]

    with pytest.raises(ValueError, match=r"iterations_per_loop=10.*inside that loop") as error:
        _train(tmp_path, 10, max_steps=20, hooks_of=logging_hook)
    assert "TPUConfig(iterations_per_loop=1)" in str(error.value)
    # One step per run, the same hook works.
    est, lines = _train(tmp_path / "one", 1, max_steps=3, hooks_of=logging_hook)
    assert est.get_variable_value("global_step") == 3
    assert any(line.startswith("accuracy = ") for line in lines), lines


def test_an_input_not_read_from_a_tf_data_iterator_trains_one_step_per_run(tmp_path):
    def tensors_input_fn(params):  # constant tensors: no iterator to read again in a loop
        return {"x": tf.constant(X[: params["batch_size"]])}, tf.constant(Y[: params["batch_size"]])

    counter = _RunCounter()
    est, lines = _train(tmp_path, 10, max_steps=12, hooks=[counter], input_fn=tensors_input_fn)
    assert est.get_variable_value("global_step") == 12 and counter.runs == 12
    assert any("one training step per Session.run" in line for line in lines), lines


def test_sigterm_stops_at_a_loop_end_with_the_checkpoint_of_that_step(tmp_path):
    class _SignalAfterTwoLoops(tf.train.SessionRunHook):
        runs = 0

        def after_run(self, run_context, run_values):
            self.runs += 1
            if self.runs == 2:
                os.kill(os.getpid(), signal.SIGTERM)

    preemption = hooks.PreemptionHook()
    est, _ = _train(tmp_path, 10, max_steps=1000, hooks=[_SignalAfterTwoLoops(), preemption])
    assert preemption.preempted == signal.SIGTERM
    # Seen after the second loop: training stops at that loop's end, all its steps kept.
    assert est.get_variable_value("global_step") == 20
    assert _checkpoint_steps(tmp_path)[-1] == 20


_TF1_SCRIPT = """
import numpy as np
import tensorflow as tf

class RunCounter(tf.train.SessionRunHook):
    runs = 0

    def after_run(self, run_context, run_values):
        RunCounter.runs += 1

def input_fn(params):
    x = np.ones((64, 4), np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, np.zeros(64, np.int32)))
    return ds.repeat().batch(params["batch_size"])

def model_fn(features, labels, mode, params):
    logits = tf.layers.dense(features, 2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.train.get_global_step())
    return tf.contrib.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

config = tf.contrib.tpu.RunConfig(
    model_dir=MODEL_DIR, tpu_config=tf.contrib.tpu.TPUConfig(iterations_per_loop=10))
estimator = tf.contrib.tpu.TPUEstimator(
    model_fn, config=config, use_tpu=False, train_batch_size=8)
estimator.train(input_fn, max_steps=12, hooks=[RunCounter()])
print("runs:", RunCounter.runs, "step:", estimator.get_variable_value("global_step"))
"""


def test_the_legacy_runner_keeps_tf115s_one_step_per_run(tmp_path):
    # Off a TPU, TF 1.15's TPUEstimator ran one step per Session.run, whatever the TPUConfig.
    script = tmp_path / "train.py"
    script.write_text(f"MODEL_DIR = {str(tmp_path / 'model')!r}\n" + _TF1_SCRIPT)
    proc = run_program(["-m", "tfest_kit.legacy", str(script)])
    assert "runs: 12 step: 12" in proc.stdout, proc.stdout + proc.stderr


def test_bfloat16_in_a_loop_gives_the_numbers_of_one_step_per_run(tmp_path):
    import tfest_kit

    bf16 = tfest_kit.session_config(mixed_precision="bfloat16")
    one, _ = _train(tmp_path / "one", 1, max_steps=20, session_config=bf16)
    ten, _ = _train(tmp_path / "ten", 10, max_steps=20, session_config=bf16)
    for name, value in _weights(one).items():
        np.testing.assert_allclose(_weights(ten)[name], value, rtol=1e-5, atol=1e-6)
    if not bfloat16_is_emulated():  # else TensorFlow leaves the graph float32
        # The rewrite ran in both (the weights are bfloat16's, not float32's).
        float32, _ = _train(tmp_path / "float32", 10, max_steps=20)
        assert not np.allclose(_weights(float32)["dense/kernel"], _weights(ten)["dense/kernel"])


def test_a_builders_model_fn_with_warm_up_and_decay_gives_the_same_weights(tmp_path):
    # model_fn.classifier's AdamW, warm-up and decay read the global step inside the loop.
    from tfest_kit import model_fn as mf

    def network(features, mode, params):
        seeded = tf.glorot_uniform_initializer(seed=3)
        return tf.layers.dense(features["x"], 2, kernel_initializer=seeded, name="dense")

    weights = {}
    for per_loop in (1, 5):
        config = tpu.RunConfig(
            model_dir=str(tmp_path / str(per_loop)),
            tpu_config=tpu.TPUConfig(iterations_per_loop=per_loop),
        )
        build = mf.classifier(
            network, 2, optimizer="adamw", warmup_steps=4, decay_steps=20, tpu_spec=True
        )
        est = tpu.TPUEstimator(build, config=config, use_tpu=False, train_batch_size=BATCH)
        est.train(_input_fn, max_steps=13)
        weights[per_loop] = _weights(est)
    for name, value in weights[1].items():
        np.testing.assert_allclose(weights[5][name], value, rtol=1e-5, atol=1e-6)


def test_a_nan_loss_in_a_loop_names_the_step_the_loop_began_at(tmp_path):
    from tfest_kit.hooks import NanLossError

    def nan_input_fn(params):  # example 15 (one per step) is NaN
        x = tf.data.Dataset.range(1000).map(
            lambda i: tf.where(tf.equal(i, 15), np.nan, 1.0) * tf.ones([4])
        )
        ds = tf.data.Dataset.zip(({"x": x}, tf.data.Dataset.from_tensors(1).repeat()))
        return ds.batch(params["batch_size"])

    def linear_model_fn(features, labels, mode, params):  # a ReLU would hide the NaN
        logits = tf.layers.dense(features["x"], 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    config = tpu.RunConfig(
        model_dir=str(tmp_path),
        log_step_count_steps=10,
        tpu_config=tpu.TPUConfig(iterations_per_loop=4),
    )
    est = tpu.TPUEstimator(linear_model_fn, config=config, use_tpu=False, train_batch_size=1)
    # Loops of 4 end at 4, 8, 10 (log_step_count_steps), 14, 18: step 15 is in the fifth.
    with pytest.raises(NanLossError, match=r"global step 14") as raised:
        est.train(nan_input_fn, max_steps=100)
    assert raised.value.step == 14


def test_an_estimator_spec_with_its_own_saver_loops_and_keeps_its_settings(tmp_path):
    # The Saver built inside the loop is built again after it (its ops run only in the loop).
    def model_fn(features, labels, mode, params):
        spec = _model_fn(features, labels, mode, params)
        saver = tf.train.Saver(max_to_keep=2)
        return tf.estimator.EstimatorSpec(
            mode, loss=spec.loss, train_op=spec.train_op, scaffold=tf.train.Scaffold(saver=saver)
        )

    def train(model_dir, per_loop, max_steps):
        config = tpu.RunConfig(
            model_dir=str(model_dir),
            save_checkpoints_steps=10,
            tpu_config=tpu.TPUConfig(iterations_per_loop=per_loop),
        )
        est = tpu.TPUEstimator(model_fn, config=config, use_tpu=False, train_batch_size=BATCH)
        return est.train(_input_fn, max_steps=max_steps)

    ten, one = train(tmp_path / "ten", 10, 30), train(tmp_path / "one", 1, 30)
    for name, value in _weights(one).items():
        np.testing.assert_allclose(_weights(ten)[name], value, rtol=1e-5, atol=1e-6)
    assert _checkpoint_steps(tmp_path / "ten") == [20, 30]  # its max_to_keep=2
    assert train(tmp_path / "ten", 10, 45).get_variable_value("global_step") == 45  # resumes


def _keras_estimator(model_dir, per_loop):
    from tfest_kit import keras_bridge, run_config
    from tfest_kit._tf import tf2

    keras = tf2.keras
    model = keras.Sequential(
        [
            keras.Input((4,), name="x"),
            keras.layers.Dense(8, "relu", kernel_initializer=keras.initializers.GlorotUniform(1)),
            keras.layers.BatchNormalization(),
            keras.layers.Dense(2, kernel_initializer=keras.initializers.GlorotUniform(2)),
        ]
    )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(keras.optimizers.Adam(0.01), loss)
    config = run_config(
        model_dir=str(model_dir),
        log_step_count_steps=10,
        save_checkpoints_steps=20,
        iterations_per_loop=per_loop,
    )
    return keras_bridge.to_estimator(model, config=config)


def _keras_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(BATCH)


def test_a_keras_conversion_loops_with_run_configs_iterations_per_loop(tmp_path):
    runs = {}
    for per_loop in (None, 10):
        est, counter = _keras_estimator(tmp_path / str(per_loop), per_loop), _RunCounter()
        with captured_tf_log() as lines:
            est.train(_keras_input_fn, max_steps=45, hooks=[counter])
        runs[per_loop] = est, lines, counter.runs
    (one, _, one_runs), (ten, ten_lines, ten_runs) = runs[None], runs[10]
    assert (one_runs, ten_runs) == (45, 5)
    for name in one.get_variable_names():
        if "kernel" in name or "moving_mean" in name:  # the batch norm's updates ran too
            np.testing.assert_allclose(
                ten.get_variable_value(name), one.get_variable_value(name), rtol=1e-5, atol=1e-6
            )
    assert sorted(_loss_lines(ten_lines)) == [10, 20, 30, 40, 45], ten_lines
    assert _checkpoint_steps(tmp_path / "10") == _checkpoint_steps(tmp_path / "None")
    assert _checkpoint_steps(tmp_path / "10") == [0, 20, 40, 45]
    # Its object-based checkpoint resumes, in a loop and in Keras' own model.
    again = _keras_estimator(tmp_path / "10", 10)
    again.train(_keras_input_fn, max_steps=60)
    assert _checkpoint_steps(tmp_path / "10")[-2:] == [45, 60]
    assert ten.evaluate(_keras_input_fn, steps=2)["global_step"] == 60


def test_run_config_iterations_per_loop(tmp_path):
    from tfest_kit import run_config

    assert type(run_config()) is tf.estimator.RunConfig  # off by default
    config = run_config(iterations_per_loop=100, model_dir=str(tmp_path), threads=2)
    assert isinstance(config, tf.estimator.tpu.RunConfig)
    assert config.tpu_config.iterations_per_loop == 100
    assert config.session_config.intra_op_parallelism_threads == 2
    with pytest.raises(ValueError, match="iterations_per_loop.*positive int"):
        run_config(iterations_per_loop=0)


def test_a_keras_conversions_hook_fetching_inside_the_loop_is_told_the_fix(tmp_path):
    est = _keras_estimator(tmp_path, 10)

    class _FetchLogits(tf.train.SessionRunHook):
        def before_run(self, run_context):
            ops = tf.get_default_graph().get_operations()
            return tf.train.SessionRunArgs([op for op in ops if op.type == "BiasAdd"][-1].outputs)

    with pytest.raises(ValueError, match=r"inside that loop") as error:
        est.train(_keras_input_fn, max_steps=20, hooks=[_FetchLogits()])
    assert "run_config(iterations_per_loop=None)" in str(error.value)


def test_a_keras_conversions_train_graph_builds_outside_train(tmp_path):
    # An export of the TRAIN graph calls model_fn with no train() before it: one step, no loop.
    est = _keras_estimator(tmp_path / "model", 10)
    with tf.Graph().as_default():  # the receiver copies their dtypes and shapes
        receiver = tf.estimator.experimental.build_raw_supervised_input_receiver_fn(
            {"x": tf.placeholder(tf.float32, [None, 4])}, tf.placeholder(tf.int32, [None])
        )
    modes = {tf.estimator.ModeKeys.TRAIN: receiver}
    export = est.experimental_export_all_saved_models(str(tmp_path / "export"), modes)
    assert os.path.isfile(os.path.join(os.fsdecode(export), "saved_model.pb"))
