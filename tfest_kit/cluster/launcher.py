"""``LocalCluster``: each task of a ``TF_CONFIG`` cluster as a local process; its command line.

TensorFlow's task servers listen on every interface and run what any client sends: use a
trusted network.
"""

import argparse
import contextlib
import ctypes
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any, Optional

from tfest_kit.cluster import cluster_spec, tf_config

__all__ = ["LocalCluster", "main"]

Task = tuple[str, int]
# Above train_and_evaluate's default throttle_secs (600): the evaluator may sleep that long
# before it evaluates the final checkpoint and makes the final export.
_EVALUATOR_GRACE_SECS = 660.0


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):  # not Linux: stop() still cleans up
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def _name(task: Task) -> str:
    return f"{task[0]}:{task[1]}"


class _Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class LocalCluster:
    """A chief, workers, parameter servers and an optional evaluator as local processes.

    Args:
      command: the program every task runs, e.g. ``["python", "my_trainer.py", "--x=1"]``.
      workers, ps: the numbers of non-chief workers and of parameter servers.
      evaluator: also run an evaluator task (outside the cluster, as TensorFlow expects).
      env, cwd: extra environment variables and the working directory of every task.
      output: stream for the prefixed output lines (default ``sys.stdout``).

    Raises:
      ValueError: for an empty command, bad counts or a cluster that fails validation.

    Example:

        with LocalCluster(["python", "my_trainer.py"], workers=1, ps=1, evaluator=True) as c:
            status = c.run(timeout=600)
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        workers: int = 0,
        ps: int = 0,
        evaluator: bool = False,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        output: Optional[IO[str]] = None,
    ) -> None:
        if isinstance(command, str) or not command:
            raise ValueError(
                "`command` must be a non-empty list of program arguments, e.g. "
                f"['python', 'my_trainer.py']. Got: {command!r}"
            )
        self.command = [str(arg) for arg in command]
        self.cluster = cluster_spec(workers=workers, ps=ps)
        jobs = self.cluster.items()  # chief, worker, ps: cluster_spec's order
        self.tasks: list[Task] = [(job, i) for job, hosts in jobs for i in range(len(hosts))]
        if evaluator:
            self.tasks.append(("evaluator", 0))
        self._env, self._cwd, self._output = dict(env or {}), cwd, output
        self._lock = threading.Lock()
        self._procs, self._pumps = {}, {}  # by task: its latest process, its output pump thread

    def tf_config(self, task_type: str, index: int = 0) -> dict:
        """Returns the ``TF_CONFIG`` dict of one task."""
        return tf_config(self.cluster, task_type, index)

    def start_task(self, task_type: str, index: int = 0) -> subprocess.Popen:
        """Starts (or restarts, once it has exited) one task; returns its process."""
        task = (task_type, index)
        env = {**os.environ, **self._env, "PYTHONUNBUFFERED": "1"}
        env["TF_CONFIG"] = json.dumps(self.tf_config(task_type, index))
        pipes = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        die = _die_with_parent if sys.platform.startswith("linux") else None
        self._procs[task] = proc = subprocess.Popen(
            self.command, env=env, cwd=self._cwd, start_new_session=True, preexec_fn=die, **pipes
        )
        self._pumps[task] = threading.Thread(target=self._pump, args=(task, proc), daemon=True)
        self._pumps[task].start()
        return proc

    def _pump(self, task: Task, proc: subprocess.Popen) -> None:
        for raw in iter(proc.stdout.readline, b""):
            self._write(f"[{_name(task)}] " + raw.decode("utf-8", errors="replace").rstrip())
        proc.stdout.close()

    def _write(self, line: str) -> None:
        stream = self._output or sys.stdout
        # A closed output must not stop a pump: the task would block on its full pipe.
        with self._lock, contextlib.suppress(OSError, ValueError):
            stream.write(line + "\n")
            stream.flush()

    def process(self, task_type: str, index: int = 0) -> Optional[subprocess.Popen]:
        """The latest process of a task, or None if it was never started."""
        return self._procs.get((task_type, index))

    def signal_task(self, task_type: str, index: int = 0, signum: int = signal.SIGKILL) -> None:
        """Sends ``signum`` to the task's whole process group (no-op if it has exited)."""
        if (proc := self.process(task_type, index)) is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signum)

    def wait_task(
        self, task_type: str, index: int = 0, timeout: Optional[float] = None
    ) -> Optional[int]:
        """Waits for a task to exit; returns its exit status, or None on timeout."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            status = self._procs[(task_type, index)].wait(timeout)
            self._pumps[(task_type, index)].join(5)  # its last lines
            return status
        return None

    def start(self) -> None:
        """Starts every task, parameter servers first."""
        for task in sorted(self.tasks, key=lambda t: t[0] != "ps"):
            self.start_task(*task)

    def stop(self, grace_secs: float = 5.0) -> None:
        """Stops every task: SIGTERM to each process group, SIGKILL after ``grace_secs``.

        The parameter servers go last: a chief saving a checkpoint on SIGTERM needs them.
        """
        running = [(t, p) for t, p in self._procs.items() if p.poll() is None]
        for is_ps in (False, True):
            group = [(t, p) for t, p in running if (t[0] == "ps") == is_ps]
            for task, _ in group:
                self.signal_task(*task, signal.SIGTERM)
            deadline = time.monotonic() + grace_secs
            for task, proc in group:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self._write(f"[launcher] {_name(task)} ignored SIGTERM {grace_secs}s: SIGKILL")
                    self.signal_task(*task, signal.SIGKILL)
                    proc.wait(10)
        for proc in self._procs.values():  # leftovers of a task whose leader already exited
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for pump in self._pumps.values():
            pump.join(5)

    def _watch(self, job: str, secs: Optional[float]) -> tuple[Optional[int], list[str]]:
        """Waits up to ``secs`` for ``job``'s tasks, naming each failed task once. Returns the exit
        status after a lost ps or a failed chief or worker, else None and ``job``'s tasks left."""
        deadline = None if secs is None else time.monotonic() + secs
        while True:
            for task, proc in self._procs.items():
                code = proc.poll()
                if code is None or task in self._failed or (code == 0 and task[0] != "ps"):
                    continue
                self._failed.add(task)
                self._pumps[task].join(5)  # its last lines (a traceback) first
                how = f"exited with {code}" if code >= 0 else f"was killed by signal {-code}"
                if task[0] != "evaluator":
                    self._write(f"[launcher] {_name(task)} {how}; stopping every task")
                    return 128 - code if code < 0 else code or 1, []
                self._write(f"[launcher] {_name(task)} {how}; training goes on, then exit 1")
            pending = [t for t in self.tasks if t[0] == job and self._procs[t].poll() is None]
            if not pending or (deadline is not None and time.monotonic() > deadline):
                for task in (t for t in self.tasks if t[0] == job and t not in pending):
                    self._pumps[task].join(5)  # their last lines before the launcher's next
                return None, [_name(t) for t in pending]
            time.sleep(0.1)

    def run(
        self,
        *,
        timeout: Optional[float] = None,
        worker_grace_secs: float = 120.0,
        evaluator_grace_secs: float = _EVALUATOR_GRACE_SECS,
    ) -> int:
        """Starts the cluster, waits for the chief and returns the cluster's exit status.

        Each failed task is named in one ``[launcher]`` line; a lost ps, a failed chief or worker,
        or ``timeout`` stops every task at once. After the chief's success, workers and the
        evaluator get ``worker_grace_secs`` / ``evaluator_grace_secs`` to finish, then all stop.

        Returns:
          0; else the status of the task that stopped the cluster (``128 + N`` for signal N),
          124 on timeout, or 1 after a failed evaluator or a task stopped after its grace.
        """
        self._failed: set[Task] = set()
        try:
            self.start()
            graces = (("worker", worker_grace_secs), ("evaluator", evaluator_grace_secs))
            for job, secs in (("chief", timeout), *graces):
                evaluator = self._procs.get(("evaluator", 0))
                if job == "evaluator" and evaluator and evaluator.poll() is None:  # may be silent
                    self._write(f"[launcher] waiting up to {secs}s for the evaluator's last eval")
                status, left = self._watch(job, secs)
                if status is not None:
                    return status
                if left and job == "chief":
                    self._write(f"[launcher] the chief did not finish within {timeout}s; stopping")
                    return 124
                if left:  # the evaluator's final evaluation may wait throttle_secs
                    self._write(
                        f"[launcher] {', '.join(left)} still running {secs}s after the chief "
                        f"finished: stopping, exit 1 (more time: --{job}-grace > throttle_secs)"
                    )
                    self._failed.update(task for task in self.tasks if _name(task) in left)
            self._write("[launcher] training done; stopping the parameter servers")
            return 1 if self._failed else 0
        finally:
            self.stop()

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _seconds(text: str) -> float:
    """A number of seconds >= 0 from the command line."""
    value = float(text)  # a ValueError: argparse says "invalid _seconds value"
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0. Got: {text}")
    return value


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parses the command line, runs the cluster and returns its exit status (see ``run``).

    Example:

        status = main(["--workers", "1", "--ps", "1", "--", "python", "my_trainer.py"])
    """
    parser = argparse.ArgumentParser(
        prog="python -m tfest_kit.cluster",
        description="Run a program that trains through train_and_evaluate as a local TF_CONFIG "
        "cluster on loopback ports; a task that fails is named, and the exit status is not 0.",
    )
    parser.add_argument("--chief", type=int, default=1, choices=[1], help="number of chiefs")
    parser.add_argument("--workers", type=int, default=0, help="number of non-chief workers")
    parser.add_argument("--ps", type=int, default=0, help="number of parameter servers")
    parser.add_argument("--evaluator", action="store_true", help="also run an evaluator task")
    parser.add_argument("--timeout", type=_seconds, help="seconds the chief may run")
    parser.add_argument(
        "--worker-grace", type=_seconds, default=120.0, help="seconds workers may outlive the chief"
    )
    parser.add_argument(
        "--evaluator-grace",
        type=_seconds,
        default=_EVALUATOR_GRACE_SECS,
        help="seconds the evaluator may run after the chief finished, for its final "
        "evaluation; keep it above the program's throttle_secs (default: %(default)s)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS…]")
    args = parser.parse_args(argv)
    if not (command := args.command[1:] if args.command[:1] == ["--"] else args.command):
        parser.error("give the program to run after `--`, e.g. -- python my_trainer.py")
    if args.timeout == 0:
        parser.error("--timeout 0 would stop the chief at once: give seconds > 0, or leave it out")
    try:
        local = LocalCluster(command, workers=args.workers, ps=args.ps, evaluator=args.evaluator)
    except ValueError as e:
        parser.error(str(e))
    if shutil.which(command[0]) is None:  # each task's Popen would raise FileNotFoundError
        parser.error(f"{command[0]!r} is not a program on PATH nor an executable file")
    for task in local.tasks:
        local._write(f"[launcher] {_name(task)} TF_CONFIG={json.dumps(local.tf_config(*task))}")

    def interrupt(signum: int, frame: Any) -> None:
        for s in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the clean-up
            signal.signal(s, signal.SIG_IGN)
        raise _Interrupted(signum)

    graces = dict(worker_grace_secs=args.worker_grace, evaluator_grace_secs=args.evaluator_grace)
    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return local.run(timeout=args.timeout, **graces)
    except _Interrupted as e:
        local._write(f"[launcher] {e}: stopping every task")
        local.stop()
        return 128 + e.signum
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
