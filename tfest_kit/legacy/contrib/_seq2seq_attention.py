"""``tf.contrib.seq2seq``'s attention: a port of TF 1.15's ``attention_wrapper.py``.

The shells are TF1 ``tf.compat.v1.layers.Dense`` / ``RNNCell`` code so that TF 1.15's variable
names come out (``memory_layer/kernel`` where the mechanism is built;
``<decoder scope>/attention_wrapper/bahdanau_attention/{query_layer/kernel,attention_v}``,
``…/luong_attention/attention_g``, ``…/attention_wrapper/attention_layer/kernel`` and the
wrapped cell's variables under ``…/attention_wrapper/``).  The arithmetic (scores, masks,
monotonic probabilities) is in ``_seq2seq_ops.py``, written after TF 1.15's.
"""

from __future__ import annotations

import collections
import functools
import math
from typing import Any, Callable, Optional

import numpy as np

from tfest_kit._tf import tf
from tfest_kit.legacy.contrib import _seq2seq_ops

__all__ = [
    "AttentionMechanism",
    "AttentionWrapper",
    "AttentionWrapperState",
    "BahdanauAttention",
    "BahdanauMonotonicAttention",
    "LuongAttention",
    "LuongMonotonicAttention",
]


class AttentionMechanism:
    """The base class TF 1.15's attention mechanisms share (for ``isinstance`` checks).

    Example:

        assert isinstance(tf.contrib.seq2seq.LuongAttention(8, memory), AttentionMechanism)
    """

    @property
    def alignments_size(self):
        raise NotImplementedError

    @property
    def state_size(self):
        raise NotImplementedError


class _BaseAttentionMechanism(AttentionMechanism):
    """Keys and values from ``memory`` (masked past ``memory_sequence_length``), as TF 1.15."""

    def __init__(
        self,
        query_layer,
        memory,
        probability_fn: Callable,
        memory_sequence_length=None,
        memory_layer=None,
        check_inner_dims_defined: bool = True,
        score_mask_value=None,
        custom_key_value_fn: Optional[Callable] = None,
        name: Optional[str] = None,
    ):
        if not callable(probability_fn):
            raise TypeError(f"`probability_fn` must be callable. Got: {probability_fn!r}")
        self._query_layer = query_layer
        self._memory_layer = memory_layer
        self.dtype = memory_layer.dtype
        if score_mask_value is None:
            score_mask_value = tf.as_dtype(memory_layer.dtype).as_numpy_dtype(-np.inf)
        self._probability_fn = lambda score, prev: probability_fn(
            _seq2seq_ops.maybe_mask_score(
                score,
                memory_sequence_length=memory_sequence_length,
                score_mask_value=score_mask_value,
            ),
            prev,
        )
        with tf.name_scope(name, "BaseAttentionMechanismInit", tf.nest.flatten(memory)):
            self._values = _seq2seq_ops.prepare_memory(
                memory,
                memory_sequence_length=memory_sequence_length,
                check_inner_dims_defined=check_inner_dims_defined,
            )
            self._keys = self.memory_layer(self._values) if self.memory_layer else self._values
            if custom_key_value_fn is not None:
                self._keys, self._values = custom_key_value_fn(self._keys, self._values)
            self._batch_size = (
                tf.compat.dimension_value(self._keys.shape[0]) or tf.shape(self._keys)[0]
            )
            self._alignments_size = (
                tf.compat.dimension_value(self._keys.shape[1]) or tf.shape(self._keys)[1]
            )

    @property
    def memory_layer(self):
        return self._memory_layer

    @property
    def query_layer(self):
        return self._query_layer

    @property
    def values(self):
        return self._values

    @property
    def keys(self):
        return self._keys

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def alignments_size(self):
        return self._alignments_size

    @property
    def state_size(self):
        return self._alignments_size

    def initial_alignments(self, batch_size, dtype):
        """Zeros ``[batch_size, max_time]``: no attention paid before the first step."""
        return tf.zeros(tf.stack([batch_size, self._alignments_size]), dtype=dtype)

    def initial_state(self, batch_size, dtype):
        return self.initial_alignments(batch_size, dtype)


