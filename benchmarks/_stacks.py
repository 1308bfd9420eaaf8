"""The TensorFlow stacks a benchmark run measures: each one's interpreter and versions.

The parent never imports TensorFlow, so versions come from package metadata; another
interpreter is asked in a subprocess that imports this module from this repository.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from typing import Optional

__all__ = ["stack_versions", "stack_label", "child_env", "ROOT"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _version(package: str) -> Optional[str]:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _major_minor(version: str) -> tuple:
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else (0, 0)


# What another interpreter runs to report its versions (this repository is on its path).
_VERSIONS = (
    "import json; from benchmarks import _stacks; print(json.dumps(_stacks.stack_versions()))"
)


def stack_versions(python: Optional[str] = None) -> dict:
    """The Python, TensorFlow, tensorflow-estimator and Keras 2 versions of an interpreter.

    Read from package metadata, without importing TensorFlow; ``python`` (default: the running
    interpreter) is asked in a subprocess. ``tensorflow`` is None where it is not installed.

    Raises:
      ValueError: ``python`` cannot be run, or cannot import this repository's ``benchmarks``.
    """
    if python is None:
        tf = _version("tensorflow")
        # As tfest_kit._tf.KERAS_PACKAGE: Keras 2 is tf-keras from TensorFlow 2.16 on (plain
        # `keras` is Keras 3 there), the keras package before.
        keras = "tf-keras" if tf and _major_minor(tf) >= (2, 16) else "keras"
        return {
            "executable": sys.executable,
            "python": platform.python_version(),
            "tensorflow": tf,
            "tensorflow_estimator": _version("tensorflow-estimator"),
            "keras_package": keras,
            "keras": _version(keras),
        }
    try:
        proc = subprocess.run(
            [python, "-c", _VERSIONS],
            cwd=ROOT,
            env=child_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValueError(f"cannot be run ({getattr(e, 'strerror', None) or e})") from e
    try:
        versions = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else 0
    except (IndexError, json.JSONDecodeError):
        versions = None
    if not isinstance(versions, dict):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(
            f"is not a Python that can run the benchmarks (exited {proc.returncode}: {tail})"
        )
    return {**versions, "executable": python}


def stack_label(versions: dict) -> Optional[str]:
    """A stack's default label, its TensorFlow's major.minor ("2.21"); None without TensorFlow."""
    return "%d.%d" % _major_minor(versions["tensorflow"]) if versions["tensorflow"] else None


def child_env() -> dict:
    """The environment of a child: this repository first on its path, no GPU, quiet TF logs."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "")
    return env
