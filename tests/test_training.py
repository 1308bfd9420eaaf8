"""train_and_evaluate on a real tiny Estimator: eval set, hooks, exporters, cluster tasks."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import signal
import threading
import time
import types

import numpy as np
import pytest

import tfest_kit
from tests.conftest import captured_tf_log
from tests.signal_hooks import SignalAtStep
from tfest_kit import _model_dir, hooks, serving, training
from tfest_kit._model_dir import complete_exports, export_unless_vanished, metrics_by_step
from tfest_kit._tf import estimator, tf
from tfest_kit.cluster import free_ports
from tfest_kit.serving import EXPORT_METRICS_FILE as METRICS_FILE

RNG = np.random.RandomState(1)
X = RNG.randn(260, 3).astype(np.float32)
Y = (X[:, 0] + X[:, 1] > 0).astype(np.int32)


def _model_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 2, name="logits")
    if mode == estimator.ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss, tf.train.get_global_step())
    # Counts the examples the evaluation saw, to prove it covered the whole eval set.
    seen = tf.Variable(
        0.0,
        trainable=False,
        name="examples_seen",
        collections=[tf.GraphKeys.LOCAL_VARIABLES, tf.GraphKeys.METRIC_VARIABLES],
    )
    count = (tf.identity(seen), seen.assign_add(tf.cast(tf.shape(labels)[0], tf.float32)))
    metrics = {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1)), "examples": count}
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def _train_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(20)


def _eval_input_fn():
    # 130 batches: more than the 100 the official EvalSpec evaluates by default.
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(2)


def _estimator(model_dir, save_steps=20):
    config = estimator.RunConfig(
        model_dir=model_dir,
        save_checkpoints_steps=save_steps,
        save_summary_steps=1000,
        tf_random_seed=0,
    )
    return estimator.Estimator(_model_fn, config=config)


class _CountSteps(estimator.SessionRunHook):
    def __init__(self):
        self.calls = 0

    def after_run(self, run_context, run_values):
        self.calls += 1


class _StopAfter(estimator.SessionRunHook):
    def __init__(self, batches):
        self.batches, self.calls = batches, 0

    def after_run(self, run_context, run_values):
        self.calls += 1
        if self.calls >= self.batches:
            run_context.request_stop()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    model_dir = str(tmp_path_factory.mktemp("train") / "model")
    est = _estimator(model_dir)
    hook = _CountSteps()
    receiver = serving.raw_receiver({"x": (tf.float32, [3])})
    exporters = [
        serving.best_exporter(receiver, monitor="accuracy", mode="max"),
        estimator.FinalExporter("final", receiver),
    ]
    metrics = tfest_kit.train_and_evaluate(
        est,
        _train_input_fn,
        _eval_input_fn,
        max_steps=40,
        hooks=[hook],
        exporters=exporters,
        throttle_secs=0,
        eval_name="holdout",
    )
    return {"est": est, "metrics": metrics, "hook": hook, "model_dir": model_dir}


def test_returns_final_metrics_of_the_whole_eval_set(finished):
    metrics = finished["metrics"]
    assert metrics["global_step"] == 40
    assert metrics["examples"] == len(X)  # not 100 batches x 2
    assert metrics["accuracy"] > 0.7
    assert isinstance(metrics["loss"], float)
    assert finished["hook"].calls == 40
    assert os.path.isdir(os.path.join(finished["model_dir"], "eval_holdout"))


def test_exporters_run_and_the_final_state_is_exported(finished):
    export = os.path.join(finished["model_dir"], "export")
    final = serving.latest_export(os.path.join(export, "final"))
    best = serving.latest_export(os.path.join(export, "best"))
    with open(os.path.join(best, "assets.extra", serving.EXPORT_METRICS_FILE)) as f:
        assert json.load(f)["monitor"] == "accuracy"
    logits = serving.Predictor(final)({"x": X[:5]})["logits"]
    # The export holds the final checkpoint's weights (step 40), not an earlier one's.
    predicted = finished["est"].predict(
        lambda: tf.data.Dataset.from_tensor_slices({"x": X[:5]}).batch(5),
        checkpoint_path=os.path.join(finished["model_dir"], "model.ckpt-40"),
    )
    np.testing.assert_allclose(logits, [p["logits"] for p in predicted], rtol=1e-5, atol=1e-6)


def test_already_complete_run_still_returns_metrics(finished):
    again = training.train_and_evaluate(
        finished["est"], _train_input_fn, _eval_input_fn, max_steps=40, eval_name="holdout"
    )
    assert again["global_step"] == 40
    assert again["accuracy"] == pytest.approx(finished["metrics"]["accuracy"])


def _repeating_eval_input_fn():
    return _eval_input_fn().repeat()


def test_eval_input_that_repeats_forever_needs_eval_steps(finished):
    # The official loop would evaluate a repeat()ed Dataset forever, silently.
    with pytest.raises(ValueError, match="repeats forever.*eval_steps=N"):
        training.train_and_evaluate(
            finished["est"],
            _train_input_fn,
            _repeating_eval_input_fn,
            max_steps=40,
            eval_hooks=[_StopAfter(500)],  # a failure, not a hang, if the check is missing
        )
    metrics = training.train_and_evaluate(
        finished["est"], _train_input_fn, _repeating_eval_input_fn, max_steps=40, eval_steps=3
    )
    assert metrics["examples"] == 3 * 2


def _endless_generator_input_fn():
    def endless():
        while True:
            yield {"x": X[0]}, Y[0]

    signature = ({"x": tf.TensorSpec([3], tf.float32)}, tf.TensorSpec([], tf.int32))
    return tf.data.Dataset.from_generator(endless, output_signature=signature).batch(2)


def test_eval_input_of_unknown_length_says_how_far_it_is(finished):
    # A generator's cardinality is unknown: the evaluation cannot be refused, but it says
    # after 100 batches that the input has not ended and what bounds it (not at 1..99).
    stop = _StopAfter(150)  # a failure, not a hang, if the input ended by itself
    with captured_tf_log(logging.WARNING) as lines:
        training.train_and_evaluate(
            finished["est"],
            _train_input_fn,
            _endless_generator_input_fn,
            max_steps=40,
            eval_hooks=[stop],
        )
    said = [line for line in lines if "has not ended yet" in line]
    assert len(said) == 1, lines
    assert "100 batches" in said[0] and "eval_steps=N" in said[0], said
    assert "eval_input_fn" in said[0]
    # A Dataset of known length says nothing.
    with captured_tf_log(logging.WARNING) as lines:
        training.train_and_evaluate(finished["est"], _train_input_fn, _eval_input_fn, max_steps=40)
    assert not [line for line in lines if "has not ended yet" in line], lines


def test_early_stopping_reads_the_evaluations_train_and_evaluate_names(tmp_path):
    # It read eval/ while the evaluations went to eval_holdout/: it never stopped training.
    est = _estimator(str(tmp_path), save_steps=10)
    kw = dict(min_delta=1e9, patience_steps=10, run_every_steps=5)
    run = dict(max_steps=100000, eval_name="holdout", throttle_secs=0)
    with pytest.raises(
        ValueError, match=r"reads .*eval, but .*eval_holdout: .*eval_name='holdout'"
    ):
        tfest_kit.train_and_evaluate(
            est, _train_input_fn, _eval_input_fn, hooks=[hooks.early_stopping(est, **kw)], **run
        )
    stopper = hooks.early_stopping(est, eval_name="holdout", **kw)
    metrics = tfest_kit.train_and_evaluate(
        est, _train_input_fn, _eval_input_fn, hooks=[stopper], **run
    )
    assert metrics["global_step"] < 100 and stopper.stopped_early


def test_an_official_train_spec_without_max_steps_trains_until_the_input_ends(tmp_path):
    # The final-evaluation check compared the step with max_steps=None (a TypeError).
    once = lambda: _train_input_fn().take(3)  # noqa: E731
    train_spec = estimator.TrainSpec(once, max_steps=None)
    eval_spec = estimator.EvalSpec(_eval_input_fn, steps=None, throttle_secs=0)
    metrics = tfest_kit.train_and_evaluate(_estimator(str(tmp_path)), train_spec, eval_spec)
    assert metrics["global_step"] == 3


class _FeedIterator(estimator.SessionRunHook):
    """The TF1 pattern: an input_fn's initializable iterator over placeholders, fed by a hook."""

    def input_fn(self):
        x, y = tf.placeholder(tf.float32, X.shape), tf.placeholder(tf.int32, Y.shape)
        iterator = tf.data.make_initializable_iterator(
            tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(20)
        )
        self._init = lambda session: session.run(iterator.initializer, {x: X, y: Y})
        return iterator.get_next()

    def after_create_session(self, session, coord):
        self._init(session)