def _dense(num_units: int, name: str, dtype) -> Any:
    return tf.layers.Dense(num_units, name=name, use_bias=False, dtype=dtype)


class LuongAttention(_BaseAttentionMechanism):
    """``tf.contrib.seq2seq.LuongAttention``: multiplicative attention, TF 1.15's arguments.

    Args:
      num_units: depth of the keys (``memory_layer``'s units).
      memory: ``[batch_size, max_time, ...]`` encoder outputs.
      memory_sequence_length: positions past it are masked.
      scale: learn a scalar ``attention_g`` multiplying the score.
      probability_fn: scores to probabilities; ``tf.nn.softmax`` by default.
      score_mask_value: the masked scores' value, ``-inf`` by default.
      dtype: the variables' dtype, float32 by default.
      custom_key_value_fn: ``fn(keys, values) -> (keys, values)``.
      name: name scope of the set-up ops.

    Example:

        attention = LuongAttention(64, encoder_outputs, memory_sequence_length=lengths)
    """

    def __init__(
        self,
        num_units: int,
        memory,
        memory_sequence_length=None,
        scale: bool = False,
        probability_fn: Optional[Callable] = None,
        score_mask_value=None,
        dtype=None,
        custom_key_value_fn: Optional[Callable] = None,
        name: str = "LuongAttention",
    ):
        probability_fn = probability_fn or tf.nn.softmax
        dtype = dtype or tf.float32
        super().__init__(
            query_layer=None,
            memory_layer=_dense(num_units, "memory_layer", dtype),
            memory=memory,
            probability_fn=lambda score, _: probability_fn(score),
            memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value,
            custom_key_value_fn=custom_key_value_fn,
            name=name,
        )
        self._num_units = num_units
        self._scale = scale
        self._name = name

    def _score(self, query):
        attention_g = None
        if self._scale:
            attention_g = tf.get_variable(
                "attention_g", dtype=query.dtype, initializer=tf.ones_initializer, shape=()
            )
        return _seq2seq_ops.luong_score(query, self._keys, attention_g)

    def __call__(self, query, state):
        with tf.variable_scope(None, "luong_attention", [query]):
            score = self._score(query)
        alignments = self._probability_fn(score, state)
        return alignments, alignments


class BahdanauAttention(_BaseAttentionMechanism):
    """``tf.contrib.seq2seq.BahdanauAttention``: additive attention, TF 1.15's arguments.

    Args:
      num_units: depth of the query and keys layers.
      memory: ``[batch_size, max_time, ...]`` encoder outputs.
      memory_sequence_length: positions past it are masked.
      normalize: weight-normalise ``attention_v`` (adds ``attention_g``, ``attention_b``).
      probability_fn: scores to probabilities; ``tf.nn.softmax`` by default.
      score_mask_value: the masked scores' value, ``-inf`` by default.
      dtype: the variables' dtype, float32 by default.
      custom_key_value_fn: ``fn(keys, values) -> (keys, values)``.
      name: name scope of the set-up ops.

    Example:

        attention = BahdanauAttention(64, encoder_outputs, memory_sequence_length=lengths)
    """

    def __init__(
        self,
        num_units: int,
        memory,
        memory_sequence_length=None,
        normalize: bool = False,
        probability_fn: Optional[Callable] = None,
        score_mask_value=None,
        dtype=None,
        custom_key_value_fn: Optional[Callable] = None,
        name: str = "BahdanauAttention",
    ):
        probability_fn = probability_fn or tf.nn.softmax
        dtype = dtype or tf.float32
        super().__init__(
            query_layer=_dense(num_units, "query_layer", dtype),
            memory_layer=_dense(num_units, "memory_layer", dtype),
            memory=memory,
            probability_fn=lambda score, _: probability_fn(score),
            memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value,
            custom_key_value_fn=custom_key_value_fn,
            name=name,
        )
        self._num_units = num_units
        self._normalize = normalize
        self._name = name

    def _score(self, query):
        processed_query = self.query_layer(query) if self.query_layer else query
        attention_v = tf.get_variable("attention_v", [self._num_units], dtype=query.dtype)
        attention_g = attention_b = None
        if self._normalize:
            attention_g = tf.get_variable(
                "attention_g",
                dtype=query.dtype,
                initializer=tf.constant_initializer(math.sqrt(1.0 / self._num_units)),
                shape=(),
            )
            attention_b = tf.get_variable(
                "attention_b",
                [self._num_units],
                dtype=query.dtype,
                initializer=tf.zeros_initializer(),
            )
        return _seq2seq_ops.bahdanau_score(
            processed_query, self._keys, attention_v, attention_g, attention_b
        )

    def __call__(self, query, state):
        with tf.variable_scope(None, "bahdanau_attention", [query]):
            score = self._score(query)
        alignments = self._probability_fn(score, state)
        return alignments, alignments


