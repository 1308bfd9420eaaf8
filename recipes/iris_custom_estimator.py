"""A custom Estimator on Iris, read from CSV files: the tensorflow.org custom-Estimator walkthrough.

The Iris data set (shipped with scikit-learn) is written to ``train.csv`` and ``test.csv`` under
``--model_dir``; ``tfest_kit.inputs.from_csv`` reads them (shuffled and repeated for training).
Numeric feature columns go through ``tf.compat.v1.feature_column.input_layer`` into two dense
hidden layers. The ``model_fn`` has the three branches of the guide: PREDICT returns class ids
and probabilities, EVAL the accuracy metric, TRAIN an optimizer step plus an ``accuracy`` scalar
for TensorBoard. The model is trained, evaluated, asked about three held-out flowers, then
exported (``parsing_receiver``) and asked again through ``tfest_kit.serving.Predictor``.

Run:

    python -m recipes.iris_custom_estimator                    # ~1000 steps, under a minute
    python -m recipes.iris_custom_estimator --steps=300        # test size
    tensorboard --logdir /tmp/…                                # the printed model_dir

The same command runs as every task of a ``TF_CONFIG`` cluster, given the same ``--model_dir``
(see ``recipes/_interrupt.py``); on this machine:

    python -m tfest_kit.cluster --workers 1 --ps 1 --evaluator -- \\
        python -m recipes.iris_custom_estimator --model_dir=/tmp/iris_cluster
"""

from __future__ import annotations

import csv
import os
import tempfile

import numpy as np
from absl import flags
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split

from recipes import _flags
from recipes._export import export_once, say_exported
from recipes._interrupt import Run
from tfest_kit import inputs, logs, serving
from tfest_kit import model_fn as tfest_model_fn
from tfest_kit._tf import tf, tf2

FLAGS = flags.FLAGS
_flags.define_path("model_dir", None, "Checkpoints, CSV files and exports (a temp dir if unset).")
flags.DEFINE_integer("steps", 1000, "Training steps.", lower_bound=1)
flags.DEFINE_integer("batch_size", 32, "Training batch size.", lower_bound=1)
flags.DEFINE_list("hidden_units", ["16", "16"], "Units of the two hidden layers.")
flags.DEFINE_float("learning_rate", 0.05, "Adam learning rate.")
flags.DEFINE_integer("seed", 0, "Seed of the train/test split and of the weights.")
_flags.define_tensorflow_info()
_flags.register_layer_sizes("hidden_units")
_flags.register_positive("learning_rate")

COLUMNS = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth", "Species"]
SPECIES = ["Setosa", "Versicolor", "Virginica"]
# Three flowers from the guide, one per species, kept out of both CSV files.
HELD_OUT = {
    "SepalLength": [5.1, 5.9, 6.9],
    "SepalWidth": [3.3, 3.0, 3.1],
    "PetalLength": [1.7, 4.2, 5.4],
    "PetalWidth": [0.5, 1.5, 2.1],
}
EXPECTED = ["Setosa", "Versicolor", "Virginica"]
RUN = Run("iris_custom_estimator")


def write_csv_files(directory: str, seed: int) -> tuple[str, str]:
    """Writes Iris as train.csv (80 %) and test.csv (20 %, stratified) with a header line.

    The ``HELD_OUT`` flowers are left out of both files: the predictions asked about them
    are of flowers the model has not seen. Each file is renamed into place when whole: a
    task of a second run into the same model_dir never gives a reader half a file.
    """
    data = load_iris()
    held_out = np.array([HELD_OUT[name] for name in COLUMNS[:-1]]).T  # one row per flower
    keep = ~np.any(np.all(np.isclose(data.data[:, None, :], held_out[None]), axis=2), axis=1)
    x_train, x_test, y_train, y_test = train_test_split(
        data.data[keep],
        data.target[keep],
        test_size=0.2,
        stratify=data.target[keep],
        random_state=seed,
    )
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name, x, y in (("train.csv", x_train, y_train), ("test.csv", x_test, y_test)):
        path = os.path.join(directory, name)
        with tempfile.NamedTemporaryFile("w", dir=directory, newline="", delete=False) as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            writer.writerows([*np.round(row, 2), int(label)] for row, label in zip(x, y))
        os.replace(handle.name, path)
        paths.append(path)
    return paths[0], paths[1]


