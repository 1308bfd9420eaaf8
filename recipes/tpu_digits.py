"""A TPUEstimator program: a small conv net on the 8x8 Digits, runnable with or without a TPU.

Written the way TPU programs are: every ``input_fn`` takes ``params`` and batches with
``params["batch_size"]`` (with ``drop_remainder=True`` for the static shapes a TPU needs; the
evaluation set is padded to full batches with examples of weight 0, as BERT does, so that every
test image counts), the ``model_fn`` returns a ``TPUEstimatorSpec`` whose evaluation metrics are
a ``metric_fn`` plus the tensors it needs — as the list ``[labels, logits, …]`` or as the dict
``{"labels": …, "logits": …, …}`` (by default the model is evaluated once with each) — and the
predict ``input_fn`` returns a
``Dataset`` of features only. ``tfest_kit.tpu.TPUEstimator`` runs it on a TPU when there is
one; here (no TPU) it falls back to a plain Estimator and prints ``loss = …, step = …`` lines
as it trains.

The model is then exported with ``tfest_kit.serving.raw_receiver`` and asked about test images
through ``tfest_kit.serving.Predictor``.

Run:

    python -m recipes.tpu_digits                         # 1000 steps, about a minute on CPU
    python -m recipes.tpu_digits --steps=300 --metric_tensors=dict   # test size
    python -m recipes.tpu_digits --tpu=my-tpu            # on a Cloud TPU

Without a TPU the same command runs as every task of a ``TF_CONFIG`` cluster, given the same
``--model_dir`` (see ``recipes/_interrupt.py``):

    python -m tfest_kit.cluster --workers 1 --ps 1 --evaluator -- \\
        python -m recipes.tpu_digits --model_dir=/tmp/digits_cluster
"""

from __future__ import annotations

import os

import numpy as np
from absl import flags
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from recipes import _flags
from recipes._export import export_once, say_exported
from recipes._interrupt import Run
from tfest_kit import logs, serving, tpu
from tfest_kit._tf import tf, tf2

FLAGS = flags.FLAGS
_flags.define_path("model_dir", None, "Checkpoints and exports (a temporary directory if unset).")
flags.DEFINE_bool("use_tpu", True, "Use a TPU when one is found (falls back to CPU/GPU).")
flags.DEFINE_string("tpu", None, "TPU name or grpc:// address (default: local TPU devices).")
flags.DEFINE_integer("steps", 1000, "Training steps.", lower_bound=1)
flags.DEFINE_integer("train_batch_size", 64, "Global training batch size.", lower_bound=1)
flags.DEFINE_integer("eval_batch_size", 32, "Evaluation batch size.", lower_bound=1)
flags.DEFINE_integer("predict_batch_size", 16, "Prediction batch size.", lower_bound=1)
flags.DEFINE_integer("iterations_per_loop", 100, "Steps per TPU loop.", lower_bound=1)
flags.DEFINE_float("learning_rate", 2e-3, "Adam learning rate.")
flags.DEFINE_enum(
    "metric_tensors",
    "both",
    ["list", "dict", "both"],
    "Pass metric_fn's tensors as a list, a dict, or evaluate once with each.",
)
flags.DEFINE_integer("seed", 0, "Seed of the split and of the weights.")
_flags.define_tensorflow_info()
_flags.register_positive("learning_rate")

NUM_CLASSES = 10
RUN = Run("tpu_digits")


def load_data(seed: int):
    """Digits as float32 images in [0, 1], shape [n, 8, 8], split 80 / 20 stratified."""
    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)
    return train_test_split(
        images,
        data.target.astype(np.int32),
        test_size=0.2,
        stratify=data.target,
        random_state=seed,
    )


def train_input_fn(images, labels):
    def input_fn(params):
        ds = tf2.data.Dataset.from_tensor_slices(({"image": images}, labels))
        ds = ds.shuffle(len(images)).repeat()
        return ds.batch(params["batch_size"], drop_remainder=True).prefetch(tf2.data.AUTOTUNE)

    return input_fn


def eval_input_fn(images, labels):
    def input_fn(params):
        # A TPU needs full batches (static shapes). Instead of dropping the last partial batch,
        # pad it with blank images of weight 0, which the metrics leave out: BERT's
        # is_real_example pattern, so that every test image is counted.
        batch_size = params["batch_size"]
        padding = -len(images) % batch_size
        features = {
            "image": np.concatenate([images, np.zeros((padding, *images.shape[1:]), images.dtype)]),
            "weight": np.concatenate([np.ones(len(images)), np.zeros(padding)]).astype(np.float32),
        }
        padded_labels = np.concatenate([labels, np.zeros(padding, labels.dtype)])
        ds = tf2.data.Dataset.from_tensor_slices((features, padded_labels))
        return ds.batch(batch_size, drop_remainder=True)

    return input_fn