class _MonotonicMixin:
    """Monotonic mechanisms start with all attention on the first memory position."""

    def initial_alignments(self, batch_size, dtype):
        return tf.one_hot(
            tf.zeros((batch_size,), dtype=tf.int32), self._alignments_size, dtype=dtype
        )


def _monotonic_fn(sigmoid_noise, sigmoid_noise_seed, mode):
    return functools.partial(
        _seq2seq_ops.monotonic_probability_fn,
        sigmoid_noise=sigmoid_noise,
        mode=mode,
        seed=sigmoid_noise_seed,
    )


def _score_bias(dtype, score_bias_init):
    return tf.get_variable("attention_score_bias", dtype=dtype, initializer=score_bias_init)


class BahdanauMonotonicAttention(_MonotonicMixin, BahdanauAttention):
    """``tf.contrib.seq2seq.BahdanauMonotonicAttention``, TF 1.15's arguments.

    Args:
      num_units, memory, memory_sequence_length, normalize, score_mask_value, dtype: as
        ``BahdanauAttention``.
      sigmoid_noise: std of the noise added to the scores before the sigmoid.
      sigmoid_noise_seed: the noise's seed.
      score_bias_init: initial value of ``attention_score_bias``.
      mode: ``"recursive"``, ``"parallel"`` or ``"hard"`` (``monotonic_attention``).
      name: name scope of the set-up ops.

    Example:

        attention = BahdanauMonotonicAttention(64, encoder_outputs, score_bias_init=-1.0)
    """

    def __init__(
        self,
        num_units: int,
        memory,
        memory_sequence_length=None,
        normalize: bool = False,
        score_mask_value=None,
        sigmoid_noise: float = 0.0,
        sigmoid_noise_seed=None,
        score_bias_init: float = 0.0,
        mode: str = "parallel",
        dtype=None,
        name: str = "BahdanauMonotonicAttention",
    ):
        BahdanauAttention.__init__(
            self,
            num_units,
            memory,
            memory_sequence_length=memory_sequence_length,
            normalize=normalize,
            score_mask_value=score_mask_value,
            dtype=dtype,
            name=name,
        )
        fn = _monotonic_fn(sigmoid_noise, sigmoid_noise_seed, mode)
        self._probability_fn = self._masked(fn, memory_sequence_length, score_mask_value)
        self._score_bias_init = score_bias_init

    def _masked(self, fn, memory_sequence_length, score_mask_value):
        if score_mask_value is None:
            score_mask_value = tf.as_dtype(self.dtype).as_numpy_dtype(-np.inf)
        return lambda score, prev: fn(
            _seq2seq_ops.maybe_mask_score(
                score,
                memory_sequence_length=memory_sequence_length,
                score_mask_value=score_mask_value,
            ),
            prev,
        )

    def __call__(self, query, state):
        with tf.variable_scope(None, "bahdanau_monotonic_attention", [query]):
            score = self._score(query)
            score += _score_bias(query.dtype, self._score_bias_init)
        alignments = self._probability_fn(score, state)
        return alignments, alignments


