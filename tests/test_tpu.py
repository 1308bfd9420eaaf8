"""tfest_kit.tpu: the fallback TPUEstimator trains, evaluates, predicts, exports, logs loss."""

from __future__ import annotations

import glob
import itertools
import json
import logging
import os
import re
import socket

import numpy as np
import pytest

from tests.conftest import captured_tf_log, run_program
from tfest_kit import _loop, hooks, tpu
from tfest_kit._tf import estimator, tf, tf2

N, TRAIN_BS, EVAL_BS, PREDICT_BS = 50, 8, 7, 7  # 7 does not divide 50
LOSS_LINE = re.compile(r"loss = [-\d.e+naif]+, step = \d+ \([\d.]+ sec\)")


def _data():
    rng = np.random.RandomState(0)
    x = rng.normal(size=(N, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int32)
    return x, y


class _Recorder:
    def __init__(self):
        self.model_fn = {}
        self.input_fn = {}


def _make_input_fn(rec, repeat):
    x, y = _data()

    def input_fn(params, mode):
        rec.input_fn[mode] = params["batch_size"]
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        if repeat:
            ds = ds.repeat()
        return ds.batch(params["batch_size"])

    return input_fn


def _make_model_fn(rec):
    def model_fn(features, labels, mode, params):
        rec.model_fn[mode] = params.get("batch_size")
        logits = tf.layers.dense(features["x"], 2, name="dense")
        if mode == estimator.ModeKeys.PREDICT:
            predictions = {"class_ids": tf.argmax(logits, 1), "logits": logits}
            return tpu.TPUEstimatorSpec(
                mode,
                predictions=predictions,
                export_outputs={"serving_default": estimator.export.PredictOutput(predictions)},
            )
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)

        def scaffold_fn():
            if params.get("init_checkpoint"):
                tf.train.init_from_checkpoint(params["init_checkpoint"], {"dense/": "dense/"})
            return tf.train.Scaffold()

        if mode == estimator.ModeKeys.EVAL:

            def metric_fn(labels, logits):
                return {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}

            tensors = (
                {"labels": labels, "logits": logits}
                if params.get("metrics_as_dict")
                else [labels, logits]
            )
            host_call = None
            if params.get("eval_host_call"):

                def eval_host_fn(loss):
                    return [tf2.summary.scalar("host_eval_loss", loss[0])]

                host_call = (eval_host_fn, [tf.reshape(loss, [1])])
            return tpu.TPUEstimatorSpec(
                mode,
                loss=loss,
                eval_metrics=(metric_fn, tensors),
                scaffold_fn=scaffold_fn,
                host_call=host_call,
            )
        global_step = tf.train.get_or_create_global_step()
        optimizer = tpu.CrossShardOptimizer(tf.train.GradientDescentOptimizer(params["lr"]))
        train_op = optimizer.minimize(loss, global_step=global_step)

        def host_fn(loss):
            # No writer, no step: the fallback provides the default writer and global step.
            return [tf2.summary.scalar("host_loss", loss[0])]

        return tpu.TPUEstimatorSpec(
            mode,
            loss=loss,
            train_op=train_op,
            scaffold_fn=scaffold_fn,
            host_call=(host_fn, [tf.reshape(loss, [1])]),
        )

    return model_fn