def eval_steps(num_examples: int, batch_size: int) -> int:
    """Batches that cover every example once the last one is padded."""
    return -(-num_examples // batch_size)


def predict_input_fn(images):
    def input_fn(params):
        ds = tf2.data.Dataset.from_tensor_slices({"image": images})
        return ds.batch(params["batch_size"])

    return input_fn


def conv_net(images, training: bool):
    layers = tf2.keras.layers
    net = tf.reshape(images, [-1, 8, 8, 1])
    net = layers.Conv2D(32, 3, padding="same", activation="relu")(net)
    net = layers.Conv2D(32, 3, padding="same", activation="relu")(net)
    net = layers.MaxPooling2D(2)(net)
    net = layers.Flatten()(net)
    net = layers.Dense(64, activation="relu")(net)
    net = layers.Dropout(0.2)(net, training=training)
    return layers.Dense(NUM_CLASSES)(net)


def metric_fn(labels, logits, weights, per_example_loss):
    """Runs on the host (CPU) with the tensors of ``eval_metrics``; padding has weight 0."""
    predictions = tf.argmax(logits, axis=1)
    return {
        "accuracy": tf.metrics.accuracy(labels, predictions, weights=weights),
        "mean_per_class_accuracy": tf.metrics.mean_per_class_accuracy(
            labels, predictions, NUM_CLASSES, weights=weights
        ),
        # Estimator's own "loss" averages the batches' losses, so the padded batch would
        # count as a full one; this is the mean over the real examples.
        "eval_loss": tf.metrics.mean(per_example_loss, weights=weights),
    }


def model_fn(features, labels, mode, params):
    logits = conv_net(features["image"], training=mode == tf.estimator.ModeKeys.TRAIN)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {
            "class_ids": tf.argmax(logits, axis=1),
            "probabilities": tf.nn.softmax(logits),
        }
        return tpu.TPUEstimatorSpec(mode, predictions=predictions)

    if mode == tf.estimator.ModeKeys.EVAL:
        weights = features["weight"]
        per_example_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        loss = tf.losses.compute_weighted_loss(per_example_loss, weights)
        tensors = [labels, logits, weights, per_example_loss]
        if params["metric_tensors"] == "dict":
            names = ["labels", "logits", "weights", "per_example_loss"]
            tensors = dict(zip(names, tensors))
        return tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, tensors))

    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    # On a TPU the gradients are averaged across shards; off a TPU this is the optimizer itself.
    optimizer = tpu.CrossShardOptimizer(tf.train.AdamOptimizer(params["learning_rate"]))
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def main(argv):
    del argv
    # The fallback's loss lines and the recipe's results, without Estimator's INFO lines
    # (eleven "Evaluation [i/11]" per evaluation, the RunConfig once per TPUEstimator).
    logs.setup(tensorflow_info=FLAGS.tensorflow_info)
    return RUN.main(_run)


def _run():
    model_dir = RUN.choose_model_dir(FLAGS.model_dir)
    # Another --seed splits the images otherwise: a resumed model would be tested on images it
    # trained on.
    RUN.check_and_record(model_dir, {"seed": FLAGS.seed})
    RUN.announce(model_dir)
    x_train, x_test, y_train, y_test = load_data(FLAGS.seed)

    config = tpu.RunConfig(
        cluster=tpu.TPUClusterResolver(FLAGS.tpu) if FLAGS.tpu else None,
        model_dir=model_dir,
        tf_random_seed=FLAGS.seed,
        save_checkpoints_steps=max(FLAGS.iterations_per_loop, FLAGS.steps // 2),
        tpu_config=tpu.TPUConfig(iterations_per_loop=FLAGS.iterations_per_loop),
    )

    def make_estimator(metric_tensors: str):
        return tpu.TPUEstimator(
            model_fn=model_fn,
            config=config,
            params={"learning_rate": FLAGS.learning_rate, "metric_tensors": metric_tensors},
            use_tpu=FLAGS.use_tpu,
            train_batch_size=FLAGS.train_batch_size,
            eval_batch_size=FLAGS.eval_batch_size,
            predict_batch_size=FLAGS.predict_batch_size,
            # The Predictor below loads the CPU graph of the export; a TPU graph beside it
            # would be unused, and without a TPU asking for one warned on every run.
            export_to_tpu=False,
        )

    forms = ["list", "dict"] if FLAGS.metric_tensors == "both" else [FLAGS.metric_tensors]
    estimator = make_estimator(forms[0])
    test_steps = eval_steps(len(x_test), FLAGS.eval_batch_size)
    # The same on one process and as any task of a TF_CONFIG cluster; evaluated with the first
    # form of metric tensors.
    first = RUN.train_and_evaluate(
        estimator,
        train_input_fn(x_train, y_train),
        eval_input_fn(x_test, y_test),
        FLAGS.steps,
        eval_name=forms[0],
        eval_steps=test_steps,
    )
    if first is None:  # a cluster's worker or evaluator: the rest is the chief's
        return RUN.task_done()
    print()
    for form in forms:
        # Another estimator on the same model_dir evaluates the same checkpoint.
        result = first
        if form != forms[0]:
            result = make_estimator(form).evaluate(
                eval_input_fn(x_test, y_test), steps=test_steps, name=form
            )
        print(
            f"Test accuracy on {len(x_test)} images: {result['accuracy']:.4f}  "
            f"mean per-class accuracy: {result['mean_per_class_accuracy']:.4f}  "
            f"loss: {result['eval_loss']:.4f} (metric tensors as a {form})"
        )
    print()

    predictions = list(estimator.predict(predict_input_fn(x_test[:8])))
    print(
        "Predicted / true digits:",
        [(int(p["class_ids"]), int(t)) for p, t in zip(predictions, y_test[:8])],
    )

    export_dir, reused = export_once(
        estimator,
        os.path.join(model_dir, "export"),
        serving.raw_receiver({"image": (tf.float32, [8, 8])}),
    )
    predictor = serving.Predictor(export_dir)
    answer = predictor({"image": x_test})
    served_accuracy = float(np.mean(np.asarray(answer["class_ids"]).reshape(-1) == y_test))
    say_exported(export_dir, reused)
    print(f"Predictor accuracy on {len(x_test)} test images: {served_accuracy:.4f}")
    return 0


if __name__ == "__main__":
    _flags.run(main)