def test_eval_data_fed_by_a_hook_or_read_by_a_strategys_iterator_is_evaluated(finished):
    # EvalGuard ran the data's cardinality without the feeds ("You must feed a value for
    # placeholder"), and broke a strategy's multi-device iterator ("Invalid incarnation id").
    feed = _FeedIterator()
    metrics = training.train_and_evaluate(
        finished["est"], _train_input_fn, feed.input_fn, max_steps=40, eval_hooks=[feed]
    )
    assert metrics["examples"] == len(X)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    config = finished["est"].config.replace(eval_distribute=strategy)
    mirrored = estimator.Estimator(_model_fn, finished["model_dir"], config)
    metrics = training.train_and_evaluate(mirrored, _train_input_fn, _eval_input_fn, max_steps=40)
    assert metrics["examples"] == len(X) and metrics["global_step"] == 40


def test_evaluator_task_under_tf_config_returns_newest_metrics(finished, monkeypatch):
    tf_config = {
        "cluster": {"chief": ["localhost:2222"]},
        "task": {"type": "evaluator", "index": 0},
    }
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    est = _estimator(finished["model_dir"])
    assert est.config.task_type == "evaluator"
    metrics = training.train_and_evaluate(
        est,
        _train_input_fn,
        _eval_input_fn,
        max_steps=40,
        eval_name="evaluator",
        throttle_secs=0,
        start_delay_secs=0,
    )
    assert metrics["global_step"] == 40
    assert metrics["examples"] == len(X)


