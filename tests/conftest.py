"""Shared test set-up: CPU only, quiet TensorFlow, helpers for subprocess programs."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["CUDA_VISIBLE_DEVICES"] = "-1"


def bfloat16_is_emulated() -> bool:
    """oneDNN off, or a CPU without bfloat16 instructions: bfloat16 runs would only be slow."""
    if os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip().lower() in ("0", "false"):
        return True
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            words = set(cpuinfo.read().split())
    except OSError:
        return False
    return not {"avx512_bf16", "amx_bf16", "avx_ne_convert"} & words


def run_program(args, *, timeout=300, env=None, cwd=None, check_exit=0):
    """Runs ``python ARGS…`` from the project root; on a wrong exit code fails with all output.

    Returns the ``CompletedProcess`` with ``stdout`` and ``stderr`` as text.
    """
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else [])
    )
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=cwd or ROOT,
        env=full_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check_exit is not None and proc.returncode != check_exit:
        pytest.fail(
            f"`python {' '.join(map(str, args))}` exited {proc.returncode}, expected {check_exit}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
    return proc


def run_recipe_cases(recipe: str, cases: list, *, timeout=300) -> list:
    """Runs ``python -m recipes.RECIPE ARGS…`` once per case, importing the recipe only once.

    Each case is a list of arguments or a dict ``{"args": [...], "env": {...}, "cwd": ...}``;
    its run is a process forked after the import (``tests/recipes/recipe_cases.py``), so a
    test of many command-line errors pays TensorFlow's import once. Returns one
    ``CompletedProcess`` (``returncode``, ``stdout``, ``stderr``) per case, in order.
    """
    cases = [c if isinstance(c, dict) else {"args": c} for c in cases]
    cases = [{**c, "cwd": str(c["cwd"]) if c.get("cwd") else None} for c in cases]
    with tempfile.TemporaryDirectory() as out_dir:
        script = str(ROOT / "tests" / "recipes" / "recipe_cases.py")
        run_program([script, recipe, json.dumps(cases), out_dir], timeout=timeout)
        out = Path(out_dir)
        return [
            subprocess.CompletedProcess(
                ["-m", f"recipes.{recipe}", *case["args"]],
                int((out / f"{i}.status").read_text()),
                (out / f"{i}.out").read_text(),
                (out / f"{i}.err").read_text(),
            )
            for i, case in enumerate(cases)
        ]


def write_module(path, text) -> None:
    """Writes ``text`` (dedented) to ``path``, creating its directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


@contextlib.contextmanager
def on_sys_path(*dirs):
    """``dirs`` first on ``sys.path`` for the block: the legacy scope changes how user modules
    run, never where they are found, so they must be on sys.path as run() puts them there."""
    sys.path[:0] = [str(d) for d in dirs]
    try:
        yield
    finally:
        for d in dirs:
            sys.path.remove(str(d))


def interrupt_program(args, marker: str, *, env=None, timeout=120):
    """Runs ``python ARGS…``, sends Ctrl-C (SIGINT) once a stderr line holds ``marker``.

    Returns ``(returncode, stdout, stderr)``, stderr whole (the lines read before the signal
    too).
    """
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if marker in line:
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    return proc.returncode, out, "".join(seen) + err


@pytest.fixture(autouse=True)
def _temporary_files_under_pytest(tmp_path_factory, monkeypatch):
    """Temporary files of the code under test, and of the programs it starts, go under pytest's
    own temporary directory (pruned to the last three runs) instead of piling up in /tmp.

    A recipe without ``--model_dir`` keeps its model in a fresh temporary directory for the
    user to inspect, and a benchmark case trains into one: without this, every run of the
    suite left two such directories in /tmp.
    """
    path = str(tmp_path_factory.mktemp("tmp"))
    monkeypatch.setenv("TMPDIR", path)  # programs started with run_program
    monkeypatch.setattr(tempfile, "tempdir", path)  # this process: tempfile caches its choice


@pytest.fixture
def small_disk(tmp_path):
    """``small_disk(megabytes)``: a fresh tmpfs of that size, or a skip where mounting is not
    allowed (not root, no CAP_SYS_ADMIN); unmounted after the test."""
    mounted = []

    def mount(megabytes: int) -> Path:
        mount_point = tmp_path / f"disk{len(mounted)}"
        mount_point.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs here: {proc.stderr.strip()}")
        mounted.append(mount_point)
        return mount_point

    yield mount
    for mount_point in mounted:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.fixture
def model_dir(tmp_path):
    """A fresh Estimator model_dir under pytest's tmp_path."""
    path = tmp_path / "model"
    return str(path)


@contextlib.contextmanager
def captured_tf_log(level=logging.INFO):
    """Collects the messages of TensorFlow's logger (at ``level`` and above) into a list."""
    from tfest_kit._tf import tf2

    lines = []

    class _Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logger = tf2.get_logger()
    handler, previous = _Collect(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


@pytest.fixture
def tf_thread_pools_made():
    """Runs an op, so that ``cpu_replicas`` finds the test process's thread pools made.

    It then leaves them be (with a warning), instead of giving every later test in the
    process one thread per op.
    """
    from tfest_kit._tf import tf2

    tf2.constant(1.0) + 1.0


@pytest.fixture
def tf_log_lines():
    """The messages TensorFlow's logger prints during the test, as a list of strings."""
    with captured_tf_log() as lines:
        yield lines
