"""The two stacks: each lock file (requirements-2.15.txt, requirements-2.21.txt) pins one tested set
for each of its Pythons, both share the pins tfest_kit relies on, doctor and pyproject.toml agree
with them, and the code keeps to the oldest Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tfest_kit.cli import doctor as _cli_doctor

try:
    import tomllib  # novm
except ImportError:  # Python 3.9 and 3.10: requirements-2.15.txt installs tomli there
    import tomli as tomllib

_ROOT = Path(__file__).resolve().parents[1]
_PYTHONS = {"2.15": [(3, 9), (3, 10), (3, 11)], "2.21": [(3, 11), (3, 12), (3, 13)]}
_CASES = [(stack, python) for stack, pythons in _PYTHONS.items() for python in pythons]
_IDS = ["%s-py%d.%d" % (stack, *python) for stack, python in _CASES]
# What tfest_kit's own code imports the same on both stacks, and the tools that must lint alike.
_SHARED = {"tensorflow-estimator", "tf-slim", "ruff", "vermin"}


def _environment(python: tuple) -> dict:
    return {"python_version": "%d.%d" % python, "python_full_version": "%d.%d.0" % python}


def _lines(stack: str) -> list:
    lines = []
    for line in (_ROOT / f"requirements-{stack}.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            lines.append(Requirement(line))  # a marker that does not parse fails here
    return lines


def _pins(stack: str, python: tuple) -> dict:
    """{normalised name: version} that ``pip install -r requirements-STACK.txt`` takes."""
    pins = {}
    for req in _lines(stack):
        if req.marker is not None and not req.marker.evaluate(_environment(python)):
            continue
        name = req.name.lower().replace("_", "-")
        assert name not in pins, f"{name} is pinned twice for Python {python} in {stack}"
        (spec,) = req.specifier
        assert spec.operator == "==", f"{req} is not an exact pin"
        pins[name] = spec.version
    return pins


@pytest.mark.parametrize("stack", sorted(_PYTHONS))
def test_every_line_of_a_lock_file_is_for_one_of_its_pythons(stack):
    for req in _lines(stack):
        if req.marker is not None:
            assert "python_version" in str(req.marker), f"{req}: only Python markers are tested"
            taken = [p for p in _PYTHONS[stack] if req.marker.evaluate(_environment(p))]
            assert taken, f"{req} applies to none of Python {_PYTHONS[stack]}"


@pytest.mark.parametrize("stack, python", _CASES, ids=_IDS)
def test_each_supported_python_gets_one_exact_set(stack, python):
    pins = _pins(stack, python)
    assert pins["tensorflow-estimator"] == "2.15.0"
    if stack == "2.15":
        assert pins["tensorflow"] == "2.15.1" and pins["keras"] == "2.15.0"
        assert pins["tensorflow-metadata"] == "1.15.0" and pins["numpy"].startswith("1.")
        assert "importlib-resources" in pins and "tf-keras" not in pins
        # tensorboard 2.15 imports pkg_resources, which setuptools 82 removed.
        assert int(pins["setuptools"].split(".")[0]) < 82
    else:
        assert pins["tensorflow"] == "2.21.0" and pins["tf-keras"] == "2.21.0"
        assert pins["numpy"].startswith("2.")
        # ml_dtypes 0.7.0's extension takes 0.7 s to import, in every process that imports
        # TensorFlow (0.6.0: 7 ms); a lock refresh must not take it back.
        assert pins["ml-dtypes"] == "0.6.0"
    # It does not import on TensorFlow 2.21; tf.contrib.crf / seq2seq stand on our own ops.
    assert "tensorflow-addons" not in pins and "typeguard" not in pins
    # The tools and libraries the recipes and tests use are pinned on every Python, not only
    # on the one CI runs; TensorBoard too (README: `tensorboard --logdir`), which TensorFlow
    # 2.21 no longer brings.
    assert {
        "tensorboard",
        "setuptools",
        "tensorflow-datasets",
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
        *_SHARED,
    } <= set(pins)


@pytest.mark.parametrize("python", [(3, 11)], ids=["py3.11"])
def test_both_stacks_pin_the_same_estimator_contrib_and_linters(python):
    # Python 3.11 runs both stacks: the same tensorflow-estimator and tf_slim under tfest_kit,
    # and the same Ruff and vermin, so that `make test` lints alike on both.
    old, new = _pins("2.15", python), _pins("2.21", python)
    assert {name: old[name] for name in _SHARED} == {name: new[name] for name in _SHARED}


@pytest.mark.parametrize("stack, python", _CASES, ids=_IDS)
def test_doctor_recommends_what_the_lock_file_installs(stack, python):
    pins = _pins(stack, python)
    requirements = _cli_doctor.STACKS[stack].requirements
    for req in requirements:
        name, version = req.pin_for(python).split("==")
        assert pins[name] == version, f"doctor and requirements-{stack}.txt disagree on {name}"
    # What the lock file installs is what doctor accepts, as that stack.
    installed = {r.name: pins[r.name] for r in requirements}
    assert _cli_doctor.stack_of(installed["tensorflow"], "%d.%d.1" % python) == stack
    findings = _cli_doctor.check(installed, python="%d.%d.1" % python)
    assert all(f.ok for f in findings), [f for f in findings if not f.ok]


@pytest.mark.parametrize("stack, python", _CASES, ids=_IDS)
def test_pyproject_allows_what_each_lock_file_installs(stack, python):
    project = tomllib.loads((_ROOT / "pyproject.toml").read_text())["project"]
    assert SpecifierSet(project["requires-python"]).contains("%d.%d.0" % python)
    pins = _pins(stack, python)
    for line in project["dependencies"]:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(_environment(python)):
            name = req.name.lower().replace("_", "-")
            assert req.specifier.contains(pins[name]), f"pyproject.toml's {line!r} vs {stack}"


def test_pyproject_refuses_the_pythons_no_stack_has():
    project = tomllib.loads((_ROOT / "pyproject.toml").read_text())["project"]
    allowed = SpecifierSet(project["requires-python"])
    assert not allowed.contains("3.8.18") and not allowed.contains("3.14.0")


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
    findings = _cli_doctor.check({"tensorflow": "2.21.0", "numpy": None}, python="3.11.7")
    assert "pip install numpy==2.4.6" in [f.fix for f in findings]
    findings = _cli_doctor.check({"tensorflow": "2.21.0", "numpy": None}, python="3.13.0")
    assert "pip install numpy==2.5.5" in [f.fix for f in findings]


def test_doctor_names_the_data_set_dependencies_that_break_tensorflow_datasets():
    # README: `doctor` checks the pins below TensorFlow too; they only matter with tfds (2.15).
    installed = {"tensorflow-metadata": "1.16.1", "pyarrow": "18.0.0"}
    findings = _cli_doctor.check(installed, stack="2.15")
    with pytest.raises(ValueError, match="stack"):
        _cli_doctor.check(installed, stack="2.16")
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
