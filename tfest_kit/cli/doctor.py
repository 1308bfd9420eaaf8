"""``python -m tfest_kit doctor``: are the installed versions the ones tfest_kit needs?

Prints the installed stack (2.15, or 2.21 with tf-keras), versions against its supported range,
the devices TensorFlow sees, the ``pip install`` line fixing what does not fit and the one for
the other stack. Exits 0 when everything required fits, else 1.
"""

import argparse
import collections
import contextlib
import os
import platform
import re
from importlib import metadata
from typing import NamedTuple, Optional

from tfest_kit.cli import _subparser

__all__ = ["Requirement", "Stack", "STACKS", "stack_of", "check", "report", "add_parser", "run"]


class Requirement(NamedTuple):
    """One package: the accepted versions (``wanted``) and the pin to install on Python 3.11."""

    name: str
    wanted: str  # ">=LOW,<HIGH"
    pin: str
    optional: bool = False
    why: str = ""
    older_pythons: tuple = ()  # ((python_below, pin), ...), lowest first

    def pin_for(self, python: tuple) -> str:
        """The pin to install on Python ``python`` (``(major, minor)``)."""
        return next((pin for below, pin in self.older_pythons if python < below), self.pin)


class Stack(NamedTuple):
    """One TensorFlow stack: its Pythons, its lock file, its packages and its core install."""

    name: str  # "2.15"
    pythons: str  # "3.9-3.11"
    requirements: tuple  # of Requirement
    install: str  # the `pip install` arguments of its core packages

    @property
    def lock(self) -> str:
        """The lock file in the repository, e.g. ``requirements-2.15.txt``."""
        return f"requirements-{self.name}.txt"

    @property
    def python_range(self) -> str:
        """``">=3.9,<3.12"`` for ``pythons="3.9-3.11"``."""
        low, high = self.pythons.split("-")
        major, minor = high.split(".")
        return f">={low},<{major}.{int(minor) + 1}"


Finding = collections.namedtuple("Finding", "name installed wanted ok optional fix why")
_PB, _PB_OLD = "TF 2.15 cannot load 5", "protobuf==3.20.3"
_LAST = "its last release, run through tfest_kit's bridge"
_TFDS = "only for recipes that download data sets"
_TFDS_OLD = (((3, 10), "tensorflow-datasets==4.9.3"),)  # 4.9.4+ need Python 3.10
_NUMPY_2, _NUMPY_OLD = "TensorFlow 2.21 is built against NumPy 2", (((3, 12), "numpy==2.4.6"),)
_TFMD = "1.16+ needs protobuf 5: tensorflow_datasets fails at import"
_TENSORBOARD = "for `tensorboard --logdir`; TensorFlow 2.16+ no longer brings it"
# Mirror requirements-<stack>.txt (tests/test_requirements.py). The 2.15 suite also passed on
# TF 2.13.1 and 2.14.1; TF 2.16-2.20 passed 2.21's smoke tests (docs/install.md).
_STACK_2_15 = (
    Requirement("tensorflow", ">=2.13,<2.16", "tensorflow==2.15.1", why="no tf.estimator in 2.16+"),
    Requirement("tensorflow-estimator", ">=2.13,<2.16", "tensorflow-estimator==2.15.0"),
    Requirement("keras", ">=2.13,<2.16", "keras==2.15.0", why="Keras 3 has no estimator bridge"),
    Requirement("numpy", ">=1.23,<2", "numpy==1.26.4", why="TensorFlow 2.15 needs NumPy 1"),
    # tensorflow-metadata 1.15 wants protobuf < 4.21 below Python 3.11.
    Requirement("protobuf", ">=3.20.3,<5", "protobuf==4.25.3", False, _PB, (((3, 11), _PB_OLD),)),
    Requirement("absl-py", ">=1.0,<3", "absl-py==2.1.0"),
    Requirement(
        "tensorflow-datasets", ">=4.9,<4.10", "tensorflow-datasets==4.9.6", True, _TFDS, _TFDS_OLD
    ),
    # tensorflow-datasets' own dependencies, whose newest releases break it under TF 2.15.
    Requirement("tensorflow-metadata", ">=1.13,<1.16", "tensorflow-metadata==1.15.0", True, _TFMD),
    Requirement("pyarrow", ">=10,<18", "pyarrow==17.0.0", True, "18+: NumPy 2 (tfds imports it)"),
    Requirement("matplotlib", ">=3.5,<4", "matplotlib==3.9.2", True, "for `plot`"),
)
_STACK_2_21 = (
    Requirement("tensorflow", ">=2.16,<2.22", "tensorflow==2.21.0", why="2.22+ not tested"),
    Requirement("tensorflow-estimator", ">=2.15,<2.16", "tensorflow-estimator==2.15.0", why=_LAST),
    Requirement("tf-keras", ">=2.16,<2.22", "tf-keras==2.21.0", why="Keras 2 for Estimator"),
    Requirement("numpy", ">=1.26,<3", "numpy==2.5.5", False, _NUMPY_2, _NUMPY_OLD),
    Requirement("absl-py", ">=1.0,<3", "absl-py==2.5.1"),
    Requirement("tensorflow-datasets", ">=4.9,<4.10", "tensorflow-datasets==4.9.10", True, _TFDS),
    Requirement("tensorboard", ">=2.16,<2.22", "tensorboard==2.21.0", True, _TENSORBOARD),
    Requirement("matplotlib", ">=3.5,<4", "matplotlib==3.11.2", True, "for `plot`"),
)
_CORE_2_15 = "tensorflow==2.15.1 tensorflow-estimator==2.15.0 keras==2.15.0"
_CORE_2_21 = "tensorflow==2.21.0 tf-keras==2.21.0 tensorflow-estimator==2.15.0"
STACKS = {
    "2.15": Stack("2.15", "3.9-3.11", _STACK_2_15, _CORE_2_15),
    "2.21": Stack("2.21", "3.11-3.13", _STACK_2_21, _CORE_2_21),
}


