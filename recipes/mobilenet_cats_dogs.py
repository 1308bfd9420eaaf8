"""Cats vs dogs with MobileNetV2 as an Estimator: the tensorflow.org "Estimator from Keras" flow.

A ``MobileNetV2(include_top=False)`` base, ``GlobalAveragePooling2D`` and ``Dense(1)``, compiled
with Adam, ``BinaryCrossentropy(from_logits=True)`` and accuracy, converted with
``tfest_kit.keras_bridge.to_estimator``, trained, evaluated, exported with
``tfest_kit.serving.image_bytes_receiver`` and asked about a few held-out JPEG files through
``tfest_kit.serving.Predictor``.

Works offline.  ``--data=auto`` (default) uses tfds ``cats_vs_dogs`` if it is already prepared
in ``--data_dir``, else a built-in sample generated once into ``--cache_dir``.
``--weights=auto`` uses Keras' cached ImageNet weights (frozen base, as in the guide) when they
are in ``~/.keras/models``; otherwise it starts from random weights, trains the whole network and,
unless ``--image_size`` / ``--alpha`` are given, uses a 96 px, alpha 0.35 MobileNetV2 so that
training from scratch fits in a few minutes on a CPU.

Run:

    python -m recipes.mobilenet_cats_dogs                         # offline: sample, ~3-5 min
    python -m recipes.mobilenet_cats_dogs --data=images --image_dir=~/PetImages
    python -m recipes.mobilenet_cats_dogs --data=tfds --weights=imagenet   # needs internet once

Ctrl-C during training saves a checkpoint at that step; rerun with the printed ``--model_dir``
(and the same ``--image_size`` / ``--alpha`` and data flags) to resume. A rerun whose flags
would change the model's shape or which images are held out is refused before any work.

The same command runs as every task of a ``TF_CONFIG`` cluster, given the same ``--model_dir``
(see ``recipes/_interrupt.py``); the chief evaluates, exports and predicts:

    python -m tfest_kit.cluster --workers 1 --ps 1 --evaluator -- \\
        python -m recipes.mobilenet_cats_dogs --model_dir=/tmp/pets_cluster
"""

from __future__ import annotations

import os
import time

import numpy as np
from absl import flags

import tfest_kit
from recipes import _flags, _pets_data
from recipes import _previous_run as previous_run
from recipes._export import export_once, say_exported
from recipes._interrupt import Run, checkpoint_step
from tfest_kit import hooks, logs, serving
from tfest_kit._tf import tf, tf2
from tfest_kit.keras_bridge import to_estimator

FLAGS = flags.FLAGS
flags.DEFINE_enum("data", "auto", ["auto", "tfds", "images", "sample"], "Where images come from.")
_flags.define_path(
    "data_dir", None, "tfds data_dir (default $TFDS_DATA_DIR or ~/tensorflow_datasets)."
)
_flags.define_path(
    "image_dir", None, "For --data=images: PetImages/{Cat,Dog} or cats/ dogs/ (any case)."
)
_flags.define_path(
    "cache_dir", None, "Where the built-in sample is generated (~/.cache/tfest_kit)."
)
flags.DEFINE_integer("sample_per_class", 400, "Images per class in the built-in sample.")
flags.DEFINE_string(
    "weights", "auto", "auto | imagenet | none | PATH.h5 (MobileNetV2 no-top weights)."
)
# The defaults are those of the ImageNet weights; training from scratch (--weights=none, or
# auto with none cached, as offline) uses the smaller _SCRATCH_SIZE / _SCRATCH_ALPHA unless
# either flag is given, and --help has to say so.
flags.DEFINE_integer(
    "image_size",
    160,
    "Square input size in pixels (default 160 with ImageNet weights or a weights file, 96 when "
    "training from scratch unless --alpha is given).",
)
flags.DEFINE_float(
    "alpha",
    1.0,
    "MobileNetV2 width multiplier (default 1.0 with ImageNet weights or a weights file, 0.35 "
    "when training from scratch unless --image_size is given).",
)
flags.DEFINE_integer("steps", 500, "Training steps.")
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate.")
flags.DEFINE_integer("eval_steps", None, "Evaluation batches (default: the whole held-out set).")
flags.DEFINE_float("eval_fraction", 0.2, "Held-out fraction of an image folder / the sample.")
flags.DEFINE_integer("log_every", 50, "Progress line every N steps.")
flags.DEFINE_integer("num_predict", 4, "Held-out images sent to the exported model.")
_flags.define_path("model_dir", None, "Checkpoints and exports (default: a new temp dir).")
_flags.define_tensorflow_info()

