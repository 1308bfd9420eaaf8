"""Sharded TFRecords, rich feature columns and the Head API: the large-scale Estimator style.

The Wine data set (shipped with scikit-learn; 13 measurements, 3 cultivars) is written as
``tf.train.Example`` records into sharded TFRecord files with ``tfest_kit.inputs.write_tfrecord``
— with two derived categorical features, as a real pipeline would carry: ``colour`` (a string,
pale / medium / deep) and ``region`` (an int id). It is read back with
``tfest_kit.inputs.from_tfrecord`` (parallel reads, batch-then-parse) and fed through:

* numeric columns (standardised with a ``normalizer_fn``),
* a bucketized column (``alcohol`` in five buckets),
* an indicator (one-hot) column over the ``colour`` vocabulary,
* a crossed column (alcohol bucket × colour) into an embedding column,
* an embedding column over the ``region`` ids.

The ``model_fn`` computes only the logits; loss, metrics, predictions and export outputs come from
``tf.estimator.MultiClassHead`` via ``head.create_estimator_spec``. The model is exported with
``tfest_kit.serving.parsing_receiver`` and asked about *serialized* test examples, read straight
from the test shards, through ``tfest_kit.serving.Predictor``.

Run:

    python -m recipes.tfrecord_head                  # 2000 steps, under a minute
    python -m recipes.tfrecord_head --steps=300      # test size

The same command runs as every task of a ``TF_CONFIG`` cluster, given the same ``--model_dir``
(see ``recipes/_interrupt.py``); each task writes its own shards (``data/TYPE_INDEX``, the
chief's in ``data``):

    python -m tfest_kit.cluster --workers 1 --ps 1 --evaluator -- \\
        python -m recipes.tfrecord_head --model_dir=/tmp/tfrecord_cluster
"""

from __future__ import annotations

import os
import re

import numpy as np
from absl import flags
from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split

from recipes import _flags
from recipes._export import export_once, say_exported
from recipes._interrupt import Run
from tfest_kit import inputs, logs, serving
from tfest_kit import model_fn as tfest_model_fn
from tfest_kit._tf import tf, tf2

FLAGS = flags.FLAGS
_flags.define_path("model_dir", None, "Checkpoints, TFRecord shards and exports (temp if unset).")
flags.DEFINE_integer("steps", 2000, "Training steps.", lower_bound=1)
flags.DEFINE_integer("batch_size", 32, "Training batch size.", lower_bound=1)
flags.DEFINE_integer("num_shards", 4, "TFRecord shards for the training set.", lower_bound=1)
flags.DEFINE_float("learning_rate", 0.01, "Adam learning rate.")
flags.DEFINE_integer("seed", 0, "Seed of the split and of the weights.")
_flags.define_tensorflow_info()
_flags.register_positive("learning_rate")

LABEL = "cultivar"
COLOURS = ["pale", "medium", "deep"]
NUM_REGIONS = 10
ALCOHOL_BOUNDARIES = [12.0, 12.5, 13.0, 13.5, 14.0]
RUN = Run("tfrecord_head")


def make_rows(seed: int):
    """Wine as dict rows (+ derived ``colour`` and ``region``), split 75 / 25 stratified."""
    data = load_wine()
    names = [re.sub(r"\W+", "_", n.strip()) for n in data.feature_names]
    colour_index = names.index("color_intensity")
    # Tertiles of colour intensity give a categorical string feature with real signal.
    cuts = np.quantile(data.data[:, colour_index], [1 / 3, 2 / 3])
    rng = np.random.default_rng(seed)
    rows = []
    for values, label in zip(data.data, data.target):
        row = {name: float(v) for name, v in zip(names, values)}
        row["colour"] = COLOURS[int(np.searchsorted(cuts, values[colour_index]))]
        # An id-valued feature, as logs carry (store, region, …); random here, so it is noise
        # the embedding has to learn to ignore.
        row["region"] = int(rng.integers(NUM_REGIONS))
        row[LABEL] = int(label)
        rows.append(row)
    train, test = train_test_split(rows, test_size=0.25, stratify=data.target, random_state=seed)
    return names, train, test


def feature_columns(names: list, train_rows: list) -> list:
    fc = tf.feature_column
    columns = []
    for name in names:
        values = np.array([r[name] for r in train_rows])
        mean, std = float(values.mean()), float(values.std()) or 1.0
        columns.append(fc.numeric_column(name, normalizer_fn=lambda x, m=mean, s=std: (x - m) / s))
    alcohol_buckets = fc.bucketized_column(fc.numeric_column("alcohol"), ALCOHOL_BOUNDARIES)
    colour = fc.categorical_column_with_vocabulary_list("colour", COLOURS)
    region = fc.categorical_column_with_identity("region", NUM_REGIONS)
    crossed = fc.crossed_column([alcohol_buckets, colour], hash_bucket_size=30)
    columns += [
        alcohol_buckets,
        fc.indicator_column(colour),
        fc.embedding_column(crossed, dimension=4),
        fc.embedding_column(region, dimension=2),
    ]
    return columns


