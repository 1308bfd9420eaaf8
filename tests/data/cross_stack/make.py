"""Writes this stack's cross-stack fixtures: ``python -m tests.data.cross_stack.make``.

Run it once with each venv (TF 2.15 + keras 2.15, TF 2.21 + tf-keras 2.21) from the project
root; it writes ``tests/data/cross_stack/tf<major>.<minor>/``, which ``tests/test_cross_stack.py``
reads on every stack. For each model in :data:`MODELS` (a ``model_fn.classifier`` through
``tpu.TPUEstimator``, and a Keras model through ``keras_bridge.to_estimator``) it trains a few
steps on fixed data and keeps:

- ``MODEL/checkpoint/``: the last checkpoint's ``.index`` / ``.data`` and a ``checkpoint`` file
  (no ``.meta``, graph or events: the stack that reads it builds its own graph);
- ``MODEL/export/``: a SavedModel with ``serving.raw_receiver({"x": (float32, [4])})``;
- ``MODEL/expected.json``: the step, the variables (name -> shape), the eval loss at that step
  and the export's predictions for :data:`X_SERVE`.

The tests import the model builders and the data from here, so both sides build the same model.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tfest_kit import keras_bridge, model_fn, serving, tpu  # before tensorflow: TF_USE_LEGACY_KERAS
from tfest_kit._tf import tf, tf2

HERE = Path(__file__).resolve().parent
FEATURES = 4
NUM_CLASSES = 3
STEPS = 5
BATCH = 16
_RNG = np.random.RandomState(38)
_W = _RNG.randn(FEATURES, NUM_CLASSES).astype(np.float32)
X_TRAIN = _RNG.randn(64, FEATURES).astype(np.float32)
Y_TRAIN = np.argmax(X_TRAIN @ _W, axis=1).astype(np.int64)
X_SERVE = _RNG.randn(6, FEATURES).astype(np.float32)
RECEIVER_SPEC = {"x": (tf.float32, [FEATURES])}


def stack_name() -> str:
    """``"tf2.15"``, ``"tf2.21"``: the fixture directory of the running TensorFlow."""
    return "tf" + ".".join(tf2.__version__.split(".")[:2])


def input_fn(repeat: bool = True) -> Callable:
    """Fixed data in a fixed order (no shuffling): ``({"x": [batch, 4]}, [batch, 1])``."""

    def fn(params=None):
        dataset = tf.data.Dataset.from_tensor_slices(({"x": X_TRAIN}, Y_TRAIN[:, None]))
        return (dataset.repeat() if repeat else dataset).batch(BATCH)

    return fn


def _network(features, mode, params):
    hidden = tf2.keras.layers.Dense(8, activation="tanh", name="hidden")(features["x"])
    return tf2.keras.layers.Dense(NUM_CLASSES, name="logits")(hidden)


def classifier(model_dir: str) -> Any:
    """``model_fn.classifier`` through ``tpu.TPUEstimator`` (a plain Estimator off a TPU)."""
    return tpu.TPUEstimator(
        model_fn.classifier(_network, NUM_CLASSES, learning_rate=0.05),
        config=tpu.RunConfig(
            model_dir=model_dir,
            tf_random_seed=0,
            save_summary_steps=None,
            log_step_count_steps=None,
        ),
        use_tpu=False,
        train_batch_size=BATCH,
        eval_batch_size=BATCH,
        predict_batch_size=BATCH,
    )


def keras(model_dir: str) -> Any:
    """A compiled ``tf.keras`` model (input ``"x"``) through ``keras_bridge.to_estimator``."""
    keras = tf2.keras
    inputs = keras.Input((FEATURES,), name="x")
    hidden = keras.layers.Dense(
        8, activation="relu", name="hidden", kernel_initializer=keras.initializers.GlorotUniform(0)
    )(inputs)
    logits = keras.layers.Dense(
        NUM_CLASSES, name="logits", kernel_initializer=keras.initializers.GlorotUniform(1)
    )(hidden)
    model = keras.Model(inputs, logits)
    model.compile(
        keras.optimizers.Adam(0.05),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return keras_bridge.to_estimator(
        model,
        config=tf.estimator.RunConfig(
            model_dir=model_dir,
            tf_random_seed=0,
            save_summary_steps=None,
            log_step_count_steps=None,
        ),
    )


MODELS: dict[str, Callable[[str], Any]] = {"classifier": classifier, "keras": keras}


def predictions_key(predictions: dict) -> str:
    """The float output compared across stacks: ``"probabilities"`` or the Keras output."""
    return "probabilities" if "probabilities" in predictions else sorted(predictions)[0]


def _write(name: str, out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix=f"cross_stack_{name}_"))
    try:
        est = MODELS[name](str(work / "model"))
        est.train(input_fn(), steps=STEPS)
        prefix = est.latest_checkpoint()
        step = int(prefix.rsplit("-", 1)[1])  # Keras' object-based checkpoint has no "global_step"
        loss = float(est.evaluate(input_fn(repeat=False))["loss"])
        export = est.export_saved_model(str(work / "export"), serving.raw_receiver(RECEIVER_SPEC))
        with serving.Predictor(export.decode()) as predictor:
            answer = predictor({"x": X_SERVE})
        key = predictions_key(answer)
        shutil.rmtree(out, ignore_errors=True)
        (out / "checkpoint").mkdir(parents=True)
        for path in Path(prefix).parent.glob(Path(prefix).name + ".*"):
            if path.suffix != ".meta":  # the graph: each stack builds its own
                shutil.copy(path, out / "checkpoint" / path.name)
        (out / "checkpoint" / "checkpoint").write_text(
            f'model_checkpoint_path: "{os.path.basename(prefix)}"\n'
        )
        shutil.copytree(export.decode(), out / "export")
        expected = {
            "tensorflow": tf2.__version__,
            "global_step": step,
            "eval_loss": loss,
            "variables": {n: s for n, s in tf.train.list_variables(prefix)},
            "serving_inputs": X_SERVE.tolist(),
            "output": key,
            "predictions": np.asarray(answer[key]).tolist(),
        }
        (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    out = HERE / stack_name()
    for name in MODELS:
        _write(name, out / name)
    sizes = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    print(f"wrote {out} ({sizes / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