def test_latest_eval_metrics_says_when_there_is_none(tmp_path):
    assert training.latest_eval_metrics(str(tmp_path)) == {}


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"max_steps": 0}, ValueError, "max_steps > 0"),
        ({"max_steps": 10, "eval_steps": -1}, ValueError, "steps > 0"),
        ({"max_steps": 10, "hooks": [object()]}, TypeError, "SessionRunHook"),
        ({"max_steps": 10, "exporters": ["best"]}, TypeError, "Exporter"),
        ({"max_steps": 10, "throttle_secs": -5}, ValueError, "throttle_secs"),
    ],
)
def test_bad_arguments_are_rejected(tmp_path, kwargs, error, match):
    est = _estimator(str(tmp_path))
    with pytest.raises(error, match=match):
        training.train_and_evaluate(est, _train_input_fn, _eval_input_fn, **kwargs)


def test_estimator_must_be_an_estimator():
    with pytest.raises(TypeError, match="estimator.*Got: 'model'"):
        training.train_and_evaluate("model", _train_input_fn, _eval_input_fn, max_steps=10)


def test_malformed_tf_config_is_named_before_training(tmp_path, monkeypatch):
    est = _estimator(str(tmp_path))
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps({"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "wrker", "index": 0}}),
    )
    with pytest.raises(ValueError, match="wrker"):
        training.train_and_evaluate(est, _train_input_fn, _eval_input_fn, max_steps=10)
    assert not os.path.exists(os.path.join(str(tmp_path), "checkpoint"))


def test_writer_lock_is_taken_early_by_the_checkpoint_writer_only(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.delenv("TF_CONFIG", raising=False)
    lock_file = tmp_path / ".tfest_kit.lock"
    with training.writer_lock(str(tmp_path)):
        assert json.loads(lock_file.read_text())["pid"] == os.getpid()
    assert lock_file.read_text() == ""  # released

    def take():
        with training.writer_lock(str(tmp_path)):
            return "held"

    # Held by another open file, as by another process.
    fd = os.open(lock_file, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        ps_cluster = {"chief": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"]}
        for cluster, task, refused in [
            ({}, None, True),  # one process
            (ps_cluster, ("chief", 0), True),
            (ps_cluster, ("worker", 0), False),
            (ps_cluster, ("ps", 0), False),
            ({"chief": ["h:1"]}, ("evaluator", 0), False),
            ({"worker": ["h:1", "h:2"]}, ("worker", 0), True),  # a strategy's chief
            ({"worker": ["h:1", "h:2"]}, ("worker", 1), False),
            ({}, ("worker", 0), True),  # TF_CONFIG's task without a cluster: the one process
            ({"master": ["h:1"], "worker": ["h:2"]}, ("master", 0), True),  # TF1's chief
            ({"master": ["h:1"], "worker": ["h:2"]}, ("worker", 0), False),
        ]:
            if task:
                tf_config = {"cluster": cluster, "task": {"type": task[0], "index": task[1]}}
                monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
            if refused:
                with pytest.raises(training.ModelDirLockedError, match="another model_dir"):
                    take()
            else:
                assert take() == "held"
    finally:
        os.close(fd)


def _exports(model_dir, name):
    base = os.path.join(model_dir, "export", name)
    return sorted(os.listdir(base)) if os.path.isdir(base) else []


def test_early_stop_still_makes_the_final_export(tmp_path, tf_log_lines):
    # Estimator passes is_the_final_export=True only at max_steps, which an early stop never
    # reaches: a FinalExporter exported nothing.
    model_dir = str(tmp_path / "model")
    est = _estimator(model_dir)
    receiver = serving.raw_receiver({"x": (tf.float32, [3])})
    # "examples" is 260 at every evaluation: no improvement, a stop after 20 steps of patience.
    stop = hooks.early_stopping(est, "examples", mode="min", patience_steps=20, run_every_steps=5)
    exporters = [
        estimator.FinalExporter("final", receiver),
        estimator.LatestExporter("latest", receiver, exports_to_keep=None),
    ]
    metrics = tfest_kit.train_and_evaluate(
        est,
        _train_input_fn,
        _eval_input_fn,
        max_steps=400,
        hooks=[stop],
        exporters=exporters,
        throttle_secs=0,
    )
    step = metrics["global_step"]
    assert stop.stopped_early and step < 400
    [final] = _exports(model_dir, "final")
    logits = serving.Predictor(os.path.join(model_dir, "export", "final", final))({"x": X[:5]})
    predicted = est.predict(
        lambda: tf.data.Dataset.from_tensor_slices({"x": X[:5]}).batch(5),
        checkpoint_path=os.path.join(model_dir, f"model.ckpt-{step}"),
    )
    np.testing.assert_allclose(
        logits["logits"], [p["logits"] for p in predicted], rtol=1e-5, atol=1e-6
    )
    # An exporter that exported the final checkpoint already is not asked twice.
    assert len(_exports(model_dir, "latest")) == len(metrics_by_step(est.eval_dir()))
    [said] = [line for line in tf_log_lines if "makes the final export" in line]
    assert f"step {step}" in said and "'final'" in said


def _run_with_sigusr1(model_dir, max_steps, sender, *, in_eval=False, exporters=()):
    """train_and_evaluate with a PreemptionHook for SIGUSR1 and ``sender``, a hook that sends it.

    Returns:
      (estimator, metrics, the SIGUSR1 handler in place when train_and_evaluate returned).
    """
    est = _estimator(model_dir)
    preemption = hooks.PreemptionHook(signals=[signal.SIGUSR1])
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        metrics = tfest_kit.train_and_evaluate(
            est,
            _train_input_fn,
            _eval_input_fn,
            max_steps=max_steps,
            hooks=[preemption] if in_eval else [sender, preemption],
            eval_hooks=[sender] if in_eval else [],
            exporters=exporters,
            throttle_secs=0,
        )
        handler = signal.getsignal(signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert preemption.preempted == signal.SIGUSR1
    return est, metrics, handler


def test_preempted_training_skips_the_final_evaluation(tmp_path, tf_log_lines):
    # Estimator evaluated (and exported) the checkpoint a SIGTERM stopped training at before
    # train_and_evaluate returned: with a large eval set, past a preemption's grace period.
    model_dir = str(tmp_path / "model")
    receiver = serving.raw_receiver({"x": (tf.float32, [3])})
    latest = estimator.LatestExporter("latest", receiver)
    est, metrics, _ = _run_with_sigusr1(model_dir, 400, SignalAtStep(25), exporters=latest)
    assert tf.train.latest_checkpoint(model_dir).endswith("model.ckpt-25")
    assert sorted(metrics_by_step(est.eval_dir())) == [20]
    assert metrics["global_step"] == 20 and metrics["examples"] == len(X)
    assert len(_exports(model_dir, "latest")) == 1
    [said] = [line for line in tf_log_lines if "interrupted" in line]
    assert all(word in said for word in ("step 25", "not evaluated", "step 20")), said
    assert not [line for line in tf_log_lines if line.startswith("Final eval metrics")]


class _SignalAtEvalBatch(estimator.SessionRunHook):
    """Sends SIGUSR1 at the given batch of the given evaluation; counts the batches run."""

    def __init__(self, evaluation, batch):
        self._evaluation, self._batch = evaluation, batch
        self.evaluations, self.batches = 0, 0

    def begin(self):
        self.evaluations += 1
        self.batches = 0

    def after_run(self, run_context, run_values):
        self.batches += 1
        if (self.evaluations, self.batches) == (self._evaluation, self._batch):
            os.kill(os.getpid(), signal.SIGUSR1)


def test_a_signal_during_an_evaluation_stops_it(tmp_path, tf_log_lines):
    # Locally the evaluations run inside train(), where the training hooks do not: Ctrl-C
    # waited for the whole eval set (130 batches here) before anything stopped.
    model_dir = str(tmp_path / "model")
    in_eval = _SignalAtEvalBatch(evaluation=2, batch=3)
    est, metrics, handler = _run_with_sigusr1(model_dir, 400, in_eval, in_eval=True)
    # The handler the hook replaced is back (the run ended in an exception, not end()).
    assert handler == signal.SIG_IGN
    assert (in_eval.evaluations, in_eval.batches) == (2, 3)
    assert tf.train.latest_checkpoint(model_dir).endswith("model.ckpt-40")
    assert sorted(metrics_by_step(est.eval_dir())) == [20]  # the second one not written
    assert metrics["global_step"] == 20
    [said] = [line for line in tf_log_lines if "step 40" in line and "evaluat" in line]
    assert all(word in said for word in ("SIGUSR1", "not evaluated", "step 20")), said


def test_a_signal_during_the_final_evaluation_lets_it_make_the_final_export(tmp_path):
    # Skipped, the final export would never be made: the resumed run finds training complete
    # and only evaluates.
    model_dir = str(tmp_path / "model")
    receiver = serving.raw_receiver({"x": (tf.float32, [3])})
    in_eval = _SignalAtEvalBatch(evaluation=2, batch=3)
    final = estimator.FinalExporter("final", receiver)
    _, metrics, _ = _run_with_sigusr1(model_dir, 40, in_eval, in_eval=True, exporters=final)
    assert in_eval.batches == 130  # the whole eval set
    assert metrics["global_step"] == 40 and metrics["examples"] == len(X)
    assert len(_exports(model_dir, "final")) == 1


# -- a cluster's evaluator task, in one process -----------------------------------------------
# A model trained to step 20 (checkpoints at 10 and 20) is set up as the evaluator finds it
# while the chief trains: only model.ckpt-10 is there. ``_Chief.advance()`` then does what the
# chief does next, as ``RunConfig(keep_checkpoint_max=…)`` makes it: it saves model.ckpt-20
# and deletes model.ckpt-10, at the moment a hook or a serving receiver calls it.

RECEIVER = serving.raw_receiver({"x": (tf.float32, [3])})
EVALUATOR = {"cluster": {"chief": ["localhost:2222"]}, "task": {"type": "evaluator", "index": 0}}


def _small_train_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X[:64]}, Y[:64])).repeat().batch(16)


def _small_eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X[:64]}, Y[:64])).batch(16)


