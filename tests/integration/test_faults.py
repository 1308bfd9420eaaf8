"""Fault tests: SIGKILL at random moments, preemption, disk faults (all local, bounded in time)."""

from __future__ import annotations

import io
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import ROOT
from tfest_kit._tf import tf

pytestmark = pytest.mark.slow

PROGRAM = str(ROOT / "tests" / "programs" / "crash_train.py")


class _Run:
    """One run of the crash program with its output collected line by line in a thread."""

    def __init__(self, model_dir: str, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, PROGRAM, f"--model_dir={model_dir}", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._new: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._new.put(line)
        self._new.put(None)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def start_step(self):
        found = [
            int(m.group(1)) for m in map(re.compile(r"^START step=(\d+)").match, self.lines) if m
        ]
        return found[0] if found else None

    def last_step(self):
        steps = [int(line.split()[1]) for line in self.lines if line.startswith("STEP ")]
        return steps[-1] if steps else None

    def wait_until(self, predicate, timeout: float) -> bool:
        """Waits until ``predicate(self)`` holds, the program ends, or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            try:
                if self._new.get(timeout=max(0.0, deadline - time.monotonic())) is None:
                    return predicate(self)
            except queue.Empty:
                return False
        return True

    def kill(self, signum: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signum)

    def finish(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.kill()
                self.proc.wait(10)
            self.wait_until(lambda r: False, 5)  # drain the last lines


def _listed_checkpoints(model_dir: str) -> list[str]:
    state = tf.train.get_checkpoint_state(model_dir)
    return list(state.all_model_checkpoint_paths) if state else []


def _step_of(path: str) -> int:
    return int(path.rsplit("-", 1)[1])


def _restore_all(model_dir: str, asynchronous: bool = False) -> list[int]:
    """Reads every tensor of every checkpoint the `checkpoint` file lists; returns their steps.

    With ``asynchronous`` (parameter-server training) other workers may advance the global
    step between the chief naming a checkpoint and saving it, so it may be ahead of the name.
    """
    steps = []
    for path in _listed_checkpoints(model_dir):
        reader = tf.train.load_checkpoint(path)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
        saved = reader.get_tensor("global_step")
        assert saved >= _step_of(path) if asynchronous else saved == _step_of(path), path
        steps.append(_step_of(path))
    return steps


SAVE_STEPS = 10
MAX_STEPS = 300


def test_sigkill_at_random_moments_then_resume(tmp_path):
    model_dir = str(tmp_path / "model")
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    args = [f"--max_steps={MAX_STEPS}", f"--save_steps={SAVE_STEPS}", "--step_sleep=0.005"]
    kills, reached, log = 0, None, [f"seed={seed}"]
    while kills < 3:
        latest = tf.train.latest_checkpoint(model_dir)
        run = _Run(model_dir, *args)
        try:
            if kills == 1:
                # One kill lands during start-up: import, graph building or restoring.
                run.wait_until(lambda r: False, rng.uniform(0.5, 4.0))
            else:
                # The others at a random moment after some progress, i.e. anywhere relative
                # to the checkpoint writes (before, during or after one).
                target = rng.randint(1, 3 * SAVE_STEPS)
                assert run.wait_until(
                    lambda r, t=target: r.start_step() is not None
                    and (r.last_step() or 0) >= r.start_step() + t,
                    timeout=120,
                ), run.output
                time.sleep(rng.uniform(0, 0.2))
            assert run.proc.poll() is None, f"finished before kill {kills}:\n{run.output}"
            run.kill()
        finally:
            run.finish(timeout=30)
        kills += 1
        start = run.start_step()
        log.append(f"kill {kills}: latest={latest} start={start} last={run.last_step()}")
        if start is not None:
            # It resumed from the latest checkpoint, and lost at most one save interval.
            assert start == (_step_of(latest) if latest else 0), "\n".join(log)
            if reached is not None:
                assert start >= reached - SAVE_STEPS, "\n".join(log)
            reached = max(start, run.last_step() or start)
        assert _restore_all(model_dir) == sorted(_restore_all(model_dir)), "\n".join(log)
    latest = tf.train.latest_checkpoint(model_dir)
    run = _Run(model_dir, *args)
    assert run.finish(timeout=180) == 0, run.output
    log.append(f"final: latest={latest} start={run.start_step()} last={run.last_step()}")
    if latest and _step_of(latest) == MAX_STEPS:
        # A fast machine: a killed run had saved the last step, so nothing is left to train.
        assert run.start_step() is None, "\n".join(log)
    else:
        assert run.start_step() >= reached - SAVE_STEPS, "\n".join(log)
    assert f"DONE step={MAX_STEPS}" in run.output, run.output
    steps = _restore_all(model_dir)
    assert steps[-1] == MAX_STEPS and len(steps) >= 2, "\n".join(log)


def test_sigterm_preemption_saves_the_current_step_and_restart_loses_none(tmp_path):
    model_dir = str(tmp_path / "model")
    args = ["--max_steps=150", f"--save_steps={SAVE_STEPS}", "--step_sleep=0.01", "--preemption"]
    run = _Run(model_dir, *args)
    try:
        # A step that is not a multiple of the save interval, so the save must be the hook's.
        assert run.wait_until(lambda r: (r.last_step() or 0) >= 2 * SAVE_STEPS + 3, 120), run.output
        run.kill(signal.SIGTERM)
        status = run.finish(timeout=60)
    finally:
        run.finish(timeout=10)
    assert status == 0, run.output
    preempted = int(re.search(r"PREEMPTED step=(\d+)", run.output).group(1))
    assert preempted == run.last_step(), run.output  # the step in flight was completed
    assert _step_of(tf.train.latest_checkpoint(model_dir)) == preempted
    assert "SIGTERM received" in run.output
    assert preempted in _restore_all(model_dir)

    resumed = _Run(model_dir, *args)
    assert resumed.finish(timeout=120) == 0, resumed.output
    assert resumed.start_step() == preempted, resumed.output
    assert "DONE step=150" in resumed.output


def test_disk_full_during_a_checkpoint_write_keeps_the_previous_one(small_disk):
    disk = small_disk(8)
    model_dir = str(disk / "model")
    args = ["--max_steps=100000", f"--save_steps={SAVE_STEPS}", "--step_sleep=0.01"]
    run = _Run(model_dir, *args)
    try:
        assert run.wait_until(
            lambda r: (r.last_step() or 0) > 2 * SAVE_STEPS
            and tf.train.latest_checkpoint(model_dir),
            120,
        ), run.output
        # Fill the disk: the next checkpoint (or event) write hits ENOSPC.
        with open(disk / "filler", "wb") as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        status = run.finish(timeout=60)
    finally:
        run.finish(timeout=10)
    assert status != 0, run.output
    assert "No space left on device" in run.output
    assert re.search(r"Error: .*" + re.escape(model_dir), run.output), run.output
    before = tf.train.latest_checkpoint(model_dir)
    assert _step_of(before) >= SAVE_STEPS
    assert _restore_all(model_dir)[-1] == _step_of(before)  # intact and restorable

    os.remove(disk / "filler")
    resumed = _Run(model_dir, *args[1:], f"--max_steps={_step_of(before) + 2 * SAVE_STEPS}")
    assert resumed.finish(timeout=120) == 0, resumed.output
    assert resumed.start_step() == _step_of(before)


def _checkpoint_step(model_dir: str) -> int:
    latest = tf.train.latest_checkpoint(model_dir)
    return _step_of(latest) if latest else -1


def _poll(predicate, timeout: float, what: str, output) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{output.getvalue()}"
        time.sleep(0.1)


def test_cluster_worker_and_chief_killed_and_restarted(tmp_path):
    from tfest_kit.cluster import LocalCluster

    model_dir = str(tmp_path / "model")
    stop_file = str(tmp_path / "STOP")
    command = [
        sys.executable,
        str(ROOT / "tests" / "programs" / "cluster_train.py"),
        f"--model_dir={model_dir}",
        "--max_steps=1000000",
        "--step_sleep=0.02",
        f"--stop_file={stop_file}",
        "--preemption",
    ]
    out = io.StringIO()
    env = {"PYTHONPATH": str(ROOT)}
    with LocalCluster(command, workers=1, ps=1, env=env, cwd=str(ROOT), output=out) as local:
        local.start()
        text = out.getvalue
        _poll(
            lambda: "[worker:0] JOINED" in text() and _checkpoint_step(model_dir) >= 20,
            180,
            "the worker to join",
            out,
        )

        # A worker dies and is restarted: it rejoins and the chief never noticed.
        local.signal_task("worker", 0, signal.SIGKILL)
        assert local.wait_task("worker", 0, timeout=30) == -signal.SIGKILL
        local.start_task("worker", 0)
        step = _checkpoint_step(model_dir)
        _poll(lambda: text().count("[worker:0] JOINED") == 2, 180, "the worker to rejoin", out)
        _poll(lambda: _checkpoint_step(model_dir) >= step + 20, 60, "training to go on", out)
        assert local.process("chief", 0).poll() is None

        # The chief dies and is restarted: it restores its last checkpoint and goes on.
        local.signal_task("chief", 0, signal.SIGKILL)
        assert local.wait_task("chief", 0, timeout=30) == -signal.SIGKILL
        last = tf.train.latest_checkpoint(model_dir)
        local.start_task("chief", 0)
        _poll(
            lambda: f"[chief:0] INFO:tensorflow:Restoring parameters from {last}" in text(),
            180,
            f"the chief to restore {last}",
            out,
        )
        _poll(lambda: _checkpoint_step(model_dir) >= _step_of(last) + 20, 60, "new saves", out)

        # A worker preempted (SIGTERM) says so. Before: it printed the newest evaluation as
        # "Final eval metrics", as if training had ended.
        local.signal_task("worker", 0, signal.SIGTERM)
        assert local.wait_task("worker", 0, timeout=60) == 0, out.getvalue()
        worker = [x for x in text().splitlines() if x.startswith("[worker:0]")]
        assert [x for x in worker if "Training interrupted at global step" in x], worker[-20:]
        assert not [x for x in worker if "Final eval metrics" in x], worker[-20:]

        open(stop_file, "w").close()
        assert local.wait_task("chief", 0, timeout=60) == 0, out.getvalue()
    assert "RESULT" in "\n".join(x for x in text().splitlines() if x.startswith("[chief:0]"))
    steps = _restore_all(model_dir, asynchronous=True)
    assert steps[-1] >= _step_of(last) + 20
