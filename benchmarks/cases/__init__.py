"""Benchmark cases; each module defines ``CASE`` and ``GOALS`` and imports TensorFlow lazily."""

# The front ends a training case can measure (``_training.train_throughput`` runs each). Kept
# here, not in ``_training``: case modules are imported by the parent process, which must not
# import TensorFlow, and ``_training`` does.
TRAINING_VARIANTS = (
    "tfest_kit",
    "tfest_kit_loop10",
    "tfest_kit_loop100",
    "tfest_kit_intra1_loop100",
    "tfest_kit_bf16",
    "tfest_kit_replicas",
    "estimator",
    "stock_tpu",
    "keras",
    "keras_spe10",
    "keras_spe100",
    "keras_estimator",
    "keras_estimator_loop10",
    "keras_estimator_loop100",
    "session",
    "session_loop100",
)
