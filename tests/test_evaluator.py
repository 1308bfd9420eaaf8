"""The evaluator task of a cluster, in one process: checkpoints the chief deletes, quiet waits.

A model trained to step 20 (checkpoints at 10 and 20) is set up as the evaluator finds it
while the chief trains: only model.ckpt-10 is there. ``_Chief.advance()`` then does what the
chief does next, as ``RunConfig(keep_checkpoint_max=…)`` makes it: it saves model.ckpt-20
and deletes model.ckpt-10, at the moment a hook or a serving receiver calls it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import threading

import numpy as np
import pytest

from tfest_kit import serving, training
from tfest_kit._errors import TfestKitError
from tfest_kit._evaluator import export_unless_vanished
from tfest_kit._model_dir import complete_exports, metrics_by_step
from tfest_kit._tf import estimator, tf, tf2
from tfest_kit.cluster import free_ports
from tfest_kit.serving import EXPORT_METRICS_FILE as METRICS_FILE

RNG = np.random.RandomState(2)
X = RNG.randn(64, 3).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int32)
RECEIVER = serving.raw_receiver({"x": (tf.float32, [3])})
EVALUATOR = {"cluster": {"chief": ["localhost:2222"]}, "task": {"type": "evaluator", "index": 0}}


def _model_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 2, name="logits")
    if mode == estimator.ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss, tf.train.get_global_step())
    metrics = {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def _train_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(16)


def _eval_input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(16)


def _estimator(model_dir):
    config = estimator.RunConfig(
        model_dir=model_dir, save_checkpoints_steps=10, save_summary_steps=1000, tf_random_seed=0
    )
    return estimator.Estimator(_model_fn, config=config)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    model_dir = str(tmp_path_factory.mktemp("trained") / "model")
    _estimator(model_dir).train(_train_input_fn, max_steps=20)
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
        _estimator(chief.model_dir),
        _train_input_fn,
        _eval_input_fn,
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
    warnings = _lines(tf_log_lines, "deleted while it was being evaluated")
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
    est = _estimator(chief.model_dir)
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


def test_a_skipped_export_removes_its_temp_directory_on_any_file_system():
    # shutil left gs:// temp-* directories, each a full copy of the variables, behind.
    base = "ram://bucket/skipped_export"
    export_path = base + "/export/best"
    tf.gfile.MakeDirs(export_path)

    def export():
        tf.gfile.MakeDirs(export_path + "/temp-1700000000/variables")
        raise ValueError(f"The passed save_path is not a valid checkpoint: {base}/model.ckpt-10")

    assert export_unless_vanished(export, "best", export_path, base + "/model.ckpt-10") is None
    assert tf.gfile.ListDirectory(export_path) == []


class _AdvanceLater(estimator.SessionRunHook):
    """After the first evaluation, the chief saves its next checkpoint ``secs`` later."""

    def __init__(self, chief, secs):
        self._chief = chief
        self._secs = secs
        self.timer = None

    def end(self, session):
        if self.timer is None:
            self.timer = threading.Timer(self._secs, self._chief.advance)
            self.timer.start()


def test_the_evaluator_says_once_that_it_waits_for_a_checkpoint(
    trained, tmp_path, monkeypatch, tf_log_lines
):
    chief = _Chief(trained, tmp_path)
    later = _AdvanceLater(chief, secs=4)
    filters = list(tf2.get_logger().filters)
    try:
        metrics = _evaluate(chief, monkeypatch, eval_hooks=[later])
    finally:
        later.timer.cancel()
    assert metrics["global_step"] == 20
    # TensorFlow logged "Waiting 0.99 secs before starting next eval run." on each of the
    # evaluator's turns, once a second, for as long as the chief trained: here one after
    # each of the two evaluations at most.
    assert len(_lines(tf_log_lines, "before starting next eval run")) <= 2, tf_log_lines
    # TensorFlow's own warning, once every 10 minutes at most, is the sign of life of a
    # waiting evaluator at TensorFlow's default level.
    assert len(_lines(tf_log_lines, "No new checkpoint ready")) <= 1, tf_log_lines
    waiting = _lines(tf_log_lines, "Evaluator: waiting for a new checkpoint")
    assert len(waiting) == 1, tf_log_lines
    assert "model.ckpt-10" in waiting[0]
    assert tf2.get_logger().filters == filters


def test_a_port_in_use_names_the_task_and_its_address(tmp_path, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("localhost", 0))
        taken.listen()
        address = f"localhost:{taken.getsockname()[1]}"
        tf_config = {
            "cluster": {"chief": ["localhost:1"], "ps": [address]},
            "task": {"type": "ps", "index": 0},
        }
        monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
        with pytest.raises(TfestKitError) as raised:
            training.train_and_evaluate(
                _estimator(str(tmp_path / "model")), _train_input_fn, _eval_input_fn, max_steps=20
            )
    message = str(raised.value)
    assert "Task ps:0" in message and repr(address) in message, message
    assert "TF_CONFIG" in message and "port is free" in message, message
    assert "Could not start gRPC server" in message, message
    assert isinstance(raised.value.__cause__, tf.errors.UnknownError)


def test_a_chief_without_eval_metrics_says_model_dir_must_be_shared(
    tmp_path, monkeypatch, tf_log_lines
):
    # A one-task cluster: the chief trains without a server, and no evaluator writes metrics
    # into its model_dir (as when the evaluator's model_dir is another machine's disk).
    tf_config = {"cluster": {"chief": ["localhost:2222"]}, "task": {"type": "chief", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    metrics = training.train_and_evaluate(
        _estimator(str(tmp_path / "model")), _train_input_fn, _eval_input_fn, max_steps=10
    )
    assert metrics == {}
    warnings = _lines(tf_log_lines, "No eval metrics found in")
    assert len(warnings) == 1, tf_log_lines
    assert "must use the same model_dir" in warnings[0]
    assert "gs://" in warnings[0]


def test_a_restarted_best_exporter_ignores_the_value_of_a_skipped_export(trained, tmp_path):
    # After a restart the best so far came from the eval history too, which holds the value
    # of an evaluation whose export was skipped (its checkpoint deleted): every later, exported
    # improvement on the real best was then refused.
    chief = _Chief(trained, tmp_path)
    est = _estimator(chief.model_dir)
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
        train = estimator.TrainSpec(_train_input_fn, max_steps=5)
        return (
            estimator.Estimator(_model_fn, config=config),
            train,
            estimator.EvalSpec(_eval_input_fn),
        )

    # The official call starts a second server on the task's port, which fails.
    monkeypatch.setenv("TF_CONFIG", tf_config())
    estimator.train_and_evaluate(*specs(str(tmp_path / "official_a")))
    with pytest.raises(tf.errors.UnknownError, match="Could not start gRPC server"):
        estimator.train_and_evaluate(*specs(str(tmp_path / "official_b")))

    monkeypatch.setenv("TF_CONFIG", tf_config())
    for name in ("a", "b"):
        est = _estimator(str(tmp_path / name))
        training.train_and_evaluate(est, _train_input_fn, _eval_input_fn, max_steps=5)
        assert est.latest_checkpoint().endswith("model.ckpt-5"), name
