"""``tf.contrib.summary`` as TF 1.15 had it, from TensorFlow's own ``summary_ops_v2``.

TF 1.15's ``tf.contrib.summary`` was ``summary_ops_v2`` (graph-mode summary writers used in
TPUEstimator ``host_call``s: ``create_file_writer``, ``always_record_summaries``,
``record_summaries_every_n_global_steps``, ``scalar`` …); TensorFlow 2.15 keeps those functions
there, so they are served as they are.  ``all_summary_ops`` is
``tf.compat.v1.summary.all_v2_summary_ops``, its TF 2.15 name.

Example:

    with tf.contrib.summary.create_file_writer(model_dir).as_default():
        with tf.contrib.summary.always_record_summaries():
            tf.contrib.summary.scalar("loss", loss, step=global_step)
"""

from __future__ import annotations

from tfest_kit._tf import tf

from tensorflow.python.ops import summary_ops_v2  # its graph-mode writers have no public home

_SAME = (
    "always_record_summaries",
    "never_record_summaries",
    "record_summaries_every_n_global_steps",
    "create_file_writer",
    "scalar",
    "histogram",
    "image",
    "audio",
    "generic",
    "flush",
    "initialize",
    "summary_writer_initializer_op",
    "import_event",
    "graph",
    "eval_dir",
)

__all__ = [*_SAME, "all_summary_ops", "BACKING"]

BACKING = {
    **{name: f"tensorflow.python.ops.summary_ops_v2.{name}" for name in _SAME},
    "all_summary_ops": "tf.compat.v1.summary.all_v2_summary_ops",
}

for _name in _SAME:
    globals()[_name] = getattr(summary_ops_v2, _name)
all_summary_ops = tf.summary.all_v2_summary_ops
