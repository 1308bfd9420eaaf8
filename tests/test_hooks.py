"""tfest_kit.hooks in Estimator runs and in hand-written MonitoredTrainingSession loops."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import types

import numpy as np
import pytest

from tests.conftest import captured_tf_log, run_program
from tests.signal_hooks import SignalAtStep
from tfest_kit import TfestKitError, hooks, tpu
from tfest_kit._model_dir import higher_is_better, metrics_by_step
from tfest_kit._tf import estimator, tf, tf2


@pytest.fixture
def log_lines(tf_log_lines):
    return tf_log_lines


def _regression_data(n=64):
    x = np.random.RandomState(0).normal(size=(n, 3)).astype(np.float32)
    return x, (x @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)


def _graph(nan_from_step=None, lr=0.05):
    """A tiny regression graph with a global step; the loss turns NaN from a given step."""
    x, y = _regression_data()
    global_step = tf.train.get_or_create_global_step()
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    if nan_from_step is not None:
        loss = tf.where(global_step >= nan_from_step, tf.constant(np.nan), loss)
    tf.add_to_collection(tf.GraphKeys.LOSSES, loss)
    train_op = tf.train.GradientDescentOptimizer(lr).minimize(loss, global_step)
    return loss, train_op, global_step


def _run_loop(hook_list, steps=30, checkpoint_dir=None, on_step=None, **graph_kw):
    """A hand-written TF1 loop; returns the final global step."""
    with tf.Graph().as_default():
        _, train_op, global_step = _graph(**graph_kw)
        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=checkpoint_dir,
            hooks=hook_list,
            save_checkpoint_steps=None,
            save_checkpoint_secs=None,
            save_summaries_steps=None,
            save_summaries_secs=None,
            log_step_count_steps=None,
        ) as sess:
            done = 0
            while not sess.should_stop() and done < steps:
                sess.run(train_op)
                done += 1
                if on_step is not None:
                    on_step(done)
        with tf.Session() as plain:
            if checkpoint_dir and tf.train.latest_checkpoint(checkpoint_dir):
                tf.train.Saver().restore(plain, tf.train.latest_checkpoint(checkpoint_dir))
                return int(plain.run(global_step))
    return done


def _model_fn(features, labels, mode, params):
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
    train_op = tf.train.GradientDescentOptimizer(params["lr"]).minimize(
        loss, tf.train.get_global_step()
    )
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn(repeat=True):
    x, y = _regression_data()

    def input_fn():
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        return (ds.repeat() if repeat else ds).batch(16)

    return input_fn


# ---------------------------------------------------------------- ProgressHook


class _CountingProgress(hooks.ProgressHook):
    """Counts the steps on which the hook asked the session for anything."""

    def before_run(self, run_context):
        args = super().before_run(run_context)
        self.fetching_runs = getattr(self, "fetching_runs", 0) + (args is not None)
        return args


def test_progress_hook_in_monitored_session_plain_lines(log_lines):
    hook = _CountingProgress(every_n_steps=10, total_steps=30, batch_size=64)
    assert _run_loop([hook], steps=30) == 30
    lines = [line for line in log_lines if line.startswith("step ")]
    assert [line.split(",")[0] for line in lines] == [
        "step 1/30 (3%)",
        "step 10/30 (33%)",
        "step 20/30 (67%)",
        "step 30/30 (100%)",
    ]
    assert "loss = " in lines[-1] and "examples/sec" in lines[-1]
    assert "ETA" in lines[-2] and "ETA" not in lines[-1]  # none left at the last step
    assert hook.fetching_runs == 4  # nothing fetched on the 26 other steps


class _Clock(tf.train.SessionRunHook):
    """A fake clock for the progress hooks; put it first in the list of hooks.

    The first run takes ``setup`` seconds (graph optimisation, the first batch), every other
    run ``step`` seconds.
    """

    def __init__(self, monkeypatch, setup, step):
        self.now, self._setup, self._step, self._runs = 1000.0, setup, step, 0
        monkeypatch.setattr(hooks, "time", types.SimpleNamespace(monotonic=lambda: self.now))

    def after_run(self, run_context, run_values):
        self._runs += 1
        self.now += self._setup if self._runs == 1 else self._step


def test_progress_rates_start_after_the_first_step(monkeypatch, log_lines):
    # The first line divided by the time since session creation, mostly set-up: mobilenet
    # printed "step 1/500, 0.923 steps/sec, ETA 9m00s" for a 41 s run.
    clock = _Clock(monkeypatch, setup=100.0, step=0.0001)
    hook = hooks.ProgressHook(every_n_steps=10, total_steps=100000, batch_size=32)
    _run_loop([clock, hook], steps=30)
    lines = [re.sub(", loss = [^,]+", "", line) for line in log_lines if line.startswith("step ")]
    later = "(0%), 10000.00 steps/sec, 320000 examples/sec, ETA 10s"
    assert lines == ["step 1/100000 (0%)"] + [f"step {n}/100000 {later}" for n in (10, 20, 30)]
    # The fallback TPUEstimator's loss line: no time for the first step either (as Estimator's
    # LoggingTensorHook).
    del log_lines[:]
    clock = _Clock(monkeypatch, setup=100.0, step=0.0001)
    _run_loop([clock, hooks.LossLoggingHook(every_n_steps=10, batch_size=32)], steps=10)
    lines = [re.sub("loss = [^,]+, ", "", line) for line in log_lines if line.startswith("loss")]
    assert lines == [
        "step = 1",
        "step = 10 (0.001 sec); global_step/sec: 10000, examples/sec: 320000.0",
    ]


def test_progress_hook_follows_the_global_step_of_a_loop_whose_loss_is_in_no_collection(
    log_lines,
):
    # A TF1 loop with its own update (no Optimizer) and a reduce_mean loss fills neither LOSSES
    # nor TRAIN_OP: the hook took it for prediction and counted runs ("batch 30/30" at step 60).
    def loop(hook, steps):
        with tf.Graph().as_default():
            x, y = _regression_data()
            global_step = tf.train.get_or_create_global_step()
            w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            (gradient,) = tf.gradients(loss, [w])
            train_op = tf.group(w.assign_sub(0.05 * gradient), global_step.assign_add(1))
            with tf.train.MonitoredTrainingSession(
                hooks=[hook(loss)], log_step_count_steps=None
            ) as sess:
                for _ in range(steps):
                    sess.run(train_op)

    loop(lambda loss: hooks.ProgressHook(every_n_steps=10, total_steps=20), 20)
    lines = [line for line in log_lines if line.startswith(("step ", "batch "))]
    assert [line.split(",")[0] for line in lines] == ["step 1/20 (5%)", "step 10/20 (50%)"] + [
        "step 20/20 (100%)"
    ]
    loop(lambda loss: hooks.ProgressHook(every_n_steps=10, loss=loss), 10)
    assert "loss = " in [line for line in log_lines if line.startswith("step ")][-1]


def test_progress_hook_reports_every_interval_when_a_run_moves_the_step_by_two(log_lines):
    # A GAN-style run applies two optimizers, each incrementing the global step: the hook
    # predicted one step per run and printed at steps 2, 18, 22, 38 … for every_n_steps=10.
    hook = _CountingProgress(every_n_steps=10)
    with tf.Graph().as_default():
        x, y = _regression_data()
        global_step = tf.train.get_or_create_global_step()
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        tf.add_to_collection(tf.GraphKeys.LOSSES, loss)
        train_op = tf.group(
            tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step),
            tf.train.AdamOptimizer(0.01).minimize(loss, global_step),
        )
        with tf.train.MonitoredTrainingSession(hooks=[hook], log_step_count_steps=None) as sess:
            for _ in range(16):
                sess.run(train_op)
    lines = [line for line in log_lines if line.startswith("step ")]
    assert [line.split(",")[0] for line in lines] == [f"step {n}" for n in (2, 10, 20, 30, 32)]
    assert "loss = " in lines[-2] and "loss" not in lines[-1]  # training stopped between lines
    assert hook.fetching_runs == 4


def test_progress_hook_prints_the_last_step_between_intervals(tmp_path, log_lines):
    # total_steps between two intervals: the last step is fetched with its loss.
    _run_loop([hooks.ProgressHook(every_n_steps=10, total_steps=25)], steps=25)
    lines = [line for line in log_lines if line.startswith("step ")]
    assert [line.split(",")[0] for line in lines][-2:] == ["step 20/25 (80%)", "step 25/25 (100%)"]
    assert "loss = " in lines[-1]
    # Data exhausted before total_steps and between intervals: a line of where it stopped.
    del log_lines[:]
    est = estimator.Estimator(_model_fn, str(tmp_path), params={"lr": 0.05})
    est.train(_input_fn(repeat=False), hooks=[hooks.ProgressHook(every_n_steps=3, total_steps=9)])
    lines = [line for line in log_lines if line.startswith("step ")]
    assert [line.split(",")[0] for line in lines] == [
        "step 1/9 (11%)",
        "step 3/9 (33%)",
        "step 4/9 (44%)",
    ]
    assert "steps/sec" in lines[-1] and "loss" not in lines[-1]
    # Stopped short of total_steps: no ETA for steps that will not run.
    assert lines[-1].endswith(", stopped") and "ETA" not in lines[-1]


def test_progress_hook_in_estimator(tmp_path, log_lines):
    est = estimator.Estimator(_model_fn, str(tmp_path), params={"lr": 0.05})
    hook = hooks.ProgressHook(every_n_steps=5, total_steps=15, batch_size=16)
    est.train(_input_fn(), max_steps=15, hooks=[hook])
    est.train(_input_fn(), max_steps=20, hooks=[hook])  # reused: state resets in begin()
    lines = [line.split(",")[0] for line in log_lines if line.startswith("step ")]
    assert lines == [
        "step 1/15 (7%)",
        "step 5/15 (33%)",
        "step 10/15 (67%)",
        "step 15/15 (100%)",
        "step 16",  # past the hook's total_steps: no "16/15"
        "step 20",
    ]


def test_progress_hook_past_a_too_small_total_steps_says_no_step_of_it(log_lines):
    # Before: "step 4/2 (100%)", "step 5/2 (100%)".
    _run_loop([hooks.ProgressHook(every_n_steps=1, total_steps=2)], steps=5)
    steps = [line.split(",")[0] for line in log_lines if line.startswith("step ")]
    assert steps == ["step 1/2 (50%)", "step 2/2 (100%)", "step 3", "step 4", "step 5"], steps


def test_progress_hook_ends_a_run_stopping_before_total_steps_without_an_eta(tmp_path, log_lines):
    # max_steps short of total_steps: the last line was an ordinary one, "ETA 22s" after the end.
    config = tpu.RunConfig(model_dir=str(tmp_path), tpu_config=tpu.TPUConfig(1))
    est = tpu.TPUEstimator(_model_fn, config=config, train_batch_size=16, params={"lr": 0.05})
    hook = hooks.ProgressHook(every_n_steps=4, total_steps=20)
    est.train(lambda params: _input_fn()(), max_steps=8, hooks=[hook])
    lines = [line for line in log_lines if line.startswith("step ")]
    assert [line.split(",")[0] for line in lines] == [
        "step 1/20 (5%)",
        "step 4/20 (20%)",
        "step 8/20 (40%)",
    ]
    assert "ETA" in lines[1] and "ETA" not in lines[-1] and lines[-1].endswith(", stopped")


def test_progress_hook_bad_arguments():
    with pytest.raises(ValueError, match="every_n_steps"):
        hooks.ProgressHook(every_n_steps=0)
    # Not a tensor of the graph: TensorFlow's ~70 lines at the first step.
    for hook in (hooks.ProgressHook(loss="nope:0"), hooks.LossLoggingHook(loss=42)):
        with pytest.raises(
            ValueError, match=r"`loss` must be a tensor of the graph.*Got: ('nope|42)"
        ):
            _run_loop([hook])
    with pytest.raises(ValueError, match="total_steps"):
        hooks.ProgressHook(total_steps=-1)


# ---------------------------------------------------------------- NanGuardHook


def test_nan_guard_names_step_and_last_finite_loss(log_lines):
    with pytest.raises(hooks.NanLossError) as info:
        _run_loop([hooks.NanGuardHook()], steps=30, nan_from_step=7)
    err = info.value
    assert isinstance(err, TfestKitError)
    assert isinstance(err, tf.train.NanLossDuringTrainingError)
    assert err.step == 7 and err.last_finite_step == 6 and np.isfinite(err.last_finite_loss)
    assert "step 7" in str(err) and "last finite loss" in str(err)
    assert any("step 7" in line for line in log_lines)


def test_nan_guard_without_global_step_counts_session_runs():
    # A hand-written loop with no global step used to get "Loss became nan at step None".
    with tf.Graph().as_default():
        runs = tf.Variable(0.0, trainable=False)
        loss = tf.where(runs >= 3.0, tf.constant(np.nan), 1.0 + runs)
        with tf.control_dependencies([loss]):
            train_op = tf.assign_add(runs, 1.0)
        hook = hooks.NanGuardHook(loss=loss)
        session = tf.train.MonitoredTrainingSession(hooks=[hook], log_step_count_steps=None)
        expected = "at session run 4; .* at session run 3"
        with pytest.raises(hooks.NanLossError, match=expected), session as sess:
            for _ in range(10):
                sess.run(train_op)


@pytest.mark.parametrize("official", [False, True], ids=["NanGuardHook", "NanTensorHook"])
def test_nan_guard_stops_on_an_infinite_loss_which_nan_tensor_hook_lets_through(official):
    with tf.Graph().as_default():
        step = tf.train.get_or_create_global_step()
        loss = tf.placeholder_with_default(1.0, [])
        train_op = tf.assign_add(step, 1)
        if official:
            hook = tf.train.NanTensorHook(loss, fail_on_nan_loss=False)
        else:
            hook = hooks.NanGuardHook(loss=loss)
        runs = 0
        try:
            with tf.train.MonitoredTrainingSession(hooks=[hook], log_step_count_steps=None) as s:
                while not s.should_stop() and runs < 5:
                    runs += 1
                    s.run(train_op, {loss: np.inf})
        except hooks.NanLossError as e:
            assert "Loss became inf at step 0" in str(e)
    assert runs == (5 if official else 1)


def _estimator_with_nan_loss_from(step, model_dir):
    """An Estimator saving every 5 steps whose loss turns NaN from ``step``."""
    config = estimator.RunConfig(model_dir=str(model_dir), save_checkpoints_steps=5)

    def model_fn(features, labels, mode, params):
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
        global_step = tf.train.get_global_step()
        # Trained on, so the step is read before the train op increments it. A NaN loss only
        # fetched beside the train op raced with the increment: NaN one step early, now and
        # then in a full run.
        loss = tf.where(global_step >= step, tf.constant(np.nan), loss)
        train_op = tf.train.GradientDescentOptimizer(params["lr"]).minimize(loss, global_step)
        return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    return estimator.Estimator(model_fn, config=config, params={"lr": 0.05})


@pytest.mark.parametrize("nan_from", [7, 10])
def test_nan_guard_in_estimator_names_the_latest_checkpoint(tmp_path, nan_from):
    # From 10: model.ckpt-10 was named, the weights whose loss at step 10 was not finite.
    est = _estimator_with_nan_loss_from(nan_from, tmp_path)
    pattern = f"at step {nan_from}.*from before it is model.ckpt-5[.;]"
    with pytest.raises(hooks.NanLossError, match=pattern):
        est.train(_input_fn(), max_steps=20, hooks=[hooks.NanGuardHook()])


def test_nan_guard_names_the_checkpoint_to_resume_from_when_the_latest_diverged(tmp_path):
    # Estimator's saver runs before the hooks given to train(): when a save step follows the
    # NaN, it has already written the diverged weights as the latest checkpoint.
    est = _estimator_with_nan_loss_from(9, tmp_path)
    with pytest.raises(hooks.NanLossError, match="at step 9") as info:
        est.train(_input_fn(), max_steps=20, hooks=[hooks.NanGuardHook()])
    assert est.latest_checkpoint().endswith("-10")
    message = str(info.value)
    assert "from before it is model.ckpt-5" in message and "model.ckpt-10" in message
    assert "update_checkpoint_state" in message
    # The call it names makes a resumed run start again from step 5.
    tf.train.update_checkpoint_state(str(tmp_path), "model.ckpt-5")
    est = estimator.Estimator(_model_fn, config=est.config, params={"lr": 0.05})
    est.train(_input_fn(), max_steps=6)
    assert est.get_variable_value("global_step") == 6


@pytest.mark.parametrize(
    "fetched_minus_started, named",
    [(0, 12), (1, 12), (50, 62)],
    ids=["read before the increment", "read after it", "other workers moved it"],
)
def test_nan_guard_names_the_step_the_failing_run_started_at(fetched_minus_started, named):
    # The step fetched with the loss is read while the train op increments it: the same NaN was
    # reported at step 7 or 8 by thread timing (seen once in a full run on Python 3.9).
    with tf.Graph().as_default():
        step = tf.train.create_global_step()
        loss = tf.constant(1.0)
        hook = hooks.NanGuardHook(loss=loss)
        hook.begin()
        with tf.Session() as session:
            session.run(step.assign(10))
            hook.after_create_session(session, None)
            context = tf.train.SessionRunContext(None, session)
            for started, value in ((10, 1.5), (11, 1.25), (12, np.nan)):
                results = {"loss": value, "step": started + fetched_minus_started}
                values = tf.train.SessionRunValues(results, None, None)
                if np.isfinite(value):
                    hook.after_run(context, values)
            with pytest.raises(hooks.NanLossError) as error:
                hook.after_run(context, values)
    assert error.value.step == named
    assert error.value.last_finite_loss == 1.25
    assert f"Loss became nan at step {named};" in str(error.value)


# ---------------------------------------------------------------- PreemptionHook


def test_preemption_hook_in_monitored_session(tf_log_lines):
    previous = signal.getsignal(signal.SIGTERM)
    hook = hooks.PreemptionHook(signals=("SIGTERM", signal.SIGINT))  # names too ("not valid")

    def on_step(done):
        if done == 5:
            os.kill(os.getpid(), signal.SIGTERM)

    final_step = _run_loop([hook], steps=100, checkpoint_dir=None, on_step=on_step)
    assert hook.preempted == signal.SIGTERM
    assert final_step == 6  # the step after the signal completed, then the loop stopped
    assert "SIGTERM received: stopping after step 6" in tf_log_lines
    assert signal.getsignal(signal.SIGTERM) == previous


def test_preemption_hooks_several_at_once_and_after_a_failed_run(tmp_path, tf_log_lines):
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
    try:
        # Two hooks (say a recipe's and the user's): both stop and report the signal, and the
        # handler from before is back afterwards (the second hook used to leave the first's).
        first = hooks.PreemptionHook(signals=[signal.SIGUSR1])
        second = hooks.PreemptionHook(signals=[signal.SIGUSR1])

        def on_step(done):
            if done == 3:
                os.kill(os.getpid(), signal.SIGUSR1)

        assert _run_loop([first, second], steps=50, on_step=on_step) == 4
        assert first.preempted == second.preempted == signal.SIGUSR1
        lines = [line for line in tf_log_lines if line.startswith("SIGUSR1 received")]
        assert lines == ["SIGUSR1 received: stopping after step 4"] * 2, lines
        os.kill(os.getpid(), signal.SIGUSR1)
        assert received == [signal.SIGUSR1]
        # A run that raises never calls end(); a later signal must not be swallowed by the
        # dead run's hook but reach the previous handler.
        with pytest.raises(hooks.NanLossError):
            _run_loop([hooks.NanGuardHook(), first], steps=50, nan_from_step=3)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert received == [signal.SIGUSR1] * 2 and first.preempted is None
        assert signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL
    finally:
        signal.signal(signal.SIGUSR1, previous)


@pytest.mark.parametrize("checkpoints", [True, False])
def test_preemption_hook_in_estimator_says_it_in_one_line(tmp_path, tf_log_lines, checkpoints):
    # The line used to hedge about internals ("The session's CheckpointSaverHook, if it has
    # one (Estimator's does unless checkpoints are off), saves it …"); and ProgressHook's
    # last line gave an ETA for the run that was stopping.
    steps = {"save_checkpoints_steps": 1000} if checkpoints else {"save_checkpoints_secs": None}
    config = estimator.RunConfig(**steps)
    est = estimator.Estimator(_model_fn, str(tmp_path), config=config, params={"lr": 0.05})
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        preemption = hooks.PreemptionHook(signals=[signal.SIGUSR1])
        progress_hook = hooks.ProgressHook(every_n_steps=100, total_steps=50)
        est.train(_input_fn(), max_steps=50, hooks=[SignalAtStep(3), preemption, progress_hook])
    finally:
        signal.signal(signal.SIGUSR1, previous)
    lines = [line for line in tf_log_lines if line.startswith("SIGUSR1 received")]
    assert lines == ["SIGUSR1 received: stopping after step 3"], tf_log_lines
    latest = tf.train.latest_checkpoint(str(tmp_path))
    assert latest.endswith("model.ckpt-3") if checkpoints else latest is None, latest
    last = [line for line in tf_log_lines if line.startswith("step ")][-1]
    assert last.startswith("step 3/50 (6%)") and last.endswith(", stopped"), last


def test_preemption_hook_resuming_without_checkpoints_claims_no_save(tmp_path, tf_log_lines):
    # Restoring model.ckpt-2 lists it among the saver's checkpoints, though nothing is saved:
    # the line claims no save (the hook cannot tell), and none happens.
    estimator.Estimator(_model_fn, str(tmp_path), params={"lr": 0.05}).train(
        _input_fn(), max_steps=2
    )
    config = estimator.RunConfig(save_checkpoints_secs=None)
    est = estimator.Estimator(_model_fn, str(tmp_path), config=config, params={"lr": 0.05})
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        preemption = hooks.PreemptionHook(signals=[signal.SIGUSR1])
        est.train(_input_fn(), max_steps=50, hooks=[SignalAtStep(3), preemption])
    finally:
        signal.signal(signal.SIGUSR1, previous)
    lines = [line for line in tf_log_lines if line.startswith("SIGUSR1 received")]
    assert lines == ["SIGUSR1 received: stopping after step 5"], tf_log_lines
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-2")


def test_progress_hook_prints_one_line_per_interval_when_other_workers_move_the_step(log_lines):
    # On a cluster each run moves the shared global step by this worker's step plus the
    # others': a predicted crossing printed at 1698 and again at 1701.
    moves = np.random.RandomState(0).randint(1, 4, size=3000)  # 1 to 3 steps per run
    with tf.Graph().as_default():
        step = tf.train.get_or_create_global_step()
        tf.add_to_collection(tf.GraphKeys.LOSSES, tf.constant(1.0))
        move = tf.placeholder(tf.int64, [])
        train_op = tf.assign_add(step, move)
        stop = tf.train.StopAtStepHook(last_step=3000)
        hook = hooks.ProgressHook(every_n_steps=100)
        with tf.train.MonitoredSession(hooks=[hook, stop]) as sess:
            for n in moves:
                if sess.should_stop():
                    break
                sess.run(train_op, {move: n})
    steps = [int(line.split()[1].rstrip(",")) for line in log_lines if line.startswith("step ")]
    intervals = [s // 100 for s in steps[1:]]  # the first line is the first step's
    assert intervals == sorted(set(intervals)), steps  # never two lines in one interval
    assert len(intervals) >= 28, steps


def test_progress_hook_shows_a_loss_of_one_element(log_lines):
    # A [1]-shaped loss (reduce_sum(..., keepdims=True)) is one number: shown, not refused.
    def loss_of_shape_1():
        return tf.reduce_sum(tf.square(tf.get_variable("v", [2])), keepdims=True)

    with tf.Graph().as_default():
        _, train_op, _ = _graph()
        hook = hooks.ProgressHook(every_n_steps=2, total_steps=2, loss=loss_of_shape_1())
        with tf.train.MonitoredTrainingSession(hooks=[hook], log_step_count_steps=None) as sess:
            sess.run(train_op)
            sess.run(train_op)
    assert [line for line in log_lines if line.startswith("step 2/2") and "loss = " in line]


def test_progress_hook_shows_100_percent_only_at_the_last_step(log_lines):
    _run_loop([hooks.ProgressHook(every_n_steps=199, total_steps=200)], steps=200)
    steps = [line.split(",")[0] for line in log_lines if line.startswith("step ")]
    assert steps == ["step 1/200 (0%)", "step 199/200 (99%)", "step 200/200 (100%)"]


# ---------------------------------------------------------------- early_stopping


def _write_eval_events(eval_dir, values, metric="loss"):
    with tf.Graph().as_default():
        writer = tf.summary.FileWriter(eval_dir)
        for step, value in values:
            summary = tf.Summary(value=[tf.Summary.Value(tag=metric, simple_value=value)])
            writer.add_summary(summary, step)
        writer.close()


def _evaluated_estimator(model_dir, values, metric="loss"):
    """An Estimator whose eval directory holds ``values`` of ``metric``."""
    est = estimator.Estimator(_model_fn, str(model_dir), params={"lr": 0.0})
    _write_eval_events(est.eval_dir(), values, metric)
    return est


def test_early_stopping_in_monitored_session_and_checks(tmp_path, log_lines):
    est = estimator.Estimator(_model_fn, str(tmp_path / "model"), params={"lr": 0.0})
    hook = hooks.early_stopping(est, "loss", patience_steps=20, run_every_steps=1)
    assert os.path.isdir(est.eval_dir())  # created so the hook can ever fire
    assert _run_loop([hook], steps=3) == 3  # no eval results yet: goes on
    _write_eval_events(est.eval_dir(), [(0, 1.0), (10, 1.0), (20, 1.0), (30, 1.0)])
    assert _run_loop([hooks.early_stopping(est, patience_steps=20, run_every_steps=1)]) == 1
    tiny = _evaluated_estimator(tmp_path / "tiny", [(0, 1.0), (10, 0.9995), (20, 0.999)])
    # Tiny but steady improvements keep training going...
    hook = hooks.early_stopping(tiny, patience_steps=15, run_every_steps=1)
    assert _run_loop([hook], steps=5) == 5
    # ...unless min_delta says they are too small to count.
    hook = hooks.early_stopping(tiny, patience_steps=15, min_delta=0.01, run_every_steps=1)
    assert _run_loop([hook], steps=5) == 1
    with pytest.raises(ValueError, match=r"'accuracy'.*Available: \['loss'\]"):
        _run_loop([hooks.early_stopping(est, "accuracy", patience_steps=5, run_every_steps=1)])


def test_early_stopping_argument_checks(tmp_path):
    est = estimator.Estimator(_model_fn, str(tmp_path), params={"lr": 0.0})
    with pytest.raises(TypeError, match="estimator"):
        hooks.early_stopping("not an estimator", patience_steps=1)
    with pytest.raises(ValueError, match="mode"):
        hooks.early_stopping(est, mode="up", patience_steps=1)
    with pytest.raises(ValueError, match="min_delta"):
        hooks.early_stopping(est, min_delta=-1, patience_steps=1)
    with pytest.raises(ValueError, match="patience_steps"):
        hooks.early_stopping(est, patience_steps=0)
    # The official hook's SecondOrStepTimer named its own every_secs / every_steps.
    with pytest.raises(ValueError, match=r"`run_every_secs` must be .*run_every_steps.*None"):
        hooks.early_stopping(est, patience_steps=1, run_every_secs=None)


def _train_and_evaluate(model_dir, lr, max_steps, monitor="loss", **kw):
    config = estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=10)
    est = estimator.Estimator(_model_fn, config=config, params={"lr": lr})
    hook = hooks.early_stopping(est, monitor, patience_steps=20, run_every_steps=5, **kw)
    estimator.train_and_evaluate(
        est,
        estimator.TrainSpec(_input_fn(), max_steps=max_steps, hooks=[hook]),
        estimator.EvalSpec(
            _input_fn(repeat=False), steps=None, throttle_secs=0, start_delay_secs=0
        ),
    )
    return est.get_variable_value("global_step")


@pytest.mark.slow
def test_early_stopping_in_train_and_evaluate(tmp_path):
    # A plateau (learning rate 0): stops long before max_steps.
    assert _train_and_evaluate(str(tmp_path / "flat"), lr=0.0, max_steps=1000) < 100
    # A steadily improving model: never stops early.
    assert _train_and_evaluate(str(tmp_path / "improving"), lr=0.01, max_steps=60) == 60


def test_early_stopping_auto_mode_picks_direction(tmp_path):
    assert higher_is_better("accuracy", "auto", "test") is True
    assert higher_is_better("auc_precision_recall", "auto", "test") is True
    assert higher_is_better("loss", "auto", "test") is False
    assert higher_is_better("average_loss", "auto", "test") is False
    assert higher_is_better("loss", "max", "test") is True


@pytest.mark.parametrize(
    "monitor, higher",
    [
        ("mape", False),
        ("smape", False),
        ("wmape", False),
        ("heatmap_mse", False),
        ("layer2_mse", False),
        ("mean_absolute_percentage_error", False),
        ("eval/accuracy_error", False),
        ("rmse", False),
        ("map", True),
        ("map@10", True),
        ("f_1", True),
        ("f1_score", True),
        ("precision@5", True),
        ("recall_at_5", True),
        ("head-1/accuracy", True),
        ("top_5", True),
        ("r2", True),
        ("auroc", True),
        ("auprc", True),
        ("r_squared", True),
        ("bleu", True),
        ("rouge_l", True),
        ("ssim", True),
        ("dice", True),
        ("mcc", True),
        ("kappa", True),
        ("mrr", True),
        ("hits_at_10", True),
        ("val_psnr", True),
    ],
)
def test_early_stopping_auto_mode_matches_whole_words(monitor, higher):
    # "map" (mean average precision) and "r2" were matched as substrings, so MAPE-like errors
    # and names like "heatmap_mse" or "layer2_mse" were maximised.
    assert higher_is_better(monitor, "auto", "test") is higher


def test_auto_mode_warns_when_it_guesses_the_direction_of_an_unknown_metric():
    # At INFO, hidden at TensorFlow's default level, the guess went unseen: a best_exporter
    # watching a higher-is-better metric it did not know kept the worst model.
    with captured_tf_log(logging.WARNING) as warnings:
        assert higher_is_better("widget_score", "auto", "best_exporter") is False
        assert higher_is_better("loss", "auto", "best_exporter") is False
    assert len(warnings) == 1 and '"widget_score"' in warnings[0]
    assert 'pass mode="max" if higher is better' in warnings[0]


def test_early_stopping_auto_mode_keeps_training_while_mape_falls(tmp_path, log_lines):
    # With "mape" taken as higher-is-better, the hook stopped at once on an improving MAPE.
    est = estimator.Estimator(_model_fn, str(tmp_path), params={"lr": 0.0})
    _write_eval_events(est.eval_dir(), [(100, 40.0), (200, 30.0), (300, 20.0)], metric="mape")
    hook = hooks.early_stopping(est, "mape", patience_steps=200, run_every_steps=1)
    assert _run_loop([hook], steps=5) == 5
    _write_eval_events(est.eval_dir(), [(400, 25.0), (500, 26.0), (600, 27.0)], metric="mape")
    hook = hooks.early_stopping(est, "mape", patience_steps=200, run_every_steps=1)
    assert _run_loop([hook], steps=5) == 1


def test_early_stopping_with_single_machine_mirrored_strategy(tmp_path):
    # The official factory treats any train_distribute as multi-worker and rejects
    # run_every_secs; a one-machine MirroredStrategy must get the ordinary chief hook.
    strategy = tf2.distribute.MirroredStrategy(["/cpu:0"])
    config = estimator.RunConfig(model_dir=str(tmp_path), train_distribute=strategy)
    est = estimator.Estimator(_model_fn, config=config, params={"lr": 0.0})
    hook = hooks.early_stopping(est, patience_steps=5, run_every_secs=1)
    _write_eval_events(est.eval_dir(), [(0, 1.0), (10, 1.0)])
    est.train(_input_fn(), max_steps=200, hooks=[hook])
    assert est.get_variable_value("global_step") < 200


def test_early_stopping_added_when_resuming_a_model_dir(tmp_path):
    # The official hook saves its stop flag with the model, so resuming a model_dir trained
    # without it failed with "Key signal_early_stopping/STOP not found in checkpoint".
    est = estimator.Estimator(_model_fn, model_dir=str(tmp_path), params={"lr": 0.01})
    est.train(_input_fn(), max_steps=5)
    hook = hooks.early_stopping(est, patience_steps=5, run_every_steps=1)
    _write_eval_events(est.eval_dir(), [(0, 1.0), (5, 1.0)])
    est.train(_input_fn(), max_steps=200, hooks=[hook])
    assert 5 < est.get_variable_value("global_step") < 200
    # The flag did not go into the checkpoint, so a plain resume still works too.
    names = [name for name, _ in tf.train.list_variables(str(tmp_path))]
    assert not any("signal_early_stopping" in name for name in names)
    est.train(_input_fn(), steps=2)


def test_early_stopping_with_a_scaffold_that_builds_its_own_local_init_op(tmp_path):
    # TF1 model_fns often build Scaffold(local_init_op=...) themselves. That op exists before
    # the hooks' begin(), so a STOP flag added there as a local variable stayed uninitialised
    # and the session failed with "Init operations did not make model ready".
    def model_fn(features, labels, mode, params):
        spec = _model_fn(features, labels, mode, params)
        local_init_op = tf.group(tf.local_variables_initializer(), tf.tables_initializer())
        return spec._replace(scaffold=tf.train.Scaffold(local_init_op=local_init_op))

    est = estimator.Estimator(model_fn, model_dir=str(tmp_path), params={"lr": 0.01})
    hook = hooks.early_stopping(est, patience_steps=5, run_every_steps=1)
    _write_eval_events(est.eval_dir(), [(0, 1.0), (5, 1.0)])
    est.train(_input_fn(), max_steps=200, hooks=[hook])
    assert 0 < est.get_variable_value("global_step") < 200  # trained, then stopped early
    names = [name for name, _ in tf.train.list_variables(str(tmp_path))]
    assert not any("signal_early_stopping" in name for name in names)


def test_early_stopping_never_takes_nan_as_the_best_value(tmp_path):
    # A NaN first evaluation was the best value nothing beat: an improving run stopped.
    nan = float("nan")
    est = _evaluated_estimator(tmp_path / "a", [(0, nan), (10, 0.9), (20, 0.8), (30, 0.7)])
    assert _run_loop([hooks.early_stopping(est, patience_steps=15, run_every_steps=1)]) == 30
    # Nothing but NaN for longer than the patience stops it, as no improvement would.
    est = _evaluated_estimator(tmp_path / "b", [(0, nan), (10, nan), (20, nan)])
    with captured_tf_log(logging.WARNING) as warnings:
        assert _run_loop([hooks.early_stopping(est, patience_steps=15, run_every_steps=1)]) == 1
    assert ['"loss" is NaN at step 20' in line for line in warnings] == [True]  # said once


def test_early_stopping_says_it_had_no_evaluation_to_stop_on(tmp_path):
    # est.train with the hook and no evaluation anywhere: it never fired, without a word.
    est = estimator.Estimator(_model_fn, str(tmp_path), params={"lr": 0.0})
    with captured_tf_log(logging.WARNING) as warnings:  # fewer steps than the patience
        assert _run_loop([hooks.early_stopping(est, patience_steps=40, run_every_steps=1)]) == 30
    assert not warnings
    with captured_tf_log(logging.WARNING) as warnings:
        assert _run_loop([hooks.early_stopping(est, patience_steps=20, run_every_steps=1)]) == 30
    assert len(warnings) == 1 and "30 steps trained, and no evaluation in" in warnings[0]


def test_early_stopping_skips_evaluations_from_before_the_metric_existed(tmp_path):
    # A metric added when resuming made the model_dir unusable: "'accuracy' is not among the
    # eval metrics … at step 100", raised inside the running hook.
    est = _evaluated_estimator(tmp_path, [(100, 1.0), (200, 0.9), (300, 0.8), (400, 0.7)])
    _write_eval_events(est.eval_dir(), [(300, 0.6), (400, 0.5)], metric="accuracy")
    hook = hooks.early_stopping(est, "accuracy", patience_steps=150, run_every_steps=1)
    assert _run_loop([hook], steps=5) == 5  # accuracy peaked at 300: 100 steps < patience
    hook = hooks.early_stopping(est, "accuracy", patience_steps=100, run_every_steps=1)
    assert _run_loop([hook], steps=5) == 1


def test_early_stopping_names_a_monitor_that_later_evaluations_lack(tmp_path):
    # A metric renamed when resuming ("AUC" -> "auc"): the old evaluations alone were read,
    # so the patience never ran out, without a word.
    est = _evaluated_estimator(tmp_path, [(100, 0.6), (200, 0.7)], metric="AUC")
    _write_eval_events(est.eval_dir(), [(300, 0.7), (400, 0.7), (900, 0.7)], metric="auc")
    hook = hooks.early_stopping(est, "AUC", patience_steps=500, run_every_steps=1)
    with pytest.raises(ValueError, match=r"'AUC' is not among the eval metrics.*900.*\['auc'\]"):
        _run_loop([hook], steps=5)


def test_early_stopping_reads_tf2_scalar_summaries(tmp_path):
    # tf.summary.scalar (TF2, Keras' TensorBoard callback) stores a tensor, not a
    # simple_value: the hook said "no eval results yet" and never stopped.
    est = estimator.Estimator(_model_fn, str(tmp_path), params={"lr": 0.0})
    writer = tf2.summary.create_file_writer(est.eval_dir())
    with writer.as_default():
        for step in (0, 10, 20, 30):
            tf2.summary.scalar("loss", 1.0, step=step)
            tf2.summary.text("note", "not a number", step=step)
    writer.close()
    assert metrics_by_step(est.eval_dir()) == {step: {"loss": 1.0} for step in (0, 10, 20, 30)}
    assert _run_loop([hooks.early_stopping(est, patience_steps=20, run_every_steps=1)]) == 1


def test_a_damaged_eval_record_is_said_once_a_torn_last_one_is_not(tmp_path):
    # A bit flipped inside an events file ended its reading in silence (a DEBUG line): plot,
    # inspect and early stopping saw fewer evaluations.
    writer = tf2.summary.create_file_writer(str(tmp_path / "eval"))
    with writer.as_default():
        for step in range(10):
            tf2.summary.scalar("loss", float(step), step=step)
    writer.close()
    (events,) = (tmp_path / "eval").glob("events.out.tfevents.*")
    data = bytearray(events.read_bytes())
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / events.name).write_bytes(bytes(data[:-5]))  # being appended
    data[len(data) // 2] ^= 0xFF
    events.write_bytes(bytes(data))
    with captured_tf_log(logging.WARNING) as lines:
        for _ in range(2):
            read = metrics_by_step(str(tmp_path / "eval"))
            assert 0 < len(read) < 10
        assert sorted(metrics_by_step(str(tmp_path / "torn"))) == list(range(9))
    assert len(lines) == 1 and lines[0].startswith(f"{events}: corrupted record at"), lines
    assert "the values after it are not read" in lines[0]


def test_early_stopping_on_a_worker_waits_for_the_chiefs_flag(tmp_path, monkeypatch):
    cluster = {"chief": ["localhost:2222"], "worker": ["localhost:2223"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    )
    est = _evaluated_estimator(tmp_path, [(0, 1.0), (10, 1.0), (20, 1.0)])
    assert not est.config.is_chief
    # A chief would stop at once; a worker waits for the flag, which no chief initialises here.
    hook = hooks.early_stopping(est, patience_steps=5, run_every_steps=1)
    assert _run_loop([hook], steps=5) == 5


@pytest.mark.slow
def test_early_stopping_resumes_a_model_dir_under_multi_worker_mirrored_strategy(tmp_path):
    # The official multi-worker hook saved its flag with the model: resuming a model_dir
    # trained without early stopping failed ("Restoring from checkpoint failed … missing"),
    # and the default run_every_secs was refused as if the user had set it.
    proc = run_program(["tests/programs/mwms_early_stopping.py", str(tmp_path)])
    out = proc.stdout
    assert "NO_INTERVAL" in out and "Pass run_every_steps" in out, out
    [steps] = [line.split()[1:] for line in out.splitlines() if line.startswith("STEPS ")]
    before, after = map(int, steps)
    assert before == 10 and 10 < after < 200, out  # resumed, then stopped early
    assert "FLAG_IN_CHECKPOINT no" in out
