"""``tf.contrib.seq2seq`` as TF 1.15 had it: decoders, helpers, beam search and attention.

Every piece is TensorFlow ops written after TF 1.15's contrib code (Apache 2.0), one code path
for every supported TensorFlow:

- ``sequence_loss``, ``tile_batch``, ``gather_tree`` (contrib's C++ kernel, as a ``tf.scan``
  backtrack), ``hardmax``, ``safe_cumprod``, ``monotonic_attention``: ``_seq2seq_ops.py``.
- ``Decoder``, ``dynamic_decode``, ``BasicDecoder`` and the helpers (``TrainingHelper``,
  ``GreedyEmbeddingHelper`` …): ``dynamic_decode`` opens the ``decoder`` variable scope, so a
  cell and output layer first called inside it get TF 1.15's names
  (``decoder/basic_lstm_cell/kernel``, ``decoder/dense/kernel``); the helpers are in
  ``_seq2seq_helpers.py``.
- ``BeamSearchDecoder``: TF 1.15's step, ``gather_tree`` and re-ordering of beams
  (``_seq2seq_beam_search.py``).
- ``AttentionWrapper`` and the mechanisms, with TF 1.15's variable names
  (``_seq2seq_attention.py``).

Example:

    helper = tf.contrib.seq2seq.TrainingHelper(decoder_inputs, target_lengths)
    decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper, initial_state, output_layer)
    outputs, _, _ = tf.contrib.seq2seq.dynamic_decode(decoder)
    loss = tf.contrib.seq2seq.sequence_loss(outputs.rnn_output, targets, weights)
"""

from __future__ import annotations

import abc
import collections
import contextlib

import numpy as np

from tfest_kit._tf import tf
from tfest_kit.legacy.contrib import _seq2seq_attention
from tfest_kit.legacy.contrib._seq2seq_attention import (  # noqa: F401 (served)
    AttentionMechanism,
    AttentionWrapper,
    AttentionWrapperState,
    BahdanauAttention,
    BahdanauMonotonicAttention,
    LuongAttention,
    LuongMonotonicAttention,
)
from tfest_kit.legacy.contrib._seq2seq_beam_search import (  # noqa: F401 (served)
    BeamSearchDecoderOutput,
    BeamSearchDecoderState,
    BeamSearchMixin,
    FinalBeamSearchDecoderOutput,
    beam_search_step,
)
from tfest_kit.legacy.contrib._seq2seq_helpers import (  # noqa: F401 (served)
    CustomHelper,
    GreedyEmbeddingHelper,
    Helper,
    InferenceHelper,
    SampleEmbeddingHelper,
    ScheduledEmbeddingTrainingHelper,
    TrainingHelper,
    embedding_fn,
    int_scalar,
    int_vector,
    transpose_batch_time,
)
from tfest_kit.legacy.contrib._seq2seq_ops import (  # noqa: F401 (served)
    gather_tree,
    hardmax,
    monotonic_attention,
    safe_cumprod,
    sequence_loss,
    tile_batch,
)

_OPS = (
    "sequence_loss",
    "tile_batch",
    "gather_tree",
    "hardmax",
    "safe_cumprod",
    "monotonic_attention",
)
_ATTENTION = tuple(_seq2seq_attention.__all__)
_DECODING = (
    "Decoder",
    "dynamic_decode",
    "BasicDecoder",
    "BasicDecoderOutput",
    "Helper",
    "CustomHelper",
    "TrainingHelper",
    "ScheduledEmbeddingTrainingHelper",
    "GreedyEmbeddingHelper",
    "SampleEmbeddingHelper",
    "InferenceHelper",
)
_BEAM = (
    "BeamSearchDecoder",
    "BeamSearchDecoderOutput",
    "BeamSearchDecoderState",
    "FinalBeamSearchDecoderOutput",
)

__all__ = [*_OPS, *_ATTENTION, *_DECODING, *_BEAM, "BACKING", "NOT_SERVED"]

