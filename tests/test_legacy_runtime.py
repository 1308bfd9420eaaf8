"""The legacy runner's TF 1.15 runtime: log levels, reference variables, guarded Estimators.

Each test runs an unmodified TF1 script from tests/legacy_scripts/ through
``python -m tfest_kit.legacy`` in a subprocess, as tests/test_legacy.py does.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, captured_tf_log, run_program
from tfest_kit import tpu
from tfest_kit._tf import TF_VERSION, tf
from tfest_kit.legacy._namespace import build_namespace
from tfest_kit.legacy._shim import Report

SCRIPTS = ROOT / "tests" / "legacy_scripts"
_LOSS_LINE = re.compile(r"loss = [0-9.e+-]+, step = (\d+)")
_HINT = "Training logs its loss lines at INFO"
_TF_MINOR = tuple(int(part) for part in TF_VERSION.split(".")[:2])


def _legacy(script: str, *args, check_exit: int = 0) -> subprocess.CompletedProcess:
    command = ["-m", "tfest_kit.legacy", str(SCRIPTS / script), *map(str, args)]
    return run_program(command, timeout=240, check_exit=check_exit)


def _result(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["absl", "tf", "none"])
def test_loss_lines_follow_the_scripts_own_log_level(tmp_path, how):
    # absl.logging.set_verbosity(INFO) before absl.app.run (mnist_tpu.py) showed no loss line:
    # the runner held TensorFlow's logger at WARNING where TF 1.15 let it follow absl.
    proc = _legacy("loss_lines.py", how, tmp_path / "model")
    output = proc.stdout + proc.stderr
    assert "trained to step 30" in proc.stdout
    steps = [int(step) for step in _LOSS_LINE.findall(output)]
    if how == "none":  # TF 1.15's WARNING level: no loss line, one hint saying how
        assert steps == [], output
        assert output.count(_HINT) == 1, output
        assert "set_verbosity" in output
        return
    assert output.count(_HINT) == 0, output
    # Each loss line once: absl's handler and TensorFlow's own would both print it.
    assert len(steps) >= 3 and len(set(steps)) == len(steps), output
    if how == "absl":
        assert re.search(r"^I\d{4} .*loss = ", output, re.M), output  # absl's format


def test_reference_variables_as_tf115(tmp_path):
    # TF2's resource variables raised NotImplementedError in initialized_value(), and a
    # cond reading an uninitialised variable (ExponentialMovingAverage.apply) failed.
    result = _result(_legacy("ref_variables.py", tmp_path / "model"))
    assert result["types"] == {
        "get_variable": "RefVariable",
        "use_resource=True": "ResourceVariable",
        "Variable": "RefVariable",
    }
    assert result["after_enable_resource_variables"] == "ResourceVariable"
    # TF2's Keras initializers drew a seed of their own for tf.layers / tf.keras.layers.
    assert result["seeded_kernels_repeat"] is True
    assert result["model_fn_types"] == ["RefVariable"]
    assert result["doubled"] == [2.0, 4.0]
    assert result["assigned"] == [5.0, 6.0]
    # Two accumulated micro-batch gradients, averaged, applied once: v = 0.1 * (1, 1).
    assert result["accumulated"] == pytest.approx([0.1, 0.1])
    slots = ("", "/Adam", "/Adam_1", "/ExponentialMovingAverage")
    variables = ("hidden/bias", "hidden/kernel", "out/w")
    assert result["checkpoint"] == sorted(
        ["beta1_power", "beta2_power", "global_step"] + [v + s for v in variables for s in slots]
    )


def test_second_plain_estimator_into_one_model_dir_is_refused(tmp_path):
    model_dir, release = tmp_path / "model", tmp_path / "release"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(
        [
            sys.executable,
            *("-m", "tfest_kit.legacy", str(SCRIPTS / "model_dir_guard.py")),
            f"--model_dir={model_dir}",
            f"--hold_until={release}",
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout.readline().strip() == "training"  # holds the lock from here
        second = _legacy("model_dir_guard.py", f"--model_dir={model_dir}", check_exit=1)
        assert "ModelDirLockedError" in second.stderr
        assert f"Another process is training into model_dir {model_dir}" in second.stderr
        assert f"pid {first.pid}" in second.stderr
        release.touch()
        out, err = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {
        "restored_step": 0,
        "final_step": 20,
        "is_estimator": True,
    }


@pytest.mark.parametrize(
    "flag, said", [("--max_steps=abc", "flag --max_steps=abc"), ("--max_steps", "Missing value")]
)
def test_a_bad_flag_value_for_tf_app_run_is_said_in_absls_two_lines(tmp_path, flag, said):
    # TF 1.15's tf.app.run let absl's error out as a 60-line traceback.
    proc = _legacy("model_dir_guard.py", f"--model_dir={tmp_path}", flag, check_exit=1)
    assert f"FATAL Flags parsing error: {said}" in proc.stderr, proc.stderr
    assert "--helpshort" in proc.stderr and "Traceback" not in proc.stderr
    assert not os.listdir(tmp_path)  # main never ran


def test_plain_estimator_resumes_past_a_garbled_state_file(tmp_path):
    model_dir = tmp_path / "model"
    _legacy("model_dir_guard.py", f"--model_dir={model_dir}", "--max_steps=20")
    (model_dir / "checkpoint").write_text('model_checkpoint_path: "model.ck')
    proc = _legacy("model_dir_guard.py", f"--model_dir={model_dir}", "--max_steps=30")
    # Without the recovery TensorFlow ignores the state file and trains from step 0 again.
    assert _result(proc)["restored_step"] == 20
    assert _result(proc)["final_step"] == 30
    assert "resuming from model.ckpt-20" in proc.stderr


def test_canned_estimators_are_guarded_and_isinstance_holds_as_tf1(tmp_path):
    estimator = build_namespace(Report()).estimator
    model_dir = str(tmp_path / "model")
    x = tf.feature_column.numeric_column("x")
    linear = estimator.LinearRegressor([x], model_dir=model_dir)

    def input_fn():
        data = ({"x": [[1.0], [2.0]]}, [[2.0], [4.0]])
        return tf.data.Dataset.from_tensors(data).repeat()

    linear.train(input_fn, steps=2)
    (tmp_path / "model" / "checkpoint").write_text("garbled")
    with captured_tf_log(logging.WARNING) as lines:
        linear.train(input_fn, steps=1)
    assert linear.get_variable_value("global_step") == 3  # resumed, not trained from 0
    assert any("resuming from model.ckpt-2" in line for line in lines), lines
    # Evaluate, predict and export restore it too (TensorFlow: initial weights, "Couldn't find
    # trained model"); a damaged checkpoint_path given is named.
    trained = next(linear.predict(input_fn))["predictions"]
    (tmp_path / "model" / "checkpoint").write_text("garbled")
    assert linear.evaluate(input_fn, steps=1)["global_step"] == 3
    assert next(linear.predict(input_fn))["predictions"] == pytest.approx(trained)
    receiver = tf.estimator.export.build_parsing_serving_input_receiver_fn(
        tf.feature_column.make_parse_example_spec([x])
    )
    for export in (linear.export_saved_model, linear.export_savedmodel):
        assert os.path.isdir(export(str(tmp_path / "export"), receiver))
    (tmp_path / "model" / "model.ckpt-2.index").write_bytes(b"\0" * 10)
    with pytest.raises(ValueError, match="Checkpoint .*model.ckpt-2 cannot be restored"):
        linear.export_savedmodel(
            str(tmp_path / "export"), receiver, checkpoint_path=f"{model_dir}/model.ckpt-2"
        )
    # As in TF 1.x: every Estimator is a tf.estimator.Estimator, and a script's subclass may
    # not override train.
    fallback = tpu.TPUEstimator(lambda features, labels, mode: None, use_tpu=False)
    assert isinstance(linear, estimator.Estimator) and isinstance(fallback, estimator.Estimator)
    assert issubclass(tf.estimator.DNNClassifier, estimator.Estimator)

    class OwnTrain(estimator.Estimator):
        def train(self, *args, **kwargs):
            return self

    with pytest.raises(ValueError, match="cannot override members of Estimator"):
        OwnTrain(lambda features, labels, mode: None)


def test_params_may_be_any_object_as_in_tf1(tmp_path):
    # CS230-style projects pass a Params object (attributes, no .get); TF 1.15's Estimator
    # handed it to model_fn as it was (omoindrot/tensorflow-triplet-loss).
    class Params:
        learning_rate = 0.25

    def model_fn(features, labels, mode, params):
        w = tf.get_variable("w", [], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(w - features))
        step = tf.train.GradientDescentOptimizer(params.learning_rate)
        train_op = step.minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = build_namespace(Report()).estimator
    est = estimator.Estimator(model_fn, str(tmp_path / "model"), params=Params())
    est.train(lambda: tf.data.Dataset.from_tensors(1.0).repeat(), steps=3)
    assert est.get_variable_value("global_step") == 3
    assert est.get_variable_value("w") == pytest.approx(1 - 0.5**3)  # halves the gap each step


def _legacy_inline(tmp_path, source: str, *args, check_exit: int = 0, report: bool = False):
    script = tmp_path / "script.py"
    script.write_text(source)
    command = ["-m", "tfest_kit.legacy", *(["--report"] if report else []), str(script), *args]
    return run_program(command, timeout=240, check_exit=check_exit, cwd=tmp_path)


def test_numpy_prints_and_names_as_numpy_1(tmp_path):
    # NumPy 2 (the 2.21 stack) printed `{'accuracy': np.float32(0.0625)}` where TF 1.15-era
    # scripts logged `{'accuracy': 0.0625}`; np.asscalar (NumPy <= 1.22) was missing on both.
    proc = _legacy_inline(
        tmp_path,
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "print({'accuracy': np.float32(0.0625), 'global_step': np.int64(3)})\n"
        "print('asscalar', repr(np.asscalar(np.array([2.5]))))\n",
    )
    assert "{'accuracy': 0.0625, 'global_step': 3}" in proc.stdout, proc.stdout
    assert "asscalar 2.5" in proc.stdout, proc.stdout


def test_a_refused_name_is_printed_as_written(tmp_path):
    # Python 3.10+ appended its guess at a near name the stand-in has, after our full stop:
    # "… its TensorFlow 2 equivalent.. Did you mean: 'CsvDataset'?".
    source = (
        "import tensorflow as tf\n"
        "try:\n"
        "    tf.contrib.data.Dataset.range(3)\n"  # TF 1.3's, moved to tf.data by TF 1.4
        "except AttributeError as e:\n"
        "    print('REFUSED', e)\n"
        "tf.contrib.data.CsvDatasett\n"
    )
    proc = _legacy_inline(tmp_path, source, check_exit=1)
    assert "Replace it in the script with tf.data.Dataset (TF 1.4 moved it" in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert "tf.contrib.data.CsvDatasett is not provided" in last, proc.stderr
    assert last.endswith("equivalent."), last


def test_forwarders_tensorflow_dropped_still_forward(tmp_path):
    # TF 1.13-2.15 forwarded tensorflow.python.estimator.* to tensorflow_estimator (TPU-era
    # projects import it), and training_ops to gen_training_ops (custom optimizers); on 2.21
    # both were a ModuleNotFoundError under the runner.
    proc = _legacy_inline(
        tmp_path,
        "import json\n"
        "import tensorflow as tf\n"
        "from tensorflow.python.training import training_ops\n"
        "from tensorflow.python.estimator import estimator\n"
        "from tensorflow.python.estimator.canned import head as head_lib\n"
        "import tensorflow.python.estimator.run_config as run_config_lib\n"
        "from tensorflow_estimator.python.estimator import estimator as real\n"
        "from tensorflow_estimator.python.estimator import run_config as real_config\n"
        "print(json.dumps({\n"
        "    'estimator': estimator.Estimator is real.Estimator,\n"
        "    'run_config': run_config_lib.RunConfig is real_config.RunConfig,\n"
        "    'head': hasattr(head_lib, '_Head'),\n"
        "    'training_ops': callable(training_ops.resource_apply_adam),\n"
        "}))\n",
    )
    assert set(_result(proc)) == {"estimator", "run_config", "head", "training_ops"}
    assert all(_result(proc).values()), _result(proc)


def test_tf115s_keras_packages_tensorflow_dropped_are_the_scripts_keras(tmp_path):
    # nlp_estimator_tutorial (TF 1.x tutorials): `from tensorflow.python.keras.datasets import
    # imdb` was a ModuleNotFoundError; TensorFlow 2's own older Keras copy has no datasets,
    # preprocessing, applications or estimator. TF 1.15's were tf.keras's.
    proc = _legacy_inline(
        tmp_path,
        "import json\n"
        "import tensorflow as tf\n"
        "from tensorflow.python.keras.preprocessing import sequence\n"
        "from tensorflow.python.keras.datasets import imdb\n"
        "import tensorflow.python.keras.applications.mobilenet as mobilenet\n"
        "from tensorflow.python.keras.estimator import model_to_estimator\n"
        "padded = sequence.pad_sequences([[1, 2, 3], [4]], maxlen=4, padding='post')\n"
        "print(json.dumps({\n"
        "    'padded': padded.tolist(),\n"
        "    'imdb': imdb.load_data is tf.keras.datasets.imdb.load_data,\n"
        "    'mobilenet': mobilenet.MobileNet is tf.keras.applications.mobilenet.MobileNet,\n"
        "    'estimator': model_to_estimator is tf.keras.estimator.model_to_estimator,\n"
        "}))\n",
        report=True,
    )
    result = next(line for line in proc.stdout.splitlines() if line.startswith("{"))
    assert json.loads(result) == {
        "padded": [[1, 2, 3, 0], [4, 0, 0, 0]],
        "imdb": True,
        "mobilenet": True,
        "estimator": True,
    }, proc.stdout
    # --report names them among TensorFlow's private modules, with where they went.
    private = proc.stdout[proc.stdout.index("From TensorFlow's private modules") :]
    assert "tensorflow.python.keras.datasets (-> " in private, proc.stdout
    assert "keras.datasets)" in private, proc.stdout


def test_user_codes_keras_is_keras_2(tmp_path):
    # On 2.21 `import keras` gave user code Keras 3: a model_fn with keras.layers.Dense
    # trained, then evaluate failed with "Key dense_2/bias not found in checkpoint".
    (tmp_path / "mylayers.py").write_text("from keras import layers\n")
    proc = _legacy_inline(
        tmp_path,
        "import importlib, json, sys\n"
        "import numpy as np\n"
        "import tensorflow as tf\n"
        "import keras\n"
        "from keras.layers import Dense\n"
        "import mylayers\n"
        "x = np.random.RandomState(0).rand(32, 4).astype(np.float32)\n"
        "y = (x.sum(1) > 2).astype(np.int64)\n"
        "def model_fn(features, labels, mode):\n"
        "    logits = mylayers.layers.Dense(2)(Dense(8, activation='relu')(features['x']))\n"
        "    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)\n"
        "    op = tf.train.AdamOptimizer(0.05).minimize(loss, tf.train.get_global_step())\n"
        "    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op)\n"
        "est = tf.estimator.Estimator(model_fn, model_dir=sys.argv[1])\n"
        "est.train(tf.estimator.inputs.numpy_input_fn({'x': x}, y, batch_size=16,\n"
        "                                             num_epochs=None, shuffle=True), steps=2)\n"
        "loss = est.evaluate(tf.estimator.inputs.numpy_input_fn({'x': x}, y, shuffle=False))\n"
        "print(json.dumps({'keras': keras.__version__, 'loss': float(loss['loss']),\n"
        "                  'installed': importlib.import_module('keras').__version__}))\n",
        tmp_path / "model",
    )
    result = _result(proc)
    assert result["keras"].startswith("2.") and result["loss"] > 0, result
    # Installed libraries (importlib here) keep the real keras: Keras 3 on 2.21.
    assert result["installed"].startswith("3." if _TF_MINOR >= (2, 16) else "2."), result


def test_report_says_what_runs_with_compat_v1_on_this_tensorflow():
    # On 2.21 --report listed tf.estimator.* and tf.layers.* as running unchanged with
    # `import tensorflow.compat.v1 as tf` (TensorFlow 2.16+ has no tf.compat.v1.estimator, and
    # its tf.compat.v1.layers refuses under Keras 3), and said "TensorFlow 2.15 has no such name".
    report = Report()
    ns = build_namespace(report)
    used = ns.estimator.Estimator, ns.layers.Dense, ns.train.Optimizer, ns.contrib.layers.layer_norm
    assert all(used)
    text = report.format("x.py")
    release = ".".join(TF_VERSION.split(".")[:2])
    assert f"Served by the legacy shim (1; TensorFlow {release} has no such name" in text, text
    compat = text.split("From tf.compat.v1 (")[1]
    if _TF_MINOR >= (2, 16):
        compat, lost = compat.split("Lost by tf.compat.v1 in TensorFlow 2.16 (2; ")
        assert "tf.train.Optimizer" in compat and "tf.estimator" not in compat, text
        assert f"TensorFlow {release} has no tf.estimator" in lost, text
        assert "after `import tfest_kit`" in lost, text
        assert "tf.estimator.Estimator, tf.layers.Dense" in lost, text
    else:
        assert "tf.estimator.Estimator, tf.layers.Dense, tf.train.Optimizer" in compat, text
        assert "Lost by" not in text, text


def test_a_hand_written_layer_norm_and_a_batch_norm_before_tanh_evaluate(tmp_path):
    # TensorFlow 2.15's oneDNN graph rewrite aborted the process (map.h:1293 CHECK failed) on
    # this layer norm in a graph without gradients: Kyubyong/transformer's evaluation. On 2.15 and
    # 2.21 its fusion of conv + inference batch norm + tanh failed: "Fusion is not implemented:
    # [FusedBatchNorm,Tanh]" (tensorflow-without-a-phd's YOLO planespotting).
    proc = _legacy_inline(
        tmp_path,
        """
