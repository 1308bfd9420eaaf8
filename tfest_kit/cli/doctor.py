"""``python -m tfest_kit doctor``: are the installed versions the ones tfest_kit needs?

Prints Python and package versions next to the supported range, the devices TensorFlow sees
and the ``pip install`` line that fixes whatever does not fit. Exits 0 when everything required
fits, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
from importlib import metadata
from typing import NamedTuple, Optional

__all__ = ["Requirement", "REQUIREMENTS", "check", "add_parser", "run"]


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


# Mirrors requirements.txt (tests/test_requirements.py keeps them in step). The suite also
# passed on TensorFlow 2.13.1 and 2.14.1.
REQUIREMENTS = (
    Requirement(
        "tensorflow", ">=2.13,<2.16", "tensorflow==2.15.1", why="tf.estimator left in 2.16"
    ),
    Requirement("tensorflow-estimator", ">=2.13,<2.16", "tensorflow-estimator==2.15.0"),
    Requirement("keras", ">=2.13,<2.16", "keras==2.15.0", why="Keras 3 has no estimator bridge"),
    Requirement("numpy", ">=1.23,<2", "numpy==1.26.4", why="TensorFlow 2.15 needs NumPy 1"),
    # tensorflow-metadata 1.15 wants protobuf < 4.21 below Python 3.11.
    Requirement(
        "protobuf",
        ">=3.20.3,<5",
        "protobuf==4.25.3",
        False,
        "TF 2.15 cannot load 5",
        (((3, 11), "protobuf==3.20.3"),),
    ),
    Requirement("absl-py", ">=1.0,<3", "absl-py==2.1.0"),
    # 4.9.4+ need Python 3.10.
    Requirement(
        "tensorflow-datasets",
        ">=4.9,<4.10",
        "tensorflow-datasets==4.9.6",
        True,
        "only for recipes that download data sets",
        (((3, 10), "tensorflow-datasets==4.9.3"),),
    ),
    # tensorflow-datasets' own dependencies, whose newest releases break it under TF 2.15.
    Requirement(
        "tensorflow-metadata",
        ">=1.13,<1.16",
        "tensorflow-metadata==1.15.0",
        True,
        "1.16+ needs protobuf 5: tensorflow_datasets fails at import",
    ),
    Requirement(
        "pyarrow", ">=10,<18", "pyarrow==17.0.0", True, "18+ needs NumPy 2 (tfds imports it)"
    ),
    Requirement("matplotlib", ">=3.5,<4", "matplotlib==3.9.2", True, "for `plot`"),
)
PYTHON_RANGE = ">=3.9,<3.12"


class Finding(NamedTuple):
    name: str
    installed: Optional[str]
    wanted: str
    ok: bool
    optional: bool
    fix: Optional[str]
    why: str


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


def check(installed: Optional[dict] = None, python: Optional[str] = None) -> list:
    """Compares installed versions against :data:`REQUIREMENTS`; returns ``Finding``\\ s.

    Args:
      installed: ``{package: version or None}``; by default read with ``importlib.metadata``.
      python: the Python version; by default the running interpreter's.

    Example:

        bad = [f for f in check() if not f.ok and not f.optional]
    """
    python = python or platform.python_version()
    findings = [
        Finding(
            "python",
            python,
            PYTHON_RANGE,
            _fits(python, PYTHON_RANGE),
            False,
            "use Python 3.9-3.11 (3.11 preferred) for the virtualenv",
            "TensorFlow 2.15 wheels exist for 3.9-3.11",
        )
    ]
    for req in REQUIREMENTS:
        version = installed.get(req.name) if installed is not None else _installed(req.name)
        ok = _fits(version, req.wanted)
        fix = None if ok else f"pip install {req.pin_for(_release(python)[:2])}"
        findings.append(Finding(req.name, version, req.wanted, ok, req.optional, fix, req.why))
    return findings


def report(findings: list, devices: list, device_error: Optional[str]) -> tuple[str, int]:
    """Formats the findings; returns (text, exit code)."""
    lines = [f"{'':5}{'package':22}{'installed':14}{'supported':18}note"]
    for f in findings:
        status = "ok" if f.ok else ("opt" if f.optional else "FAIL")
        note = "" if f.ok else f.why
        lines.append(f"{status:5}{f.name:22}{f.installed or 'missing':14}{f.wanted:18}{note}")
    lines += ["", f"cpu cores: {os.cpu_count()}  platform: {platform.platform()}"]
    if device_error:
        lines.append(f"devices: could not ask TensorFlow ({device_error})")
    else:
        lines.append("devices: " + ", ".join(f"{t} {n}" for t, n in devices))
    required = [f for f in findings if not f.ok and not f.optional]
    optional = [f for f in findings if not f.ok and f.optional]
    if optional:
        lines.append(
            "optional, not installed or not supported: "
            + ", ".join(f"{f.name} ({f.why}; {f.fix})" for f in optional)
        )
    if not required and not device_error:
        return "\n".join([*lines, "doctor: all required packages fit"]), 0
    pins = [f.fix[len("pip install ") :] for f in required if f.fix.startswith("pip install ")]
    if pins:
        lines.append(f"To fix: pip install {' '.join(pins)}   (or pip install -r requirements.txt)")
    lines += [f"To fix: {f.fix}" for f in required if not f.fix.startswith("pip install ")]
    return "\n".join([*lines, "doctor: NOT OK"]), 1


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``doctor`` on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "doctor",
        help="check Python/TensorFlow/Keras versions and devices",
        description=__doc__.split("\n\n")[1],
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Runs ``doctor``; returns the exit code (0 = everything required fits)."""
    try:
        from tfest_kit._tf import tf2

        devices = [(d.device_type, d.name) for d in tf2.config.list_physical_devices()]
        error = None
    except Exception as e:  # noqa: BLE001 - doctor reports every failure instead of dying
        devices, error = [], f"{type(e).__name__}: {e}"
    text, code = report(check(), devices, error)
    print(text, flush=True)
    return code