_PORT = "a port of TF 1.15's (tfest_kit.legacy.contrib.seq2seq, TF 1.15's variable names)"
_OPS_PORT = "TF ops after TF 1.15's contrib/seq2seq (tfest_kit.legacy.contrib._seq2seq_ops)"
BACKING = {
    **{name: _OPS_PORT for name in _OPS},
    "gather_tree": f"{_OPS_PORT}: tf.scan in place of contrib's C++ kernel",
    **{name: _PORT for name in _DECODING + _ATTENTION + _BEAM},
    "BeamSearchDecoder": f"{_PORT}; TF 1.15's beam-search step (_seq2seq_beam_search)",
}
NOT_SERVED = {
    "ScheduledOutputTrainingHelper": "tf.contrib.seq2seq.InferenceHelper or CustomHelper "
    "(feed the outputs back yourself)",
    "BasicDecoderV2": "tf.contrib.seq2seq.BasicDecoder (TF 1.15's Keras-layer variant is not "
    "ported)",
    "BeamSearchDecoderV2": "tf.contrib.seq2seq.BeamSearchDecoder (TF 1.15's Keras-layer variant "
    "is not ported)",
}


class BasicDecoderOutput(collections.namedtuple("BasicDecoderOutput", ("rnn_output", "sample_id"))):
    """A ``BasicDecoder`` step's output: the (projected) cell output and the sampled ids.

    Example:

        outputs, _, _ = tf.contrib.seq2seq.dynamic_decode(decoder)
        logits, ids = outputs.rnn_output, outputs.sample_id
    """


class Decoder(metaclass=abc.ABCMeta):
    """TF 1.15's ``tf.contrib.seq2seq.Decoder`` interface, run by ``dynamic_decode``.

    Subclasses give ``batch_size``, ``output_size``, ``output_dtype``, ``initialize(name)`` ->
    ``(finished, inputs, state)`` and ``step(time, inputs, state, name)`` ->
    ``(outputs, next_state, next_inputs, finished)``; ``finalize`` and ``tracks_own_finished``
    are optional.

    Example:

        outputs, state, lengths = dynamic_decode(MyDecoder(...))
    """

    @property
    def batch_size(self):
        raise NotImplementedError

    @property
    def output_size(self):
        raise NotImplementedError

    @property
    def output_dtype(self):
        raise NotImplementedError

    @abc.abstractmethod
    def initialize(self, name=None):
        raise NotImplementedError

    @abc.abstractmethod
    def step(self, time, inputs, state, name=None):
        raise NotImplementedError

    def finalize(self, outputs, final_state, sequence_lengths):
        raise NotImplementedError

    @property
    def tracks_own_finished(self) -> bool:
        return False


