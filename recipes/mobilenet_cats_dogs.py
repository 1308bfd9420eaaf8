"""Placeholder for the MobileNetV2 cats-vs-dogs recipe (issue 5): trains a tiny Estimator.

Run with ``python -m recipes.mobilenet_cats_dogs``.
"""

from __future__ import annotations

import tempfile

import numpy as np
from absl import app, flags

from tfest_kit import logs
from tfest_kit._tf import tf

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 200, "Training steps.")
flags.DEFINE_string("model_dir", None, "Where checkpoints go (a temporary directory if unset).")


def main(argv):
    del argv
    logs.setup()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 4)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int32")

    def input_fn():
        ds = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        return ds.shuffle(512).repeat().batch(32)

    model_dir = FLAGS.model_dir or tempfile.mkdtemp(prefix="tfest_kit_demo_")
    est = tf.estimator.LinearClassifier([tf.feature_column.numeric_column("x", (4,))], model_dir)
    est.train(input_fn, steps=FLAGS.steps)
    result = est.evaluate(input_fn, steps=10)
    print(f"placeholder recipe: trained a LinearClassifier for {FLAGS.steps} steps in {model_dir}")
    print(f"accuracy = {result['accuracy']:.3f}")


if __name__ == "__main__":
    app.run(main)
