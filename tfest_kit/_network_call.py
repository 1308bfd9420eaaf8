"""Calling the user's ``network_fn`` inside a model_fn: seeds, feature lookups, layer updates.

For the :mod:`tfest_kit.model_fn` builders, kept apart so that module reads as the head and the
spec: Keras layers take their initial weights from ``RunConfig.tf_random_seed``; a feature the
network looks up that the input lacks is named, with the features there are; the state updates
Keras layers keep out of ``UPDATE_OPS`` run with each training step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Callable

from tfest_kit._model_fn_call import keras_seeds
from tfest_kit._tf import estimator, tf

__all__ = ["network_outputs", "shape"]


def network_outputs(network_fn: Callable, features, mode, params, config):
    """``network_fn(features, mode, params)``, seeded from ``config``; see the module doc."""
    graph = tf.get_default_graph()
    first_op = len(graph.get_operations())
    with keras_seeds(getattr(config, "tf_random_seed", None)):
        outputs = _call_network(network_fn, features, mode, params)
    if mode == estimator.ModeKeys.TRAIN:
        _run_layer_updates(graph.get_operations()[first_op:])
    return outputs


def shape(tensor) -> str:
    return str(tensor.shape.as_list()) if tensor.shape.rank is not None else "unknown"


# What a layer's moving averages and similar state updates are made of.
_UPDATE_OP_TYPES = frozenset(
    {"AssignSubVariableOp", "AssignAddVariableOp", "AssignSub", "AssignAdd"}
)


def _run_layer_updates(network_ops: list) -> None:
    """Puts the state updates nothing would run into ``UPDATE_OPS``, which the train op waits for.

    ``tf.keras.layers.BatchNormalization`` keeps its moving-average updates on the layer, out
    of ``UPDATE_OPS``: in a model_fn nothing runs them, and evaluation and prediction then
    normalise with the initial mean 0 and variance 1. An update is taken when no op reads it
    or waits for it; ``tf.layers`` updates, already in ``UPDATE_OPS``, are left alone.
    """
    waiting = {}
    for op in network_ops:
        for dependency in op.control_inputs:
            waiting.setdefault(dependency, []).append(op)

    def unused(op) -> bool:
        if any(output.consumers() for output in op.outputs):
            return False
        return all(unused(later) for later in waiting.get(op, ()))

    known = set(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
    updates = [
        op for op in network_ops if op.type in _UPDATE_OP_TYPES and op not in known and unused(op)
    ]
    for op in updates:
        tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, op)
    if updates:
        tf.logging.info(
            "model_fn: %d state updates of Keras layers in network_fn (%s) run with each "
            "training step; Keras keeps them out of UPDATE_OPS",
            len(updates),
            ", ".join(sorted({op.name.split("/")[0] for op in updates})),
        )


class _MissingFeature(KeyError):
    """A lookup on the features mapping found no such feature."""


class _Features(dict):
    """The features as the network sees them: a missing key is told apart from other lookups.

    It is still a ``KeyError``, so a network that catches one for an optional feature works.
    """

    def __missing__(self, key):
        raise _MissingFeature(key)


class _NameOnSequence(TypeError):
    """A lookup by name on features that are a tuple or list (``features["x"]``)."""


class _NameLookupOnSequence:
    """Tuple / list features as the network sees them: a lookup by name is told apart.

    Python's own error ("tuple indices must be integers or slices, not str") names neither the
    sequence nor the key. Still a ``TypeError``; positions, slices and iteration are unchanged.
    """

    def __getitem__(self, key):
        if isinstance(key, str):
            raise _NameOnSequence(key)
        return super().__getitem__(key)


class _FeatureTuple(_NameLookupOnSequence, tuple):
    pass


class _FeatureList(_NameLookupOnSequence, list):
    pass


# The end of TensorFlow's error for ``tensor["x"]``: "... are valid indices, got 'x'".
_NAME_AS_INDEX = re.compile(r"valid indices, got ('[^']*'|\"[^\"]*\")$")


def _call_network(network_fn: Callable, features, mode, params):
    """Calls ``network_fn``; a lookup of a feature the input does not provide gets named.

    Only lookups on the features themselves are rewritten: a ``KeyError`` from anywhere else
    (a ``params`` key the network expects, say) is not the input pipeline's fault. A lookup by
    name on features that are one tensor (an input_fn yielding ``(x, y)``), which TensorFlow
    reports as a bad slice index, or a tuple of tensors (``((x1, x2), y)``) is named too; a
    network that takes a bare tensor or indexes the tuple by position is unaffected.
    """
    is_mapping = isinstance(features, Mapping)
    if is_mapping:
        features = _Features(features)
    elif type(features) is tuple:  # not a namedtuple, whose fields the network may read
        features = _FeatureTuple(features)
    elif type(features) is list:
        features = _FeatureList(features)
    try:
        return network_fn(features, mode, params)
    except _MissingFeature as error:
        raise ValueError(
            f"`network_fn` looked up feature {error.args[0]!r}, which the input_fn (or serving "
            f"receiver) does not provide. Got features: {sorted(map(str, features))}"
        ) from error
    except _NameOnSequence as error:
        key = error.args[0]
        kind = "tuple" if isinstance(features, tuple) else "list"
        raise TypeError(
            f"`network_fn` looked up feature {key!r}, but the input_fn yields a "
            f"{kind} of {len(features)} features, not a dict of features; "
            f"yield ({{{key!r}: x, ...}}, y) (inputs.from_arrays does)"
        ) from error
    except TypeError as error:
        match = _NAME_AS_INDEX.search(str(error))
        if is_mapping or not tf.is_tensor(features) or match is None:
            raise
        key = match.group(1)
        raise TypeError(
            f"`network_fn` looked up feature {key}, but the input_fn yields a single tensor, "
            f"not a dict of features; yield ({{{key}: x}}, y) (inputs.from_arrays does). "
            f"Got: a {features.dtype.name} tensor of shape {shape(features)}"
        ) from error
