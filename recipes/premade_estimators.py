"""Premade Estimators side by side on Breast Cancer: the tensorflow.org premade-Estimator workflow.

Baselines first, as the guide recommends: a ``LinearClassifier``, a ``DNNClassifier`` and a
``DNNLinearCombinedClassifier`` share the same numeric feature columns (one per family of
measurements, each standardised by a ``normalizer_fn`` with the training mean and deviation)
and the same ``tfest_kit.inputs.from_arrays`` input functions. Their accuracy / AUC / loss on
the held-out fifth are printed as a table; the best (by AUC) is exported with
``tfest_kit.serving.parsing_receiver`` and queried through ``tfest_kit.serving.Predictor``.

Run:

    python -m recipes.premade_estimators                 # 1000 steps each, about a minute
    python -m recipes.premade_estimators --steps=200     # test size

The same command runs as every task of a ``TF_CONFIG`` cluster, given the same ``--model_dir``
(see ``recipes/_interrupt.py``): the whole cluster trains the three models one after the other,
each in its sub-directory (each task's server serves all three); the chief prints the table and
exports the best.

    python -m tfest_kit.cluster --workers 1 --ps 1 --evaluator -- \\
        python -m recipes.premade_estimators --model_dir=/tmp/premade_cluster
"""

from __future__ import annotations

import os

import numpy as np
from absl import flags
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from recipes import _flags
from recipes._export import export_once, say_exported
from recipes._interrupt import Run
from tfest_kit import inputs, logs, serving
from tfest_kit._tf import tf, tf2

FLAGS = flags.FLAGS
_flags.define_path("model_dir", None, "One sub-directory per model, plus exports (temp if unset).")
flags.DEFINE_integer("steps", 1000, "Training steps per model.", lower_bound=1)
flags.DEFINE_integer("batch_size", 32, "Training batch size.", lower_bound=1)
flags.DEFINE_list("hidden_units", ["32", "16"], "Hidden layers of the DNN models.")
flags.DEFINE_float("dnn_learning_rate", 0.01, "Adam learning rate of the DNN parts.")
flags.DEFINE_integer("seed", 0, "Seed of the train/test split and of the weights.")
flags.DEFINE_integer("num_queries", 5, "Held-out rows sent to the exported model.", lower_bound=1)
_flags.define_tensorflow_info()
_flags.register_layer_sizes("hidden_units")
_flags.register_positive("dnn_learning_rate")


FAMILIES = ("mean", "error", "worst")
RUN = Run("premade_estimators")
# Each model's checkpoints in a sub-directory of --model_dir, known before any model is built
# so that the flags can be checked first.
SUBDIRS = {
    "LinearClassifier": "linear",
    "DNNClassifier": "dnn",
    "DNNLinearCombinedClassifier": "wide_deep",
}


def load_data(seed: int):
    """Breast Cancer as feature dicts: one [n, 10] array per family of the 30 measurements.

    The data set has ten measurements of each cell nucleus, given as the mean, the standard
    error and the worst value; one numeric column of shape [10] per family keeps the graphs
    (and their variables) three times, not thirty times, as large as one column.
    """
    data = load_breast_cancer()
    x_train, x_test, y_train, y_test = train_test_split(
        data.data.astype(np.float32),
        data.target,
        test_size=0.2,
        stratify=data.target,
        random_state=seed,
    )

    def by_family(x):
        return {family: x[:, 10 * i : 10 * (i + 1)] for i, family in enumerate(FAMILIES)}

    return list(FAMILIES), (by_family(x_train), y_train), (by_family(x_test), y_test)


def numeric_columns(train_features: dict) -> list:
    """One numeric column per family, z-scored by a normalizer_fn with training statistics."""
    columns = []
    for name, values in train_features.items():
        mean = values.mean(axis=0)
        std = np.where(values.std(axis=0) > 0, values.std(axis=0), 1.0).astype(np.float32)
        columns.append(
            tf.feature_column.numeric_column(
                name, shape=[values.shape[1]], normalizer_fn=lambda x, m=mean, s=std: (x - m) / s
            )
        )
    return columns