def model_fn(features, labels, mode, params):
    """Logits from a small DNN; everything else from the MultiClassHead."""
    net = tf.feature_column.input_layer(features, params["feature_columns"])
    net = tf2.keras.layers.Dense(32, activation="relu")(net)
    logits = tf2.keras.layers.Dense(params["n_classes"])(net)
    head = tf.estimator.MultiClassHead(n_classes=params["n_classes"])

    def train_op_fn(loss):
        optimizer = tf.train.AdamOptimizer(params["learning_rate"])
        return optimizer.minimize(loss, global_step=tf.train.get_global_step())

    return head.create_estimator_spec(
        features=features, mode=mode, logits=logits, labels=labels, train_op_fn=train_op_fn
    )


def main(argv):
    del argv
    logs.setup(tensorflow_info=FLAGS.tensorflow_info)
    return RUN.main(_run)


def _run():
    model_dir = RUN.choose_model_dir(FLAGS.model_dir)
    # Another --seed splits the rows otherwise: a resumed model would be tested on rows it
    # trained on.
    RUN.check_and_record(model_dir, {"seed": FLAGS.seed})
    RUN.announce(model_dir)
    data_dir = RUN.data_dir(model_dir)
    names, train_rows, test_rows = make_rows(FLAGS.seed)
    train_paths = inputs.write_tfrecord(
        train_rows, os.path.join(data_dir, "train.tfrecord"), num_shards=FLAGS.num_shards
    )
    test_paths = inputs.write_tfrecord(
        test_rows, os.path.join(data_dir, "test.tfrecord"), num_shards=2
    )
    # write_tfrecord says how many examples went into how many files, at the INFO level.

    columns = feature_columns(names, train_rows)
    spec = tf.feature_column.make_parse_example_spec(columns)
    spec[LABEL] = tf.io.FixedLenFeature([], tf.int64)
    # The paths written now, not a pattern: a re-run with another --num_shards leaves the
    # earlier run's shards beside them.
    train_fn = inputs.from_tfrecord(
        train_paths,
        spec,
        LABEL,
        batch_size=FLAGS.batch_size,
        num_epochs=None,
        seed=FLAGS.seed,
    )
    eval_fn = inputs.from_tfrecord(test_paths, spec, LABEL, batch_size=64, shuffle=False)
    classifier = tf.estimator.Estimator(
        # The Keras layers in model_fn start from the weights --seed gives (Keras 2.10+
        # would seed them from Python's random, whatever tf_random_seed says).
        tfest_model_fn.seeded(model_fn),
        model_dir=model_dir,
        config=tf.estimator.RunConfig(tf_random_seed=FLAGS.seed, log_step_count_steps=200),
        params={"feature_columns": columns, "n_classes": 3, "learning_rate": FLAGS.learning_rate},
    )
    progress = RUN.progress_hook(FLAGS.steps, FLAGS.batch_size)
    # The same on one process and as any task of a TF_CONFIG cluster.
    result = RUN.train_and_evaluate(classifier, train_fn, eval_fn, FLAGS.steps, [progress])
    if result is None:  # a cluster's worker or evaluator: the rest is the chief's
        return RUN.task_done()
    print(
        f"\nTest accuracy: {result['accuracy']:.3f}  average loss: {result['average_loss']:.4f}\n"
    )

    export_dir, reused = export_once(
        classifier, os.path.join(model_dir, "export"), serving.parsing_receiver(columns)
    )
    say_exported(export_dir, reused)

    # Serialized tf.train.Examples, exactly as stored, go to the "examples" input as they are.
    serialized = [r.numpy() for r in tf2.data.TFRecordDataset(test_paths)]
    labels = [
        tf2.train.Example.FromString(s).features.feature[LABEL].int64_list.value[0]
        for s in serialized
    ]
    predictor = serving.Predictor(export_dir, signature="predict")
    answer = predictor({"examples": np.array(serialized, dtype=object)})
    class_ids = np.asarray(answer["class_ids"]).reshape(-1)
    agreement = float(np.mean(class_ids == np.array(labels)))
    print("First predictions (class: probability, true class):")
    for ids, probs, label in list(zip(class_ids, answer["probabilities"], labels))[:5]:
        print(f"  {int(ids)}: {float(probs[int(ids)]):.3f}  ({label})")
    print(f"Predictor accuracy on {len(serialized)} serialized test examples: {agreement:.3f}")
    return 0


if __name__ == "__main__":
    _flags.run(main)