def _small_estimator(model_dir):
    return _estimator(model_dir, save_steps=10)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    model_dir = str(tmp_path_factory.mktemp("trained") / "model")
    _small_estimator(model_dir).train(_small_train_input_fn, max_steps=20)
    return model_dir


class _Chief:
    """What the evaluator sees of a chief that trains from step 10 to 20."""

    def __init__(self, trained, tmp_path, delete=".*"):
        self.model_dir = str(tmp_path / "model")
        shutil.copytree(trained, self.model_dir)
        self.ckpt_10 = os.path.join(self.model_dir, "model.ckpt-10")
        self.ckpt_20 = os.path.join(self.model_dir, "model.ckpt-20")
        self._later = tmp_path / "later"
        self._later.mkdir()
        for path in glob.glob(self.ckpt_20 + ".*"):
            shutil.move(path, self._later)
        tf.train.update_checkpoint_state(self.model_dir, self.ckpt_10, [self.ckpt_10])
        self._delete = delete  # which files of model.ckpt-10 go: all, or the data only
        self.advanced = False

    def advance(self):
        if self.advanced:
            return
        self.advanced = True
        for path in self._later.iterdir():
            shutil.move(str(path), self.model_dir)
        tf.train.update_checkpoint_state(self.model_dir, self.ckpt_20, [self.ckpt_20])
        for path in glob.glob(self.ckpt_10 + self._delete):
            os.remove(path)


