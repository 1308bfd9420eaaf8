"""The TensorFlow version gate in tfest_kit._tf."""

from __future__ import annotations

import re
import textwrap

import pytest

from tests.conftest import run_program
from tfest_kit import _tf


@pytest.mark.parametrize("version", ["2.15.1", "2.13.0", "2.16.1", "2.20.0rc0", "2.21.0"])
def test_supported_versions_pass(version):
    _tf.check_version(version, has_estimator=True)


@pytest.mark.parametrize("version", ["2.22.0", "2.23.0rc0", "3.0.0"])
def test_untested_versions_are_refused_naming_both_stacks(version):
    with pytest.raises(ImportError) as excinfo:
        _tf.check_version(version)
    message = str(excinfo.value)
    assert version in message and "2.15 and 2.21" in message
    assert "tensorflow==2.15.1" in message and "tensorflow==2.21.0 tf-keras==2.21.0" in message


def test_build_without_estimator_is_refused():
    with pytest.raises(ImportError, match="tensorflow-estimator package"):
        _tf.check_version("2.21.0", has_estimator=False)


def test_too_old_version_is_refused():
    with pytest.raises(ImportError, match="2.12.0"):
        _tf.check_version("2.12.0")


def test_import_on_simulated_untested_tf_raises_clear_error(tmp_path):
    # A stand-in `tensorflow` package first on sys.path plays TensorFlow 2.22, which nobody
    # has tested; importing tfest_kit must stop with the fix in the message.
    fake = tmp_path / "fake_site" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('__version__ = "2.22.0"\n')
    script = textwrap.dedent(
        """
        try:
            import tfest_kit
        except ImportError as e:
            print("IMPORT ERROR:", e)
            raise SystemExit(3)
        """
    )
    proc = run_program(
        ["-c", script],
        env={"PYTHONPATH": f"{tmp_path / 'fake_site'}"},
        check_exit=3,
        timeout=60,
    )
    assert "IMPORT ERROR: tfest_kit was tested with TensorFlow 2.15 and 2.21" in proc.stdout
    assert "found 2.22.0" in proc.stdout
    assert "pip install tensorflow==2.15.1 tensorflow-estimator==2.15.0" in proc.stdout


def test_import_prints_nothing():
    proc = run_program(["-c", "import tfest_kit, tfest_kit.logs"], timeout=120)
    assert proc.stdout == ""
    assert proc.stderr == ""


def test_real_tensorflow_is_one_of_the_two_stacks():
    assert _tf.TF_VERSION.startswith(("2.15.", "2.21."))
    assert hasattr(_tf.tf, "estimator") and hasattr(_tf.tf2, "estimator")
    assert _tf.estimator is _tf.tf.estimator


def test_doctor_runs_where_tensorflow_is_unsupported_and_says_what_to_install(tmp_path):
    # `python -m tfest_kit` imports the package first, which refuses TensorFlow 2.22; doctor,
    # the command that explains that, must still run. Other commands still refuse.
    site = tmp_path / "fake_site"
    (site / "tensorflow").mkdir(parents=True)
    (site / "tensorflow" / "__init__.py").write_text('__version__ = "2.22.0"\n')
    info = site / "tensorflow-2.22.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.22.0\n")
    env = {"PYTHONPATH": str(site)}
    proc = run_program(["-m", "tfest_kit", "doctor"], env=env, check_exit=1, timeout=60)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    assert re.search(r"^FAIL +tensorflow +2\.22\.0 ", proc.stdout, re.M), out
    assert "devices: could not ask TensorFlow (ImportError: tfest_kit" in out and "2.22.0" in out
    # TensorFlow 2.16+ is the 2.21 stack's: doctor names its pin, and the other stack's line.
    assert "stack: 2.21 (TensorFlow 2.22.0)" in out
    assert "To fix: pip install tensorflow==2.21.0" in out and "doctor: NOT OK" in out
    assert "other stack: 2.15" in out and "pip install tensorflow==2.15.1" in out
    proc = run_program(["-m", "tfest_kit", "signature", "x"], env=env, check_exit=1, timeout=60)
    assert "ImportError: tfest_kit was tested with TensorFlow 2.15 and 2.21" in proc.stderr


def test_a_failing_tensorflow_estimator_import_is_named_with_its_own_error(tmp_path):
    # The import can fail for another package's reason (Keras 3 where Keras 2 is needed …):
    # the refusal keeps what the import said.
    fake = tmp_path / "fake_site" / "tensorflow_estimator"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named keras.src.engine')\n")
    proc = run_program(
        ["-c", "import tfest_kit"], env={"PYTHONPATH": str(tmp_path / "fake_site")}, check_exit=1
    )
    assert "needs the tensorflow-estimator package" in proc.stderr
    assert "(import tensorflow_estimator: No module named keras.src.engine)" in proc.stderr