_IMAGENET_SIZES = (96, 128, 160, 192, 224)
_IMAGENET_ALPHAS = (0.35, 0.5, 0.75, 1.0, 1.3, 1.4)
_SCRATCH_SIZE, _SCRATCH_ALPHA = 96, 0.35


RECIPE = "mobilenet_cats_dogs"
RUN = Run(RECIPE)


class RecipeError(Exception):
    """An expected problem (offline, missing folder, bad flag value): one line, exit 1."""


def main(argv):
    del argv
    # The recipe reports each event itself (progress, evaluation, export); TensorFlow's own
    # INFO lines would say most of them a second time, in several lines each.
    logs.setup(tensorflow_info=FLAGS.tensorflow_info)
    return RUN.main(_run, errors=(RecipeError,))


def _run() -> int:
    _check_flags()
    RUN.check_cluster(FLAGS.model_dir)  # a cluster's tasks need the same --model_dir
    weights, pretrained, image_size, alpha = _choose_weights()
    source = _data_source()
    given_dir = FLAGS.model_dir  # "~" expanded by the flag
    # A checkpoint trained at another --image_size / --alpha cannot be resumed, and one trained
    # on another split would be evaluated on images it was trained on.
    recorded = {"image_size": image_size, "alpha": alpha, **_split_flags(source)}
    if given_dir:
        previous_run.check(given_dir, RECIPE, recorded)
    base = _base_model(weights, pretrained, image_size, alpha)  # fails fast when offline
    data = _choose_data(source, image_size)
    model_dir = RUN.choose_model_dir(given_dir)
    RUN.record(model_dir, recorded)
    RUN.announce(model_dir)
    keras = tf2.keras
    model = keras.Sequential([base, keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(1)])
    model.compile(
        optimizer=keras.optimizers.legacy.Adam(FLAGS.learning_rate),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    est = to_estimator(model, config=_config(model_dir))
    progress = hooks.ProgressHook(
        FLAGS.log_every, total_steps=FLAGS.steps, batch_size=FLAGS.batch_size
    )
    clock = _LastStep()
    started, first_step = time.time(), checkpoint_step(model_dir) or 0
    # Says "training from step S to N" first (building the graph and the first step take
    # ~10 s before the first progress line), or "already trained to step N". Ctrl-C saves a
    # checkpoint at that step and says how to resume: without it up to 10 minutes of training
    # are lost. The same on one process and as any task of a TF_CONFIG cluster.
    result = RUN.train_and_evaluate(
        est,
        data["train"],
        data["eval"],
        FLAGS.steps,
        [progress, clock],
        eval_steps=FLAGS.eval_steps,
    )
    if result is None:  # a cluster's worker or evaluator: the rest is the chief's
        return RUN.task_done()
    last_step = checkpoint_step(model_dir) or 0
    if last_step != first_step and clock.at is not None:  # this process trained
        _say(
            f"trained {last_step - first_step} steps (to step {last_step}) in "
            f"{clock.at - started:.0f} s"
        )
    print("eval: " + ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(result.items())))
    export_dir, reused = export_once(
        est, os.path.join(model_dir, "export"), serving.image_bytes_receiver(image_size)
    )
    say_exported(export_dir, reused)
    _predict(serving.Predictor(export_dir), data["examples"])
    return 0


class _LastStep(tf.estimator.SessionRunHook):
    """When the last training step ended: the final evaluation follows it in the same call."""

    def __init__(self) -> None:
        self.at = None

    def after_run(self, run_context, run_values) -> None:
        self.at = time.time()


def _config(model_dir: str):
    # In a cluster the evaluator restores a checkpoint while the chief writes newer ones.
    keep = 5 if RUN.in_cluster else 1
    config = tfest_kit.run_config(model_dir=model_dir, seed=0, keep_checkpoint_max=keep)
    # ProgressHook prints the loss, speed and ETA; the Estimator's own loss and step/sec
    # lines (None turns them off, including the one at step 0) would repeat them.
    return config.replace(log_step_count_steps=None)


def _fmt(value) -> str:
    return f"{value:.4f}" if isinstance(value, (float, np.floating)) else str(value)


def _check_flags() -> None:
    counts = ("steps", "batch_size", "image_size", "sample_per_class", "num_predict", "log_every")
    for name in counts:
        if getattr(FLAGS, name) < 1:
            raise RecipeError(f"--{name} must be positive. Got: {getattr(FLAGS, name)}")
    if FLAGS.learning_rate <= 0:
        raise RecipeError(f"--learning_rate must be positive. Got: {FLAGS.learning_rate}")
    if FLAGS.image_size < 32:
        raise RecipeError(
            f"--image_size must be at least 32 for MobileNetV2. Got: {FLAGS.image_size}"
        )
    if FLAGS.eval_steps is not None and FLAGS.eval_steps < 1:
        raise RecipeError(f"--eval_steps must be positive. Got: {FLAGS.eval_steps}")
    if FLAGS.alpha <= 0:
        raise RecipeError(f"--alpha must be positive. Got: {FLAGS.alpha}")
    if not 0.0 < FLAGS.eval_fraction < 1.0:
        raise RecipeError(f"--eval_fraction must be in (0, 1). Got: {FLAGS.eval_fraction}")
    if FLAGS.data == "images" and not FLAGS.image_dir:
        raise RecipeError(
            "--data=images needs --image_dir=DIR (PetImages/{Cat,Dog} or cats/ dogs/)"
        )


