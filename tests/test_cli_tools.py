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
from google.protobuf import text_format

from tfest_kit import __main__ as cli_main
from tfest_kit._tf import TF_VERSION, SavedModel, estimator, tf
from tfest_kit.cli import doctor as _cli_doctor
from tfest_kit.cli import inspect as _cli_inspect
from tfest_kit.cli import plot as _cli_plot

_METRICS_FILE = "tfest_kit_eval_metrics.json"


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


def _receiver():
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    return estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def _export(est, base, value, scratch):
    # The same layout tfest_kit.serving.best_exporter writes: metrics in assets.extra.
    metrics_path = os.path.join(scratch, f"metrics-{value}.json")
    with open(metrics_path, "w") as f:
        json.dump({"monitor": "loss", "mode": "min", "value": value}, f)
    path = est.export_saved_model(base, _receiver, assets_extra={_METRICS_FILE: metrics_path})
    return path.decode() if isinstance(path, bytes) else path


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
    base = os.path.join(model_dir, "export", "best")
    good = _export(est, base, 0.25, str(root))
    worse = _export(est, base, 0.5, str(root))
    # A plain export_saved_model(model_dir/export) puts a version straight into export/.
    direct = est.export_saved_model(os.path.join(model_dir, "export"), _receiver)
    del direct
    return {"model_dir": model_dir, "est": est, "best": good, "worse": worse}


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
    assert "doctor: all required packages fit" in out
    assert "\nbfloat16: " in out
    from tfest_kit.config import _default_thread_count

    cores = _default_thread_count()  # 2 on the project's machine
    assert ("\ncpu replicas: this process may use" in out) == (cores > 1), out


def test_doctor_names_cpu_replicas_only_on_a_cpu_with_cores_to_share(monkeypatch):
    from tfest_kit import config

    cpu, gpu = ("CPU", "/physical_device:CPU:0"), ("GPU", "/physical_device:GPU:0")
    monkeypatch.setattr(config, "_default_thread_count", lambda: 4)
    assert "run_config(cpu_replicas=N), N <= 4," in _cli_doctor._cpu_replicas([cpu])
    assert _cli_doctor._cpu_replicas([cpu, gpu]) is None  # a GPU trains the model instead
    monkeypatch.setattr(config, "_default_thread_count", lambda: 1)
    assert _cli_doctor._cpu_replicas([cpu]) is None