import os
import numpy as np
import tensorflow as tf

x = tf.placeholder(tf.float32, [None, None, 16])
mean, variance = tf.nn.moments(x, [-1], keep_dims=True)
gamma = tf.get_variable("gamma", [16], initializer=tf.ones_initializer())
beta = tf.get_variable("beta", [16], initializer=tf.zeros_initializer())
y = gamma * (x - mean) / ((variance + 1e-8) ** .5) + beta
with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
    sess.run(tf.global_variables_initializer())
    out = sess.run(y, {x: np.random.RandomState(0).rand(2, 3, 16)})
images = tf.placeholder(tf.float32, [2, 4, 4, 3])
conv = tf.layers.conv2d(images, 2, 1, use_bias=False)
squashed = tf.nn.tanh(tf.layers.batch_normalization(conv, training=False))
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    shape = sess.run(squashed, {images: np.ones([2, 4, 4, 3])}).shape
print(os.environ.get("TF_ENABLE_ONEDNN_OPTS"), round(float(out.std()), 3), shape[-1])
""",
    )
    onednn, std, channels = proc.stdout.split()[-3:]
    assert std == "1.0" and channels == "2"  # normalised; evaluated
    assert onednn == "0"  # TF 1.15's wheel had no oneDNN either


def test_keras_layers_apply_as_tf115(tmp_path):
    # vahidk/TensorflowFramework builds its convolutions as `tf.keras.layers.Conv2D(…).apply(x)`:
    # TF 1.15's Keras Layer had `apply`, "an alias of `self.__call__`"; Keras 2.15 / tf_keras
    # dropped it ("'Conv2D' object has no attribute 'apply'").
    proc = _legacy_inline(
        tmp_path,
        "import json\n"
        "import tensorflow as tf\n"
        "x = tf.ones([2, 8, 8, 3])\n"
        "y = tf.keras.layers.Conv2D(4, 3, name='conv', kernel_initializer='ones').apply(x)\n"
        "z = tf.keras.layers.Dense(2, name='dense').apply(tf.layers.flatten(y), training=True)\n"
        "with tf.Session() as sess:\n"
        "    sess.run(tf.global_variables_initializer())\n"
        "    out = sess.run(y)\n"
        "print(json.dumps({'shape': list(out.shape), 'value': float(out[0, 0, 0, 0]),\n"
        "                  'z': z.shape.as_list(),\n"
        "                  'vars': sorted(v.op.name for v in tf.global_variables())}))\n",
    )
    assert _result(proc) == {
        "shape": [2, 6, 6, 4],
        "value": 27.0,
        "z": [2, 2],
        "vars": ["conv/bias", "conv/kernel", "dense/bias", "dense/kernel"],
    }, proc.stdout
