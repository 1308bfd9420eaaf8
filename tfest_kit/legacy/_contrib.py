"""The ``tf.contrib`` pieces TF1-era fine-tuning scripts use, backed by TF 2.15 and tfest_kit.

``tf.contrib`` was removed in TensorFlow 2.0.  What BERT-style scripts need from it lives on:

- ``tf.contrib.tpu``: ``TPUEstimator``, ``TPUEstimatorSpec``, ``RunConfig``, ``TPUConfig``,
  ``InputPipelineConfig``, ``CrossShardOptimizer`` from ``tfest_kit.tpu`` (CPU/GPU fallback
  without a TPU); other names from ``tf.compat.v1.estimator.tpu`` / ``tf.compat.v1.tpu``;
- ``tf.contrib.cluster_resolver.TPUClusterResolver``: ``tfest_kit.tpu.TPUClusterResolver``;
- ``tf.contrib.data.*`` (``map_and_batch``, ``parallel_interleave`` …):
  ``tf.compat.v1.data.experimental``;
- ``tf.contrib.layers.layer_norm``: :func:`tfest_kit.legacy.layer_norm`.

Example:

    contrib = build_contrib(Report())
    contrib.tpu.TPUEstimator      # tfest_kit.tpu.TPUEstimator
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from tfest_kit._tf import tf
from tfest_kit.legacy._layer_norm import layer_norm
from tfest_kit.legacy._shim import SHIM, Entry, Report, ShimModule

__all__ = ["build_contrib", "tpu_module", "cluster_resolver_module", "TPU_NAMES"]

TPU_NAMES = ("TPUEstimator", "TPUEstimatorSpec", "RunConfig", "TPUConfig", "InputPipelineConfig")

_CONTRIB_PROVIDES = (
    "Of tf.contrib it provides: tpu (TPUEstimator, TPUEstimatorSpec, RunConfig, TPUConfig, "
    "InputPipelineConfig, CrossShardOptimizer), cluster_resolver.TPUClusterResolver, "
    "data (tf.data.experimental), layers.layer_norm. "
)


def _from_tfest_tpu(name: str) -> Callable[[], Any]:
    # Imported on first use: tfest_kit.tpu pulls in the Estimator machinery.
    return lambda: getattr(importlib.import_module("tfest_kit.tpu"), name)


def tpu_module(display: str, report: Report, *, cross_shard: bool) -> ShimModule:
    """Returns a ``tpu`` stand-in (``tf.contrib.tpu`` or ``tf.estimator.tpu``).

    Args:
      display: ``"tf.contrib.tpu"`` or ``"tf.estimator.tpu"``.
      report: where served names are recorded.
      cross_shard: also serve ``CrossShardOptimizer`` and fall back to ``tf.compat.v1.tpu``
        (``tf.contrib.tpu`` had both).

    Returns:
      A module whose TPUEstimator family comes from ``tfest_kit.tpu``.
    """
    entries = {name: Entry(_from_tfest_tpu(name), f"tfest_kit.tpu.{name}") for name in TPU_NAMES}
    fallbacks = [(lambda: tf.estimator.tpu, "tf.compat.v1.estimator.tpu")]
    if cross_shard:
        entries["CrossShardOptimizer"] = Entry(
            _from_tfest_tpu("CrossShardOptimizer"), "tfest_kit.tpu.CrossShardOptimizer"
        )
        fallbacks.append((lambda: tf.tpu, "tf.compat.v1.tpu"))
    return ShimModule(
        display,
        report,
        entries=entries,
        fallbacks=fallbacks,
        kind=SHIM,
        provides=f"Of {display} it provides {', '.join(sorted(entries))}. ",
    )


def cluster_resolver_module(display: str, report: Report) -> ShimModule:
    """Returns a ``cluster_resolver`` stand-in whose ``TPUClusterResolver`` is tfest_kit's.

    tfest_kit's resolver answers "no TPU" on a machine without one (TF 2.15's raises "Please
    provide a TPU Name to connect to.") and contacts no metadata server unless a TPU name or
    address is given.

    Args:
      display: e.g. ``"tf.contrib.cluster_resolver"``.
      report: where served names are recorded.

    Returns:
      A module serving ``TPUClusterResolver`` from ``tfest_kit.tpu``, the other resolvers from
      ``tf.compat.v1.distribute.cluster_resolver``.
    """
    return ShimModule(
        display,
        report,
        entries={
            "TPUClusterResolver": Entry(
                _from_tfest_tpu("TPUClusterResolver"), "tfest_kit.tpu.TPUClusterResolver"
            )
        },
        fallbacks=[
            (
                lambda: tf.distribute.cluster_resolver,
                "tf.compat.v1.distribute.cluster_resolver",
            )
        ],
        kind=SHIM,
    )


def build_contrib(report: Report) -> ShimModule:
    """Returns the ``tf.contrib`` stand-in.

    Args:
      report: where served names are recorded.

    Returns:
      A module with ``tpu``, ``cluster_resolver``, ``data`` and ``layers``; any other name
      raises ``AttributeError`` saying the legacy runner does not provide it.
    """
    entries = {
        "tpu": Entry(lambda: tpu_module("tf.contrib.tpu", report, cross_shard=True), None),
        "cluster_resolver": Entry(
            lambda: cluster_resolver_module("tf.contrib.cluster_resolver", report), None
        ),
        "data": Entry(
            lambda: ShimModule(
                "tf.contrib.data",
                report,
                fallbacks=[(lambda: tf.data.experimental, "tf.data.experimental")],
                kind=SHIM,
                provides="Of tf.contrib.data it provides what tf.data.experimental has. ",
            ),
            None,
        ),
        "layers": Entry(
            lambda: ShimModule(
                "tf.contrib.layers",
                report,
                entries={
                    "layer_norm": Entry(
                        lambda: layer_norm,
                        "tfest_kit.legacy.layer_norm (same variables), or "
                        "tf.keras.layers.LayerNormalization(epsilon=1e-12, name='LayerNorm')",
                    )
                },
                provides="Of tf.contrib.layers it provides layer_norm. ",
            ),
            None,
        ),
    }
    return ShimModule("tf.contrib", report, entries=entries, provides=_CONTRIB_PROVIDES)
