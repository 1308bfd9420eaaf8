"""Supported Pythons: requirements.txt pins one tested set for each, doctor agrees with it, and
the code keeps to the oldest one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tfest_kit.cli import doctor as _cli_doctor

_ROOT = Path(__file__).resolve().parents[1]
_PYTHONS = [(3, 9), (3, 10), (3, 11)]


def _pins(python: tuple) -> dict:
    """{normalised name: version} that ``pip install -r requirements.txt`` takes on ``python``."""
    environment = {"python_version": "%d.%d" % python, "python_full_version": "%d.%d.0" % python}
    pins = {}
    for line in (_ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(environment):
            continue
        name = req.name.lower().replace("_", "-")
        assert name not in pins, f"{name} is pinned twice for Python {python}"
        (spec,) = req.specifier
        assert spec.operator == "==", f"{line!r} is not an exact pin"
        pins[name] = spec.version
    return pins


@pytest.mark.parametrize("python", _PYTHONS, ids=lambda p: "%d.%d" % p)
def test_each_supported_python_gets_one_exact_set(python):
    pins = _pins(python)
    assert pins["tensorflow"] == "2.15.1" and pins["tensorflow-estimator"] == "2.15.0"
    assert pins["keras"] == "2.15.0" and pins["tensorflow-metadata"] == "1.15.0"
    assert pins["numpy"].startswith("1.")
    # The tools and libraries the recipes and tests use are pinned on every Python, not only
    # on the one CI runs.
    assert {
        "tensorflow-datasets",
        "importlib-resources",
        "pyarrow",
        "protobuf",
        "absl-py",
        "scikit-learn",
        "pandas",
        "matplotlib",
        "pillow",
        "pytest",
        "pytest-timeout",
        "pytest-xdist",
        "execnet",
        "ruff",
    } <= set(pins)


@pytest.mark.parametrize("python", _PYTHONS, ids=lambda p: "%d.%d" % p)
def test_doctor_recommends_what_requirements_txt_installs(python):
    pins = _pins(python)
    for req in _cli_doctor.REQUIREMENTS:
        name, version = req.pin_for(python).split("==")
        assert pins[name] == version, f"doctor and requirements.txt disagree on {name}"
    # What requirements.txt installs is what doctor accepts.
    installed = {r.name: pins[r.name] for r in _cli_doctor.REQUIREMENTS}
    findings = _cli_doctor.check(installed, python="%d.%d.1" % python)
    assert all(f.ok for f in findings), [f for f in findings if not f.ok]


def test_doctor_names_the_pin_for_the_running_python():
    findings = _cli_doctor.check(
        {"tensorflow": "2.15.1", "protobuf": "5.28.0", "tensorflow-datasets": None},
        python="3.9.18",
    )
    text, code = _cli_doctor.report(findings, [("CPU", "/physical_device:CPU:0")], None)
    assert code == 1
    assert "protobuf==3.20.3" in text and "protobuf==4.25.3" not in text
    assert "tensorflow-datasets==4.9.3" in text
    findings = _cli_doctor.check({"protobuf": "5.28.0"}, python="3.11.7")
    assert "pip install protobuf==4.25.3" in [f.fix for f in findings]


def test_doctor_names_the_data_set_dependencies_that_break_tensorflow_datasets():
    # README: `doctor` checks the pins below TensorFlow too; they only matter with tfds.
    findings = _cli_doctor.check({"tensorflow-metadata": "1.16.1", "pyarrow": "18.0.0"})
    by_name = {f.name: f for f in findings}
    for name, pin in (("tensorflow-metadata", "1.15.0"), ("pyarrow", "17.0.0")):
        assert not by_name[name].ok and by_name[name].optional
        assert by_name[name].fix == f"pip install {name}=={pin}"


def test_code_uses_nothing_newer_than_python_3_9():
    # CI runs Python 3.11 only; vermin reads the source for syntax and standard-library calls
    # 3.9 lacks (zip(strict=...), match, itertools.pairwise ...). What it cannot see, like
    # isinstance(x, int | str), the suite's run on 3.9 showed clean on 2026-11-22.
    vermin = str(Path(sys.executable).parent / "vermin")  # its console script; no __main__
    options = ["--target=3.9-", "--violations", "--no-tips", "--exclude-regex", "legacy_scripts/"]
    proc = subprocess.run(
        [vermin, *options, "tfest_kit", "recipes", "benchmarks", "tests"],
        cwd=_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Minimum required versions: 3.9" in proc.stdout, proc.stdout