def dynamic_decode(
    decoder: Decoder,
    output_time_major: bool = False,
    impute_finished: bool = False,
    maximum_iterations=None,
    parallel_iterations: int = 32,
    swap_memory: bool = False,
    scope=None,
):
    """Runs ``decoder`` until every sequence is finished, as TF 1.15's ``dynamic_decode``.

    Args:
      decoder: a ``Decoder`` (``BasicDecoder``, ``BeamSearchDecoder`` …).
      output_time_major: return ``[time, batch, ...]`` outputs instead of ``[batch, time, ...]``.
      impute_finished: zero the outputs and copy the state through past each sequence's end.
      maximum_iterations: the most decoding steps (an int32 scalar); None for no limit.
      parallel_iterations: passed to ``tf.while_loop``.
      swap_memory: passed to ``tf.while_loop``.
      scope: the variable scope, ``"decoder"`` by default.

    Returns:
      ``(final_outputs, final_state, final_sequence_lengths)``.

    Raises:
      TypeError: ``decoder`` is not a ``Decoder``.
      ValueError: ``maximum_iterations`` is not a scalar.

    Example:

        outputs, state, lengths = dynamic_decode(decoder, maximum_iterations=50)
    """
    if not isinstance(decoder, Decoder):
        raise TypeError(
            "`decoder` must be a tf.contrib.seq2seq Decoder (BasicDecoder, BeamSearchDecoder …). "
            f"Got: {type(decoder).__name__}"
        )
    with tf.variable_scope(scope, "decoder") as varscope:
        if not tf.executing_eagerly() and varscope.caching_device is None:
            varscope.set_caching_device(lambda op: op.device)
        if maximum_iterations is not None:
            maximum_iterations = tf.convert_to_tensor(
                maximum_iterations, dtype=tf.int32, name="maximum_iterations"
            )
            if maximum_iterations.shape.ndims != 0:
                raise ValueError(
                    "`maximum_iterations` must be a scalar. Got shape: "
                    f"{maximum_iterations.shape}"
                )
        initial_finished, initial_inputs, initial_state = decoder.initialize()
        zero_outputs = tf.nest.map_structure(
            lambda size, dtype: tf.zeros(
                tf.concat(
                    ([decoder.batch_size], tf.constant(tf.TensorShape(size).as_list(), tf.int32)), 0
                ),
                dtype,
            ),
            decoder.output_size,
            decoder.output_dtype,
        )
        if maximum_iterations is not None:
            initial_finished = tf.logical_or(initial_finished, maximum_iterations <= 0)
        initial_sequence_lengths = tf.zeros_like(initial_finished, dtype=tf.int32)
        static_batch = tf.get_static_value(decoder.batch_size)

        def _create_ta(size, dtype):
            shape = tf.TensorShape(size)
            element_shape = None if shape.ndims == 0 else tf.TensorShape([static_batch]) + shape
            return tf.TensorArray(
                dtype=dtype, size=0, dynamic_size=True, element_shape=element_shape
            )

        initial_outputs_ta = tf.nest.map_structure(
            _create_ta, decoder.output_size, decoder.output_dtype
        )

        def condition(unused_time, unused_outputs_ta, unused_state, unused_inputs, finished, _):
            return tf.logical_not(tf.reduce_all(finished))

        def body(time, outputs_ta, state, inputs, finished, sequence_lengths):
            next_outputs, decoder_state, next_inputs, decoder_finished = decoder.step(
                time, inputs, state
            )
            lengths_from_state = False
            if decoder.tracks_own_finished:
                next_finished = decoder_finished
                lengths = getattr(decoder_state, "lengths", None)
                if lengths is not None:
                    lengths_from_state = True
                    sequence_lengths = tf.cast(lengths, tf.int32)
            else:
                next_finished = tf.logical_or(decoder_finished, finished)
            if maximum_iterations is not None:
                next_finished = tf.logical_or(next_finished, time + 1 >= maximum_iterations)
            if lengths_from_state:
                next_sequence_lengths = sequence_lengths
            else:
                next_sequence_lengths = tf.where(
                    tf.logical_not(finished),
                    tf.fill(tf.shape(sequence_lengths), time + 1),
                    sequence_lengths,
                )
            tf.nest.assert_same_structure(state, decoder_state)
            tf.nest.assert_same_structure(outputs_ta, next_outputs)
            tf.nest.assert_same_structure(inputs, next_inputs)
            if impute_finished:
                emit = tf.nest.map_structure(
                    lambda out, zero: tf.where(finished, zero, out), next_outputs, zero_outputs
                )
            else:
                emit = next_outputs

            def _maybe_copy_state(new, cur):
                if isinstance(cur, tf.TensorArray):
                    return new
                new.set_shape(cur.shape)
                return new if new.shape.ndims == 0 else tf.where(finished, cur, new)

            if impute_finished:
                next_state = tf.nest.map_structure(_maybe_copy_state, decoder_state, state)
            else:
                next_state = decoder_state
            outputs_ta = tf.nest.map_structure(
                lambda ta, out: ta.write(time, out), outputs_ta, emit
            )
            return (
                time + 1,
                outputs_ta,
                next_state,
                next_inputs,
                next_finished,
                next_sequence_lengths,
            )

        res = tf.while_loop(
            condition,
            body,
            loop_vars=(
                tf.constant(0, dtype=tf.int32),
                initial_outputs_ta,
                initial_state,
                initial_inputs,
                initial_finished,
                initial_sequence_lengths,
            ),
            parallel_iterations=parallel_iterations,
            maximum_iterations=maximum_iterations,
            swap_memory=swap_memory,
        )
        final_state, final_sequence_lengths = res[2], res[5]
        final_outputs = tf.nest.map_structure(lambda ta: ta.stack(), res[1])
        with contextlib.suppress(NotImplementedError):
            final_outputs, final_state = decoder.finalize(
                final_outputs, final_state, final_sequence_lengths
            )
        if not output_time_major:
            final_outputs = tf.nest.map_structure(transpose_batch_time, final_outputs)
    return final_outputs, final_state, final_sequence_lengths


def _rnn_output_size(cell, output_layer):
    size = cell.output_size
    if output_layer is None:
        return size
    shapes = tf.nest.map_structure(lambda s: tf.TensorShape([None]).concatenate(s), size)
    layer_shape = output_layer.compute_output_shape(shapes)
    return tf.nest.map_structure(lambda s: s[1:], layer_shape)