class LuongMonotonicAttention(_MonotonicMixin, LuongAttention):
    """``tf.contrib.seq2seq.LuongMonotonicAttention``, TF 1.15's arguments.

    Args:
      num_units, memory, memory_sequence_length, scale, score_mask_value, dtype: as
        ``LuongAttention``.
      sigmoid_noise, sigmoid_noise_seed, score_bias_init, mode: as
        ``BahdanauMonotonicAttention``.
      name: name scope of the set-up ops.

    Example:

        attention = LuongMonotonicAttention(64, encoder_outputs, mode="hard")
    """

    def __init__(
        self,
        num_units: int,
        memory,
        memory_sequence_length=None,
        scale: bool = False,
        score_mask_value=None,
        sigmoid_noise: float = 0.0,
        sigmoid_noise_seed=None,
        score_bias_init: float = 0.0,
        mode: str = "parallel",
        dtype=None,
        name: str = "LuongMonotonicAttention",
    ):
        LuongAttention.__init__(
            self,
            num_units,
            memory,
            memory_sequence_length=memory_sequence_length,
            scale=scale,
            score_mask_value=score_mask_value,
            dtype=dtype,
            name=name,
        )
        fn = _monotonic_fn(sigmoid_noise, sigmoid_noise_seed, mode)
        self._probability_fn = BahdanauMonotonicAttention._masked(
            self, fn, memory_sequence_length, score_mask_value
        )
        self._score_bias_init = score_bias_init

    def __call__(self, query, state):
        with tf.variable_scope(None, "luong_monotonic_attention", [query]):
            score = self._score(query)
            score += _score_bias(query.dtype, self._score_bias_init)
        alignments = self._probability_fn(score, state)
        return alignments, alignments


class AttentionWrapperState(
    collections.namedtuple(
        "AttentionWrapperState",
        ("cell_state", "attention", "time", "alignments", "alignment_history", "attention_state"),
    )
):
    """TF 1.15's ``AttentionWrapperState`` (with its ``time`` field and ``clone``).

    Example:

        state = cell.zero_state(batch_size, tf.float32).clone(cell_state=encoder_state)
    """

    def clone(self, **kwargs):
        """A copy with the fields in ``kwargs`` replaced; tensors keep the old static shapes.

        Example:

            state = cell.zero_state(batch_size, tf.float32).clone(cell_state=encoder_state)
        """

        def with_same_shape(old, new):
            tensors = isinstance(old, tf.Tensor) and isinstance(new, tf.Tensor)
            if tensors and not tf.executing_eagerly():
                new.set_shape(old.shape)  # incompatible shapes raise ValueError, as in TF 1.15
            return new

        return tf.nest.map_structure(with_same_shape, self, super()._replace(**kwargs))


def _compute_attention(attention_mechanism, cell_output, attention_state, attention_layer):
    alignments, next_attention_state = attention_mechanism(cell_output, state=attention_state)
    context = tf.squeeze(tf.matmul(tf.expand_dims(alignments, 1), attention_mechanism.values), [1])
    if attention_layer is not None:
        return (
            attention_layer(tf.concat([cell_output, context], 1)),
            alignments,
            next_attention_state,
        )
    return context, alignments, next_attention_state