def model_fn(features, labels, mode, params):
    """The custom model_fn: input_layer → two hidden layers → logits, with three mode branches."""
    net = tf.feature_column.input_layer(features, params["feature_columns"])
    for units in params["hidden_units"]:
        net = tf2.keras.layers.Dense(units, activation="relu")(net)
    logits = tf2.keras.layers.Dense(params["n_classes"])(net)
    predicted_classes = tf.argmax(logits, 1)

    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {
            "class_ids": predicted_classes[:, tf.newaxis],
            "probabilities": tf.nn.softmax(logits),
            "logits": logits,
        }
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)

    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    accuracy = tf.metrics.accuracy(labels=labels, predictions=predicted_classes, name="acc_op")
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})

    # TRAIN: the streaming accuracy's update op doubles as a TensorBoard scalar.
    tf.summary.scalar("accuracy", accuracy[1])
    optimizer = tf.train.AdamOptimizer(learning_rate=params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(argv):
    del argv
    logs.setup(tensorflow_info=FLAGS.tensorflow_info)
    return RUN.main(_run)


def _run():
    model_dir = RUN.choose_model_dir(FLAGS.model_dir)
    # Another --seed splits the rows otherwise: a resumed model would be tested on rows it
    # trained on. Other --hidden_units cannot restore the checkpoint.
    RUN.check_and_record(model_dir, {"seed": FLAGS.seed, "hidden_units": FLAGS.hidden_units})
    RUN.announce(model_dir)
    train_csv, test_csv = write_csv_files(RUN.data_dir(model_dir), FLAGS.seed)
    print(f"Wrote {train_csv} and {test_csv}")

    feature_columns = [tf.feature_column.numeric_column(name) for name in COLUMNS[:-1]]
    classifier = tf.estimator.Estimator(
        # The Keras layers in model_fn start from the weights --seed gives (Keras 2.10+
        # would seed them from Python's random, whatever tf_random_seed says).
        model_fn=tfest_model_fn.seeded(model_fn),
        model_dir=model_dir,
        config=tf.estimator.RunConfig(tf_random_seed=FLAGS.seed, log_step_count_steps=100),
        params={
            "feature_columns": feature_columns,
            "hidden_units": [int(u) for u in FLAGS.hidden_units],
            "n_classes": len(SPECIES),
            "learning_rate": FLAGS.learning_rate,
        },
    )
    # Every CSV column is numeric; float defaults keep the features float32 as the columns expect.
    defaults = {name: 0.0 for name in COLUMNS[:-1]}
    train_fn = inputs.from_csv(
        train_csv,
        label_name="Species",
        column_defaults=defaults,
        batch_size=FLAGS.batch_size,
        shuffle=True,
        num_epochs=None,
        seed=FLAGS.seed,
    )
    eval_fn = inputs.from_csv(
        test_csv, label_name="Species", column_defaults=defaults, batch_size=64, shuffle=False
    )
    progress = RUN.progress_hook(FLAGS.steps, FLAGS.batch_size)
    # The same on one process and as any task of a TF_CONFIG cluster.
    result = RUN.train_and_evaluate(classifier, train_fn, eval_fn, FLAGS.steps, [progress])
    if result is None:  # a cluster's worker or evaluator: the rest is the chief's
        return RUN.task_done()
    print(f"\nTest set accuracy: {result['accuracy']:.3f}  (loss {result['loss']:.4f})\n")

    predict_fn = inputs.from_arrays(HELD_OUT, shuffle=False, batch_size=len(EXPECTED))
    for pred, expected in zip(classifier.predict(predict_fn), EXPECTED):
        class_id = int(pred["class_ids"][0])
        probability = float(pred["probabilities"][class_id])
        print(
            f'Prediction is "{SPECIES[class_id]}" ({100 * probability:.1f}%), '
            f'expected "{expected}"'
        )

    export_dir, reused = export_once(
        classifier, os.path.join(model_dir, "export"), serving.parsing_receiver(feature_columns)
    )
    predictor = serving.Predictor(export_dir)
    answer = predictor({k: np.asarray(v, np.float32) for k, v in HELD_OUT.items()})
    served = [SPECIES[int(i)] for i in np.asarray(answer["class_ids"]).reshape(-1)]
    say_exported(export_dir, reused)
    print(f"Predictor answer: {served} (expected {EXPECTED})")
    return 0


if __name__ == "__main__":
    _flags.run(main)
