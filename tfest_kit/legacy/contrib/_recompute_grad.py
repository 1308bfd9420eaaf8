"""``tf.contrib.layers.recompute_grad``, a port of TF 1.15's (tf_slim 1.1's does not run).

tf_slim 1.1's copy checks its arguments with ``ops.Tensor``, which TensorFlow 2.15's
``tensorflow.python.framework.ops`` no longer has.  TensorFlow 2.15's own ``tf.recompute_grad``
re-runs the function in its variable scope without ``reuse``, so a function that makes its
variables with ``tf.get_variable`` (``tf.layers``, ``tf.contrib.layers``) fails on the backward
pass.  This is contrib's: ``tf.custom_gradient`` whose gradient function re-runs ``fn`` in the
captured variable scope (``reuse=True``) and ``arg_scope``, after the output gradients exist.

Example:

    @tf.contrib.layers.recompute_grad
    def block(x):
        return tf.layers.dense(x, 64, activation=tf.nn.relu)

    with tf.variable_scope("block_0", use_resource=True):
        y = block(x)
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import numpy as np
import tf_slim

from tfest_kit._tf import tf, tf2

__all__ = ["recompute_grad"]

_USE_DEFAULT = "__rev_block_lib_default"
_WRONG_VARS = (
    "The variables used on recompute were different than the variables originally used. "
    "The function wrapped with @recompute_grad likely creates its own variable scope with a "
    "default name and has been called twice in the same enclosing scope. To fix, call it in "
    "its own variable scope each time."
)


def _refs(variables) -> set:
    return {v.ref() for v in variables}


def _force_data_dependency(first_compute: list, then_compute: list) -> list:
    """``then_compute`` plus a zero computed from ``first_compute`` (XLA drops control deps)."""

    def first_element(x):
        if x.get_shape().ndims is None:
            raise ValueError(f"Rank of Tensor {x} must be known")
        return tf.reshape(tf.slice(x, [0] * x.get_shape().ndims, [1] * x.get_shape().ndims), [])

    total = tf.add_n([first_element(x) for x in first_compute if x is not None])
    if not total.dtype.is_floating:
        raise ValueError("_force_data_dependency only supports floating dtypes.")
    zero = tf.stop_gradient(np.finfo(total.dtype.as_numpy_dtype).tiny * total)
    return [tf.identity(x) + zero if x is not None else None for x in then_compute]


def _recompute(fn: Callable, args: tuple, use_data_dep: bool, tupleize_grads: bool):
    has_flag = "is_recomputing" in inspect.signature(fn).parameters
    for arg in args:
        if not isinstance(arg, (tf.Tensor, tf.Variable)):
            raise ValueError("All inputs to function must be Tensors")

    @tf.custom_gradient
    def fn_with_recompute(*args):
        var_scope = tf.get_variable_scope()
        arg_scope = tf_slim.current_arg_scope()
        with tf2.GradientTape() as tape:
            outputs = fn(*args, **({"is_recomputing": False} if has_flag else {}))
        original_vars = _refs(tape.watched_variables())

        def _grad_fn(output_grads, variables=None):
            if original_vars and _refs(variables or []) != original_vars:
                raise ValueError(_WRONG_VARS)
            variables = list(variables or [])
            # Identities so the gradient walk stops at the recomputed inputs.
            inputs = [tf.identity(x) for x in args]
            # After the output gradients exist, so the recompute is not merged with the
            # forward pass and runs on the backward one.
            with tf.control_dependencies([g for g in output_grads if g is not None]):
                if use_data_dep:
                    inputs = _force_data_dependency(list(output_grads), inputs)
                with tf_slim.arg_scope(arg_scope), tf.variable_scope(var_scope, reuse=True):
                    with tf2.GradientTape() as recompute_tape:
                        kwargs = {"is_recomputing": True} if has_flag else {}
                        recomputed = fn(*inputs, **kwargs)
                    if _refs(recompute_tape.watched_variables()) != original_vars:
                        raise ValueError(_WRONG_VARS)
            if not isinstance(recomputed, (list, tuple)):
                recomputed = [recomputed]
            grads = tf.gradients(
                list(recomputed), inputs + variables, list(output_grads), stop_gradients=inputs
            )
            if tupleize_grads:
                grads = _force_data_dependency(grads, grads) if use_data_dep else tf.tuple(grads)
            return grads[: len(inputs)], grads[len(inputs) :]

        # custom_gradient passes `variables` only to a grad_fn that accepts it.
        if original_vars:

            def grad_fn(*output_grads, **kwargs):
                return _grad_fn(output_grads, kwargs["variables"])
        else:

            def grad_fn(*output_grads):
                return _grad_fn(output_grads)

        return outputs, grad_fn

    return fn_with_recompute(*args)


def recompute_grad(fn: Any = None, use_data_dep: Any = _USE_DEFAULT, tupleize_grads: bool = False):
    """``tf.contrib.layers.recompute_grad``: ``fn`` whose activations are recomputed for gradients.

    Usable as ``@recompute_grad`` or ``@recompute_grad(use_data_dep=…, tupleize_grads=…)``.
    Its variables must be resource variables (``tf.variable_scope(…, use_resource=True)``), as
    in TF 1.15; ``fn`` may take an ``is_recomputing`` keyword (False forward, True backward).

    Args:
      fn: a function of tensors (positional) returning a tensor or a tuple of tensors; it must
        not close over tensors or variables.
      use_data_dep: make the recompute wait on a dummy data dependency rather than a control
        dependency (XLA drops control dependencies); default False without a TPU.
      tupleize_grads: produce all gradients before any is used.

    Returns:
      The wrapped function (or, called with arguments only, a decorator).

    Raises:
      ValueError: if ``fn`` closes over a tensor or variable, an input is not a tensor, or the
        recompute touches other variables than the forward pass.

    Example:

        y = tf.contrib.layers.recompute_grad(lambda x: tf.layers.dense(x, 8))(x)
    """
    if fn is None or not callable(fn):
        if fn is not None:  # recompute_grad(True) as TF 1.15 allowed: use_data_dep positionally
            use_data_dep = fn
        return lambda f: recompute_grad(f, use_data_dep=use_data_dep, tupleize_grads=tupleize_grads)
    code = getattr(fn, "__code__", None)
    for name, cell in zip(code.co_freevars if code else (), getattr(fn, "__closure__", None) or ()):
        value = cell.cell_contents
        if isinstance(value, (tf.Tensor, tf.Variable)):
            raise ValueError(
                f"fn decorated with @recompute_grad closes over Tensor {value.name} (local "
                f"variable name: {name}). Gradients would not reach it: make it an input to fn."
            )
    data_dep = False if use_data_dep == _USE_DEFAULT else bool(use_data_dep)

    @functools.wraps(fn)
    def wrapped(*args):
        return _recompute(fn, args, data_dep, tupleize_grads)

    return wrapped
