"""`doctor`, `inspect` and `plot` on a real model_dir trained here (plain Estimator)."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from tfest_kit import __main__ as cli_main
from tfest_kit._tf import TF_VERSION, estimator, tf
from tfest_kit.cli import doctor as _cli_doctor
from tfest_kit.cli import inspect as _cli_inspect
from tfest_kit.cli import plot as _cli_plot


def _model_fn(features, labels, mode):
    weights = tf.get_variable("w", [4, 2])
    logits = tf.matmul(features["x"], weights)
    if mode == estimator.ModeKeys.PREDICT:
        return estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.GradientDescentOptimizer(0.5).minimize(
        loss, global_step=tf.train.get_global_step()
    )
    metrics = {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}
    return estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def _input_fn():
    rng = np.random.RandomState(0)
    x = rng.randn(128, 4).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(16)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    model_dir = str(root / "model")
    config = estimator.RunConfig(
        model_dir=model_dir, save_summary_steps=5, save_checkpoints_steps=20, tf_random_seed=0
    )
    est = estimator.Estimator(_model_fn, config=config)
    for _ in range(2):
        est.train(_input_fn, steps=20)
        est.evaluate(_input_fn, steps=2)
    return {"model_dir": model_dir, "est": est}


def _cli(argv):
    return cli_main.main(argv)


@pytest.mark.parametrize("command", ["doctor", "inspect", "plot"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        _cli([command, "--help"])
    assert info.value.code == 0
    assert f"usage: python -m tfest_kit {command}" in capsys.readouterr().out


def test_doctor_passes_on_this_environment(capsys):
    assert _cli(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "tensorflow" in out and TF_VERSION in out
    assert "CPU" in out
    stack = "2.15" if TF_VERSION.startswith("2.15") else "2.21"
    other = {"2.15": "2.21", "2.21": "2.15"}[stack]
    assert f"stack: {stack} (TensorFlow {TF_VERSION})" in out
    assert f"other stack: {other}" in out and f"requirements-{other}.txt" in out
    assert "doctor: all required packages fit" in out


def _pins(stack: str) -> dict:
    return {req.name: req.pin.split("==")[1] for req in _cli_doctor.STACKS[stack].requirements}


def test_doctor_says_what_to_install_when_versions_do_not_fit():
    device = [("CPU", "/physical_device:CPU:0")]
    # TensorFlow 2.16+ is the 2.21 stack's, not refused; it needs tf-keras beside it.
    installed = _pins("2.21")
    installed.update({"tf-keras": None, "tensorflow": "2.16.1", "tensorflow-datasets": None})
    text, code = _cli_doctor.report(_cli_doctor.check(installed, python="3.12.1"), device, None)
    assert code == 1
    assert "stack: 2.21 (TensorFlow 2.16.1)" in text
    assert "To fix: pip install tf-keras==2.21.0" in text
    assert "tensorflow-datasets" in text  # optional: reported, not fatal
    assert "pip install tensorflow==2.15.1 tensorflow-estimator==2.15.0 keras==2.15.0" in text
    # TensorFlow 2.15 on a Python it has no wheels for: the Pythons, and the other stack.
    text, code = _cli_doctor.report(_cli_doctor.check(_pins("2.15"), python="3.12.1"), device, None)
    assert code == 1 and "Python 3.9-3.11" in text
    assert "pip install -r requirements-2.21.txt" in text
    # Newer than the bridge was tested with: the 2.21 pins.
    installed = {**_pins("2.21"), "tensorflow": "2.22.0", "keras": "3.3.3"}
    text, code = _cli_doctor.report(_cli_doctor.check(installed, python="3.12.1"), device, None)
    assert code == 1 and "pip install tensorflow==2.21.0" in text
    for stack, python in (("2.15", "3.11.9"), ("2.21", "3.11.9"), ("2.21", "3.13.0")):
        assert all(f.ok for f in _cli_doctor.check(_pins(stack), python=python))


def test_doctor_refuses_the_protobuf_tensorflow_220_cannot_write_a_graph_with():
    # TensorFlow 2.20 takes any protobuf >= 5.28; 7.34+ breaks every Estimator.train.
    installed = {**_pins("2.21"), "tensorflow": "2.20.0", "tf-keras": "2.20.1"}
    for protobuf, fits in (("7.36.2", False), ("6.33.6", True)):
        findings = {f.name: f for f in _cli_doctor.check({**installed, "protobuf": protobuf})}
        assert findings["protobuf"].ok is fits
    assert findings["protobuf"].fix is None
    assert "protobuf" not in {f.name for f in _cli_doctor.check(_pins("2.21"))}
    text, code = _cli_doctor.report(
        _cli_doctor.check({**installed, "protobuf": "7.36.2"}), [("CPU", "cpu:0")], None
    )
    assert code == 1 and "pip install protobuf==6.33.6" in text


@pytest.mark.parametrize(
    "tensorflow, keras, fits",
    [("2.14.1", "2.14.0", True), ("2.13.1", "2.13.1", True), ("2.12.1", "2.12.0", False)],
)
def test_doctor_accepts_the_older_tensorflows_the_suite_passed_on(tensorflow, keras, fits):
    installed = _pins("2.15")
    estimator = tensorflow[: tensorflow.rindex(".")] + ".0"
    installed.update({"tensorflow": tensorflow, "tensorflow-estimator": estimator, "keras": keras})
    findings = {f.name: f for f in _cli_doctor.check(installed, python="3.11.7")}
    assert [findings[n].ok for n in ("tensorflow", "tensorflow-estimator", "keras")] == [fits] * 3
    if not fits:
        assert findings["tensorflow"].fix == "pip install tensorflow==2.15.1"


def test_inspect_lists_checkpoints_and_evals(trained, capsys):
    model_dir = trained["model_dir"]
    info = _cli_inspect.describe(model_dir)
    steps = [c["step"] for c in info["checkpoints"]["checkpoints"]]
    assert steps[-1] == 40 and 20 in steps
    assert info["checkpoints"]["latest"].endswith("model.ckpt-40")
    assert all(c["damaged"] is None for c in info["checkpoints"]["checkpoints"])
    (evaluation,) = info["evaluations"]
    assert evaluation["dir"] == "eval" and evaluation["step"] == 40
    assert set(evaluation["metrics"]) >= {"loss", "accuracy"}
    assert evaluation["metrics"]["loss"] == pytest.approx(
        trained["est"].evaluate(_input_fn, steps=2, name="again")["loss"], rel=1e-4
    )

    assert _cli(["inspect", model_dir]) == 0
    out = capsys.readouterr().out
    assert "model.ckpt-40  <- latest" in out
    assert "latest evaluation eval/ at step 40" in out and "accuracy" in out
    assert _cli(["inspect", "--json", model_dir]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoints"]["latest"].endswith("-40")


def test_inspect_and_plot_explain_missing_things(tmp_path, capsys):
    assert _cli(["inspect", str(tmp_path / "nope")]) == 1
    assert "not a local directory" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("x")
    assert _cli(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "checkpoints: none" in out and "evaluations: none" in out and "exports: none" in out
    assert _cli(["plot", str(tmp_path)]) == 1
    assert "no scalar summaries" in capsys.readouterr().err


def test_inspect_says_when_an_eval_directorys_events_are_unreadable(tmp_path, capsys):
    # It printed "latest evaluation eval/ at step None:", and nothing below it.
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "events.out.tfevents.1.host").write_bytes(b"garbage" * 20)
    assert _cli(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "latest evaluation eval/ unreadable (damaged events):" in out, out


def test_inspect_reads_a_model_dir_named_like_a_pattern_and_writes_strict_json(
    trained, tmp_path, capsys
):
    # "lr[0.1]" as a glob matched "lr0/"…, so the checkpoints here were missed; and a
    # diverged evaluation's NaN was written as a bare NaN, which strict JSON parsers reject.
    model_dir = tmp_path / "lr[0.1]"
    shutil.copytree(trained["model_dir"], model_dir)
    os.remove(model_dir / "checkpoint")  # listed from the *.index files only
    with tf.Graph().as_default():
        writer = tf.summary.FileWriter(str(model_dir / "eval_diverged"))
        nan = tf.Summary(value=[tf.Summary.Value(tag="loss", simple_value=np.nan)])
        writer.add_summary(nan, 50)
        writer.close()
    checkpoints = _cli_inspect.describe(str(model_dir))["checkpoints"]
    assert 40 in [c["step"] for c in checkpoints["checkpoints"]]
    # TensorFlow reads no checkpoint under such a path: said once, none called damaged.
    assert "never restored" in checkpoints["state_file"] and checkpoints["latest"] is None
    assert not [c for c in checkpoints["checkpoints"] if c["damaged"]]
    assert _cli(["inspect", "--json", str(model_dir)]) == 0

    def strict(constant):
        raise AssertionError(f"not JSON: {constant}")

    info = json.loads(capsys.readouterr().out, parse_constant=strict)
    diverged = next(e for e in info["evaluations"] if e["dir"] == "eval_diverged")
    assert diverged["metrics"]["loss"] is None
    # A remote model_dir is named as such, not as missing (and nothing is fetched).
    assert _cli(["inspect", "gs://bucket/model"]) == 1
    assert "not a local directory" in capsys.readouterr().err


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", head
    return struct.unpack(">II", head[16:24])


def test_plot_writes_png_into_model_dir(trained, tmp_path, capsys, monkeypatch):
    model_dir = trained["model_dir"]
    monkeypatch.chdir(tmp_path)  # nothing may land in the current directory
    history = _cli_plot.scalar_history(model_dir)
    assert len(history["loss"]) >= 6  # summaries every 5 of 40 steps
    assert history["loss"][-1][1] < history["loss"][0][1]

    assert _cli(["plot", model_dir]) == 0
    path = os.path.join(model_dir, "training.png")
    assert f"wrote {path}" in capsys.readouterr().out
    width, height = _png_size(path)
    assert width >= 600 and height >= 300
    assert os.path.getsize(path) > 10_000
    assert os.listdir(tmp_path) == []

    # matplotlib adds ".png" to a name without a type: it said "wrote …/checkpoint".
    assert _cli(["plot", model_dir, "--out", str(tmp_path / "checkpoint")]) == 0
    assert f"wrote {tmp_path / 'checkpoint.png'}\n" in capsys.readouterr().out
    assert _png_size(tmp_path / "checkpoint.png")[0] >= 600
    out = tmp_path / "sub" / "curves.png"
    assert _cli(["plot", model_dir, "--out", str(out)]) == 0
    assert _png_size(out)[0] >= 600
    # It said "[Errno 17] File exists" for --out under a file, and "train … first" for a
    # parent of model_dirs (premade_estimators' output).
    assert _cli(["plot", model_dir, "--out", str(out / "curves.png")]) == 1
    assert "cannot write --out" in capsys.readouterr().err
    parent = tmp_path / "runs"
    shutil.copytree(model_dir, parent / "dnn")
    assert _cli(["plot", str(parent)]) == 1
    assert "plot one of the model_dirs below it: dnn." in capsys.readouterr().err


def _snapshot(root):
    return sorted(
        (os.path.relpath(os.path.join(d, f), root), os.stat(os.path.join(d, f)).st_mtime_ns)
        for d, _, files in os.walk(root)
        for f in files
    )


def _copy_checkpoints(model_dir, dest):
    os.makedirs(dest)
    for name in os.listdir(model_dir):
        if name.startswith("model.ckpt-") or name == "checkpoint":
            shutil.copy(os.path.join(model_dir, name), dest)
    return dest


def test_inspect_lists_each_checkpoint_once_for_a_relative_model_dir(
    trained, tmp_path, monkeypatch
):
    # Estimator writes relative paths into `checkpoint`, the Keras bridge absolute ones; a
    # relative MODEL_DIR used to list every checkpoint twice, the latest as "incomplete".
    absolute = _copy_checkpoints(trained["model_dir"], str(tmp_path / "absolute"))
    latest = os.path.join(absolute, "model.ckpt-40")
    tf.train.update_checkpoint_state(absolute, latest, [os.path.join(absolute, "model.ckpt-20")])
    with open(os.path.join(absolute, "checkpoint")) as f:
        assert f'"{latest}"' in f.read()
    for model_dir in (trained["model_dir"], absolute):
        monkeypatch.chdir(os.path.dirname(model_dir))
        info = _cli_inspect.describe(os.path.basename(model_dir))
        checkpoints = info["checkpoints"]["checkpoints"]
        steps = [c["step"] for c in checkpoints]
        assert steps == sorted(set(steps)) and steps[-1] == 40, checkpoints
        assert all(c["damaged"] is None for c in checkpoints)
        assert info["checkpoints"]["latest"] == os.path.join(model_dir, "model.ckpt-40")
        assert "damaged" not in _cli_inspect.format_text(info)


def test_inspect_marks_a_latest_checkpoint_whose_files_are_gone(trained, tmp_path, capsys):
    model_dir = _copy_checkpoints(trained["model_dir"], str(tmp_path / "model"))
    for path in glob.glob(os.path.join(model_dir, "model.ckpt-40.*")):
        os.remove(path)
    before = _snapshot(model_dir)
    assert _cli(["inspect", model_dir]) == 0
    assert _snapshot(model_dir) == before  # inspect only reads
    out = capsys.readouterr().out
    line40 = next(line for line in out.splitlines() if "step       40" in line)
    assert "<- latest" not in line40 and "damaged" in line40 and ".index" in line40
    # The latest is the one an Estimator restores, and the note says why.
    latest = next(line for line in out.splitlines() if "<- latest" in line)
    assert "model.ckpt-20" in latest and "damaged" not in latest, out
    assert "note: the `checkpoint` state file names model.ckpt-40, not there" in out

    with open(os.path.join(model_dir, "checkpoint"), "w") as f:
        f.write("half-written {")
    before = _snapshot(model_dir)
    assert _cli(["inspect", model_dir]) == 0
    out = capsys.readouterr().out
    assert "model.ckpt-20  <- latest" in out and "state file is unreadable" in out, out
    assert _snapshot(model_dir) == before


def test_inspect_marks_a_damaged_checkpoint(trained, tmp_path, capsys):
    model_dir = _copy_checkpoints(trained["model_dir"], str(tmp_path / "model"))
    (data,) = glob.glob(os.path.join(model_dir, "model.ckpt-40.data-*"))
    os.truncate(data, os.path.getsize(data) // 2)
    with open(glob.glob(os.path.join(model_dir, "model.ckpt-20.index"))[0], "wb") as f:
        f.write(b"garbage" * 10)
    assert _cli(["inspect", model_dir]) == 0
    lines = capsys.readouterr().out.splitlines()
    (line40,) = (line for line in lines if "step       40" in line)
    assert "damaged" in line40 and "truncated" in line40, lines
    (line20,) = (line for line in lines if "step       20" in line)
    assert "damaged" in line20 and ".index" in line20, lines
    assert not [line for line in lines if "  step " in line and "damaged" in line][2:]
    info = _cli_inspect.describe(model_dir)
    damaged = {
        os.path.basename(c["path"]): c["damaged"] for c in info["checkpoints"]["checkpoints"]
    }
    assert damaged["model.ckpt-40"] and damaged["model.ckpt-20"], damaged
    assert [name for name, why in damaged.items() if why is None], damaged


# A training run deleting old checkpoints (keep_checkpoint_max), as fast as a process can.
_CHURN = """
import os, sys
d = sys.argv[1]
while True:
    for i in range(100):
        for ext in ("index", "data-00000-of-00001", "meta"):
            open(os.path.join(d, f"model.ckpt-{i}.{ext}"), "w").close()
    for i in range(100):
        for ext in ("index", "data-00000-of-00001", "meta"):
            os.remove(os.path.join(d, f"model.ckpt-{i}.{ext}"))
"""


def test_inspect_survives_checkpoints_deleted_while_it_reads(tmp_path):
    # Before: ~1 % of reads died with "[Errno 2] No such file" (a file deleted between the
    # listing and its stat), reported as if MODEL_DIR did not exist.
    churn = subprocess.Popen([sys.executable, "-c", _CHURN, str(tmp_path)])
    try:
        runs, deadline = 0, time.monotonic() + 1.5
        while time.monotonic() < deadline or runs < 100:
            _cli_inspect.format_text(_cli_inspect.describe(str(tmp_path)))
            runs += 1
    finally:
        churn.kill()
        churn.wait()


def test_plot_reads_restarted_runs_without_warnings(trained, tmp_path, caplog):
    # Each of the fixture's two train() calls wrote a graph and a meta graph event, which
    # TensorBoard's reader warned about.
    out = str(tmp_path / "curves.png")
    with caplog.at_level(logging.WARNING):
        assert _cli(["plot", trained["model_dir"], "--out", out]) == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert _png_size(out)[0] >= 600