class _AtBegin(estimator.SessionRunHook):
    """Calls ``action`` as an evaluation starts: after its graph, before its restore."""

    def __init__(self, action):
        self._action = action

    def begin(self):
        self._action()


def _evaluate(chief, monkeypatch, **kwargs):
    monkeypatch.setenv("TF_CONFIG", json.dumps(EVALUATOR))
    return training.train_and_evaluate(
        _small_estimator(chief.model_dir),
        _small_train_input_fn,
        _small_eval_input_fn,
        max_steps=20,
        throttle_secs=1,
        start_delay_secs=0,
        **kwargs,
    )


def _lines(lines, *parts):
    return [line for line in lines if all(part in line for part in parts)]


@pytest.mark.parametrize("delete", [".*", ".data-*"], ids=["all_files", "data_only"])
def test_a_checkpoint_deleted_during_its_evaluation_is_skipped(
    trained, tmp_path, monkeypatch, tf_log_lines, delete
):
    # All files: "not a valid checkpoint" (ValueError); the data only: "Restoring from
    # checkpoint failed" (NotFoundError). Either ended the evaluator task.
    chief = _Chief(trained, tmp_path, delete)
    metrics = _evaluate(chief, monkeypatch, eval_hooks=[_AtBegin(chief.advance)])
    assert chief.advanced
    assert metrics["global_step"] == 20
    assert sorted(metrics_by_step(os.path.join(chief.model_dir, "eval"))) == [20]
    warnings = _lines(tf_log_lines, "deleted while being evaluated")
    assert len(warnings) == 1, tf_log_lines
    assert chief.ckpt_10 in warnings[0]
    assert "RunConfig(keep_checkpoint_max=" in warnings[0]


def _temp_dirs(export_base):
    return [name for name in os.listdir(export_base) if name.startswith("temp-")]