# ----------------------------------------------------------------------------- weights


def _cached_imagenet_file(alpha: float, image_size: int) -> str:
    name = f"mobilenet_v2_weights_tf_dim_ordering_tf_kernels_{float(alpha)}_{image_size}_no_top.h5"
    return os.path.join(os.path.expanduser("~"), ".keras", "models", name)


def _choose_weights():
    """Returns (weights argument for MobileNetV2, pretrained?, image_size, alpha)."""
    choice, size, alpha = FLAGS.weights, FLAGS.image_size, FLAGS.alpha
    if choice in ("auto", "imagenet"):
        cached = _cached_imagenet_file(alpha, size)
        if choice == "imagenet" or os.path.isfile(cached):
            if size not in _IMAGENET_SIZES or alpha not in _IMAGENET_ALPHAS:
                raise RecipeError(
                    f"ImageNet weights exist for --image_size in {list(_IMAGENET_SIZES)} and "
                    f"--alpha in {list(_IMAGENET_ALPHAS)}. Got: {size}, {alpha}"
                )
            found = "cached" if os.path.isfile(cached) else "not cached yet; Keras downloads"
            _say(f"weights: ImageNet ({found}: {cached}); base frozen, training the head only")
            return "imagenet", True, size, alpha
        reason = f"no ImageNet weights cached at {cached}"
    elif choice == "none":
        reason = "--weights=none"
    else:
        path = os.path.expanduser(choice)
        if not (path.endswith(".h5") and os.path.isfile(path)):
            raise RecipeError(
                f"--weights must be auto, imagenet, none or an existing .h5 file. Got: {choice!r}"
            )
        _say(f"weights: {path}; base frozen, training the head only")
        return path, True, size, alpha
    if not FLAGS["image_size"].present and not FLAGS["alpha"].present:
        size, alpha = _SCRATCH_SIZE, _SCRATCH_ALPHA
        reason += (
            f"; using --image_size={size} --alpha={alpha} (not 160 / 1.0) so training from scratch "
            "fits a few minutes on a CPU (set them to override)"
        )
    _say(f"weights: random ({reason}); training the whole network")
    return None, False, size, alpha


def _base_model(weights, pretrained: bool, image_size: int, alpha: float):
    keras = tf2.keras
    try:
        base = keras.applications.MobileNetV2(
            input_shape=(image_size, image_size, 3), include_top=False, weights=weights, alpha=alpha
        )
    except Exception as e:  # noqa: BLE001 - download / h5 errors come in many types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        cached = _cached_imagenet_file(alpha, image_size)
        if weights == "imagenet" and os.path.isfile(cached):
            # Keras reuses a cached file without checking it (an interrupted download).
            hint = (
                f"the cached file {cached} is damaged: delete it to download it again, or use "
                "--weights=none to train from scratch"
            )
        elif weights == "imagenet":
            hint = "offline? a download needs internet access; --weights=none trains from scratch"
        else:  # a local file: the network has nothing to do with it
            hint = (
                f"--weights needs MobileNetV2 include_top=False weights for --alpha={alpha}, "
                "such as the mobilenet_v2_*_no_top.h5 files Keras keeps in ~/.keras/models"
            )
        raise RecipeError(
            f"could not load MobileNetV2 weights {weights!r} ({hint}): "
            f"{type(e).__name__}: {first[:300]}"
        ) from e
    if pretrained:
        base.trainable = False  # the guide's feature extractor
    else:
        # From scratch the weights move fast; Keras' 0.999 momentum would leave the moving
        # statistics (used at eval and export) hundreds of steps behind them.
        for layer in base.layers:
            if isinstance(layer, keras.layers.BatchNormalization):
                layer.momentum = 0.9
    return base


# ----------------------------------------------------------------------------- data


def _say(message: str) -> None:
    print(message, flush=True)


def _data_source() -> str:
    """The source of the images: --data, with auto resolved to tfds or sample."""
    if FLAGS.data != "auto":
        return FLAGS.data
    directory = _pets_data.tfds_data_dir(FLAGS.data_dir)
    if _pets_data.tfds_prepared(FLAGS.data_dir):
        _say(f"data: tfds cats_vs_dogs (--data=auto: already prepared in {directory})")
        return "tfds"
    _say(f"data: built-in sample (--data=auto: tfds cats_vs_dogs is not prepared in {directory})")
    return "sample"


