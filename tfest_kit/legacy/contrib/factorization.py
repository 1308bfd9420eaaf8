"""``tf.contrib.factorization`` as TF 1.15 had it, from the classes TensorFlow kept.

- ``KMeans`` (the graph-level ``KMeans(inputs, num_clusters, …).training_graph()``) and its
  constants ``RANDOM_INIT``, ``KMEANS_PLUS_PLUS_INIT``, ``SQUARED_EUCLIDEAN_DISTANCE``,
  ``COSINE_DISTANCE``: ``tensorflow.python.ops.clustering_ops``, where TF 1.15's contrib module
  moved, unchanged (no public name in TensorFlow 2);
- ``KMeansClustering``: ``tf.compat.v1.estimator.experimental.KMeans``, the same Estimator, with
  the protections of the runner's ``tf.estimator.Estimator`` (one writer per model_dir …).

``GMM`` and ``WALSMatrixFactorization`` / ``WALSModel`` have no TensorFlow 2 home: refused.

Example:

    kmeans = tf.contrib.factorization.KMeans(inputs=x, num_clusters=25,
                                             distance_metric="cosine", use_mini_batch=True)
    training_graph = kmeans.training_graph()
"""

from __future__ import annotations

from tfest_kit._tf import estimator as tf_estimator
from tfest_kit.legacy._estimator import guarded

from tensorflow.python.ops import clustering_ops

_FROM_CLUSTERING_OPS = ("KMeans", "RANDOM_INIT", "KMEANS_PLUS_PLUS_INIT")
_FROM_CLUSTERING_OPS += ("SQUARED_EUCLIDEAN_DISTANCE", "COSINE_DISTANCE")

__all__ = [*_FROM_CLUSTERING_OPS, "KMeansClustering", "BACKING", "NOT_SERVED"]

BACKING = {
    **{
        name: f"tensorflow.python.ops.clustering_ops.{name} (TensorFlow's private module)"
        for name in _FROM_CLUSTERING_OPS
    },
    "KMeansClustering": "tf.compat.v1.estimator.experimental.KMeans",
}
_NONE = "none in TensorFlow 2: run the script on TensorFlow 1.15"
NOT_SERVED = {name: _NONE for name in ("GMM", "gmm", "GmmAlgorithm")}
NOT_SERVED.update(dict.fromkeys(("WALSMatrixFactorization", "WALSModel"), _NONE))

for _name in _FROM_CLUSTERING_OPS:
    globals()[_name] = getattr(clustering_ops, _name)
KMeansClustering = guarded(tf_estimator.experimental.KMeans)