def test_an_export_whose_checkpoint_is_deleted_is_skipped(
    trained, tmp_path, monkeypatch, tf_log_lines
):
    chief = _Chief(trained, tmp_path)

    def receiver():  # the chief deletes the checkpoint while the evaluator exports it
        chief.advance()
        return RECEIVER()

    metrics = _evaluate(
        chief,
        monkeypatch,
        exporters=[
            serving.best_exporter(receiver, monitor="accuracy", mode="max"),
            # Any exporter: this one is official, it gets no special care of its own.
            estimator.LatestExporter("latest", RECEIVER),
        ],
    )
    assert chief.advanced
    assert metrics["global_step"] == 20
    # Both evaluations happened; the exports are of the checkpoint that is still there.
    assert sorted(metrics_by_step(os.path.join(chief.model_dir, "eval"))) == [10, 20]
    for name in ("best", "latest"):
        export_base = os.path.join(chief.model_dir, "export", name)
        assert len(complete_exports(export_base)) == 1, os.listdir(export_base)
        assert _temp_dirs(export_base) == []
        warnings = _lines(tf_log_lines, f"Exporter '{name}'", "deleted while it was being")
        assert len(warnings) == 1, tf_log_lines
        assert chief.ckpt_10 in warnings[0]
        assert "RunConfig(keep_checkpoint_max=" in warnings[0]
    best = complete_exports(os.path.join(chief.model_dir, "export", "best"))[0]
    with open(os.path.join(best, "assets.extra", METRICS_FILE)) as f:
        assert json.load(f)["checkpoint_path"] == chief.ckpt_20


def test_best_exporter_skips_a_checkpoint_deleted_while_it_exports(trained, tmp_path, tf_log_lines):
    # Also under the official tf.estimator.train_and_evaluate, without tfest_kit's loop.
    chief = _Chief(trained, tmp_path)

    def receiver():
        chief.advance()
        return RECEIVER()

    exporter = serving.best_exporter(receiver, monitor="accuracy", mode="max")
    est = _small_estimator(chief.model_dir)
    export_base = str(tmp_path / "best")
    first = exporter.export(
        est, export_base, chief.ckpt_10, {"accuracy": 0.9, "global_step": 10}, False
    )
    assert first is None
    assert _temp_dirs(export_base) == []
    assert len(_lines(tf_log_lines, "Exporter 'best'", chief.ckpt_10, "keep_checkpoint_max")) == 1
    # 0.9 was never exported, so it is not the best to beat.
    second = exporter.export(
        est, export_base, chief.ckpt_20, {"accuracy": 0.8, "global_step": 20}, False
    )
    assert complete_exports(export_base) == [second.decode()]


def test_an_error_while_the_checkpoint_exists_is_not_skipped(trained, tmp_path, monkeypatch):
    chief = _Chief(trained, tmp_path)

    def fail():
        raise ValueError(f"Something else is wrong with {chief.ckpt_10}")

    with pytest.raises(ValueError, match="Something else is wrong"):
        _evaluate(chief, monkeypatch, eval_hooks=[_AtBegin(fail)])

    def receiver():
        fail()

    with pytest.raises(ValueError, match="Something else is wrong"):
        _evaluate(chief, monkeypatch, exporters=[serving.best_exporter(receiver, "accuracy")])


def test_an_error_about_an_older_missing_checkpoint_is_not_skipped(trained, tmp_path, monkeypatch):
    # An error naming another, absent file of model_dir (an --init_checkpoint the chief's
    # rotation deleted) was taken for the evaluated checkpoint's: a warning, then the same
    # checkpoint was retried on every turn, forever.
    chief = _Chief(trained, tmp_path)
    chief.advance()  # ckpt-20 is complete and the one evaluated
    missing = os.path.join(chief.model_dir, "model.ckpt-5")

    def fail():
        raise tf.errors.NotFoundError(
            None, None, f"Failed to find any matching files for {missing}"
        )

    with pytest.raises(tf.errors.NotFoundError, match="model.ckpt-5"):
        _evaluate(chief, monkeypatch, eval_hooks=[_AtBegin(fail)])


def test_a_failed_export_removes_its_temp_directory_on_any_file_system():
    # shutil left gs:// temp-* directories, each a full copy of the variables, behind.
    base = "ram://bucket/skipped_export"
    export_path = base + "/export/best"
    tf.gfile.MakeDirs(export_path)

    def export():
        tf.gfile.MakeDirs(export_path + "/temp-1700000000/variables")
        raise ValueError(f"The passed save_path is not a valid checkpoint: {base}/model.ckpt-10")

    assert export_unless_vanished(export, "best", export_path, base + "/model.ckpt-10") is None
    assert tf.gfile.ListDirectory(export_path) == []

    # Any failed export (a full disk, a bad receiver) leaves no half-written temp-* either.
    def fail():
        tf.gfile.MakeDirs(export_path + "/temp-1700000001/variables")
        raise OSError("No space left on device")

    with pytest.raises(OSError, match="No space"):
        export_unless_vanished(fail, "best", export_path, base + "/model.ckpt-20")
    assert tf.gfile.ListDirectory(export_path) == []