def _check_cell(cell, output_layer) -> None:
    if not (hasattr(cell, "output_size") and hasattr(cell, "state_size") and callable(cell)):
        raise TypeError(f"`cell` must be an RNNCell. Got: {type(cell).__name__}")
    if output_layer is not None and not callable(output_layer):
        raise TypeError(
            "`output_layer` must be a layer (tf.layers.Dense …). "
            f"Got: {type(output_layer).__name__}"
        )


class BasicDecoder(Decoder):
    """``tf.contrib.seq2seq.BasicDecoder``: a cell, a ``Helper`` and an optional output layer.

    Args:
      cell: an ``RNNCell``.
      helper: a ``Helper`` (``TrainingHelper``, ``GreedyEmbeddingHelper`` …).
      initial_state: the cell's initial state.
      output_layer: applied to the cell's output before sampling (``tf.layers.Dense``).

    Raises:
      TypeError: ``helper`` is not a ``Helper``, or ``cell`` / ``output_layer`` is not a layer.

    Example:

        decoder = BasicDecoder(cell, helper, initial_state, tf.layers.Dense(vocab_size))
        outputs, _, _ = dynamic_decode(decoder)  # outputs.rnn_output, outputs.sample_id
    """

    def __init__(self, cell, helper: Helper, initial_state, output_layer=None):
        _check_cell(cell, output_layer)
        if not isinstance(helper, Helper):
            raise TypeError(
                "`helper` must be a tf.contrib.seq2seq Helper (TrainingHelper …). "
                f"Got: {type(helper).__name__}"
            )
        self._cell = cell
        self._helper = helper
        self._initial_state = initial_state
        self._output_layer = output_layer

    @property
    def batch_size(self):
        return self._helper.batch_size

    @property
    def output_size(self):
        return BasicDecoderOutput(
            rnn_output=_rnn_output_size(self._cell, self._output_layer),
            sample_id=self._helper.sample_ids_shape,
        )

    @property
    def output_dtype(self):
        dtype = tf.nest.flatten(self._initial_state)[0].dtype
        return BasicDecoderOutput(
            tf.nest.map_structure(
                lambda _: dtype, _rnn_output_size(self._cell, self._output_layer)
            ),
            self._helper.sample_ids_dtype,
        )

    def initialize(self, name=None):
        return self._helper.initialize() + (self._initial_state,)

    def step(self, time, inputs, state, name=None):
        with tf.name_scope(name, "BasicDecoderStep", (time, inputs, state)):
            cell_outputs, cell_state = self._cell(inputs, state)
            if self._output_layer is not None:
                cell_outputs = self._output_layer(cell_outputs)
            sample_ids = self._helper.sample(time=time, outputs=cell_outputs, state=cell_state)
            finished, next_inputs, next_state = self._helper.next_inputs(
                time=time, outputs=cell_outputs, state=cell_state, sample_ids=sample_ids
            )
        return BasicDecoderOutput(cell_outputs, sample_ids), next_state, next_inputs, finished


