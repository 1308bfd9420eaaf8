"""tfest_kit._model_dir: resume from an intact checkpoint, one writer per model_dir, our errors."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import ROOT, captured_tf_log
from tfest_kit import _model_dir, tpu
from tfest_kit._checks import TfestKitError
from tfest_kit._model_dir import vanished_checkpoint
from tfest_kit._tf import estimator, tf, tf2
from tfest_kit.hooks import NanGuardHook, NanLossError


class _StartStep(tf.train.SessionRunHook):
    """Records the global step a training session starts from."""

    def begin(self):
        self._global_step = tf.train.get_global_step()

    def after_create_session(self, session, coord):
        self.start = int(session.run(self._global_step))


def _model_fn(features, labels, mode, params):
    out = tf.layers.dense(features["x"], 1, name="out")
    if mode == estimator.ModeKeys.PREDICT:
        return tpu.TPUEstimatorSpec(mode, predictions={"y": out})
    loss = tf.losses.mean_squared_error(labels, out)
    step = tf.train.get_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
    return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn(params):
    x = np.ones((16, 2), "float32")
    y = np.ones((16, 1), "float32")
    return tf2.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(params["batch_size"])


def _eval_input_fn(params):
    return _input_fn(params).take(2)


def _predict_input_fn(params):
    return _input_fn(params).map(lambda features, labels: features).take(1)


def _serving_input_fn():
    x = tf.placeholder(tf.float32, [None, 2])
    return estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def _plain_model_fn(features, labels, mode):
    spec = _model_fn(features, labels, mode, {})
    return estimator.EstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op)


def _estimator(model_dir, model_fn=_model_fn, save_steps=10, per_loop=2):
    config = tpu.RunConfig(
        model_dir=model_dir,
        save_checkpoints_steps=save_steps,
        log_step_count_steps=None,
        tpu_config=tpu.TPUConfig(iterations_per_loop=per_loop),
    )
    return tpu.TPUEstimator(
        model_fn,
        config=config,
        use_tpu=False,
        train_batch_size=4,
        eval_batch_size=4,
        predict_batch_size=4,
    )


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    """A model_dir trained to step 30, with checkpoints at 0, 10, 20 and 30."""
    model_dir = str(tmp_path_factory.mktemp("trained") / "model")
    _estimator(model_dir).train(_input_fn, max_steps=30)
    return model_dir


@pytest.fixture
def copy_dir(trained_dir, tmp_path):
    model_dir = str(tmp_path / "model")
    shutil.copytree(trained_dir, model_dir)
    return model_dir


def _read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def _read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def _truncate(path):
    os.truncate(path, os.path.getsize(path) // 2)


def _damage(model_dir, how):
    prefix = os.path.join(model_dir, "model.ckpt-30")
    if how == "truncated .data":
        _truncate(glob.glob(prefix + ".data-*")[0])
    elif how == "garbage .index":
        with open(prefix + ".index", "wb") as f:
            f.write(b"not an sstable at all" * 4)
    elif how == "deleted files":
        for path in glob.glob(prefix + ".*"):
            os.remove(path)
    else:  # a crash before the page cache was flushed: same size, other bytes
        (data,) = glob.glob(prefix + ".data-*")
        with open(data, "r+b") as f:
            content = bytearray(f.read())
            if how == "zeroed .data":
                content = bytearray(len(content))
            else:
                content[len(content) // 2] ^= 0x10
            f.seek(0)
            f.write(content)


def _state(model_dir):
    return os.path.basename(tf.train.get_checkpoint_state(model_dir).model_checkpoint_path)


def _listed(model_dir):
    state = tf.train.get_checkpoint_state(model_dir)
    return [os.path.basename(p) for p in state.all_model_checkpoint_paths]


def _warnings(lines):
    return [line for line in lines if "model_dir" in line and "newest intact" in line]


@pytest.mark.parametrize("content", ["garbage {{{", "", None], ids=["garbled", "empty", "missing"])
def test_bad_state_file_resumes_from_the_newest_checkpoint(copy_dir, content):
    state = os.path.join(copy_dir, "checkpoint")
    if content is None:
        os.remove(state)
    else:
        with open(state, "w") as f:
            f.write(content)
    with captured_tf_log(logging.WARNING) as lines:
        assert _model_dir.recover_checkpoint_state(copy_dir).endswith("model.ckpt-30")
    assert len(_warnings(lines)) == 1, lines
    assert "`checkpoint` state file" in _warnings(lines)[0]
    assert "model.ckpt-30" in _warnings(lines)[0]
    assert _state(copy_dir) == "model.ckpt-30"
    assert not [line for line in lines if "Checkpoint ignored" in line], lines
    # Only the one chosen is listed: the saver's keep_checkpoint_max clean-up deletes listed
    # checkpoints, and the older ones were never listed by a readable state file.
    assert _listed(copy_dir) == ["model.ckpt-30"]


@pytest.mark.parametrize(
    "how",
    ["truncated .data", "garbage .index", "deleted files", "bit-flipped .data", "zeroed .data"],
)
def test_damaged_newest_checkpoint_resumes_from_the_one_before(copy_dir, how):
    _damage(copy_dir, how)
    with captured_tf_log(logging.WARNING) as lines:
        assert _model_dir.recover_checkpoint_state(copy_dir).endswith("model.ckpt-20")
    (warning,) = _warnings(lines)
    assert "model.ckpt-30" in warning and "model.ckpt-20" in warning, warning
    assert ("not there" if how == "deleted files" else "damaged") in warning
    assert _state(copy_dir) == "model.ckpt-20"
    assert _listed(copy_dir) == ["model.ckpt-0", "model.ckpt-10", "model.ckpt-20"]
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(copy_dir))
    assert reader.get_tensor("global_step") == 20


def test_checkpoint_damage_tells_what_is_wrong(copy_dir):
    prefix = os.path.join(copy_dir, "model.ckpt-30")
    assert _model_dir.checkpoint_damage(prefix) is None
    _damage(copy_dir, "bit-flipped .data")
    assert "Checksum does not match" in _model_dir.checkpoint_damage(prefix)
    _truncate(glob.glob(prefix + ".data-*")[0])
    assert "Read less bytes" in _model_dir.checkpoint_damage(prefix)
    os.remove(glob.glob(prefix + ".data-*")[0])
    assert "No such file" in _model_dir.checkpoint_damage(prefix)
    os.remove(prefix + ".index")
    assert ".index" in _model_dir.checkpoint_damage(prefix)


def test_a_verdict_is_kept_until_the_checkpoints_files_change(copy_dir, monkeypatch):
    # evaluate / predict / export each look for the checkpoint: one read, then stat calls.
    reads = []
    read = _model_dir._read_damage
    monkeypatch.setattr(_model_dir, "_read_damage", lambda *args: reads.append(args) or read(*args))
    prefix = os.path.join(copy_dir, "model.ckpt-30")
    for _ in range(3):
        assert _model_dir.usable_checkpoint(copy_dir, "evaluate()") == prefix
    assert reads == [(prefix, False)]
    assert _model_dir.checkpoint_damage(prefix, finite=True) is None  # a verdict of its own
    assert len(reads) == 2
    # Bit-flipped in place at the same size, its mtime put back (a coarse clock's tick later).
    (data,) = glob.glob(prefix + ".data-*")
    mtime = os.stat(data).st_mtime_ns
    time.sleep(0.02)
    _damage(copy_dir, "bit-flipped .data")
    os.utime(data, ns=(mtime, mtime))
    assert "Checksum does not match" in _model_dir.checkpoint_damage(prefix)
    with captured_tf_log(logging.WARNING) as lines:
        assert _model_dir.usable_checkpoint(copy_dir, "predict()").endswith("model.ckpt-20")
    assert "model.ckpt-30" in _warnings(lines)[0]


def test_intact_state_is_left_alone(copy_dir):
    state = os.path.join(copy_dir, "checkpoint")
    before = os.stat(state).st_mtime_ns
    with captured_tf_log(logging.WARNING) as lines:
        assert _model_dir.recover_checkpoint_state(copy_dir).endswith("model.ckpt-30")
    assert lines == []
    assert os.stat(state).st_mtime_ns == before


def test_no_intact_checkpoint_is_an_error_naming_files_and_the_fresh_start(copy_dir):
    for index in glob.glob(os.path.join(copy_dir, "*.index")):
        with open(index, "wb") as f:
            f.write(b"x")
    est = _estimator(copy_dir)
    with pytest.raises(TfestKitError, match=r"no intact checkpoint") as raised:
        est.train(_input_fn, max_steps=40)
    message = str(raised.value)
    assert "model.ckpt-30.index" in message and "delete" in message and "afresh" in message
    assert "another model_dir" in message
    # Nothing was trained over the old files.
    assert sorted(glob.glob(os.path.join(copy_dir, "model.ckpt-*.index")))[-1].endswith("30.index")


def test_tpu_estimator_resumes_after_a_truncated_checkpoint(copy_dir):
    _damage(copy_dir, "truncated .data")
    damaged = {
        f: _read(os.path.join(copy_dir, f), "rb") for f in os.listdir(copy_dir) if "-30." in f
    }
    start = _StartStep()
    with captured_tf_log(logging.WARNING) as lines:
        _estimator(copy_dir).train(_input_fn, max_steps=40, hooks=[start])
    assert start.start == 20
    assert len(_warnings(lines)) == 1, lines
    # Training saved step 30 again over the damaged files (an intact .index or .data beside a
    # damaged one held the only copy of its part): they are kept under another name.
    assert [line for line in lines if "its files kept as model.ckpt-30.damaged.*" in line]
    for name, content in damaged.items():
        assert _read(os.path.join(copy_dir, name.replace("-30.", "-30.damaged.")), "rb") == content
    assert _model_dir.checkpoint_damage(tf.train.latest_checkpoint(copy_dir)) is None
    assert tf.train.load_checkpoint(copy_dir).get_tensor("global_step") == 40


def test_a_model_dir_that_is_not_writable_is_named_as_such(tmp_path, monkeypatch):
    # The lock file's PermissionError read like a stale lock's. (Root ignores file modes.)
    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "makedirs", denied)
    with pytest.raises(PermissionError, match=r"model_dir .*ro is not writable.*train elsewhere"):
        _estimator(str(tmp_path / "ro")).train(_input_fn, max_steps=5)


def test_evaluating_into_a_model_dir_that_is_not_writable_says_its_metrics_are_not_saved(
    copy_dir, monkeypatch
):
    # TensorFlow's "Write failed" is a C++ ERROR below TF_CPP_MIN_LOG_LEVEL's default: the
    # metrics were returned, and inspect, early_stopping and best_exporter never saw them.
    access = os.access
    writable = lambda path, mode: access(path, mode) and not path.startswith(copy_dir)  # noqa: E731
    monkeypatch.setattr(os, "access", writable)
    with captured_tf_log(logging.WARNING) as lines:
        metrics = _estimator(copy_dir).evaluate(_eval_input_fn, steps=2)
    assert metrics["global_step"] == 30
    said = [line for line in lines if "not writable" in line]
    assert len(said) == 1 and copy_dir in said[0] and "saves none" in said[0], lines


def test_a_directory_named_checkpoint_is_refused_before_training_writes(copy_dir):
    # TensorFlow's FailedPreconditionError "Is a directory" came at the first save, three times.
    os.rename(os.path.join(copy_dir, "checkpoint"), os.path.join(copy_dir, "saved"))
    os.mkdir(os.path.join(copy_dir, "checkpoint"))
    for run in (
        lambda est: est.train(_input_fn, max_steps=40),
        lambda est: est.evaluate(_eval_input_fn),
    ):
        with pytest.raises(ValueError, match=r"`checkpoint` is a directory.*rename it"):
            run(_estimator(copy_dir))
    assert not os.listdir(os.path.join(copy_dir, "checkpoint"))
    assert not glob.glob(os.path.join(copy_dir, "model.ckpt-40*"))


def test_an_export_or_an_unexpanded_home_as_model_dir_is_refused(copy_dir, tmp_path, monkeypatch):
    # An export's directory: trained from scratch beside saved_model.pb (TF 1.15 did too). A
    # quoted "~/runs": a directory named "~" in the working directory.
    export = os.fsdecode(
        _estimator(copy_dir).export_saved_model(str(tmp_path / "export"), _serving_input_fn)
    )
    with pytest.raises(ValueError, match=r"is an export \(saved_model.pb\), not a model_dir"):
        _estimator(export).train(_input_fn, max_steps=5)
    assert sorted(os.listdir(export)) == ["saved_model.pb", "variables"]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"model_dir ~/runs starts with '~'.*expand it"):
        _estimator("~/runs").train(_input_fn, max_steps=5)
    assert not os.path.exists(tmp_path / "~")


def test_a_foreign_or_orphaned_state_file_without_checkpoints_is_refused(copy_dir, tmp_path):
    # Another tool's `checkpoint` file was overwritten by training from step 0; a state file
    # naming deleted checkpoints gave "not a valid checkpoint" (train) or untrained metrics.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "checkpoint").write_text("run_a: 0.91\n")
    with pytest.raises(TfestKitError, match=r"state file is unreadable.*move the `checkpoint`"):
        _estimator(str(foreign)).train(_input_fn, max_steps=5)
    assert (foreign / "checkpoint").read_text() == "run_a: 0.91\n"
    for name in glob.glob(os.path.join(copy_dir, "model.ckpt-*")):
        if not name.endswith(".meta"):
            os.remove(name)
    est = _estimator(copy_dir)
    for call in (lambda: est.train(_input_fn, max_steps=40), lambda: est.evaluate(_eval_input_fn)):
        with pytest.raises(TfestKitError, match=r"names model\.ckpt-30, not there.*Restore the"):
            call()


def test_plain_estimator_on_a_damaged_newest_checkpoint_is_told_what_resumes(copy_dir):
    # The advice was "Pass an intact checkpoint_path", which Estimator.train does not take.
    from tfest_kit import model_fn

    _damage(copy_dir, "truncated .data")
    regressor = model_fn.regressor(lambda features, mode, params: tf.layers.dense(features["x"], 1))
    est = estimator.Estimator(regressor, copy_dir)
    with pytest.raises(ValueError, match=r"ckpt-30 cannot be restored.*to train on, use tfest_kit"):
        est.train(lambda: _input_fn({"batch_size": 4}), max_steps=40)


def test_bit_flipped_newest_checkpoint_is_damaged_at_resume_and_in_inspect(copy_dir):
    from tfest_kit.cli import inspect as cli_inspect

    _damage(copy_dir, "bit-flipped .data")
    with pytest.raises(tf.errors.DataLossError, match="Checksum does not match"):
        # The official resume stops on it, although model.ckpt-20 is intact.
        estimator.Estimator(_plain_model_fn, copy_dir).train(lambda: _input_fn({"batch_size": 4}))
    checkpoints = cli_inspect.describe(copy_dir)["checkpoints"]
    damaged = {os.path.basename(c["path"]): c["damaged"] for c in checkpoints["checkpoints"]}
    assert "Checksum" in damaged.pop("model.ckpt-30") and not any(damaged.values()), damaged
    assert (
        checkpoints["latest"].endswith("model.ckpt-20") and "damaged" in checkpoints["state_file"]
    )
    start = _StartStep()
    with captured_tf_log(logging.WARNING) as lines:
        _estimator(copy_dir).train(_input_fn, max_steps=40, hooks=[start])
    assert start.start == 20
    (warning,) = _warnings(lines)
    assert "model.ckpt-30" in warning and "Checksum" in warning, warning


def test_evaluate_predict_and_export_find_the_checkpoint_as_training_does(copy_dir, tmp_path):
    # A garbled state file made them use fresh weights (export: "Couldn't find trained model").
    with open(os.path.join(copy_dir, "checkpoint"), "w") as f:
        f.write("garbage {{{")
    _damage(copy_dir, "truncated .data")
    # A save under way (its .index not written yet) is another process's: readers skip it.
    (data,) = glob.glob(os.path.join(copy_dir, "model.ckpt-20.data-*"))
    shutil.copy(data, data.replace("ckpt-20", "ckpt-40"))
    est = _estimator(copy_dir)
    step_20 = os.path.join(copy_dir, "model.ckpt-20")
    with captured_tf_log(logging.WARNING) as lines:
        assert est.evaluate(_eval_input_fn)["global_step"] == 20
        predicted = next(est.predict(_predict_input_fn))["y"]
        export = est.export_saved_model(str(tmp_path / "export"), _serving_input_fn)
    expected = next(est.predict(_predict_input_fn, checkpoint_path=step_20))["y"]
    np.testing.assert_array_equal(predicted, expected)
    exported = tf.train.load_variable(
        os.path.join(export, b"variables", b"variables"), "out/kernel"
    )
    np.testing.assert_array_equal(exported, tf.train.load_variable(step_20, "out/kernel"))
    warnings = _warnings(lines)
    assert len(warnings) == 3, lines
    for warning, user in zip(warnings, ["evaluate()", "predict()", "an export"]):
        assert f"{user} uses model.ckpt-20" in warning and "model.ckpt-30" in warning, warning
        assert "model.ckpt-40" not in warning
        assert "state file is unreadable" in warning
    assert not [line for line in lines if "Checkpoint ignored" in line], lines
    # Only read: the state file is left for the next training to rewrite.
    assert _read(os.path.join(copy_dir, "checkpoint")) == "garbage {{{"


def test_a_checkpoint_newer_than_the_state_files_is_resumed_not_overwritten(copy_dir):
    # Saved after the state file was last written (a crash between): training from the state
    # file's model.ckpt-20 overwrote the intact model.ckpt-30 at step 30.
    names = ["model.ckpt-0", "model.ckpt-10", "model.ckpt-20"]
    tf.train.update_checkpoint_state(copy_dir, names[-1], names)
    (data,) = glob.glob(os.path.join(copy_dir, "model.ckpt-30.data-*"))
    before = _read_bytes(data)
    start = _StartStep()
    with captured_tf_log(logging.WARNING) as lines:
        assert _estimator(copy_dir).evaluate(_eval_input_fn)["global_step"] == 30
        _estimator(copy_dir).train(_input_fn, max_steps=40, hooks=[start])
    assert start.start == 30
    warnings = _warnings(lines)
    assert len(warnings) == 2, lines
    for warning in warnings:
        assert "names model.ckpt-20: model.ckpt-30 is newer" in warning, warning
        assert "delete" in warning
    assert _read_bytes(data) == before
    assert _listed(copy_dir) == [*names, "model.ckpt-30", "model.ckpt-40"]


def test_a_state_file_naming_another_machines_paths_says_so(copy_dir):
    # A model_dir copied from elsewhere: "names model.ckpt-30, which is damaged; evaluate()
    # uses model.ckpt-30" before.
    elsewhere = "/elsewhere/run/model.ckpt-30"
    tf.train.update_checkpoint_state(copy_dir, elsewhere, [elsewhere])
    with captured_tf_log(logging.WARNING) as lines:
        assert _estimator(copy_dir).evaluate(_eval_input_fn)["global_step"] == 30
    (warning,) = _warnings(lines)
    assert f"names {elsewhere}, in another directory" in warning, warning
    assert "damaged" not in warning, warning


def test_a_copied_model_dir_naming_the_originals_checkpoints_leaves_them_alone(
    trained_dir, tmp_path
):
    # The state file, with absolute paths as TF 1.x wrote them, named the original's: the copy
    # resumed from them, and its Saver deleted them beyond keep_checkpoint_max.
    original, copy = str(tmp_path / "original"), str(tmp_path / "copy")
    shutil.copytree(trained_dir, original)
    names = [os.path.join(original, f"model.ckpt-{step}") for step in (0, 10, 20, 30)]
    tf.train.update_checkpoint_state(original, names[-1], names)
    shutil.copytree(original, copy)
    before = sorted(os.listdir(original))
    start = _StartStep()
    with captured_tf_log(logging.WARNING) as lines:
        _estimator(copy).train(_input_fn, max_steps=80, hooks=[start])
    assert start.start == 30 and sorted(os.listdir(original)) == before
    (warning,) = _warnings(lines)
    assert f"names {names[-1]}, in another directory" in warning, warning
    assert tf.train.latest_checkpoint(copy) == os.path.join(copy, "model.ckpt-80")


def test_evaluate_and_predict_on_a_model_dir_without_checkpoints_say_so(tmp_path):
    # TensorFlow says it in an INFO line, which tfest_kit's logs.setup(tensorflow_info=False)
    # hides: the results of initial weights looked like a trained model's.
    est = _estimator(str(tmp_path / "empty"))
    with captured_tf_log(logging.WARNING) as lines:
        est.evaluate(_eval_input_fn)
        next(est.predict(_predict_input_fn))
    said = [line for line in lines if "No checkpoint in model_dir" in line]
    assert [s.split(": ")[1].split()[0] for s in said] == ["evaluate()", "predict()"], lines
    assert all("initial weights" in line for line in said)


def test_evaluate_predict_and_export_without_an_intact_checkpoint_name_the_files(
    copy_dir, tmp_path
):
    for index in glob.glob(os.path.join(copy_dir, "*.index")):
        with open(index, "wb") as f:
            f.write(b"x")
    est = _estimator(copy_dir)
    calls = {
        "evaluate()": lambda: est.evaluate(_eval_input_fn),
        "predict()": lambda: next(est.predict(_predict_input_fn)),
        "an export": lambda: est.export_saved_model(str(tmp_path / "export"), _serving_input_fn),
    }
    for user, call in calls.items():
        with pytest.raises(TfestKitError, match="no intact checkpoint") as raised:
            call()
        message = str(raised.value)
        assert f"{user} would use untrained weights" in message, message
        assert "model.ckpt-30.index" in message and "model.ckpt-0.index" in message
    assert not os.path.exists(tmp_path / "export")


def test_a_damaged_checkpoint_path_given_to_evaluate_predict_or_export_is_named(copy_dir, tmp_path):
    # TensorFlow's ~100 lines: "OutOfRangeError: Read less bytes than requested".
    _damage(copy_dir, "truncated .data")
    est, given = _estimator(copy_dir), os.path.join(copy_dir, "model.ckpt-30")
    export_base = str(tmp_path / "export")
    for call in (
        lambda: est.evaluate(_eval_input_fn, checkpoint_path=given),
        lambda: next(est.predict(_predict_input_fn, checkpoint_path=given)),
        lambda: est.export_saved_model(export_base, _serving_input_fn, checkpoint_path=given),
    ):
        with pytest.raises(ValueError, match=r"Checkpoint .*model\.ckpt-30 cannot be"):
            call()
    intact = os.path.join(copy_dir, "model.ckpt-20")
    assert est.evaluate(_eval_input_fn, checkpoint_path=intact)["global_step"] == 20
    # One the chief deleted between the evaluator's latest_checkpoint() and evaluate(): the
    # evaluator's loop recognises it as vanished and evaluates the next one.
    for name in glob.glob(os.path.join(copy_dir, "model.ckpt-20.*")):
        os.remove(name)
    with pytest.raises(ValueError) as raised:
        est.evaluate(_eval_input_fn, checkpoint_path=intact)
    assert vanished_checkpoint(raised.value, copy_dir) == intact


def test_a_relative_model_dir_resumes_after_recovery_and_again(trained_dir, tmp_path, monkeypatch):
    # The rewritten state file named "../model.ckpt-30": "not a valid checkpoint" next time.
    shutil.copytree(trained_dir, tmp_path / "model")
    monkeypatch.chdir(tmp_path)
    with open(os.path.join("model", "checkpoint"), "w") as f:
        f.write("")
    assert _model_dir.recover_checkpoint_state("model") == os.path.join("model", "model.ckpt-30")
    assert 'model_checkpoint_path: "model.ckpt-30"' in _read(os.path.join("model", "checkpoint"))
    for max_steps, start_step in [(40, 30), (50, 40)]:
        start = _StartStep()
        _estimator("model").train(_input_fn, max_steps=max_steps, hooks=[start])
        assert start.start == start_step
    assert _estimator("model").evaluate(_eval_input_fn)["global_step"] == 50


def test_a_model_dir_with_glob_characters_is_refused_before_anything_is_written(tmp_path):
    # TensorFlow globs checkpoint paths (Saver.restore, the checkpoint reader, the deletion of
    # old checkpoints): a run into "lr[0.1]" trains, but nothing can resume from it.
    official_dir = str(tmp_path / "official[0.1]")
    official = estimator.Estimator(_plain_model_fn, official_dir)
    official.train(lambda: _input_fn({"batch_size": 4}), max_steps=2)
    assert official.latest_checkpoint() is None  # "Couldn't match files for checkpoint"
    with pytest.raises(ValueError, match="not a valid checkpoint"):
        official.train(lambda: _input_fn({"batch_size": 4}), max_steps=4)

    model_dir = str(tmp_path / "lr[0.1]")
    for call in (
        lambda: _estimator(model_dir).train(_input_fn, max_steps=2),
        lambda: _estimator(official_dir).train(_input_fn, max_steps=4),
        lambda: _estimator(official_dir).evaluate(_eval_input_fn),
    ):
        with pytest.raises(
            ValueError, match=r"`model_dir` must not hold the characters \* \? \["
        ) as e:
            call()
        assert "Rename the directory" in str(e.value) and "Got: " in str(e.value)
    assert not os.path.exists(model_dir)
    a_file = tmp_path / "notes.txt"  # FileExistsError from the lock file's makedirs before
    a_file.write_text("kept")
    with pytest.raises(ValueError, match=r"`model_dir` must be a directory.*Got: a file"):
        _estimator(str(a_file)).train(_input_fn, max_steps=2)
    assert a_file.read_text() == "kept"


def test_train_and_evaluate_resumes_a_plain_estimator_after_a_garbled_state(copy_dir):
    import tfest_kit

    with open(os.path.join(copy_dir, "checkpoint"), "w") as f:
        f.write("model_checkpoint_path: ")  # a write cut short

    def model_fn(features, labels, mode):
        spec = _model_fn(features, labels, mode, {})
        return estimator.EstimatorSpec(mode, loss=spec.loss, train_op=spec.train_op)

    def input_fn():
        return _input_fn({"batch_size": 4})

    def eval_input_fn():
        return _input_fn({"batch_size": 4}).take(2)

    config = estimator.RunConfig(model_dir=copy_dir, save_checkpoints_steps=10)
    est = estimator.Estimator(model_fn, config=config)
    start = _StartStep()
    metrics = tfest_kit.train_and_evaluate(
        est, input_fn, eval_input_fn, max_steps=35, hooks=[start], throttle_secs=0
    )
    assert start.start == 30
    assert metrics["global_step"] == 35


def test_writer_lock_is_skipped_for_object_stores(tmp_path):
    with _model_dir.writer_lock("gs://no-such-bucket/model"):
        pass
    # Nested in one process: allowed; the file is emptied at the end.
    with _model_dir.writer_lock(str(tmp_path)), _model_dir.writer_lock(str(tmp_path)):
        assert json.loads(_read(tmp_path / _model_dir.LOCK_FILE))["pid"] == os.getpid()
    assert _read(tmp_path / _model_dir.LOCK_FILE) == ""


_TF1_CLUSTER = {"master": ["h:1"], "worker": ["h:2"]}
_CHIEF_CLUSTER = {"chief": ["h:1"], "worker": ["h:2"]}


@pytest.mark.parametrize(
    "cluster, task, strategy, writes",
    [
        ({}, ("worker", 0), False, True),  # a task without a cluster: RunConfig's one process
        (_TF1_CLUSTER, ("master", 0), False, True),  # TF1's chief
        (_TF1_CLUSTER, ("worker", 0), False, False),
        # Under a strategy an Estimator's RunConfig calls every task worker 0 and chief.
        (_CHIEF_CLUSTER, ("chief", 0), True, True),
        (_CHIEF_CLUSTER, ("worker", 0), True, False),
        ({"worker": ["h:1", "h:2"]}, ("worker", 0), True, True),  # the coordinator's chief
        ({"worker": ["h:1", "h:2"]}, ("worker", 1), True, False),
    ],
)
def test_training_locks_on_runconfigs_chief_only(
    tmp_path, monkeypatch, cluster, task, strategy, writes
):
    tf_config = {"cluster": cluster, "task": {"type": task[0], "index": task[1]}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    config = estimator.RunConfig(
        train_distribute=tf2.distribute.MirroredStrategy() if strategy else None
    )
    if not strategy:
        assert config.is_chief == writes  # RunConfig's own word
    est = estimator.Estimator(lambda features, labels, mode: None, str(tmp_path), config=config)
    assert _model_dir.writes_checkpoints() == writes
    with _model_dir.training(est):
        lock = tmp_path / _model_dir.LOCK_FILE
        assert (json.loads(_read(lock))["pid"] == os.getpid()) if writes else not lock.exists()


def test_second_writer_stops_and_a_dead_writers_lock_is_taken_over(tmp_path):
    model_dir = str(tmp_path / "model")
    stop_file = str(tmp_path / "STOP")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "programs" / "hold_model_dir.py"),
            f"--model_dir={model_dir}",
            f"--stop_file={stop_file}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("TRAINING"):
                break
        assert lines and lines[-1].startswith("TRAINING"), "".join(lines)
        holder = json.loads(_read(os.path.join(model_dir, _model_dir.LOCK_FILE)))
        assert holder["pid"] == proc.pid

        est = _estimator(model_dir)
        started = time.monotonic()
        with pytest.raises(_model_dir.ModelDirLockedError, match=f"pid {proc.pid}") as raised:
            est.train(_input_fn, max_steps=5)
        assert time.monotonic() - started < 5  # at once, not after a wait
        assert "another model_dir" in str(raised.value) and "since" in str(raised.value)
        assert raised.value.holder["pid"] == proc.pid

        proc.send_signal(signal.SIGKILL)  # dies holding it: the file still names it
        proc.wait(30)
        with captured_tf_log(logging.WARNING) as log:
            est.train(_input_fn, max_steps=5)  # not at step 5 yet: trains
        taken = [line for line in log if "taking over the lock" in line]
        assert len(taken) == 1 and f"pid {proc.pid}" in taken[0], log
        assert _read(os.path.join(model_dir, _model_dir.LOCK_FILE)) == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_nan_loss_names_the_step_and_the_newest_finite_checkpoint(tmp_path):
    def input_fn(params):
        # Example 15 (one per step) is NaN: the run that starts at global step 15 fails.
        x = tf2.data.Dataset.range(1000).map(
            lambda i: tf.where(tf.equal(i, 15), np.nan, 1.0) * tf.ones([2])
        )
        y = tf2.data.Dataset.from_tensors(tf.ones([1])).repeat()
        return tf2.data.Dataset.zip(({"x": x}, y)).batch(1)

    model_dir = str(tmp_path / "model")
    # Saves at 0, 8, 16: the run from step 15 saves its NaN weights at 16, then fails.
    est = _estimator(model_dir, save_steps=8, per_loop=1)
    with pytest.raises(NanLossError, match=r"global step 15") as raised:
        est.train(input_fn, max_steps=100)
    message = str(raised.value)
    assert raised.value.step == 15
    assert "finite weights: model.ckpt-8" in message, message

    # Resumed with a NanGuardHook, the NaN weights of model.ckpt-16 fail at once: the advice
    # names model.ckpt-8, read to be finite, not the newest checkpoint before the step.
    with pytest.raises(NanLossError, match="at step 16") as raised:
        resumed = _estimator(model_dir, save_steps=8, per_loop=1)
        resumed.train(input_fn, max_steps=100, hooks=[NanGuardHook()])
    message = str(raised.value)
    good = os.path.join(model_dir, "model.ckpt-8")
    assert "finite weights from before it is model.ckpt-8" in message, message
    assert f"update_checkpoint_state({model_dir!r}, {good!r})" in message, message
    tf.train.update_checkpoint_state(model_dir, good)
    start = _StartStep()
    _estimator(model_dir, save_steps=8).train(input_fn, max_steps=10, hooks=[start])
    assert start.start == 8


def test_disk_full_while_saving_names_the_directory_and_the_intact_checkpoint(small_disk):
    def model_fn(features, labels, mode, params):
        # 1.2 MB of weights: the fourth checkpoint does not fit on the 4 MiB disk.
        big = tf.get_variable("big", [300000], initializer=tf.zeros_initializer())
        return _model_fn({"x": features["x"] + tf.reduce_mean(big)}, labels, mode, params)

    model_dir = str(small_disk(4) / "model")
    with pytest.raises(TfestKitError, match="No space left on device") as raised:
        _estimator(model_dir, model_fn=model_fn).train(_input_fn, max_steps=1000)
    latest = tf.train.latest_checkpoint(model_dir)
    message = str(raised.value)
    assert model_dir in message and f"{os.path.basename(latest)}, is intact" in message, message
    assert _model_dir.checkpoint_damage(latest) is None
    reader = tf.train.load_checkpoint(latest)
    for name in reader.get_variable_to_shape_map():
        reader.get_tensor(name)
    assert reader.get_tensor("global_step") >= 10


@pytest.mark.parametrize("task, absent", [("worker", "chief"), ("chief", "ps")])
def test_a_task_waiting_for_a_task_where_nothing_listens_says_so(monkeypatch, task, absent):
    # TensorFlow waits for the chief (a chief for its ps) for 2 hours, at INFO ("still creating
    # the session"); the chief was not told.
    from tfest_kit.cluster import free_ports

    ports = free_ports(2)
    tf_config = {"cluster": {"chief": [f"localhost:{ports[0]}"], "worker": ["localhost:1"]}}
    if absent == "ps":
        tf_config["cluster"]["ps"] = [f"localhost:{ports[1]}"]
    listening = socket.create_server(("localhost", ports[0]))  # the chief's own server
    gone = tf_config["cluster"][absent][0]
    monkeypatch.setenv("TF_CONFIG", json.dumps({**tf_config, "task": {"type": task, "index": 0}}))
    monkeypatch.setattr(_model_dir._StepCounter, "say_every", 0.05)
    counter = _model_dir._StepCounter(started=time.monotonic())
    with captured_tf_log(logging.WARNING) as warnings, tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        counter.begin()
        deadline = time.monotonic() + 10
        while not warnings and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # said once
        counter.first_step_done.set()
    listening.close()
    assert len(warnings) == 1, warnings
    assert "waiting" in warnings[0] and f"{absent} {gone}, where nothing listens" in warnings[0]