def test_doctor_says_whether_bfloat16_can_help(monkeypatch):
    from tfest_kit import config

    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    monkeypatch.setattr(config, "_cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    assert _cli_doctor._bfloat16().startswith("bfloat16: this CPU has avx512_bf16; run_config(")
    monkeypatch.setattr(config, "_cpu_flags", lambda: frozenset({"avx2"}))
    assert "this CPU has no bfloat16 instructions" in _cli_doctor._bfloat16()
    monkeypatch.setattr(config, "_cpu_flags", lambda: None)
    assert "does not say" in _cli_doctor._bfloat16()
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    assert "which TF_ENABLE_ONEDNN_OPTS=0 turns off" in _cli_doctor._bfloat16()
    text, code = _cli_doctor.report([], [("CPU", "/physical_device:CPU:0")], None, ["bfloat16: x"])
    assert code == 0 and text.splitlines()[-2:] == [
        "bfloat16: x",
        "doctor: all required packages fit",
    ]


def test_doctor_says_what_to_install_when_versions_do_not_fit():
    installed = {req.name: req.pin.split("==")[1] for req in _cli_doctor.REQUIREMENTS}
    installed.update({"tensorflow": "2.16.1", "keras": "3.3.3", "tensorflow-datasets": None})
    findings = _cli_doctor.check(installed, python="3.12.1")
    text, code = _cli_doctor.report(findings, [("CPU", "/physical_device:CPU:0")], None)
    assert code == 1
    assert "pip install tensorflow==2.15.1 keras==2.15.0" in text
    assert "Python 3.9-3.11" in text
    assert "tensorflow-datasets" in text  # optional: reported, not fatal
    assert "no GPU" in text
    ok = _cli_doctor.check(
        {req.name: req.pin.split("==")[1] for req in _cli_doctor.REQUIREMENTS}, python="3.11.9"
    )
    assert all(f.ok for f in ok)


@pytest.mark.parametrize(
    "tensorflow, keras, fits",
    [("2.14.1", "2.14.0", True), ("2.13.1", "2.13.1", True), ("2.12.1", "2.12.0", False)],
)
def test_doctor_accepts_the_older_tensorflows_the_suite_passed_on(tensorflow, keras, fits):
    installed = {req.name: req.pin.split("==")[1] for req in _cli_doctor.REQUIREMENTS}
    estimator = tensorflow[: tensorflow.rindex(".")] + ".0"
    installed.update({"tensorflow": tensorflow, "tensorflow-estimator": estimator, "keras": keras})
    findings = {f.name: f for f in _cli_doctor.check(installed, python="3.11.7")}
    assert [findings[n].ok for n in ("tensorflow", "tensorflow-estimator", "keras")] == [fits] * 3
    if not fits:
        assert findings["tensorflow"].fix == "pip install tensorflow==2.15.1"


def test_inspect_lists_checkpoints_evals_and_best_export(trained, capsys):
    model_dir = trained["model_dir"]
    info = _cli_inspect.describe(model_dir)
    steps = [c["step"] for c in info["checkpoints"]["checkpoints"]]
    assert steps[-1] == 40 and 20 in steps
    assert info["checkpoints"]["latest"].endswith("model.ckpt-40")
    assert all(c["bytes"] > 0 and c["modified"] for c in info["checkpoints"]["checkpoints"])
    (evaluation,) = info["evaluations"]
    assert evaluation["dir"] == "eval" and evaluation["step"] == 40
    assert set(evaluation["metrics"]) >= {"loss", "accuracy"}
    assert evaluation["metrics"]["loss"] == pytest.approx(
        trained["est"].evaluate(_input_fn, steps=2, name="again")["loss"], rel=1e-4
    )
    direct, exporter = info["exports"]
    assert direct["name"] == "." and len(direct["versions"]) == 1
    assert not direct["versions"][0]["best"]  # no metrics: nothing to call best
    assert exporter["name"] == "best"
    best = [v for v in exporter["versions"] if v["best"]]
    assert [v["path"] for v in best] == [trained["best"]]
    assert all(v["complete"] and v["bytes"] > 0 for v in exporter["versions"])

    assert _cli(["inspect", model_dir]) == 0
    out = capsys.readouterr().out
    assert "model.ckpt-40  <- latest" in out
    assert "latest evaluation eval/ at step 40" in out
    assert "accuracy" in out and "BEST" in out and "loss=0.25" in out
    assert _cli(["inspect", "--json", model_dir]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoints"]["latest"].endswith("-40")


def _copy_export(source, base, version, metrics, as_text=False):
    """A copy of export ``source`` as ``base/version``, with its best exporter ``metrics``."""
    dest = os.path.join(base, str(version))
    shutil.copytree(source, dest)
    with open(os.path.join(dest, "assets.extra", _METRICS_FILE), "w") as f:
        json.dump(metrics, f)
    if as_text:  # what best_exporter(as_text=True) writes instead of saved_model.pb
        with open(os.path.join(dest, "saved_model.pb"), "rb") as f:
            saved_model = SavedModel.FromString(f.read())
        os.remove(os.path.join(dest, "saved_model.pb"))
        with open(os.path.join(dest, "saved_model.pbtxt"), "w") as f:
            f.write(text_format.MessageToString(saved_model))
    return dest


def test_inspect_counts_text_format_exports_as_complete(trained, tmp_path, capsys):
    # best_exporter(as_text=True) writes saved_model.pbtxt: every such export was listed as
    # "incomplete" and none was marked BEST.
    base = str(tmp_path / "model" / "export" / "best_text")
    loss = {"monitor": "loss", "mode": "min"}
    _copy_export(trained["best"], base, 1, {**loss, "value": 0.5}, as_text=True)
    best = _copy_export(trained["best"], base, 2, {**loss, "value": 0.25}, as_text=True)
    (exporter,) = _cli_inspect.describe(str(tmp_path / "model"))["exports"]
    assert [v["complete"] for v in exporter["versions"]] == [True, True]
    assert [v["path"] for v in exporter["versions"] if v["best"]] == [best]
    os.remove(os.path.join(best, "variables", "variables.index"))  # still needs the weights
    assert _cli(["inspect", str(tmp_path / "model")]) == 0
    out = capsys.readouterr().out
    assert "loss=0.5  BEST" in out and "incomplete  loss=0.25" in out, out


def test_inspect_marks_best_among_the_exports_of_the_current_monitor(trained, tmp_path, capsys):
    # The user switched best_exporter(monitor="loss") to "accuracy" and restarted: comparing
    # the loss values with the accuracy values, the max over all marked a loss export BEST.
    model_dir = str(tmp_path / "model")
    base = os.path.join(model_dir, "export", "best")
    loss, accuracy = {"monitor": "loss", "mode": "min"}, {"monitor": "accuracy", "mode": "max"}
    # Versions 9 and 10 also check numeric order: as names, "10" < "11" < "9".
    _copy_export(trained["best"], base, 9, {**loss, "value": 1.3})
    _copy_export(trained["best"], base, 10, {**loss, "value": 0.7})
    _copy_export(trained["best"], base, 11, {**accuracy, "value": 0.8})
    best = _copy_export(trained["best"], base, 12, {**accuracy, "value": 0.95})
    (exporter,) = _cli_inspect.describe(model_dir)["exports"]
    assert [v["version"] for v in exporter["versions"]] == [9, 10, 11, 12]
    assert [v["path"] for v in exporter["versions"] if v["best"]] == [best]
    assert exporter["best_by"] == accuracy
    assert _cli(["inspect", model_dir]) == 0
    out = capsys.readouterr().out
    assert "accuracy=0.95  BEST" in out and "loss=1.3\n" in out, out
    note = next(line for line in out.splitlines() if "BEST compares only" in line)
    assert "accuracy" in note and "(max)" in note and "loss" in note and "switched" in note
    # Without a switch there is nothing to explain.
    assert _cli(["inspect", trained["model_dir"]]) == 0
    assert "BEST compares only" not in capsys.readouterr().out


def test_inspect_and_plot_explain_missing_things(tmp_path, capsys):
    assert _cli(["inspect", str(tmp_path / "nope")]) == 1
    assert "not a directory" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("x")
    assert _cli(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "checkpoints: none" in out and "notes.txt" in out and "exports: none" in out
    assert _cli(["plot", str(tmp_path)]) == 1
    assert "no scalar summaries" in capsys.readouterr().err


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
    steps = [c["step"] for c in _cli_inspect.describe(str(model_dir))["checkpoints"]["checkpoints"]]
    assert 40 in steps
    assert _cli(["inspect", "--json", str(model_dir)]) == 0

    def strict(constant):
        raise AssertionError(f"not JSON: {constant}")

    info = json.loads(capsys.readouterr().out, parse_constant=strict)
    diverged = next(e for e in info["evaluations"] if e["dir"] == "eval_diverged")
    assert diverged["metrics"]["loss"] is None
    # A remote model_dir is named as such, not as missing (and nothing is fetched).
    assert _cli(["inspect", "gs://bucket/model"]) == 1
    assert "is a remote path" in capsys.readouterr().err


def test_doctor_finds_tensorflow_installed_as_tensorflow_cpu(monkeypatch):
    real = _cli_doctor.metadata.version

    def version(name):
        if name == "tensorflow":
            raise _cli_doctor.metadata.PackageNotFoundError(name)
        return TF_VERSION if name == "tensorflow-cpu" else real(name)

    monkeypatch.setattr(_cli_doctor.metadata, "version", version)
    assert _cli_doctor._installed("tensorflow") == TF_VERSION


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

    out = tmp_path / "sub" / "curves.png"
    assert _cli(["plot", model_dir, "--out", str(out)]) == 0
    assert _png_size(out)[0] >= 600


def test_plot_draws_a_keras_models_loss_1_as_the_training_loss():
    # Estimator's loss summary is "loss_1" in to_estimator's graphs (Keras has an op "loss").
    keras_run = {"loss_1": [(1, 0.7), (101, 0.6)], "global_step/sec": [(101, 900.0)]}
    assert _cli_plot._with_loss_named_loss(keras_run) == {
        "loss": [(1, 0.7), (101, 0.6)],
        "global_step/sec": [(101, 900.0)],
    }
    both = {"loss": [(1, 0.5)], "loss_1": [(1, 0.2)]}  # a real "loss" stays, and so does loss_1
    assert _cli_plot._with_loss_named_loss(both) == both


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
        assert all(c["complete"] and c["bytes"] > 0 for c in checkpoints)
        assert info["checkpoints"]["latest"] == os.path.join(model_dir, "model.ckpt-40")
        assert "warning" not in _cli_inspect.format_text(info)


def test_inspect_warns_about_a_state_file_restore_would_trip_on(trained, tmp_path, capsys):
    model_dir = _copy_checkpoints(trained["model_dir"], str(tmp_path / "model"))
    for path in glob.glob(os.path.join(model_dir, "model.ckpt-40.*")):
        os.remove(path)
    before = _snapshot(model_dir)
    assert _cli(["inspect", model_dir]) == 0
    assert _snapshot(model_dir) == before  # inspect only reads
    out = capsys.readouterr().out
    warning = next(line for line in out.splitlines() if line.startswith("warning:"))
    assert "model.ckpt-40" in warning and "gone" in warning and "not a valid checkpoint" in warning
    assert "tf.train.update_checkpoint_state" in warning
    line40 = next(line for line in out.splitlines() if "model.ckpt-40" in line and "step" in line)
    assert "<- latest" in line40 and "files are missing" in line40

    with open(os.path.join(model_dir, "checkpoint"), "w") as f:
        f.write("half-written {")
    before = _snapshot(model_dir)
    assert _cli(["inspect", model_dir]) == 0
    out = capsys.readouterr().out
    assert "`checkpoint` state file is unreadable" in out and "train from step 0" in out
    assert "no `checkpoint` state file" not in out
    assert "model.ckpt-20" in out
    assert _snapshot(model_dir) == before


def test_inspect_marks_a_damaged_checkpoint(trained, tmp_path, capsys):
    model_dir = _copy_checkpoints(trained["model_dir"], str(tmp_path / "model"))
    (data,) = glob.glob(os.path.join(model_dir, "model.ckpt-40.data-*"))
    os.truncate(data, os.path.getsize(data) // 2)
    with open(glob.glob(os.path.join(model_dir, "model.ckpt-20.index"))[0], "wb") as f:
        f.write(b"garbage" * 10)
    assert _cli(["inspect", model_dir]) == 0
    lines = capsys.readouterr().out.splitlines()
    (line40,) = (line for line in lines if "model.ckpt-40" in line)
    assert "damaged" in line40 and "truncated" in line40, lines
    (line20,) = (line for line in lines if "model.ckpt-20" in line)
    assert "damaged" in line20 and ".index" in line20, lines
    assert not [line for line in lines if "model.ckpt-" in line and "damaged" in line][2:]
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


def test_inspect_shows_unfinished_exports_and_recognises_an_export_dir(tmp_path, capsys):
    temp = tmp_path / "model" / "export" / "best" / "temp-1712345678"
    (temp / "variables").mkdir(parents=True)
    assert _cli(["inspect", str(tmp_path / "model")]) == 0
    out = capsys.readouterr().out
    assert "exports export/best/:" in out and "(no numbered export directories)" in out
    assert "temp-1712345678  (unfinished" in out

    base = str(tmp_path / "model" / "export" / "best")
    assert _cli(["inspect", base]) == 0
    out = capsys.readouterr().out
    assert "looks like an export" in out and f"python -m tfest_kit signature {base}" in out
    assert _cli(["inspect", str(temp / "variables" / "nothing")]) == 1
    err = capsys.readouterr().err
    assert "does not exist" in err and "model_dir given to the Estimator" in err
    (tmp_path / "model.ckpt-1.index").write_text("")
    assert _cli(["plot", str(tmp_path / "model.ckpt-1.index")]) == 1
    err = capsys.readouterr().err
    assert "is not a directory but a file" in err and repr(str(tmp_path)) in err


def test_plot_rejects_an_out_it_cannot_write_as_named(trained, tmp_path, capsys):
    model_dir = trained["model_dir"]
    before = _snapshot(model_dir)
    (tmp_path / "file.txt").write_text("x")
    cases = {
        str(tmp_path): "is a directory. Name the image file, e.g. --out",
        str(tmp_path / "curves"): "must end in an image format matplotlib writes",
        str(tmp_path / "curves.xyz"): "E.g. --out " + str(tmp_path / "curves.png"),
        str(tmp_path / "file.txt" / "curves.png"): "Pass --out with a writable path",
    }
    for out, message in cases.items():
        assert _cli(["plot", model_dir, "--out", out]) == 1, out
        err = capsys.readouterr().err
        assert message in err and err.startswith("plot: ") and err.count("\n") == 1, err
    # matplotlib used to append .png silently and report the name without it.
    assert sorted(os.listdir(tmp_path)) == ["file.txt"]
    assert _snapshot(model_dir) == before


def test_plot_reads_restarted_runs_without_warnings(trained, tmp_path, caplog):
    # Each of the fixture's two train() calls wrote a graph and a meta graph event, which
    # TensorBoard's reader warned about.
    out = str(tmp_path / "curves.png")
    with caplog.at_level(logging.WARNING):
        assert _cli(["plot", trained["model_dir"], "--out", out]) == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert _png_size(out)[0] >= 600


def test_plot_without_matplotlib_says_what_to_install(trained, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    assert _cli(["plot", trained["model_dir"], "--out", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("plot: matplotlib is needed") and "pip install matplotlib" in err