class BeamSearchDecoder(BeamSearchMixin, Decoder):
    """``tf.contrib.seq2seq.BeamSearchDecoder`` with TF 1.15's arguments.

    The memory and initial state of an attention cell must be tiled ``beam_width`` times
    (``tile_batch``), as in TF 1.15.

    Args:
      cell: an ``RNNCell``.
      embedding: the embedding matrix, or a callable on ids.
      start_tokens: ``[batch]`` int32 first tokens.
      end_token: int32 scalar.
      initial_state: the cell's initial state, ``[batch * beam_width, ...]``.
      beam_width: the number of beams.
      output_layer: applied to the cell's output (``tf.layers.Dense``).
      length_penalty_weight: the length penalty; 0 disables it.
      coverage_penalty_weight: the coverage penalty; 0 disables it (only 0 is served).
      reorder_tensor_arrays: re-order ``TensorArray`` states (alignment history) by beam.

    Returns (from ``dynamic_decode``): a ``FinalBeamSearchDecoderOutput``;
    ``predicted_ids`` is ``[batch, time, beam_width]``, best beam first.

    Raises:
      ValueError: ``start_tokens`` is not a vector, ``end_token`` not a scalar, or a
        ``coverage_penalty_weight`` other than 0.

    Example:

        decoder = BeamSearchDecoder(cell, embeddings, start_tokens, EOS, state, 4, dense)
        outputs, _, _ = dynamic_decode(decoder, maximum_iterations=20)
    """

    def __init__(
        self,
        cell,
        embedding,
        start_tokens,
        end_token,
        initial_state,
        beam_width: int,
        output_layer=None,
        length_penalty_weight: float = 0.0,
        coverage_penalty_weight: float = 0.0,
        reorder_tensor_arrays: bool = True,
    ):
        _check_cell(cell, output_layer)
        if coverage_penalty_weight != 0.0:
            raise ValueError(
                "`coverage_penalty_weight` other than 0.0 is not served by "
                "tfest_kit.legacy's BeamSearchDecoder (the port has TF 1.15's length penalty "
                f"only); pass 0.0. Got: {coverage_penalty_weight!r}"
            )
        self._cell = cell
        self._output_layer = output_layer
        self._beam_width = beam_width
        self._length_penalty_weight = length_penalty_weight
        self._reorder_tensor_arrays = reorder_tensor_arrays
        self._embedding_fn = embedding_fn(embedding)
        self._start_tokens = int_vector(start_tokens, "start_tokens")
        self._end_token = int_scalar(end_token, "end_token")
        self._batch_size = tf.size(start_tokens)
        self._initial_cell_state = tf.nest.map_structure(
            self._maybe_split_batch_beams, initial_state, self._cell.state_size
        )
        self._start_tokens = tf.tile(tf.expand_dims(self._start_tokens, 1), [1, self._beam_width])
        self._start_inputs = self._embedding_fn(self._start_tokens)
        self._finished = tf.one_hot(
            tf.zeros([self._batch_size], dtype=tf.int32),
            depth=self._beam_width,
            on_value=False,
            off_value=True,
            dtype=tf.bool,
        )

    def initialize(self, name=None):
        dtype = tf.nest.flatten(self._initial_cell_state)[0].dtype
        log_probs = tf.one_hot(
            tf.zeros([self._batch_size], dtype=tf.int32),
            depth=self._beam_width,
            on_value=tf.convert_to_tensor(0.0, dtype=dtype),
            off_value=tf.convert_to_tensor(-np.inf, dtype=dtype),
            dtype=dtype,
        )
        initial_state = BeamSearchDecoderState(
            cell_state=self._initial_cell_state,
            log_probs=log_probs,
            finished=self._finished,
            lengths=tf.zeros([self._batch_size, self._beam_width], dtype=tf.int64),
            accumulated_attention_probs=(),
        )
        return self._finished, self._start_inputs, initial_state

    @property
    def output_dtype(self):
        dtype = tf.nest.flatten(self._initial_cell_state)[0].dtype
        return BeamSearchDecoderOutput(
            scores=tf.nest.map_structure(lambda _: dtype, self._rnn_output_size()),
            predicted_ids=tf.int32,
            parent_ids=tf.int32,
        )

    def step(self, time, inputs, state, name=None):
        with tf.name_scope(name, "BeamSearchDecoderStep", (time, inputs, state)):
            cell_state = tf.nest.map_structure(
                self._maybe_merge_batch_beams, state.cell_state, self._cell.state_size
            )
            inputs = tf.nest.map_structure(
                lambda inp: self._merge_batch_beams(inp, s=inp.shape[2:]), inputs
            )
            cell_outputs, next_cell_state = self._cell(inputs, cell_state)
            cell_outputs = tf.nest.map_structure(
                lambda out: self._split_batch_beams(out, out.shape[1:]), cell_outputs
            )
            next_cell_state = tf.nest.pack_sequence_as(cell_state, tf.nest.flatten(next_cell_state))
            next_cell_state = tf.nest.map_structure(
                self._maybe_split_batch_beams, next_cell_state, self._cell.state_size
            )
            if self._output_layer is not None:
                cell_outputs = self._output_layer(cell_outputs)
            beam_search_output, beam_search_state = beam_search_step(
                logits=cell_outputs,
                next_cell_state=next_cell_state,
                beam_state=state,
                batch_size=self._batch_size,
                beam_width=self._beam_width,
                end_token=self._end_token,
                length_penalty=self._length_penalty_weight,
            )
            finished = beam_search_state.finished
            next_inputs = tf.cond(
                tf.reduce_all(finished),
                lambda: self._start_inputs,
                lambda: self._embedding_fn(beam_search_output.predicted_ids),
            )
        return beam_search_output, beam_search_state, next_inputs, finished
