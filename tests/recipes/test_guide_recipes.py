"""The tensorflow.org-guide recipes, each run at test size as a subprocess.

Each test asserts the exit code, the printed metrics above a floor and that the exported
SavedModel answers through ``tfest_kit.serving.Predictor`` (the recipes print its answer).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, interrupt_program, run_program, run_recipe_cases
from tfest_kit._tf import tf

pytestmark = pytest.mark.slow


def _number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, f"pattern {pattern!r} not in the output:\n{text}"
    return float(match.group(1))


def _exports(model_dir) -> list:
    base = os.path.join(model_dir, "export")
    return [d for d in os.listdir(base) if d.isdigit()]


def _assert_model_dir_first_and_export_line(out: str, model_dir) -> None:
    # Printed first, so that an interrupted run with a temporary model_dir still names it; and
    # only there. The export line is worded as in every recipe.
    assert out.splitlines()[0] == f"model_dir: {model_dir}", out
    assert out.count("model_dir: ") == 1, out
    export = os.path.join(model_dir, "export", _exports(model_dir)[0])
    assert f"SavedModel exported: {export}" in out.splitlines(), out


def test_iris_custom_estimator(tmp_path):
    proc = run_program(
        ["-m", "recipes.iris_custom_estimator", "--steps=300", f"--model_dir={tmp_path}"]
    )
    out = proc.stdout
    assert (tmp_path / "data" / "train.csv").exists() and (tmp_path / "data" / "test.csv").exists()
    assert _number(r"Test set accuracy: ([\d.]+)", out) >= 0.9
    assert len(re.findall(r'Prediction is "(\w+)" \([\d.]+%\), expected "\1"', out)) >= 2
    assert "Predictor answer: ['Setosa', 'Versicolor', 'Virginica']" in out
    assert len(_exports(tmp_path)) == 1
    _assert_model_dir_first_and_export_line(out, tmp_path)
    # The TRAIN branch writes the accuracy summary for TensorBoard.
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(tmp_path))
    # Progress from ProgressHook; TensorFlow's own INFO lines only with --tensorflow_info.
    assert re.search(r"step 300/300 \(100%\), loss = ", proc.stderr), proc.stderr
    assert "Calling model_fn" not in proc.stderr and "Using config" not in proc.stderr
    assert "training from step 0 to 300" in out.splitlines(), out
    # A rerun says there is nothing to train (it said nothing), and reuses the export.
    proc = run_program(
        ["-m", "recipes.iris_custom_estimator", "--steps=300", f"--model_dir={tmp_path}"]
    )
    lines = proc.stdout.splitlines()
    assert f"already trained to step 300 in {tmp_path}; raise --steps to train more" in lines
    assert not any(line.startswith("training ") for line in lines), proc.stdout
    assert any(line.startswith("SavedModel already exported") for line in lines), proc.stdout


def test_iris_csv_files_leave_out_the_three_held_out_flowers(tmp_path):
    # The flowers the recipe predicts "unseen" used to be in the files (2 train, 1 test).
    # In a subprocess: importing a recipe defines its absl flags in this process.
    # Written twice, as by two runs (or tasks) into one model_dir: the second replaces each
    # file whole (a new inode) where it used to rewrite it under the first one's reader.
    script = (
        "import os, sys; from recipes.iris_custom_estimator import write_csv_files; "
        "inode = os.stat(write_csv_files(sys.argv[1], int(sys.argv[2]))[0]).st_ino; "
        "print(os.stat(write_csv_files(sys.argv[1], int(sys.argv[2]))[0]).st_ino != inode)"
    )
    held_out = [(5.1, 3.3, 1.7, 0.5), (5.9, 3.0, 4.2, 1.5), (6.9, 3.1, 5.4, 2.1)]
    for seed in (0, 1):
        proc = run_program(["-c", script, str(tmp_path / str(seed)), str(seed)])
        assert proc.stdout == "True\n", proc.stdout
        assert sorted(os.listdir(tmp_path / str(seed))) == ["test.csv", "train.csv"]
        rows = {}
        for name in ("train.csv", "test.csv"):
            lines = (tmp_path / str(seed) / name).read_text().splitlines()[1:]
            rows[name] = [tuple(float(v) for v in line.split(",")[:4]) for line in lines]
        assert len(rows["test.csv"]) == 30 and len(rows["train.csv"]) == 117
        for flower in held_out:
            assert flower not in rows["train.csv"] + rows["test.csv"], (seed, flower)


def _files(directory) -> dict:
    return {
        str(p): (p.stat().st_mtime_ns, p.stat().st_size, p.read_bytes())
        for p in directory.rglob("*")
        if p.is_file()
    }


def test_a_second_run_into_a_model_dir_is_refused_before_it_writes_and_the_first_finishes(
    tmp_path,
):
    # iris rewrote model_dir/data/*.csv before the writer lock: the first run died reading a
    # half-written file ("Can't read header of file") while the second trained on.
    model_dir = tmp_path / "iris"
    args = ["-m", "recipes.iris_custom_estimator", "--steps=1000", f"--model_dir={model_dir}"]
    out_path = tmp_path / "first.out"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    with open(out_path, "w") as out:
        first = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 120
        while "training from step 0 to 1000" not in out_path.read_text():
            assert first.poll() is None and time.monotonic() < deadline, out_path.read_text()
            time.sleep(0.1)
        first.send_signal(signal.SIGSTOP)  # holds the lock, and changes no file meanwhile
        before = _files(model_dir)
        assert str(model_dir / "data" / "train.csv") in before
        second = run_program(args, check_exit=1)
        assert _files(model_dir) == before  # not one file touched
        assert second.stdout == ""
        lines = second.stderr.strip().splitlines()  # one line, naming the first run and the fix
        assert len(lines) == 1 and lines[0].startswith("iris_custom_estimator: error: "), lines
        for words in ("Another process is training", str(model_dir), f"pid {first.pid}"):
            assert words in lines[0], lines
        assert "another model_dir" in lines[0], lines
        first.send_signal(signal.SIGCONT)
        assert first.wait(120) == 0, out_path.read_text()
    finally:
        first.kill()
        first.wait()
    output = out_path.read_text()
    assert "Test set accuracy: " in output and "Traceback" not in output, output
    assert "Predictor answer: ['Setosa', 'Versicolor', 'Virginica']" in output, output


def test_premade_estimators(tmp_path):
    proc = run_program(
        ["-m", "recipes.premade_estimators", "--steps=150", f"--model_dir={tmp_path}"]
    )
    out = proc.stdout
    rows = re.findall(r"^(\w+Classifier)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert [r[0] for r in rows] == [
        "LinearClassifier",
        "DNNClassifier",
        "DNNLinearCombinedClassifier",
    ], out
    accuracy = {name: float(acc) for name, acc, _, _ in rows}
    auc = {name: float(a) for name, _, a, _ in rows}
    assert min(accuracy.values()) >= 0.75 and max(accuracy.values()) >= 0.92, out
    assert max(auc.values()) >= 0.95, out
    best = re.search(r"^Best by AUC: (\w+)$", out, re.M).group(1)
    assert auc[best] == max(auc.values())
    assert _number(r"Predictor agreement: (\d+)/5", out) >= 4
    # Each model's progress under its name, without the three RunConfig dumps.
    assert out.count("training ") == 3 and proc.stderr.count("step 150/150 (100%)") == 3
    assert "training LinearClassifier from step 0 to 150" in out.splitlines(), out
    assert "Using config" not in proc.stderr, proc.stderr
    assert len(_exports(tmp_path)) == 1
    _assert_model_dir_first_and_export_line(out, tmp_path)
    # The printed model_dir holds no checkpoint (`inspect` said none): the second line names
    # the directories that do.
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    listed = out.splitlines()[1].split(": ", 1)[1].split(", ")
    assert listed == [str(tmp_path / d) for d in ("linear", "dnn", "wide_deep")], out
    assert all(tf.train.latest_checkpoint(d).endswith("model.ckpt-150") for d in listed)
    # A rerun trains nothing: it used to say "training LinearClassifier" all the same.
    proc = run_program(
        ["-m", "recipes.premade_estimators", "--steps=150", f"--model_dir={tmp_path}"]
    )
    assert "training " not in proc.stdout, proc.stdout
    for name, subdir in (("LinearClassifier", "linear"), ("DNNClassifier", "dnn")):
        line = (
            f"{name} already trained to step 150 in {tmp_path / subdir}; raise --steps to "
            "train more"
        )
        assert line in proc.stdout.splitlines(), proc.stdout


def test_tfrecord_head(tmp_path):
    proc = run_program(["-m", "recipes.tfrecord_head", "--steps=300", f"--model_dir={tmp_path}"])
    out = proc.stdout
    shards = sorted(os.listdir(tmp_path / "data"))
    assert len([s for s in shards if s.startswith("train.tfrecord-")]) == 4
    assert _number(r"Test accuracy: ([\d.]+)", out) >= 0.9
    assert _number(r"Predictor accuracy on 45 serialized test examples: ([\d.]+)", out) >= 0.9
    # write_tfrecord's INFO lines say what was written; the recipe's own line repeated them.
    assert "write_tfrecord: 133 examples in 4 file(s)" in proc.stderr, proc.stderr
    assert "write_tfrecord: 45 examples in 2 file(s)" in proc.stderr, proc.stderr
    assert "Wrote " not in out, out
    assert "training from step 0 to 300" in out.splitlines(), out
    assert len(_exports(tmp_path)) == 1
    _assert_model_dir_first_and_export_line(out, tmp_path)


def test_tpu_digits_falls_back_and_learns(tmp_path):
    proc = run_program(["-m", "recipes.tpu_digits", "--steps=300", f"--model_dir={tmp_path}"])
    out, log = proc.stdout, proc.stderr
    assert log.count("No TPU found") == 1, log  # one line, though it builds three
    # Warned on every run, though no TPU export was asked for.
    assert "export_to_tpu" not in log, log
    assert "training from step 0 to 300" in out.splitlines(), out
    assert len(re.findall(r"loss = [\d.]+, step = \d+", log)) >= 2, log
    # eval_metrics as (metric_fn, [labels, logits]) and as (metric_fn, {"labels", "logits"}).
    list_form = _number(r"Test accuracy on 360 images: ([\d.]+) .*as a list", out)
    dict_form = _number(r"Test accuracy on 360 images: ([\d.]+) .*as a dict", out)
    assert list_form >= 0.9 and dict_form == list_form
    # The last batch is padded with weight-0 images, not dropped: evaluation and the export
    # judge the same 360 images (one image is 0.0028).
    served = _number(r"Predictor accuracy on 360 test images: ([\d.]+)", out)
    assert abs(served - list_form) < 0.001, out
    assert len(_exports(tmp_path)) == 1
    _assert_model_dir_first_and_export_line(out, tmp_path)
    # Another --seed splits the images otherwise: resuming would test on trained images.
    before = sorted(os.listdir(tmp_path))
    args = ["-m", "recipes.tpu_digits", "--steps=400", "--seed=1", f"--model_dir={tmp_path}"]
    proc = run_program(args, check_exit=1)
    assert "tpu_digits: error: " in proc.stderr and "Traceback" not in proc.stderr
    assert "trained with --seed=0; this run has --seed=1" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == before

    # A garbled `checkpoint` state file, then none: training resumes from the newest intact
    # checkpoint, and the start line says so (it said "from step 0", read before recovery).
    # Binary junk: a traceback from the recipe's own check (tf.train.latest_checkpoint). A
    # damaged newest checkpoint, asked for again: "already trained to step 303".
    state = tmp_path / "checkpoint"
    for steps, damage in ((301, "garbled"), (302, "deleted"), (303, "binary"), (303, "cut")):
        if damage == "garbled":
            state.write_text("model_checkpoint_path: {{{ not a state file")
        elif damage == "binary":
            state.write_bytes(bytes(range(256)))
        elif damage == "cut":
            (data,) = tmp_path.glob("model.ckpt-303.data-*")
            os.truncate(data, data.stat().st_size // 2)
        else:
            state.unlink()
        args = ["-m", "recipes.tpu_digits", f"--steps={steps}", f"--model_dir={tmp_path}"]
        out = run_program(args).stdout
        assert f"training from step {steps - 1} to {steps}" in out.splitlines(), (damage, out)
        assert "from step 0" not in out, (damage, out)
        assert tf.train.latest_checkpoint(str(tmp_path)).endswith(f"model.ckpt-{steps}"), damage


_NOT_POSITIVE = "is not a positive integer"
_LAYER_SIZES = "--hidden_units must be a comma-separated list of layer sizes >= 1"


_BAD_FLAG_VALUES = {
    "iris_custom_estimator": [
        ("--batch_size=0", _NOT_POSITIVE),
        # A layer of 0 units aborted the process inside oneDNN (exit 134); the other bad
        # lists ("a", "") are in test_flags.py.
        ("--hidden_units=0", _LAYER_SIZES),
        # A rate of 0 trained nothing and a negative one climbed the loss, without a word.
        ("--learning_rate=0", "--learning_rate must be > 0"),
    ],
    "premade_estimators": [
        # A negative count used to slice the held-out rows from the end: "agreement 111/-1".
        ("--num_queries=-1", _NOT_POSITIVE),
        ("--hidden_units=0,16", _LAYER_SIZES),
        ("--dnn_learning_rate=-1", "--dnn_learning_rate must be > 0"),
    ],
    "tfrecord_head": [
        ("--num_shards=0", _NOT_POSITIVE),
        ("--learning_rate=-0.01", "--learning_rate must be > 0"),
    ],
    "tpu_digits": [
        ("--iterations_per_loop=0", _NOT_POSITIVE),
        ("--learning_rate=0", "--learning_rate must be > 0"),
    ],
}


@pytest.mark.parametrize("recipe", sorted(_BAD_FLAG_VALUES))
def test_recipes_reject_bad_flag_values_and_an_unusable_model_dir_before_any_work(tmp_path, recipe):
    bad_values = _BAD_FLAG_VALUES[recipe]
    model_dirs = [tmp_path / str(i) for i in range(len(bad_values))]
    for model_dir in model_dirs:
        model_dir.mkdir()
    cases = [[flag, f"--model_dir={d}"] for (flag, _), d in zip(bad_values, model_dirs)]
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    (home / "a_file").write_text("")
    # "~" as the shell leaves it after "--model_dir=", under a file: cannot be created.
    tilde = ["--model_dir=~/a_file/run", "--steps=1"]
    *procs, unusable = run_recipe_cases(
        recipe, [*cases, {"args": tilde, "env": {"HOME": str(home)}, "cwd": cwd}]
    )
    for (flag, message), model_dir, proc in zip(bad_values, model_dirs, procs):
        assert proc.returncode == 1, (flag, proc.stdout, proc.stderr)
        # absl shows the value as parsed (--learning_rate=0.0, --hidden_units=['0']).
        name = flag.split("=")[0]
        assert f"flag {name}=" in proc.stderr and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert not list(model_dir.iterdir()), flag

    assert unusable.returncode == 1
    assert unusable.stderr.strip().splitlines()[-1] == (
        f"{recipe}: error: cannot create --model_dir {home / 'a_file' / 'run'}: Not a "
        "directory. Give a directory that can be created and written to"
    ), unusable.stderr
    assert "Traceback" not in unusable.stderr
    assert not list(cwd.iterdir())  # not ./~/a_file/run
    # Checked before any work: premade_estimators used to build its three models first and
    # print their RunConfigs (21 lines) before this one.
    assert unusable.stdout == "" and len(unusable.stderr.strip().splitlines()) == 1


def test_ctrl_c_stops_at_a_checkpoint_and_another_recipe_refuses_that_model_dir(tmp_path):
    # tpu_digits stands for the recipes that used to end Ctrl-C with a 40-80 line traceback;
    # they share the handling (recipes/_interrupt.py, tested in test_interrupt.py).
    model_dir = tmp_path / "digits"
    args = ["-m", "recipes.tpu_digits", "--steps=100000", "--iterations_per_loop=1"]
    # Ctrl-C once training is under way.
    returncode, out, err = interrupt_program([*args, f"--model_dir={model_dir}"], "loss = ")
    assert returncode == 130, out + err
    assert "Traceback" not in err
    lines = out.splitlines()
    assert lines[0] == f"model_dir: {model_dir}", out  # first: named even when interrupted
    match = re.fullmatch(
        rf"interrupted at step (\d+)/100000; checkpoint saved. To resume, rerun with "
        rf"--model_dir={re.escape(str(model_dir))} \(and the same flags\)",
        lines[-1],
    )
    assert match, out
    assert (model_dir / f"model.ckpt-{match.group(1)}.index").is_file()
    assert "Test accuracy" not in out  # stops instead of going on to evaluation

    # Another recipe given that model_dir refuses it in one line and writes nothing there
    # (iris used to print 158 lines of "Key beta1_power not found in checkpoint").
    before = sorted(os.listdir(model_dir))
    proc = run_program(
        ["-m", "recipes.iris_custom_estimator", f"--model_dir={model_dir}"], check_exit=1
    )
    assert proc.stderr.strip().splitlines() == [
        f"iris_custom_estimator: error: --model_dir {model_dir} holds a run of recipe "
        "tpu_digits (its checkpoint and tpu_digits_flags.json), not of iris_custom_estimator; "
        "give another --model_dir"
    ], proc.stderr
    assert proc.stdout == ""
    assert sorted(os.listdir(model_dir)) == before
