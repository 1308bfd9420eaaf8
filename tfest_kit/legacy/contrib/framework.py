"""``tf.contrib.framework`` as TF 1.15 had it: TensorFlow's own names plus ``tf_slim``'s.

- Global step and checkpoint helpers (``get_or_create_global_step``, ``list_variables``,
  ``load_variable``, ``init_from_checkpoint`` …) are ``tf.compat.v1.train``'s; ``sort``,
  ``argsort``, ``is_tensor``, ``assert_scalar``, ``TensorSpec`` … ``tf.compat.v1``'s;
  ``nest`` (TF 1.15's 19 functions) is built by ``tfest_kit.legacy._contrib`` from
  TensorFlow's own ``nest``.
- Arg scopes (``arg_scope``, ``add_arg_scope`` …) and the variable helpers (``model_variable``,
  ``get_variables_to_restore``, ``assign_from_checkpoint_fn`` …) are ``tf_slim``'s, the
  library contrib's code moved to: same variables and collections.

``tf_slim`` is imported when a script first reaches ``tf.contrib.framework``.

Example:

    with tf.contrib.framework.arg_scope([tf.contrib.layers.conv2d], padding="SAME"):
        net = tf.contrib.layers.conv2d(images, 32, [3, 3])
"""

from __future__ import annotations

import tf_slim

from tfest_kit._tf import tf

_FROM_TRAIN = (
    "get_or_create_global_step",
    "get_global_step",
    "create_global_step",
    "assert_global_step",
    "list_variables",
    "load_variable",
    "load_checkpoint",
    "init_from_checkpoint",
)
# The same functions as TF 1.15's tf.contrib.framework (its tensor_util re-exported them).
_FROM_TF = (
    "sort",
    "argsort",
    "is_tensor",
    "assert_same_float_dtype",
    "assert_scalar",
    "convert_to_tensor_or_sparse_tensor",
    "TensorSpec",
)
_FROM_SLIM = (
    "arg_scope",
    "add_arg_scope",
    "has_arg_scope",
    "arg_scoped_arguments",
    "current_arg_scope",
    "add_model_variable",
    "assign_from_checkpoint",
    "assign_from_checkpoint_fn",
    "assign_from_values",
    "assign_from_values_fn",
    "filter_variables",
    "get_local_variables",
    "get_model_variables",
    "get_trainable_variables",
    "get_unique_variable",
    "get_variable_full_name",
    "get_variables",
    "get_variables_by_name",
    "get_variables_by_suffix",
    "get_variables_to_restore",
    "model_variable",
    "variable",
    "VariableDeviceChooser",
    "assert_or_get_global_step",
)

__all__ = [*_FROM_TRAIN, *_FROM_TF, *_FROM_SLIM, "get_name_scope", "local_variable"]
__all__ += ["global_variable", "BACKING", "NOT_SERVED"]

# tf_slim's two call variable_scope.variable, which TensorFlow 2 dropped.
_PORTED_VARIABLE = "tf.compat.v1.Variable (a port of TF 1.15's; tf_slim's do not run on TF 2)"

BACKING = {
    **{name: f"tf.compat.v1.train.{name}" for name in _FROM_TRAIN},
    **{name: f"tf.compat.v1.{name}" for name in _FROM_TF},
    **{name: f"tf_slim.{name}" for name in _FROM_SLIM},
    "get_name_scope": "tf.compat.v1.get_default_graph().get_name_scope",
    "local_variable": _PORTED_VARIABLE,
    "global_variable": _PORTED_VARIABLE,
}
NOT_SERVED = {
    "zero_initializer": "tf.assign(variable, tf.zeros_like(variable))",
    "deprecated": "a plain function (TensorFlow's deprecation decorators are private)",
}

for _name in _FROM_TRAIN:
    globals()[_name] = getattr(tf.train, _name)
for _name in _FROM_TF:
    globals()[_name] = getattr(tf, _name)
for _name in _FROM_SLIM:
    globals()[_name] = getattr(tf_slim, _name)


def get_name_scope() -> str:
    """``tf.contrib.framework.get_name_scope``: the current name scope of the default graph.

    Example:

        with tf.name_scope('block'):
            get_name_scope()   # 'block'
    """
    return tf.get_default_graph().get_name_scope()


def local_variable(initial_value, validate_shape=True, name=None, use_resource=None):
    """``tf.contrib.framework.local_variable``: a variable in ``LOCAL_VARIABLES``, not trained.

    TF 1.15's (``variable_scope.variable`` with that collection); tf_slim's calls the
    ``variable_scope.variable`` TensorFlow 2 no longer has.

    Example:

        count = local_variable(0, name="count")   # initialised by tf.local_variables_initializer()
    """
    return _untrained(
        tf.GraphKeys.LOCAL_VARIABLES, initial_value, validate_shape, name, use_resource
    )


def global_variable(initial_value, validate_shape=True, name=None, use_resource=None):
    """``tf.contrib.framework.global_variable``: a variable in ``GLOBAL_VARIABLES``, not trained.

    Example:

        seen = global_variable(tf.zeros([10]), name="seen")   # saved in checkpoints
    """
    return _untrained(
        tf.GraphKeys.GLOBAL_VARIABLES, initial_value, validate_shape, name, use_resource
    )


def _untrained(collection, initial_value, validate_shape, name, use_resource):
    return tf.Variable(
        initial_value,
        trainable=False,
        collections=[collection],
        validate_shape=validate_shape,
        use_resource=use_resource,
        name=name,
    )