def _release(version: str) -> tuple:
    """``"2.15.1rc0"`` -> ``(2, 15, 1)``."""
    return tuple(int(p) for p in re.match(r"[\d.]*", version).group().split(".") if p)


def _fits(version: Optional[str], wanted: str) -> bool:
    low, high = (_release(bound) for bound in re.findall(r"[\d.]+", wanted))
    return version is not None and low <= _release(version) < high


def _installed(name: str) -> Optional[str]:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(name)
    return None


def stack_of(tensorflow: Optional[str], python: str) -> str:
    """The stack of an environment: by its TensorFlow, else by its Python (as ``make`` chooses)."""
    newer = _release(tensorflow)[:2] >= (2, 16) if tensorflow else _release(python)[:2] >= (3, 12)
    return "2.21" if newer else "2.15"


def _other(stack: Stack) -> Stack:
    return next(other for other in STACKS.values() if other.name != stack.name)


def check(
    installed: Optional[dict] = None, python: Optional[str] = None, stack: Optional[str] = None
) -> list:
    """Compares installed versions against a stack's requirements; returns ``Finding``\\ s.

    Args:
      installed: ``{package: version or None}``; by default read with ``importlib.metadata``.
      python: the Python version; by default the running interpreter's.
      stack: ``"2.15"`` or ``"2.21"``; by default :func:`stack_of` the installed TensorFlow.

    Example:

        bad = [f for f in check() if not f.ok and not f.optional]
    """
    if stack is not None and stack not in STACKS:
        raise ValueError(f"`stack` must be one of {sorted(STACKS)}. Got: {stack!r}")
    python = python or platform.python_version()

    def version(name: str) -> Optional[str]:
        return installed.get(name) if installed is not None else _installed(name)

    chosen = STACKS[stack or stack_of(version("tensorflow"), python)]
    other = _other(chosen)
    python_fix = f"use Python {chosen.pythons} for the virtualenv"
    if _fits(python, other.python_range):
        python_fix += f", or the {other.name} stack: pip install -r {other.lock}"
    ok = _fits(python, chosen.python_range)
    why = f"the {chosen.name} stack is for Python {chosen.pythons}"
    findings = [Finding("python", python, chosen.python_range, ok, False, python_fix, why)]
    for req in chosen.requirements:
        found = version(req.name)
        ok = _fits(found, req.wanted)
        fix = None if ok else f"pip install {req.pin_for(_release(python)[:2])}"
        findings.append(Finding(req.name, found, req.wanted, ok, req.optional, fix, req.why))
    # TensorFlow 2.20 allows any protobuf >= 5.28, but its write_graph passes float_format=,
    # which protobuf 7.34+ refuses: every Estimator.train fails in CheckpointSaverHook.
    tensorflow, protobuf = version("tensorflow"), version("protobuf")
    if tensorflow and protobuf and _release(tensorflow)[:2] == (2, 20):
        ok = _release(protobuf)[:2] < (7, 34)
        fix = None if ok else "pip install protobuf==6.33.6"
        why = "TensorFlow 2.20's write_graph fails on 7.34+"
        findings.append(Finding("protobuf", protobuf, ">=5.28,<7.34", ok, False, fix, why))
    return findings


