"""``python -m tfest_kit doctor``: are the installed versions the ones tfest_kit needs?

Prints Python and package versions next to the supported range, the devices TensorFlow sees,
whether the CPU has bfloat16 instructions, the cores ``run_config(cpu_replicas=N)`` could use
without a GPU, and the ``pip install`` line that fixes whatever does not fit. Exits 0 when
everything required fits, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import NamedTuple, Optional

__all__ = ["Requirement", "REQUIREMENTS", "check", "add_parser", "run"]


class Requirement(NamedTuple):
    """One package tfest_kit needs: the accepted range and the pin to install."""

    name: str
    low: tuple  # inclusive
    high: tuple  # exclusive
    pin: str  # on Python 3.11, the tested environment
    optional: bool = False
    why: str = ""
    # ((python_below, pin), ...): the pin requirements.txt has on older Pythons, lowest first.
    older_pythons: tuple = ()

    def pin_for(self, python: tuple) -> str:
        """The pin to install on Python ``python`` (``(major, minor)``)."""
        return next((pin for below, pin in self.older_pythons if python < below), self.pin)


# Mirrors requirements.txt, which is not installed with the package; tests/test_requirements.py
# keeps the two in step.
REQUIREMENTS = (
    # 2.15 is pinned and tested in CI; the whole suite also passed on 2.13.1 and 2.14.1.
    Requirement(
        "tensorflow", (2, 13), (2, 16), "tensorflow==2.15.1", why="tf.estimator left in 2.16"
    ),
    Requirement("tensorflow-estimator", (2, 13), (2, 16), "tensorflow-estimator==2.15.0"),
    Requirement("keras", (2, 13), (2, 16), "keras==2.15.0", why="Keras 3 has no estimator bridge"),
    Requirement("numpy", (1, 23), (2,), "numpy==1.26.4", why="TensorFlow 2.15 needs NumPy 1"),
    Requirement(
        "protobuf",
        (3, 20, 3),
        (5,),
        "protobuf==4.25.3",
        why="TF 2.15 cannot load 5",
        # tensorflow-metadata 1.15 wants protobuf < 4.21 below Python 3.11.
        older_pythons=(((3, 11), "protobuf==3.20.3"),),
    ),
    Requirement("absl-py", (1, 0), (3,), "absl-py==2.1.0"),
    Requirement(
        "tensorflow-datasets",
        (4, 9),
        (4, 10),
        "tensorflow-datasets==4.9.6",
        optional=True,
        why="only for recipes that download data sets",
        older_pythons=(((3, 10), "tensorflow-datasets==4.9.3"),),  # 4.9.4+ need Python 3.10
    ),
    # tensorflow-datasets' own dependencies, whose newest releases break it under TF 2.15.
    Requirement(
        "tensorflow-metadata",
        (1, 13),
        (1, 16),
        "tensorflow-metadata==1.15.0",
        optional=True,
        why="1.16+ needs protobuf 5: tensorflow_datasets fails at import",
    ),
    Requirement(
        "pyarrow",
        (10,),
        (18,),
        "pyarrow==17.0.0",
        optional=True,
        why="18+ needs NumPy 2 (tensorflow_datasets imports it)",
    ),
    Requirement("matplotlib", (3, 5), (4,), "matplotlib==3.9.2", optional=True, why="for `plot`"),
)
PYTHON_RANGE = ((3, 9), (3, 12))


class Finding(NamedTuple):
    name: str
    installed: Optional[str]
    wanted: str
    ok: bool
    optional: bool
    fix: Optional[str]
    why: str


def _release(version: str) -> tuple:
    """``"2.15.1"`` -> ``(2, 15, 1)``; pre-release and local suffixes are ignored."""
    return tuple(int(p) for p in re.match(r"[\d.]*", version).group().split(".") if p)


def _range_text(low: tuple, high: tuple) -> str:
    return f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"


# TensorFlow ships under other distribution names too (Docker and CI images often use
# tensorflow-cpu); any of them provides the `tensorflow` package.
_ALSO_NAMED = {"tensorflow": ("tensorflow-cpu", "tensorflow-intel", "tensorflow-macos")}


def _installed(name: str) -> Optional[str]:
    for distribution in (name, *_ALSO_NAMED.get(name, ())):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def check(installed: Optional[dict] = None, python: Optional[str] = None) -> list:
    """Compares installed versions against :data:`REQUIREMENTS`.

    Args:
      installed: ``{package: version or None}``; by default read with ``importlib.metadata``.
      python: the Python version; by default the running interpreter's.

    Returns:
      A list of ``Finding`` tuples, Python first.

    Example:

        bad = [f for f in check() if not f.ok and not f.optional]
    """
    python = python or platform.python_version()
    findings = [
        Finding(
            "python",
            python,
            _range_text(*PYTHON_RANGE),
            PYTHON_RANGE[0] <= _release(python)[:2] < PYTHON_RANGE[1],
            False,
            "use Python 3.9-3.11 (3.11 preferred) for the virtualenv",
            "TensorFlow 2.15 wheels exist for 3.9-3.11",
        )
    ]
    for req in REQUIREMENTS:
        version = installed.get(req.name) if installed is not None else _installed(req.name)
        ok = version is not None and req.low <= _release(version) < req.high
        findings.append(
            Finding(
                req.name,
                version,
                _range_text(req.low, req.high),
                ok,
                req.optional,
                None if ok else f"pip install {req.pin_for(_release(python)[:2])}",
                req.why,
            )
        )
    return findings


def _devices() -> tuple[list, Optional[str]]:
    """Returns ([(device_type, name)], error text or None)."""
    try:
        from tfest_kit._tf import tf2

        return [(d.device_type, d.name) for d in tf2.config.list_physical_devices()], None
    except Exception as e:  # noqa: BLE001 - doctor reports every failure instead of dying
        return [], f"{type(e).__name__}: {e}"


def _bfloat16() -> str:
    """One line: can ``run_config(mixed_precision="bfloat16")`` help on this machine?"""
    try:
        from tfest_kit import config

        problem = config._bfloat16_problem()
        flags = config._cpu_flags()
    except Exception as e:  # noqa: BLE001 - doctor reports every failure instead of dying
        return f"bfloat16: could not tell ({type(e).__name__}: {e})"
    if problem:
        return f"bfloat16: {problem}"
    if flags is None:
        return "bfloat16: this platform does not say which instructions its CPU has"
    native = ", ".join(sorted(flags & config._NATIVE_BFLOAT16_FLAGS))
    return (
        f"bfloat16: this CPU has {native}; run_config(mixed_precision='bfloat16') may train "
        "matmul-heavy models faster (measure yours)"
    )


def _cpu_replicas(devices: list) -> Optional[str]:
    """One line: can ``run_config(cpu_replicas=N)`` help here? None with a GPU or one core."""
    from tfest_kit import config

    cores = config._default_thread_count()
    if cores < 2 or any(device_type == "GPU" for device_type, _ in devices):
        return None
    return (
        f"cpu replicas: this process may use {cores} cores; run_config(cpu_replicas=N), "
        f"N <= {cores}, may train models with small matrices faster, one float32 replica per "
        "core (measure yours)"
    )


def report(
    findings: list, devices: list, device_error: Optional[str], notes: Sequence[str] = ()
) -> tuple[str, int]:
    """Formats the findings, then ``notes`` (lines about the machine); returns (text, code)."""
    lines = [f"{'':5}{'package':22}{'installed':14}{'supported':18}note"]
    for f in findings:
        status = "ok" if f.ok else ("opt" if f.optional else "FAIL")
        lines.append(
            f"{status:5}{f.name:22}{f.installed or 'missing':14}{f.wanted:18}"
            f"{'' if f.ok else f.why}"
        )
    lines.append("")
    lines.append(f"cpu cores: {os.cpu_count()}  platform: {platform.platform()}")
    if device_error:
        lines.append(f"devices: could not ask TensorFlow ({device_error})")
    else:
        lines.append("devices: " + ", ".join(f"{t} {n}" for t, n in devices))
        if not any(t == "GPU" for t, _ in devices):
            lines.append(
                "  no GPU: to use one, pip install 'tensorflow[and-cuda]==2.15.1' "
                "(no change to your code)"
            )
    lines.extend(notes)
    required = [f for f in findings if not f.ok and not f.optional]
    optional = [f for f in findings if not f.ok and f.optional]
    if optional:
        lines.append(
            "optional, not installed or not supported: "
            + ", ".join(f"{f.name} ({f.why}; {f.fix})" for f in optional)
        )
    if required or device_error:
        fixes = [f.fix.replace("pip install ", "") for f in required if f.fix and "pip" in f.fix]
        if fixes:
            lines.append(
                "To fix: pip install " + " ".join(fixes) + "   (or pip install -r requirements.txt)"
            )
        for f in required:
            if f.fix and "pip" not in f.fix:
                lines.append(f"To fix: {f.fix}")
        lines.append("doctor: NOT OK")
        return "\n".join(lines), 1
    lines.append("doctor: all required packages fit")
    return "\n".join(lines), 0


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
    del args
    findings = check()
    devices, error = _devices()
    # Without a working TensorFlow the bfloat16 check would only repeat the devices error.
    notes = [] if error else [_bfloat16(), _cpu_replicas(devices)]
    text, code = report(findings, devices, error, [note for note in notes if note])
    print(text)
    sys.stdout.flush()
    return code
