"""``tensorflow_addons`` imported quietly, once, when a served ``tf.contrib`` module needs it.

tensorflow-addons 0.23 is the last release for TensorFlow 2.15 and prints an end-of-life
notice (a ``UserWarning``) on import; a TF1 script reaching ``tf.contrib.crf`` should not
print it on every run.
"""

from __future__ import annotations

import functools
import types
import warnings

__all__ = ["addons"]


@functools.lru_cache(maxsize=1)
def addons() -> types.ModuleType:
    """Returns the ``tensorflow_addons`` package, imported without its end-of-life notice."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*TensorFlow Addons", category=UserWarning)
        import tensorflow_addons

    return tensorflow_addons