def report(
    findings: list, devices: list, device_error: Optional[str], stack: Optional[str] = None
) -> tuple[str, int]:
    """Formats the findings of :func:`check`; returns (text, exit code).

    ``stack`` is the one ``check`` was given; by default :func:`stack_of` the findings.
    """
    by_name = {f.name: f for f in findings}
    tensorflow = by_name["tensorflow"].installed if "tensorflow" in by_name else None
    chosen = STACKS[stack or stack_of(tensorflow, by_name["python"].installed)]
    other = _other(chosen)
    lines = [f"{'':5}{'package':22}{'installed':14}{'supported':18}note"]
    for f in findings:
        status = "ok" if f.ok else ("opt" if f.optional else "FAIL")
        note = "" if f.ok else f.why
        lines.append(f"{status:5}{f.name:22}{f.installed or 'missing':14}{f.wanted:18}{note}")
    installed = f"{chosen.name} (TensorFlow {tensorflow}), pinned in {chosen.lock}"
    if tensorflow is None:
        installed = f"none installed; this Python takes the {chosen.name} stack"
    failed = f"could not ask TensorFlow ({device_error})" if device_error else None
    lines += [
        "",
        f"stack: {installed}",
        f"other stack: {other.name} (Python {other.pythons}): pip install {other.install}"
        f"   (or pip install -r {other.lock})",
        f"cpu cores: {os.cpu_count()}  platform: {platform.platform()}",
        "devices: " + (failed or ", ".join(f"{t} {n}" for t, n in devices)),
    ]
    required = [f for f in findings if not f.ok and not f.optional]
    optional = [f for f in findings if not f.ok and f.optional]
    listed = ", ".join(f"{f.name} ({f.why}; {f.fix})" for f in optional)
    if optional:
        lines.append(f"optional, not installed or not supported: {listed}")
    if not required and not device_error:
        return "\n".join([*lines, "doctor: all required packages fit"]), 0
    if pins := [f.fix[len("pip install ") :] for f in required if f.fix.startswith("pip install ")]:
        lines.append(f"To fix: pip install {' '.join(pins)}   (or pip install -r {chosen.lock})")
    lines += [f"To fix: {f.fix}" for f in required if not f.fix.startswith("pip install ")]
    return "\n".join([*lines, "doctor: NOT OK"]), 1


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``doctor`` on an ``argparse`` subparsers object."""
    return _subparser(subparsers, run, "check Python/TensorFlow/Keras versions and devices")


def run(args: argparse.Namespace) -> int:
    """Runs ``doctor``; returns the exit code (0 = everything required fits)."""
    try:
        from tfest_kit._tf import tf2

        devices, error = [(d.device_type, d.name) for d in tf2.config.list_physical_devices()], None
    except Exception as e:  # noqa: BLE001 - doctor reports every failure instead of dying
        devices, error = [], f"{type(e).__name__}: {e}"
    text, code = report(check(), devices, error)
    print(text, flush=True)
    return code