def test_a_restarted_best_exporter_ignores_the_value_of_a_skipped_export(trained, tmp_path):
    # After a restart the best so far came from the eval history too, which holds the value
    # of an evaluation whose export was skipped (its checkpoint deleted): every later, exported
    # improvement on the real best was then refused.
    chief = _Chief(trained, tmp_path)
    est = _small_estimator(chief.model_dir)
    with tf.Graph().as_default():
        writer = tf.summary.FileWriter(os.path.join(chief.model_dir, "eval"))
        for step, accuracy in [(10, 0.8), (20, 0.9), (30, 0.85)]:
            value = tf.Summary.Value(tag="accuracy", simple_value=accuracy)
            writer.add_summary(tf.Summary(value=[value]), step)
        writer.close()
    export_path = str(tmp_path / "best")
    exporter = serving.best_exporter(RECEIVER, monitor="accuracy", mode="max")
    assert exporter.export(
        est, export_path, chief.ckpt_10, {"accuracy": 0.8, "global_step": 10}, False
    )
    gone = os.path.join(chief.model_dir, "model.ckpt-20")
    assert (
        exporter.export(est, export_path, gone, {"accuracy": 0.9, "global_step": 20}, False) is None
    )
    chief.advance()  # a checkpoint to export for step 30
    restarted = serving.best_exporter(RECEIVER, monitor="accuracy", mode="max")
    result = {"accuracy": 0.85, "global_step": 30}
    assert restarted.export(est, export_path, chief.ckpt_20, result, False)
    assert len(complete_exports(export_path)) == 2


def test_a_second_train_and_evaluate_as_the_same_task_reuses_its_server(tmp_path, monkeypatch):
    # A program that trains several models in turn (recipes.premade_estimators) runs as the
    # same cluster task each time. The worker never runs: the chief trains alone.
    def tf_config():
        chief, worker = (f"localhost:{port}" for port in free_ports(2))
        cluster = {"chief": [chief], "worker": [worker]}
        return json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})

    def specs(model_dir):
        config = estimator.RunConfig(model_dir=model_dir, tf_random_seed=0)
        train = estimator.TrainSpec(_small_train_input_fn, max_steps=5)
        return (
            estimator.Estimator(_model_fn, config=config),
            train,
            estimator.EvalSpec(_small_eval_input_fn),
        )

    # The official call starts a second server on the task's port, which fails.
    monkeypatch.setenv("TF_CONFIG", tf_config())
    estimator.train_and_evaluate(*specs(str(tmp_path / "official_a")))
    with pytest.raises(tf.errors.UnknownError, match="Could not start gRPC server"):
        estimator.train_and_evaluate(*specs(str(tmp_path / "official_b")))

    monkeypatch.setenv("TF_CONFIG", tf_config())
    for name in ("a", "b"):
        est = _small_estimator(str(tmp_path / name))
        training.train_and_evaluate(est, _small_train_input_fn, _small_eval_input_fn, max_steps=5)
        assert est.latest_checkpoint().endswith("model.ckpt-5"), name


def test_one_hook_is_taken_for_a_list_of_one(tmp_path):
    # "'NanGuardHook' object is not iterable" before.
    est = _small_estimator(str(tmp_path))
    progress = hooks.ProgressHook(every_n_steps=5)
    metrics = training.train_and_evaluate(
        est, _small_train_input_fn, _small_eval_input_fn, max_steps=5, hooks=progress
    )
    assert metrics["global_step"] == 5 and progress._stop == 5


def test_a_task_whose_port_another_process_holds_is_named(tmp_path, monkeypatch):
    # Before: TensorFlow's "Could not start gRPC server", naming neither task nor address.
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        chief, worker = f"127.0.0.1:{held.getsockname()[1]}", f"127.0.0.1:{free_ports(1)[0]}"
        cluster = {"chief": [chief], "worker": [worker]}
        monkeypatch.setenv(
            "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})
        )
        est = _small_estimator(str(tmp_path))
        with pytest.raises(OSError, match=rf"Task chief:0 cannot listen on {chief}.*a free port"):
            training.train_and_evaluate(
                est, _small_train_input_fn, _small_eval_input_fn, max_steps=5
            )
    assert not os.path.exists(os.path.join(str(tmp_path), "checkpoint"))


def test_the_official_call_with_specs_and_progress_totals(tmp_path, tf_log_lines):
    # The official signature, unchanged: the specs' own settings (steps=None evaluates all).
    est = _estimator(str(tmp_path))
    progress = hooks.ProgressHook(every_n_steps=10)  # total_steps from the TrainSpec
    metrics = tfest_kit.train_and_evaluate(
        est,
        estimator.TrainSpec(_train_input_fn, max_steps=30, hooks=[progress]),
        estimator.EvalSpec(_eval_input_fn, steps=None, throttle_secs=0),
    )
    assert metrics["global_step"] == 30 and metrics["examples"] == len(X)
    assert "step 30/30 (100%)" in " ".join(tf_log_lines)
    assert "ETA" in " ".join(tf_log_lines) and "s + final evaluation" in " ".join(tf_log_lines)
    assert "Evaluating 130 batches" in tf_log_lines  # the eval set's length, read once


