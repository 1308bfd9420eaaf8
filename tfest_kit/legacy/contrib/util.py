"""``tf.contrib.util`` as TF 1.15 had it: TensorFlow's own ``tensor_util`` functions.

TF 1.15's package re-exported ``constant_value``, ``make_tensor_proto`` and ``make_ndarray``
(``MakeNdarray``) of ``tensorflow.python.framework.tensor_util``, which TensorFlow 2 exports as
``tf.get_static_value``, ``tf.make_tensor_proto`` and ``tf.make_ndarray``: the same functions.
TF Serving clients build their requests with it.

Example:

    request.inputs["x"].CopyFrom(tf.contrib.util.make_tensor_proto(batch, shape=batch.shape))
"""

from __future__ import annotations

from tfest_kit._tf import tf

__all__ = ["constant_value", "make_tensor_proto", "make_ndarray", "BACKING", "NOT_SERVED"]

constant_value = tf.get_static_value
make_tensor_proto = tf.make_tensor_proto
make_ndarray = tf.make_ndarray

BACKING = {
    "constant_value": "tf.compat.v1.get_static_value",
    "make_tensor_proto": "tf.compat.v1.make_tensor_proto",
    "make_ndarray": "tf.compat.v1.make_ndarray",
}
_META_GRAPH = "TensorFlow's private tensorflow.python.framework.meta_graph.{}"
NOT_SERVED = {
    name: _META_GRAPH.format(name)
    for name in ("ops_used_by_graph_def", "stripped_op_list_for_graph")
}