def _split_flags(source: str) -> dict:
    """The flags that choose which images of ``source`` are held out for evaluation."""
    if source == "tfds":
        # tfds' own 80 % / 20 %, whatever the other flags say; the same in any --data_dir.
        return {"data": "tfds"}
    if source == "sample":
        # The sample is generated with a fixed seed: the same in any --cache_dir.
        return {
            "data": "sample",
            "sample_per_class": FLAGS.sample_per_class,
            "eval_fraction": FLAGS.eval_fraction,
        }
    return {
        "data": "images",
        "image_dir": os.path.abspath(FLAGS.image_dir),
        "eval_fraction": FLAGS.eval_fraction,
    }


def _choose_data(source: str, image_size: int) -> dict:
    if source == "tfds":
        return _tfds_data(image_size)
    if source == "sample":
        cache_dir = FLAGS.cache_dir or _pets_data.default_cache_dir()
        started = time.time()
        image_dir, new = _pets_data.generate_sample(cache_dir, per_class=FLAGS.sample_per_class)
        verb = f"generated in {time.time() - started:.0f} s" if new else "reusing"
        _say(f"sample: {verb} {image_dir}")
    else:
        image_dir = FLAGS.image_dir  # "~" expanded by the flag
    return _folder_data(image_dir, image_size)


def _folder_data(image_dir: str, image_size: int) -> dict:
    try:
        found = _pets_data.scan_folder(image_dir)
    except ValueError as e:
        raise RecipeError(str(e)) from e
    try:
        train, held_out = _pets_data.split(found.paths, found.labels, FLAGS.eval_fraction)
    except ValueError as e:
        raise RecipeError(f"--image_dir {image_dir!r}: {e}") from e
    skipped_line = _skipped_line(found.skipped, image_dir)
    if skipped_line:
        print(skipped_line)
    _say(f"images: {len(train[0])} for training, {len(held_out[0])} held out ({image_dir})")
    make = _pets_data.folder_input_fn
    size = {"image_size": image_size, "batch_size": FLAGS.batch_size}
    examples = _pick_examples(held_out)
    return {
        "train": make(*train, training=True, **size),
        "eval": make(*held_out, training=False, **size),
        "examples": [(os.path.relpath(p, image_dir), y, _read(p)) for p, y in examples],
    }


def _skipped_line(skipped: list, image_dir: str) -> str:
    """ "skipped N corrupted images: a, b …", or "" when none was (a zero count is only noise)."""
    if not skipped:
        return ""
    names = [os.path.relpath(path, image_dir) for path in skipped[:5]]
    more = f" and {len(skipped) - len(names)} more" if len(skipped) > len(names) else ""
    return f"skipped {len(skipped)} corrupted images: {', '.join(names)}{more}"


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _pick_examples(held_out) -> list:
    paths, labels = held_out
    by_class = [[p for p, y in zip(paths, labels) if y == c] for c in (0, 1)]
    picked = []
    for i in range(FLAGS.num_predict):
        members = by_class[i % 2]
        if i // 2 < len(members):
            picked.append((members[i // 2], i % 2))
    return picked


def _tfds_data(image_size: int) -> dict:
    try:
        train_fn, eval_fn = _pets_data.tfds_input_fns(
            FLAGS.data_dir, image_size=image_size, batch_size=FLAGS.batch_size
        )
        examples = _pets_data.tfds_examples(FLAGS.data_dir, FLAGS.num_predict)
    except RuntimeError as e:
        raise RecipeError(
            f"{e}; --data=sample or --data=images --image_dir=DIR need no download"
        ) from e
    return {"train": train_fn, "eval": eval_fn, "examples": examples}


# ----------------------------------------------------------------------------- predict


def _predict(predictor, examples) -> None:
    if not examples:
        print("no held-out images to predict")
        return
    outputs = predictor({"image_bytes": [data for _, _, data in examples]})
    logits = np.asarray(next(iter(outputs.values()))).reshape(-1)
    for (name, label, _), logit in zip(examples, logits):
        p_dog = 1.0 / (1.0 + np.exp(-float(logit)))
        guess = _pets_data.CLASS_NAMES[int(p_dog > 0.5)]
        confidence = p_dog if guess == "dog" else 1.0 - p_dog
        print(
            f"predict {name}: {guess} (probability {confidence:.3f}; "
            f"true: {_pets_data.CLASS_NAMES[label]})"
        )


if __name__ == "__main__":
    _flags.run(main)