def test_evaluating_line_says_the_batches_evaluated_not_the_steps_cap(tmp_path, tf_log_lines):
    # EvalSpec's default steps=100 on 4 batches said "Evaluating 100 batches".
    est = _small_estimator(str(tmp_path))

    def generated_eval_input_fn():  # a generator's Dataset: its length is unknown
        rows = lambda: iter([({"x": X[i]}, Y[i]) for i in range(64)])  # noqa: E731
        signature = ({"x": tf.TensorSpec([3], tf.float32)}, tf.TensorSpec([], tf.int32))
        return tf.data.Dataset.from_generator(rows, output_signature=signature).batch(16)

    for eval_input_fn in (_small_eval_input_fn, generated_eval_input_fn):
        tfest_kit.train_and_evaluate(
            est,
            estimator.TrainSpec(_small_train_input_fn, max_steps=5),
            estimator.EvalSpec(eval_input_fn, throttle_secs=0),  # steps=100
        )
    said = [line for line in tf_log_lines if line.startswith("Evaluating ")]
    assert said == ["Evaluating 4 batches", "Evaluating up to 100 batches"], said


@pytest.mark.parametrize(
    "specs, kwargs, match",
    [
        ((True, False), {}, "EvalSpec"),  # a TrainSpec with an input_fn
        ((True, True), {"max_steps": 5}, r"keywords \['max_steps'\]"),
        ((False, False), {}, "`max_steps` is required"),
    ],
)
def test_specs_mixed_with_input_fns_or_keywords_are_refused(tmp_path, specs, kwargs, match):
    train = estimator.TrainSpec(_train_input_fn, 5) if specs[0] else _train_input_fn
    evaluate = estimator.EvalSpec(_eval_input_fn) if specs[1] else _eval_input_fn
    with pytest.raises(TypeError, match=match):
        tfest_kit.train_and_evaluate(_estimator(str(tmp_path)), train, evaluate, **kwargs)


def test_an_input_that_ends_before_max_steps_is_named(tmp_path, tf_log_lines):
    est = _estimator(str(tmp_path))
    once = lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(20)  # noqa: E731
    metrics = tfest_kit.train_and_evaluate(est, once, _eval_input_fn, max_steps=50)
    assert metrics["global_step"] == 13  # 260 examples / 20
    warning = [line for line in tf_log_lines if "before max_steps=50" in line]
    assert len(warning) == 1 and "global step 13" in warning[0] and "repeat" in warning[0]


def test_the_first_step_is_not_said_to_run_once_it_ended(tmp_path, tf_log_lines, monkeypatch):
    # The progress thread checks the first step's end, then logs: a step that ended in between
    # was said to be still running, after its hooks' own lines.
    monkeypatch.setattr(_model_dir._StepCounter, "say_every", 0.01)
    saying = threading.Event()

    def slow_clock() -> float:  # the progress thread, between its check and its line
        if threading.current_thread() is not threading.main_thread():
            saying.set()
            time.sleep(0.3)
        return time.monotonic()

    monkeypatch.setattr(_model_dir, "time", types.SimpleNamespace(monotonic=slow_clock))

    class FirstStepHook(tf.estimator.SessionRunHook):
        def before_run(self, run_context):
            if not hasattr(self, "began"):
                saying.clear()
                assert saying.wait(5)

        def after_run(self, run_context, run_values):
            if not hasattr(self, "began"):
                self.began = len(tf_log_lines)
                time.sleep(0.5)

    est, hook = _estimator(str(tmp_path)), FirstStepHook()
    tfest_kit.train_and_evaluate(est, _train_input_fn, _eval_input_fn, max_steps=2, hooks=[hook])
    assert not [line for line in tf_log_lines[hook.began :] if "still running" in line]


def test_training_says_what_it_does_until_its_first_step(tmp_path, tf_log_lines, monkeypatch):
    monkeypatch.setattr(_model_dir._StepCounter, "say_every", 0.01)  # every 10 s by default

    class EvaluatingHook(tf.estimator.SessionRunHook):  # as a ValidationMonitor in step 1
        def after_run(self, run_context, run_values):
            if not hasattr(self, "began"):
                self.began = len(tf_log_lines)
                time.sleep(0.2)

    est, hook = _estimator(str(tmp_path)), EvaluatingHook()
    tfest_kit.train_and_evaluate(est, _train_input_fn, _eval_input_fn, max_steps=5, hooks=[hook])
    # The first step was done when the hook's own work began: not said to be still running.
    assert not [line for line in tf_log_lines[hook.began :] if "still running" in line]
    building = [i for i, line in enumerate(tf_log_lines) if line.startswith("Training into")]
    built = [i for i, line in enumerate(tf_log_lines) if "Training graph built in" in line]
    assert len(building) == 1 and len(built) == 1 and building[0] < built[0], tf_log_lines
    still = [line for line in tf_log_lines if line.startswith("Training: still")]
    assert any("building the graph" in line for line in still), tf_log_lines
    assert any("creating the session" in line for line in still), tf_log_lines
    time.sleep(0.1)  # and nothing once training ran its first step
    assert still == [line for line in tf_log_lines if line.startswith("Training: still")]
