"""Run TF1-era scripts unchanged on TensorFlow 2.15: ``python -m tfest_kit.legacy SCRIPT.py``.

``import tensorflow as tf`` (and ``from tensorflow.keras.optimizers import Adam``,
``from tensorflow.train import …`` …) in the script, and in the modules it imports from its
directory, the current directory and ``PYTHONPATH`` (not site-packages), gives a TF1
namespace: ``tf.compat.v1`` (graph mode, ``Dimension.value``, ref variables) plus ``tf.contrib``
packages in :mod:`tfest_kit.legacy.contrib`, with the TPU classes backed by
``tfest_kit.tpu`` and the TPU-only functions (``tf.tpu.cross_replica_sum`` …) computing one
replica, so a script asking for a TPU on a machine without one falls back to CPU/GPU with one
warning.  TensorFlow's own modules and installed libraries keep the real ``tensorflow``, but
for the packages named with ``--tf1-package NAME`` (an installed TF1-era library); an
installed package that fails on a TF1 name gets an error naming that option.  A ``tf.contrib``
module or name TF 1.15 had and the runner does not serve imports, and its first use raises
``AttributeError`` naming the replacement (``tf.contrib.layers.real_valued_column`` →
``tf.feature_column.numeric_column``) or saying TensorFlow 2 has none; other names the runner
does not provide raise at once.  ``--report`` lists first, before the script runs, the refused
names its project reaches; at the end what it asked for and did not get, then what was served
and the library behind it.

Example:

    python -m tfest_kit.legacy run_classifier.py --task_name=MRPC --do_train=true ...
    python -m tfest_kit.legacy --report run_classifier.py ...
    python -m tfest_kit.legacy -m scripts.train --steps=100     # from the project root
    python -m tfest_kit.legacy --tf1-package mytf1lib train.py  # mytf1lib gets TF1 too

    from tfest_kit import legacy
    legacy.run("run_classifier.py", ["--do_train=true"], report=True)
"""

from __future__ import annotations

from tfest_kit.legacy._layer_norm import layer_norm
from tfest_kit.legacy._runner import ScriptNotFoundError, run, run_module

__all__ = ["run", "run_module", "layer_norm", "ScriptNotFoundError"]