def _estimator(model_dir, rec, params=None, use_tpu="auto", **config_kw):
    config = tpu.RunConfig(
        model_dir=model_dir,
        log_step_count_steps=5,
        save_summary_steps=5,
        # Longer than log_step_count_steps: loops end at its multiples, so the loss is still
        # logged every 5 steps (BERT's 1000 steps per loop once left a run one loss line).
        tpu_config=tpu.TPUConfig(iterations_per_loop=10, num_shards=8),
        **config_kw,
    )
    return tpu.TPUEstimator(
        _make_model_fn(rec),
        config=config,
        params=dict({"lr": 0.5}, **(params or {})),
        use_tpu=use_tpu,
        train_batch_size=TRAIN_BS,
        eval_batch_size=EVAL_BS,
        predict_batch_size=PREDICT_BS,
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A fallback TPUEstimator trained for 30 steps, with the log lines it produced."""
    model_dir = str(tmp_path_factory.mktemp("tpu") / "model")
    rec = _Recorder()
    with captured_tf_log() as lines:
        est = _estimator(model_dir, rec)
        est.train(_make_input_fn(rec, repeat=True), max_steps=30)
    return est, rec, lines


def test_fallback_is_a_plain_estimator(trained):
    est, _, _ = trained
    assert isinstance(est, estimator.Estimator)
    assert not isinstance(est, estimator.tpu.TPUEstimator)
    assert est.config.log_step_count_steps is None  # Estimator's own loggers are off


def test_loss_is_logged_once_per_interval_without_false_warnings(trained):
    _, _, lines = trained
    loss_lines = [line for line in lines if re.match(r"loss = \S+, step = \d+", line)]
    assert len(loss_lines) >= 3, lines
    assert any("examples/sec" in line for line in loss_lines), loss_lines
    assert not any("has not been increased" in line for line in lines)
    assert not any(line.startswith("global_step/sec") for line in lines)
    # TF 1.15's TPUEstimator off a TPU: one line per model_fn call, after "Calling model_fn."
    assert lines.count("Running train on CPU") == 1, lines
    assert lines[lines.index("Running train on CPU") - 1] == "Calling model_fn.", lines
    steps = [int(re.search(r"step = (\d+)", line).group(1)) for line in loss_lines]
    assert steps == [5, 10, 15, 20, 25, 30], steps  # the first after the first loop
    # The time up to the first step is mostly set-up: a rate from it was several times too
    # low. As in Estimator's LoggingTensorHook, the first line has no time (nor rate).
    # TF1's text, then how far training is: max_steps is known.
    assert re.fullmatch(r"loss = \S+, step = 5; 17% of 30 steps", loss_lines[0]), loss_lines
    assert all(LOSS_LINE.search(line) for line in loss_lines[1:]), loss_lines
    assert re.search(r"; 100% of 30 steps$", loss_lines[-1]), loss_lines
    # The loss as LoggingTensorHook prints it: the float32's own digits, not %g's six.
    losses = [re.match(r"loss = (\S+),", line).group(1) for line in loss_lines]
    assert all(str(np.float32(loss)) == loss for loss in losses), losses
    assert any(len(loss.replace(".", "").lstrip("0")) > 6 for loss in losses), losses
    assert all(re.search(r"% of 30 steps, ETA \d+s$", line) for line in loss_lines[1:-1])


def test_progress_hook_among_the_train_hooks_replaces_the_loss_line(model_dir):
    # The README tour passes a ProgressHook: each interval printed two lines whose throughputs,
    # measured over different intervals, disagreed ("332 steps/sec" and "global_step/sec:
    # 178.9"). The ProgressHook's line is the one kept.
    rec = _Recorder()
    est = _estimator(model_dir, rec)
    progress = hooks.ProgressHook(every_n_steps=5, total_steps=10, batch_size=TRAIN_BS)
    with captured_tf_log() as lines:
        est.train(_make_input_fn(rec, repeat=True), max_steps=10, hooks=[progress])
    steps = [line.split(",")[0] for line in lines if line.startswith("step ")]
    assert steps == ["step 5/10 (50%)", "step 10/10 (100%)"], lines  # loops of 5
    assert not [line for line in lines if re.match(r"loss = \S+, step = \d+", line)], lines
    # TensorBoard's global_step/sec and examples/sec curves are still written.
    assert {"global_step/sec", "examples/sec"} <= _tags(model_dir)


def test_batch_size_reaches_input_fn_and_model_fn(trained):
    _, rec, _ = trained
    assert rec.input_fn[estimator.ModeKeys.TRAIN] == TRAIN_BS
    assert rec.model_fn[estimator.ModeKeys.TRAIN] == TRAIN_BS


def test_host_call_summary_is_written(trained):
    est, _, _ = trained
    tags = set()
    for path in glob.glob(os.path.join(est.model_dir, "events.out.tfevents.*")):
        for event in tf.train.summary_iterator(path):
            for value in event.summary.value:
                tags.add(value.tag)
    assert "host_loss" in tags, tags
    assert "loss" in tags and "global_step/sec" in tags, tags


def test_evaluate_with_eval_metrics_list(trained):
    est, rec, _ = trained
    metrics = est.evaluate(_make_input_fn(rec, repeat=False))
    assert metrics["global_step"] == 30
    assert metrics["accuracy"] > 0.7, metrics
    assert rec.input_fn[estimator.ModeKeys.EVAL] == EVAL_BS
    assert rec.model_fn[estimator.ModeKeys.EVAL] == EVAL_BS


def test_each_spec_keeps_its_own_eval_metrics_where_as_estimator_spec_does_not():
    # The official as_estimator_spec() reads host calls from a class attribute that the last
    # TPUEstimatorSpec built overwrote: a spec built earlier lost its eval_metrics.
    def metric_fn(labels):
        return {"mean": tf.metrics.mean(labels)}

    with tf.Graph().as_default():
        labels, loss = tf.constant([1.0, 2.0]), tf.constant(0.5)
        spec = tpu.TPUEstimatorSpec("eval", loss=loss, eval_metrics=(metric_fn, [labels]))
        tpu.TPUEstimatorSpec("eval", loss=loss)  # another model_fn call, say
        with pytest.raises(KeyError):
            spec.as_estimator_spec()
        assert set(tpu._to_estimator_spec(spec, "eval", "").eval_metric_ops) == {"mean"}


def test_evaluate_refuses_eval_data_that_never_ends_or_is_empty(trained):
    # Estimator.evaluate read a repeat()ed Dataset forever with steps=None, and reported
    # loss 0.0 for an empty one, without a word.
    est, rec, _ = trained
    with pytest.raises(ValueError, match=r"`input_fn` repeats forever.*pass `steps=N`"):
        est.evaluate(_make_input_fn(rec, repeat=True))
    assert est.evaluate(_make_input_fn(rec, repeat=True), steps=2)["global_step"] == 30

    def empty_input_fn(params):
        x, y = _data()
        return tf.data.Dataset.from_tensor_slices(({"x": x[:0]}, y[:0])).batch(4)

    with pytest.raises(ValueError, match=r"`input_fn` yielded no batch"):
        est.evaluate(empty_input_fn)


def test_in_memory_evaluator_hook_gets_the_eval_batch_size(model_dir):
    # The hook builds its evaluation graph through Estimator._call_input_fn, outside evaluate().
    rec = _Recorder()
    est = _estimator(model_dir, rec)
    hook = estimator.experimental.InMemoryEvaluatorHook(
        est, _make_input_fn(rec, repeat=False), every_n_iter=5
    )
    est.train(_make_input_fn(rec, repeat=True), max_steps=6, hooks=[hook])
    assert rec.input_fn[estimator.ModeKeys.EVAL] == EVAL_BS
    assert rec.model_fn[estimator.ModeKeys.EVAL] == EVAL_BS
    assert "accuracy" in _tags(est.eval_dir())


def _tags(directory):
    tags = set()
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for event in tf.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    return tags


def test_predict_yields_one_result_per_example(trained):
    est, rec, _ = trained
    # An input that repeats forever: predictions without end, and not a word (list() hung).
    with captured_tf_log(logging.WARNING) as warnings:
        endless = est.predict(_make_input_fn(rec, repeat=True))
        assert len(list(itertools.islice(endless, 3 * N))) == 3 * N
    assert any("`input_fn` repeats forever, so its predictions never end" in w for w in warnings)
    singles = list(est.predict(_make_input_fn(rec, repeat=False)))
    assert len(singles) == N
    batches = list(est.predict(_make_input_fn(rec, repeat=False), yield_single_examples=False))
    assert sum(len(b["class_ids"]) for b in batches) == N
    assert rec.model_fn[estimator.ModeKeys.PREDICT] == PREDICT_BS


def test_export_saved_model_writes_cpu_model(trained, tmp_path):
    est, rec, _ = trained

    def serving_input_fn():
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        return estimator.export.ServingInputReceiver({"x": x}, {"x": x})

    path = est.export_saved_model(str(tmp_path / "export"), serving_input_fn)
    path = path.decode() if isinstance(path, bytes) else path
    assert os.path.exists(os.path.join(path, "saved_model.pb"))
    assert rec.model_fn[estimator.ModeKeys.PREDICT] is None  # export: batch size unknown
    loaded = tf2.saved_model.load(path)
    out = loaded.signatures["serving_default"](x=tf2.constant(_data()[0][:3]))
    assert out["class_ids"].shape == (3,)


def test_checkpoint_path_of_this_model_in_another_models_model_dir(trained, tmp_path):
    # As the official class: evaluate / predict / export restore the checkpoint_path given,
    # whatever model_dir holds; a check of model_dir's latest refused all three.
    est, rec, _ = trained
    other = str(tmp_path / "other")

    def other_model_fn(features, labels, mode):
        loss = tf.reduce_mean(tf.layers.dense(features["x"], 1, name="other"))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    x, y = _data()
    estimator.Estimator(other_model_fn, other).train(
        lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(8), max_steps=1
    )
    here = _estimator(other, _Recorder(), use_tpu=False)
    checkpoint = est.latest_checkpoint()
    metrics = here.evaluate(_make_input_fn(rec, repeat=False), checkpoint_path=checkpoint)
    assert metrics == est.evaluate(_make_input_fn(rec, repeat=False))
    rows = here.predict(_make_input_fn(rec, repeat=False), checkpoint_path=checkpoint)
    assert len(list(rows)) == N

    def serving_input_fn():
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        return estimator.export.ServingInputReceiver({"x": x}, {"x": x})

    path = here.export_saved_model(
        str(tmp_path / "export"), serving_input_fn, checkpoint_path=checkpoint
    )
    assert os.path.exists(os.path.join(path.decode(), "saved_model.pb"))


def test_scaffold_fn_init_from_checkpoint_and_dict_metrics(trained, tmp_path):
    est, _, _ = trained
    rec = _Recorder()
    params = {"lr": 0.0, "metrics_as_dict": True, "init_checkpoint": est.latest_checkpoint()}
    warm = _estimator(str(tmp_path / "warm"), rec, params=params)
    warm.train(_make_input_fn(rec, repeat=True), max_steps=1)
    np.testing.assert_allclose(
        warm.get_variable_value("dense/kernel"), est.get_variable_value("dense/kernel")
    )
    metrics = warm.evaluate(_make_input_fn(rec, repeat=False))
    assert metrics["accuracy"] > 0.7, metrics


def test_plain_estimator_spec_and_input_fn_without_params(model_dir):
    x, y = _data()

    def model_fn(features, labels, mode, params):
        assert params["batch_size"] == 10
        logits = tf.layers.dense(features["x"], 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():  # no params: called without
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(10)

    est = tpu.TPUEstimator(
        model_fn, config=estimator.RunConfig(model_dir=model_dir), train_batch_size=10
    )
    est.train(input_fn, max_steps=3)
    assert est.get_variable_value("global_step") == 3


def test_what_a_tpu_refuses_is_trained_with_one_warning_each(model_dir):
    # A scaffold_fn returning None, a scalar host_call tensor: accepted silently (as by the
    # official class with use_tpu=False), refused once on a TPU. A Python float among the
    # host_call tensors was an AttributeError in the loop.
    x, y = _data()
    seen = []

    def model_fn(features, labels, mode, params):
        logits = tf.layers.dense(features["x"], 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())

        def host_fn(loss, rate):
            seen.append(rate)
            return [tf2.summary.scalar("host_loss", loss)]

        host_call = (host_fn, [loss, 0.5])
        spec = dict(loss=loss, train_op=train_op, host_call=host_call, scaffold_fn=lambda: None)
        return tpu.TPUEstimatorSpec(mode, **spec)

    def input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat()
        return ds.batch(params["batch_size"])

    config = tpu.RunConfig(model_dir=model_dir, tpu_config=tpu.TPUConfig(iterations_per_loop=2))
    est = tpu.TPUEstimator(model_fn, config=config, train_batch_size=10)
    with captured_tf_log(logging.WARNING) as lines:
        est.train(input_fn, max_steps=4)
    assert est.get_variable_value("global_step") == 4
    assert len(seen) == 1 and isinstance(seen[0], tf.Tensor), seen
    for what, fix in [("scaffold_fn returned None", "Scaffold()"), ("is a scalar", "reshape")]:
        said = [line for line in lines if what in line]
        assert len(said) == 1 and "refused on" in said[0] and fix in said[0], lines


def test_users_use_tpu_param_is_overridden_with_false(model_dir):
    # TF1 scripts pass params={"use_tpu": FLAGS.use_tpu}; off a TPU the official class sets it
    # to False, and model_fn.classifier(tpu_spec=True) then keeps its optimizer off the TPU.
    from tfest_kit import model_fn as mf

    x, y = _data()
    seen = []

    def network(features, mode, params):
        seen.append(params["use_tpu"])
        return tf.layers.dense(features["x"], 2)

    def input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y.astype(np.int64)))
        return ds.repeat().batch(params["batch_size"])

    est = tpu.TPUEstimator(
        mf.classifier(network, 2, tpu_spec=True),
        config=tpu.RunConfig(model_dir=model_dir),
        params={"use_tpu": True},
        use_tpu=True,
        train_batch_size=8,
    )
    est.train(input_fn, max_steps=3)
    assert est.get_variable_value("global_step") == 3
    assert seen == [False]


def test_reserved_params_and_batch_size_validation(model_dir):
    def model_fn(features, labels, mode, params):
        raise AssertionError("not reached")

    for key in ("batch_size", "context"):
        with pytest.raises(ValueError, match="reserved keys"):
            tpu.TPUEstimator(model_fn, params={key: 1}, train_batch_size=8)
    with pytest.raises(ValueError, match="train_batch_size"):
        tpu.TPUEstimator(model_fn, train_batch_size=0)


def test_no_tpu_detection_without_network(monkeypatch):
    monkeypatch.delenv("TPU_NAME", raising=False)
    assert tpu.tpu_available() is False
    resolver = tpu.TPUClusterResolver()
    assert resolver.master() == "" and not resolver.cluster_spec().as_dict()
    # A closed local port: the resolver gives up without touching any other host.
    assert tpu.tpu_available("grpc://127.0.0.1:1") is False
    assert isinstance(tpu.TPUClusterResolver("grpc://127.0.0.1:1"), tpu.NoTPUClusterResolver)
    config = tpu.RunConfig(cluster=tpu.TPUClusterResolver())
    assert config.master == ""
    optimizer = tf.train.AdamOptimizer()
    assert tpu.CrossShardOptimizer(optimizer) is optimizer


def test_unreachable_master_is_ignored(model_dir):
    def model_fn(features, labels, mode, params):
        raise AssertionError("not reached")

    config = tpu.RunConfig(model_dir=model_dir, master="grpc://127.0.0.1:1")
    est = tpu.TPUEstimator(model_fn, config=config, train_batch_size=8)
    assert est.config.master == ""


def test_a_wanted_tpu_that_is_not_here_is_one_warning(model_dir, monkeypatch):
    # "No TPU found" was an INFO line: at TensorFlow's default level a TF1 script asking for a
    # TPU was told nothing about where it ran.
    monkeypatch.setitem(tpu._state, "said_no_tpu", False)
    config = tpu.RunConfig(model_dir=model_dir, tpu_config=tpu.TPUConfig(num_shards=8))
    with captured_tf_log(logging.WARNING) as lines:
        tpu.TPUEstimator(_make_model_fn(_Recorder()), config=config, use_tpu=True)
    [line] = lines
    assert "No TPU found" in line and "CPU/GPU" in line
    with captured_tf_log(logging.WARNING) as lines:  # a TPUEstimator per evaluation, say
        tpu.TPUEstimator(_make_model_fn(_Recorder()), config=config, use_tpu=True)
    assert not lines, lines  # said by the first one


class _CountingListener(estimator.CheckpointSaverListener):
    def __init__(self):
        self.steps = []

    def after_save(self, session, global_step_value):
        self.steps.append(global_step_value)


class _RunCounter(tf.train.SessionRunHook):
    """Counts session.run calls made through the MonitoredSession (one per step)."""

    def __init__(self):
        self.runs = 0

    def after_run(self, run_context, run_values):
        self.runs += 1


def test_checkpoints_saved_on_schedule_by_the_fallbacks_saver_hook(model_dir):
    # The fallback installs its own CheckpointSaverHook (told that one run is one step, so it
    # does not fetch global_step again after every step); checkpoints, saving listeners and
    # resuming must work exactly as with Estimator's own hook.
    rec = _Recorder()
    est = _estimator(model_dir, rec, save_checkpoints_steps=10, keep_checkpoint_max=10)
    listener, counter = _CountingListener(), _RunCounter()
    est.train(
        _make_input_fn(rec, repeat=True),
        max_steps=25,
        hooks=[counter],
        saving_listeners=[listener],
    )
    state = tf.train.get_checkpoint_state(model_dir)
    steps = sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths)
    assert steps == [0, 10, 20, 25]
    assert listener.steps == [0, 10, 20, 25]
    assert counter.runs == 5  # loops of 10 steps end at multiples of log_step_count_steps (5)
    est.train(_make_input_fn(rec, repeat=True), max_steps=30)
    assert est.get_variable_value("global_step") == 30


def test_fallback_makes_one_session_run_per_step_where_estimator_makes_two(tmp_path, monkeypatch):
    # Estimator's own CheckpointSaverHook runs the session again after every step to read
    # global_step (25-30 % of a small model's step); the fallback's is told one run is one step.
    # Counted below the hooks, at the Session itself, where that extra run shows.
    from tensorflow.python.client import session as session_lib

    runs = []
    real_run = session_lib.BaseSession.run

    def counting_run(self, *args, **kwargs):
        runs.append(1)
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(session_lib.BaseSession, "run", counting_run)
    steps, params = 40, {"lr": 0.5}
    # Logs, summaries and checkpoints only at the start and end: what is left grows per step.
    cadence = dict(log_step_count_steps=1000, save_summary_steps=1000, save_checkpoints_steps=1000)

    def estimator_model_fn(features, labels, mode, params):
        params = dict(params, batch_size=TRAIN_BS)
        return _make_model_fn(_Recorder())(features, labels, mode, params).as_estimator_spec()

    plain = estimator.Estimator(
        estimator_model_fn,
        config=estimator.RunConfig(model_dir=str(tmp_path / "plain"), **cadence),
        params=params,
    )
    one_step = tpu.TPUConfig(iterations_per_loop=1)  # test_tpu_loop.py counts loops' runs
    fallback = tpu.TPUEstimator(
        _make_model_fn(_Recorder()),
        config=tpu.RunConfig(model_dir=str(tmp_path / "fallback"), tpu_config=one_step, **cadence),
        params=params,
        use_tpu=False,
        train_batch_size=TRAIN_BS,
    )
    batches = _make_input_fn(_Recorder(), repeat=True)

    def input_fn(params):
        return batches(dict(params, batch_size=TRAIN_BS), None)

    counts = {}
    for name, est in (("plain", plain), ("fallback", fallback)):
        del runs[:]
        est.train(input_fn, steps=steps)
        assert est.get_variable_value("global_step") == steps
        counts[name] = len(runs)
    # Both also run the session to set up, save and log: a few runs, not one per step.
    assert steps < counts["fallback"] < steps + 20, counts
    assert counts["plain"] > 2 * steps, counts


def test_users_checkpoint_saver_hook_replaces_the_default_one(model_dir):
    # As in Estimator: a CheckpointSaverHook given to train() is the only one that saves.
    rec = _Recorder()
    est = _estimator(model_dir, rec, save_checkpoints_steps=2, keep_checkpoint_max=10)
    mine = tf.train.CheckpointSaverHook(model_dir, save_steps=5)
    listener = _CountingListener()
    est.train(
        _make_input_fn(rec, repeat=True), max_steps=10, hooks=[mine], saving_listeners=[listener]
    )
    state = tf.train.get_checkpoint_state(model_dir)
    steps = sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths)
    assert steps == [0, 5, 10]
    assert listener.steps == [0, 5, 10]  # Estimator attaches the listeners to the user's hook


def test_model_with_its_own_saver_resumes_from_its_checkpoints(model_dir):
    # A Scaffold saver may store variables under other names; Estimator restores with it, so
    # the model_dir check must not take its checkpoint for another model's.
    x, y = _data()

    def model_fn(features, labels, mode, params):
        logits = tf.layers.dense(features["x"], 2, name="d")
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        step = tf.train.get_global_step()
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, step)
        names = {
            ("global_step" if var is step else "model/" + var.op.name): var
            for var in tf.global_variables()
        }

        def scaffold_fn():
            return tf.train.Scaffold(saver=tf.train.Saver(names))

        return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op, scaffold_fn=scaffold_fn)

    def input_fn(params):
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        return ds.repeat().batch(params["batch_size"])

    est = tpu.TPUEstimator(model_fn, model_dir=model_dir, use_tpu=False, train_batch_size=4)
    est.train(input_fn, max_steps=3)
    est.train(input_fn, max_steps=6)
    assert est.get_variable_value("global_step") == 6
    assert "model/d/kernel" in dict(tf.train.list_variables(model_dir))


@pytest.mark.parametrize("task_type", ["chief", "worker"])
def test_cluster_fallback_keeps_runconfigs_device_filters(
    model_dir, monkeypatch, task_type, tf_log_lines
):
    # tpu.RunConfig leaves them out (a TPU trains in-graph); without a TPU this is between-graph
    # training, where the chief's sessions would otherwise wait for every worker.
    cluster = {"chief": ["127.0.0.1:2230"], "worker": ["127.0.0.1:2231"], "ps": ["127.0.0.1:2232"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": task_type, "index": 0}})
    )
    config = tpu.RunConfig(model_dir=model_dir)
    assert config.session_config is None
    est = tpu.TPUEstimator(
        _make_model_fn(_Recorder()), config=config, use_tpu=False, train_batch_size=8
    )
    # Reading RunConfig's filters does not log TF_CONFIG a second time.
    assert sum("TF_CONFIG environment variable" in line for line in tf_log_lines) == 1
    official = estimator.RunConfig().session_config.device_filters
    assert official and est.config.session_config.device_filters == official
    # A session_config the user gives is left as it is.
    mine = tf.ConfigProto(intra_op_parallelism_threads=1)
    config = tpu.RunConfig(model_dir=model_dir, session_config=mine)
    est = tpu.TPUEstimator(
        _make_model_fn(_Recorder()), config=config, use_tpu=False, train_batch_size=8
    )
    assert not est.config.session_config.device_filters


@pytest.mark.parametrize("task_type, writes", [("chief", True), ("worker", False)])
def test_training_speed_summaries_come_from_the_chief_only(
    model_dir, monkeypatch, task_type, writes
):
    # As Estimator's global_step/sec: workers writing into model_dir too would give
    # TensorBoard several interleaved curves under one tag.
    cluster = {"chief": ["127.0.0.1:2230"], "worker": ["127.0.0.1:2231"], "ps": ["127.0.0.1:2232"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": task_type, "index": 0}})
    )
    config = tpu.RunConfig(model_dir=model_dir, save_summary_steps=1, log_step_count_steps=1)
    est = tpu.TPUEstimator(
        _make_model_fn(_Recorder()), config=config, params={"lr": 0.1}, train_batch_size=8
    )
    x, y = _data()
    with tf.Graph().as_default():
        features, labels = {"x": tf.constant(x[:8])}, tf.constant(y[:8])
        spec = est.model_fn(features, labels, estimator.ModeKeys.TRAIN, est.config)
        with tf.train.SingularMonitoredSession(hooks=spec.training_hooks) as session:
            for _ in range(3):
                session.run(spec.train_op)
        tf.summary.FileWriterCache.get(model_dir).flush()
    tags = {
        value.tag
        for path in glob.glob(os.path.join(model_dir, "events.out.tfevents.*"))
        for event in tf.train.summary_iterator(path)
        for value in event.summary.value
    }
    assert ("examples/sec" in tags) is writes, tags


def test_batch_size_left_none_is_left_out_of_params_as_in_the_official_class(model_dir):
    # Stock TPUEstimator(use_tpu=False) runs an input_fn that batches by itself; a function
    # that reads params["batch_size"] is told which constructor argument to set.
    x, y = _data()
    rec = _Recorder()

    def input_fn(params, mode):
        rec.input_fn[mode] = "batch_size" in params
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(10)
        return ds.repeat() if mode == estimator.ModeKeys.TRAIN else ds

    est = tpu.TPUEstimator(_make_model_fn(rec), model_dir=model_dir, params={"lr": 0.1})
    est.train(input_fn, max_steps=3)
    assert est.get_variable_value("global_step") == 3
    assert len(list(est.predict(input_fn))) == N
    assert rec.input_fn == {"train": False, "infer": False}
    assert rec.model_fn == {"train": None, "infer": None}


@pytest.mark.parametrize("config_class", [tpu.RunConfig, estimator.RunConfig])
def test_cluster_tasks_own_server_is_not_taken_for_a_tpu(model_dir, monkeypatch, config_class):
    # In a TF_CONFIG cluster RunConfig's master is the task's own server. Once that server runs
    # (an earlier train() in this process) something answers there, but it is not a TPU.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = "127.0.0.1:%d" % server.getsockname()[1]
        cluster = {"chief": [address], "worker": ["127.0.0.1:2231"], "ps": ["127.0.0.1:2232"]}
        tf_config = {"cluster": cluster, "task": {"type": "chief", "index": 0}}
        monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
        config = config_class(model_dir=model_dir)
        assert config.master == "grpc://" + address
        est = tpu.TPUEstimator(
            _make_model_fn(_Recorder()), config=config, use_tpu="auto", train_batch_size=8
        )
    assert type(est) is tpu.TPUEstimator


@pytest.mark.parametrize("use_tpu", [True, "auto"])
def test_on_a_tpu_config_none_reaches_the_official_class(model_dir, monkeypatch, use_tpu):
    # What the fallback accepts must not fail only once a TPU is there. The TPU is simulated
    # (local detection patched), so nothing touches a network.
    monkeypatch.setattr(tpu, "_local_tpu", lambda: True)
    monkeypatch.setitem(tpu._state, "official_estimator_built", False)
    monkeypatch.delenv("TPU_NAME", raising=False)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    model_fn = _make_model_fn(_Recorder())
    est = tpu.TPUEstimator(model_fn, model_dir=model_dir, use_tpu=use_tpu, train_batch_size=8)
    assert isinstance(est, estimator.tpu.TPUEstimator)
    assert isinstance(est.config, tpu.RunConfig) and est.model_dir == model_dir


@pytest.mark.parametrize("use_tpu", [False, 0, 0.0, np.False_, None])
def test_use_tpu_that_is_false_keeps_the_fallback_on_a_tpu_host(model_dir, monkeypatch, use_tpu):
    # 0 from an int flag or a config file, or np.False_, compared with `is False`, asked for
    # the TPU; the official class reads `if use_tpu:`. The TPU is simulated as above.
    monkeypatch.setattr(tpu, "_local_tpu", lambda: True)
    monkeypatch.setitem(tpu._state, "official_estimator_built", False)
    with captured_tf_log(logging.WARNING) as lines:
        est = tpu.TPUEstimator(
            _make_model_fn(_Recorder()),
            config=tpu.RunConfig(model_dir=model_dir, tpu_config=tpu.TPUConfig(num_shards=8)),
            use_tpu=use_tpu,
        )
    assert type(est) is tpu.TPUEstimator
    assert not lines, lines  # ignoring TPU-only settings was asked for: an INFO line


_MIRRORED_PROGRAM = """
import sys
import numpy as np
from tfest_kit import tpu
from tfest_kit._tf import estimator, tf, tf2

cpu = tf2.config.list_physical_devices("CPU")[0]
tf2.config.set_logical_device_configuration(cpu, [tf2.config.LogicalDeviceConfiguration()] * 2)
seen = []


def model_fn(features, labels, mode, params):
    seen.append(params.get("batch_size"))
    logits = tf.layers.dense(features["x"], 2)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(params):
    x = np.zeros((8, 4), np.float32)
    y = np.zeros(8, np.int32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(params["batch_size"])


strategy = tf2.distribute.MirroredStrategy(
    ["/cpu:0", "/cpu:1"], cross_device_ops=tf2.distribute.ReductionToOneDevice()
)
config = tpu.RunConfig(model_dir=sys.argv[1], train_distribute=strategy)
est = tpu.TPUEstimator(model_fn, config=config, train_batch_size=8)
est.train(input_fn, max_steps=2)
print("BATCH_SIZES", seen)
"""


@pytest.mark.slow
def test_every_replica_of_a_distribution_strategy_gets_its_share_of_the_batch(model_dir, tmp_path):
    # MirroredStrategy calls model_fn once per replica after one input_fn call. As on a TPU's
    # cores, train_batch_size is the global batch: each replica takes a batch of 4.
    script = tmp_path / "mirrored.py"
    script.write_text(_MIRRORED_PROGRAM)
    out = run_program([str(script), model_dir], timeout=120).stdout
    assert "BATCH_SIZES [4, 4]" in out, out


def test_tpu_given_as_a_list_of_one_address_resolves_like_the_official_class(monkeypatch):
    # TF1-era scripts pass TPUClusterResolver(tpu=[FLAGS.tpu]); a grpc:// address that answers
    # resolves without any network look-up.
    monkeypatch.delenv("TPU_NAME", raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = "grpc://127.0.0.1:%d" % server.getsockname()[1]
        resolver = tpu.TPUClusterResolver([address])
        assert not isinstance(resolver, tpu.NoTPUClusterResolver)
        assert resolver.master() == address
        assert tpu.tpu_available([address]) is True


def test_layers_initial_weights_follow_tf_random_seed(tmp_path):
    # tf.layers.dense is a Keras layer in TF 2.15, and Keras >= 2.10 seeds an initializer
    # from Python's random when it is created, not from the graph seed tf_random_seed sets:
    # without tfest_kit's help every run started from other weights.
    def initial_logits(seed, name):
        est = _estimator(str(tmp_path / name), _Recorder(), tf_random_seed=seed)
        batches = est.predict(_make_input_fn(_Recorder(), False), yield_single_examples=False)
        return np.concatenate([batch["logits"] for batch in batches])

    first, again, other = initial_logits(5, "a"), initial_logits(5, "b"), initial_logits(6, "c")
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


def test_a_progress_hook_that_only_the_chief_runs_leaves_the_workers_their_loss_line():
    # On the other tasks the spec's training_chief_hooks do not run: a ProgressHook there
    # prints nothing, so the fallback's own loss line must stay.
    import collections

    spec_type = collections.namedtuple("Spec", ["training_hooks", "training_chief_hooks"])
    loss_line = hooks.LossLoggingHook(every_n_steps=10)
    spec = spec_type((loss_line,), (hooks.ProgressHook(every_n_steps=10),))
    assert _loop.without_second_loss_line(spec, (), is_chief=True).training_hooks == ()
    assert _loop.without_second_loss_line(spec, (), is_chief=False).training_hooks == (loss_line,)


def test_run_config_names_a_malformed_tf_config(monkeypatch, tmp_path):
    # The official tpu.RunConfig let a bare JSONDecodeError through, never naming TF_CONFIG.
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"chief": ["h:1"]}, "task": ')
    with pytest.raises(ValueError, match=r"TF_CONFIG.*JSON"):
        tpu.RunConfig(model_dir=str(tmp_path))
    monkeypatch.delenv("TF_CONFIG")
    config = tpu.RunConfig(model_dir=str(tmp_path), save_checkpoints_steps=7)
    assert isinstance(config, estimator.tpu.RunConfig)
    replaced = config.replace(save_checkpoints_steps=9)
    assert isinstance(replaced, tpu.RunConfig) and replaced.save_checkpoints_steps == 9
