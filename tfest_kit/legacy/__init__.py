"""Run TF1-era scripts unchanged on TensorFlow 2.15: ``python -m tfest_kit.legacy SCRIPT.py``.

``import tensorflow as tf`` in the script, and in modules imported from the script's
directory, gives a TF1 namespace: ``tf.compat.v1`` (graph mode, ``Dimension.value``) plus the
``tf.contrib`` pieces fine-tuning scripts use (``tpu``, ``cluster_resolver``, ``data``,
``layers.layer_norm``), with the TPU classes backed by ``tfest_kit.tpu`` so a script asking
for a TPU on a machine without one falls back to CPU/GPU with one warning.  TensorFlow's own
modules and third-party code keep the real ``tensorflow``.  Names the runner does not provide
raise ``AttributeError`` saying so; ``--report`` lists what was served so you can migrate.

Example:

    python -m tfest_kit.legacy run_classifier.py --task_name=MRPC --do_train=true ...
    python -m tfest_kit.legacy --report run_classifier.py ...

    from tfest_kit import legacy
    legacy.run("run_classifier.py", ["--do_train=true"], report=True)
"""

from __future__ import annotations

from tfest_kit.legacy._layer_norm import layer_norm
from tfest_kit.legacy._runner import ScriptNotFoundError, run

__all__ = ["run", "layer_norm", "ScriptNotFoundError"]