def build_models(columns: list, model_dir: str, hidden_units: list, seed: int, lr: float) -> dict:
    config = tf2.estimator.RunConfig(tf_random_seed=seed, log_step_count_steps=200)

    def dnn_optimizer():
        # Adam converges in a few hundred steps here; the canned default (Adagrad) needs more.
        return tf2.keras.optimizers.legacy.Adam(learning_rate=lr)

    return {
        "LinearClassifier": tf2.estimator.LinearClassifier(
            feature_columns=columns,
            model_dir=os.path.join(model_dir, SUBDIRS["LinearClassifier"]),
            config=config,
        ),
        "DNNClassifier": tf2.estimator.DNNClassifier(
            hidden_units=hidden_units,
            feature_columns=columns,
            optimizer=dnn_optimizer,
            model_dir=os.path.join(model_dir, SUBDIRS["DNNClassifier"]),
            config=config,
        ),
        "DNNLinearCombinedClassifier": tf2.estimator.DNNLinearCombinedClassifier(
            linear_feature_columns=columns,
            dnn_feature_columns=columns,
            dnn_hidden_units=hidden_units,
            dnn_optimizer=dnn_optimizer,
            model_dir=os.path.join(model_dir, SUBDIRS["DNNLinearCombinedClassifier"]),
            config=config,
        ),
    }


def print_table(results: dict) -> None:
    print(f"\n{'model':<30}{'accuracy':>10}{'AUC':>10}{'loss':>10}")
    for name, r in results.items():
        print(f"{name:<30}{r['accuracy']:>10.4f}{r['auc']:>10.4f}{r['loss']:>10.4f}")
    print()


def main(argv):
    del argv
    logs.setup(tensorflow_info=FLAGS.tensorflow_info)
    return RUN.main(_run)


def _run():
    model_dir = RUN.choose_model_dir(FLAGS.model_dir)
    hidden_units = [int(u) for u in FLAGS.hidden_units]
    checkpoint_dirs = [os.path.join(model_dir, subdir) for subdir in SUBDIRS.values()]
    # Checked before any work (the three models log their RunConfig as they are built).
    # Another --seed splits the rows otherwise: resumed models would be tested on rows they
    # trained on. Other --hidden_units cannot restore the DNN checkpoints.
    RUN.check_and_record(
        model_dir, {"seed": FLAGS.seed, "hidden_units": hidden_units}, checkpoint_dirs
    )
    RUN.announce(model_dir, checkpoint_dirs)
    names, (x_train, y_train), (x_test, y_test) = load_data(FLAGS.seed)
    columns = numeric_columns(x_train)
    train_fn = inputs.from_arrays(
        x_train, y_train, batch_size=FLAGS.batch_size, num_epochs=None, seed=FLAGS.seed
    )
    eval_fn = inputs.from_arrays(x_test, y_test, batch_size=128, shuffle=False)

    models = build_models(columns, model_dir, hidden_units, FLAGS.seed, FLAGS.dnn_learning_rate)
    results = {}
    for name, model in models.items():
        progress = RUN.progress_hook(FLAGS.steps, FLAGS.batch_size)
        # Says "training NAME from step S to N", or that NAME is already trained that far.
        # The same on one process and as any task of a TF_CONFIG cluster.
        results[name] = RUN.train_and_evaluate(
            model, train_fn, eval_fn, FLAGS.steps, [progress], name=name, eval_name="test"
        )
    if not RUN.is_chief:  # a cluster's worker or evaluator: the rest is the chief's
        return RUN.task_done()
    print_table(results)

    best = max(results, key=lambda n: (results[n]["auc"], results[n]["accuracy"]))
    export_dir, reused = export_once(
        models[best], os.path.join(model_dir, "export"), serving.parsing_receiver(columns)
    )
    print(f"Best by AUC: {best}")
    say_exported(export_dir, reused)

    # The canned "predict" signature returns class ids and probabilities; the Predictor turns
    # plain feature arrays into the serialized tf.train.Examples the parsing receiver expects.
    predictor = serving.Predictor(export_dir, signature="predict")
    n = min(FLAGS.num_queries, len(y_test))
    answer = predictor({name: x_test[name][:n] for name in names})
    class_ids = np.asarray(answer["class_ids"]).reshape(-1)
    probabilities = np.asarray(answer["probabilities"])[:, 1]
    agree = int(np.sum(class_ids == y_test[:n]))
    print("Predictor answers (P(benign), predicted / true class):")
    for p, c, t in zip(probabilities, class_ids, y_test[:n]):
        print(f"  {p:.3f}  {int(c)} / {int(t)}")
    print(f"Predictor agreement: {agree}/{n}")
    return 0


if __name__ == "__main__":
    _flags.run(main)