class AttentionWrapper(tf.nn.rnn_cell.RNNCell):
    """``tf.contrib.seq2seq.AttentionWrapper``: an RNN cell with attention, as TF 1.15.

    Args:
      cell: the wrapped ``RNNCell``.
      attention_mechanism: one mechanism or a list of them.
      attention_layer_size: the depth (or a list, one per mechanism) of the
        ``attention_layer`` projecting ``[cell_output, context]``; None for the context itself.
      alignment_history: keep each step's alignments in a ``TensorArray``.
      cell_input_fn: ``fn(inputs, attention)``; concatenation by default.
      output_attention: emit the attention (True) or the wrapped cell's output.
      initial_cell_state: the wrapped cell's state for ``zero_state``.
      name: the layer's name, ``"attention_wrapper"`` by default.
      attention_layer: layers to use instead of ``attention_layer_size``'s.
      attention_fn: ``fn(mechanism, cell_output, attention_state, attention_layer)``.

    Raises:
      TypeError: a mechanism that is not an ``AttentionMechanism``.
      ValueError: both ``attention_layer_size`` and ``attention_layer``, or their count differs
        from the mechanisms'.

    Example:

        cell = AttentionWrapper(tf.nn.rnn_cell.BasicLSTMCell(64), attention, 64)
        state = cell.zero_state(batch_size, tf.float32).clone(cell_state=encoder_state)
    """

    def __init__(
        self,
        cell,
        attention_mechanism,
        attention_layer_size=None,
        alignment_history: bool = False,
        cell_input_fn: Optional[Callable] = None,
        output_attention: bool = True,
        initial_cell_state=None,
        name: Optional[str] = None,
        attention_layer=None,
        attention_fn: Optional[Callable] = None,
    ):
        super().__init__(name=name)
        self._is_multi = isinstance(attention_mechanism, (list, tuple))
        mechanisms = tuple(attention_mechanism) if self._is_multi else (attention_mechanism,)
        for mechanism in mechanisms:
            if not isinstance(mechanism, AttentionMechanism):
                raise TypeError(
                    "`attention_mechanism` must be a tf.contrib.seq2seq AttentionMechanism "
                    f"(BahdanauAttention, LuongAttention …) or a list of them. Got: {mechanism!r}"
                )
        if cell_input_fn is None:
            cell_input_fn = lambda inputs, attention: tf.concat([inputs, attention], -1)  # noqa: E731
        elif not callable(cell_input_fn):
            raise TypeError(f"`cell_input_fn` must be callable. Got: {cell_input_fn!r}")
        if attention_layer_size is not None and attention_layer is not None:
            raise ValueError(
                "Give only one of `attention_layer_size` and `attention_layer`. Got both: "
                f"{attention_layer_size!r}, {attention_layer!r}"
            )
        if attention_layer_size is not None:
            sizes = tuple(
                attention_layer_size
                if isinstance(attention_layer_size, (list, tuple))
                else (attention_layer_size,)
            )
            if len(sizes) != len(mechanisms):
                raise ValueError(
                    f"`attention_layer_size` must have one size per attention mechanism "
                    f"({len(mechanisms)}). Got: {attention_layer_size!r}"
                )
            self._attention_layers = tuple(
                _dense(size, "attention_layer", mechanisms[i].dtype) for i, size in enumerate(sizes)
            )
            self._attention_layer_size = sum(sizes)
        elif attention_layer is not None:
            self._attention_layers = tuple(
                attention_layer
                if isinstance(attention_layer, (list, tuple))
                else (attention_layer,)
            )
            if len(self._attention_layers) != len(mechanisms):
                raise ValueError(
                    f"`attention_layer` must have one layer per attention mechanism "
                    f"({len(mechanisms)}). Got: {attention_layer!r}"
                )
            self._attention_layer_size = sum(
                tf.compat.dimension_value(
                    layer.compute_output_shape(
                        [None, cell.output_size + tf.compat.dimension_value(m.values.shape[-1])]
                    )[-1]
                )
                for layer, m in zip(self._attention_layers, mechanisms)
            )
        else:
            self._attention_layers = None
            self._attention_layer_size = sum(
                tf.compat.dimension_value(m.values.shape[-1]) for m in mechanisms
            )
        self._attention_fn = attention_fn or _compute_attention
        self._cell = cell
        self._attention_mechanisms = mechanisms
        self._cell_input_fn = cell_input_fn
        self._output_attention = output_attention
        self._alignment_history = alignment_history
        self._initial_cell_state = None
        if initial_cell_state is not None:
            with tf.name_scope(name, "AttentionWrapperInit"):
                last = tf.nest.flatten(initial_cell_state)[-1]
                batch = tf.compat.dimension_value(last.shape[0]) or tf.shape(last)[0]
                with tf.control_dependencies(self._batch_size_checks(batch, "initial_cell_state")):
                    self._initial_cell_state = tf.nest.map_structure(
                        lambda s: tf.identity(s, name="check_initial_cell_state"),
                        initial_cell_state,
                    )

    def _batch_size_checks(self, batch_size, what: str) -> list:
        message = (
            f"The batch size of {what} does not match the attention mechanism's memory batch "
            "size (with beam search, tile the memory and state with tile_batch)."
        )
        return [
            tf.assert_equal(batch_size, m.batch_size, message=message)
            for m in self._attention_mechanisms
        ]

    def _item_or_tuple(self, seq):
        items = tuple(seq)
        return items if self._is_multi else items[0]

    @property
    def output_size(self):
        return self._attention_layer_size if self._output_attention else self._cell.output_size

    @property
    def state_size(self):
        return AttentionWrapperState(
            cell_state=self._cell.state_size,
            time=tf.TensorShape([]),
            attention=self._attention_layer_size,
            alignments=self._item_or_tuple(m.alignments_size for m in self._attention_mechanisms),
            attention_state=self._item_or_tuple(m.state_size for m in self._attention_mechanisms),
            alignment_history=self._item_or_tuple(
                m.alignments_size if self._alignment_history else ()
                for m in self._attention_mechanisms
            ),
        )

    def zero_state(self, batch_size, dtype):
        """The initial ``AttentionWrapperState``: the wrapped cell's zero (or initial) state."""
        with tf.name_scope(type(self).__name__ + "ZeroState", values=[batch_size]):
            if self._initial_cell_state is not None:
                cell_state = self._initial_cell_state
            else:
                cell_state = self._cell.zero_state(batch_size, dtype)
            with tf.control_dependencies(self._batch_size_checks(batch_size, "zero_state")):
                cell_state = tf.nest.map_structure(
                    lambda s: tf.identity(s, name="checked_cell_state"), cell_state
                )
            alignments = [
                m.initial_alignments(batch_size, dtype) for m in self._attention_mechanisms
            ]
            return AttentionWrapperState(
                cell_state=cell_state,
                time=tf.zeros([], dtype=tf.int32),
                attention=tf.zeros(tf.stack([batch_size, self._attention_layer_size]), dtype),
                alignments=self._item_or_tuple(alignments),
                attention_state=self._item_or_tuple(
                    m.initial_state(batch_size, dtype) for m in self._attention_mechanisms
                ),
                alignment_history=self._item_or_tuple(
                    tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=a.shape)
                    if self._alignment_history
                    else ()
                    for a in alignments
                ),
            )

    def call(self, inputs, state):
        if not isinstance(state, AttentionWrapperState):
            raise TypeError(
                "`state` must be an AttentionWrapperState (from this cell's zero_state). "
                f"Got: {type(state).__name__}"
            )
        cell_inputs = self._cell_input_fn(inputs, state.attention)
        cell_output, next_cell_state = self._cell(cell_inputs, state.cell_state)
        batch = tf.compat.dimension_value(cell_output.shape[0]) or tf.shape(cell_output)[0]
        with tf.control_dependencies(self._batch_size_checks(batch, "the cell output")):
            cell_output = tf.identity(cell_output, name="checked_cell_output")
        if self._is_multi:
            previous_states, previous_histories = state.attention_state, state.alignment_history
        else:
            previous_states, previous_histories = [state.attention_state], [state.alignment_history]
        attentions, alignments_all, states, histories = [], [], [], []
        for i, mechanism in enumerate(self._attention_mechanisms):
            layer = self._attention_layers[i] if self._attention_layers else None
            attention, alignments, next_attention_state = self._attention_fn(
                mechanism, cell_output, previous_states[i], layer
            )
            history = (
                previous_histories[i].write(state.time, alignments)
                if self._alignment_history
                else ()
            )
            attentions.append(attention)
            alignments_all.append(alignments)
            states.append(next_attention_state)
            histories.append(history)
        attention = tf.concat(attentions, 1)
        next_state = AttentionWrapperState(
            time=state.time + 1,
            cell_state=next_cell_state,
            attention=attention,
            attention_state=self._item_or_tuple(states),
            alignments=self._item_or_tuple(alignments_all),
            alignment_history=self._item_or_tuple(histories),
        )
        return (attention if self._output_attention else cell_output), next_state
