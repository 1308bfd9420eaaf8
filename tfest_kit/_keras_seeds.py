"""Keras layers built in a model_fn follow ``RunConfig(tf_random_seed=…)``, as TF1 layers did.

Since Keras 2.10 an initializer created without a seed takes one from Python's ``random``, so
the graph-level seed Estimator sets from ``tf_random_seed`` no longer decides the initial
weights of a Keras layer, nor of a ``tf.compat.v1.layers.dense`` (a Keras layer too in
TensorFlow 2.15) left with its default initializer: two runs of the same program start from
different weights, where under TensorFlow 1.x they started from the same. Keras's own remedy,
``tf.keras.utils.set_random_seed``, reseeds Python, NumPy and TensorFlow for the whole process;
:func:`keras_seeds` sets only the generator those initializers draw their seeds from, and only
while the model_fn builds its graph.
"""

from __future__ import annotations

import contextlib
import importlib
import random
from collections.abc import Iterator
from typing import Any, Optional

__all__ = ["keras_seeds"]


def _seed_state() -> Any:
    """Keras's thread-local holder of that generator, or None if this Keras has none."""
    # Private to Keras (``keras.utils.set_random_seed`` sets it); there is no public way to
    # set the generator alone.
    try:
        backend = importlib.import_module("keras.src.backend")
    except ImportError:
        return None
    return getattr(backend, "_SEED_GENERATOR", None)


@contextlib.contextmanager
def keras_seeds(seed: Optional[int]) -> Iterator[None]:
    """Inside the block, unseeded Keras initializers draw their seeds from ``seed``.

    Each entry starts the same sequence again, so a model_fn called again (each ``train()``,
    another process, another run) gives each layer the same initial weights, and two layers
    still get different ones. Nothing changes when ``seed`` is None.

    Args:
      seed: ``RunConfig.tf_random_seed``, or None.

    Example:

        with keras_seeds(config.tf_random_seed):
            spec = model_fn(features, labels, mode, params, config)
    """
    state = _seed_state() if seed is not None else None
    if state is None:
        yield
        return
    previous = getattr(state, "generator", None)
    state.generator = random.Random(seed)
    try:
        yield
    finally:
        state.generator = previous
