"""``tf.contrib.seq2seq``'s beam search, written after TF 1.15's ``beam_search_decoder.py``.

The output and state tuples, one step of the search (``beam_search_step``: log-softmax, the
length penalty, top-k over ``beam_width * vocab_size`` and the re-ordering of the cell state by
parent beam), and ``BeamSearchMixin``: what ``BeamSearchDecoder`` (in ``seq2seq.py``) shares with
TF 1.15's class (merging and splitting the beam axis, ``finalize`` with ``gather_tree`` and the
re-ordering of ``TensorArray`` states).  TF 1.15's sources are Apache 2.0.
"""

from __future__ import annotations

import collections

import numpy as np

from tfest_kit._tf import tf
from tfest_kit.legacy.contrib._seq2seq_ops import gather_tree, gather_tree_from_array

__all__ = [
    "BeamSearchDecoderState",
    "BeamSearchDecoderOutput",
    "FinalBeamSearchDecoderOutput",
    "BeamSearchMixin",
    "beam_search_step",
]


class BeamSearchDecoderState(
    collections.namedtuple(
        "BeamSearchDecoderState",
        ("cell_state", "log_probs", "finished", "lengths", "accumulated_attention_probs"),
    )
):
    """The beam search's state: the cell's, and per beam its log-probability, end and length.

    Example:

        state = decoder_state.cell_state  # a BeamSearchDecoder step's state
    """


class BeamSearchDecoderOutput(
    collections.namedtuple("BeamSearchDecoderOutput", ("scores", "predicted_ids", "parent_ids"))
):
    """One step's ``[batch_size, beam_width]`` scores, chosen ids and parent beams.

    Example:

        scores = outputs.beam_search_decoder_output.scores  # [time, batch, beam]
    """


class FinalBeamSearchDecoderOutput(
    collections.namedtuple(
        "FinalBeamDecoderOutput", ["predicted_ids", "beam_search_decoder_output"]
    )
):
    """``predicted_ids`` (whole beams, best first) and the steps' ``BeamSearchDecoderOutput``.

    Example:

        outputs, _, _ = tf.contrib.seq2seq.dynamic_decode(beam_decoder, maximum_iterations=20)
        best = outputs.predicted_ids[:, :, 0]
    """


def _gather_beams(values, beam_ids, static_batch=None):
    """``values[b, beam_ids[b, k], ...]``; TensorArrays and scalars (``time``) stay as they are.

    ``static_batch`` (when known) is set on the result, as TF 1.15's gather did: a state whose
    batch shape inference lost inside the loop keeps the shape it entered with.
    """
    if isinstance(values, tf.TensorArray):
        return values
    values = tf.convert_to_tensor(values)
    if values.shape.ndims < 2:
        return values
    gathered = tf.gather(values, beam_ids, axis=1, batch_dims=1)
    gathered.set_shape(tf.TensorShape([static_batch]).concatenate(values.shape[1:]))
    return gathered


def _length_penalty(lengths, weight):
    """GNMT's ``((5 + length) / 6) ** weight``, the scalar 1 when the weight is statically 0."""
    weight = tf.convert_to_tensor(weight, name="penalty_factor")
    weight.set_shape(())
    if tf.get_static_value(weight) == 0:
        return 1.0
    return (5.0 + tf.cast(lengths, tf.float32)) ** weight / (5.0 + 1.0) ** weight


def beam_search_step(
    logits, next_cell_state, beam_state, batch_size, beam_width: int, end_token, length_penalty
):
    """One step of beam search, as TF 1.15's ``_beam_search_step`` without coverage penalty.

    Finished beams can only extend with ``end_token`` at no cost; at the first step only the
    first beam has a finite log-probability, so the others are not expanded.

    Args:
      logits: ``[batch_size, beam_width, vocab_size]``.
      next_cell_state: the cell's state after this step, ``[batch_size, beam_width, ...]``.
      beam_state: the ``BeamSearchDecoderState`` before this step.
      batch_size: int32 scalar.
      beam_width: the number of beams.
      end_token: int32 scalar.
      length_penalty: the length penalty weight (0 disables it).

    Returns:
      ``(BeamSearchDecoderOutput, BeamSearchDecoderState)``.

    Example:

        output, state = beam_search_step(logits, cell_state, state, batch_size, 4, EOS, 0.0)
    """
    finished = tf.convert_to_tensor(beam_state.finished, tf.bool)
    # The static batch keeps the loop's shapes fixed; shape inference may know it when
    # batch_size itself is not a constant.
    static_batch = tf.get_static_value(batch_size)
    if static_batch is None:
        static_batch = tf.compat.dimension_value(finished.shape[0])
    vocab_size = tf.compat.dimension_value(logits.shape[-1]) or tf.shape(logits)[-1]
    step_log_probs = tf.nn.log_softmax(logits)
    # A finished beam puts all its mass on end_token (the lowest float elsewhere, not -inf).
    finished_row = tf.one_hot(
        end_token,
        vocab_size,
        on_value=0.0,
        off_value=step_log_probs.dtype.min,
        dtype=step_log_probs.dtype,
    )
    finished_3d = tf.broadcast_to(tf.expand_dims(finished, 2), tf.shape(step_log_probs))
    step_log_probs = tf.where(
        finished_3d, tf.broadcast_to(finished_row, tf.shape(step_log_probs)), step_log_probs
    )
    total_probs = tf.expand_dims(beam_state.log_probs, 2) + step_log_probs
    # Each continuation adds 1 to the length, except end_token and finished beams.
    lengths_to_add = tf.one_hot(
        tf.fill([batch_size, beam_width], end_token),
        vocab_size,
        on_value=np.int64(0),
        off_value=np.int64(1),
        dtype=tf.int64,
    )
    lengths_to_add *= tf.expand_dims(tf.cast(tf.logical_not(finished), tf.int64), 2)
    new_lengths = lengths_to_add + tf.expand_dims(beam_state.lengths, 2)
    penalty = _length_penalty(new_lengths, length_penalty)
    scores = total_probs / tf.cast(penalty, total_probs.dtype)

    scores_flat = tf.reshape(scores, [batch_size, -1])
    next_beam_scores, word_indices = tf.nn.top_k(scores_flat, k=beam_width)
    next_beam_scores.set_shape([static_batch, beam_width])
    word_indices.set_shape([static_batch, beam_width])
    next_log_probs = tf.gather(
        tf.reshape(total_probs, [batch_size, -1]), word_indices, axis=1, batch_dims=1
    )
    next_log_probs.set_shape([static_batch, beam_width])
    next_word_ids = tf.cast(
        tf.math.floormod(word_indices, vocab_size, name="next_beam_word_ids"), tf.int32
    )
    next_beam_ids = tf.cast(word_indices // vocab_size, tf.int32, name="next_beam_parent_ids")
    previously_finished = _gather_beams(finished, next_beam_ids)
    next_finished = tf.logical_or(
        previously_finished, tf.equal(next_word_ids, end_token), name="next_beam_finished"
    )
    next_lengths = _gather_beams(beam_state.lengths, next_beam_ids) + tf.cast(
        tf.logical_not(previously_finished), tf.int64
    )
    next_state = BeamSearchDecoderState(
        cell_state=tf.nest.map_structure(
            lambda state: _gather_beams(state, next_beam_ids, static_batch), next_cell_state
        ),
        log_probs=next_log_probs,
        finished=next_finished,
        lengths=next_lengths,
        accumulated_attention_probs=(),
    )
    output = BeamSearchDecoderOutput(
        scores=next_beam_scores, predicted_ids=next_word_ids, parent_ids=next_beam_ids
    )
    return output, next_state


class BeamSearchMixin:
    """TF 1.15's ``BeamSearchDecoder`` members besides its constructor, ``initialize`` and ``step``.

    The subclass sets ``_cell``, ``_output_layer``, ``_beam_width``, ``_batch_size``,
    ``_end_token`` and ``_reorder_tensor_arrays``.
    """

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def tracks_own_finished(self) -> bool:
        # Beams are re-ordered every step: dynamic_decode must not track `finished` itself.
        return True

    def _rnn_output_size(self):
        size = self._cell.output_size
        if self._output_layer is None:
            return size
        shapes = tf.nest.map_structure(lambda s: tf.TensorShape([None]).concatenate(s), size)
        layer_shape = self._output_layer.compute_output_shape(shapes)
        return tf.nest.map_structure(lambda s: s[1:], layer_shape)

    @property
    def output_size(self):
        beams = tf.TensorShape([self._beam_width])
        return BeamSearchDecoderOutput(scores=beams, predicted_ids=beams, parent_ids=beams)

    def finalize(self, outputs, final_state, sequence_lengths):
        """Whole beams by ``gather_tree``; ``TensorArray`` states re-ordered the same way."""
        del sequence_lengths  # final_state.lengths holds each beam's
        max_sequence_lengths = tf.cast(tf.reduce_max(final_state.lengths, axis=1), tf.int32)
        predicted_ids = gather_tree(
            outputs.predicted_ids,
            outputs.parent_ids,
            max_sequence_lengths=max_sequence_lengths,
            end_token=self._end_token,
        )
        if self._reorder_tensor_arrays:
            final_state = final_state._replace(
                cell_state=tf.nest.map_structure(
                    lambda t: self._maybe_sort_array_beams(
                        t, outputs.parent_ids, final_state.lengths
                    ),
                    final_state.cell_state,
                )
            )
        return (
            FinalBeamSearchDecoderOutput(
                beam_search_decoder_output=outputs, predicted_ids=predicted_ids
            ),
            final_state,
        )

    def _merge_batch_beams(self, t, s=None):
        """``[batch_size, beam_width, s]`` -> ``[batch_size * beam_width, s]``."""
        s = _depth_shape(s)
        static_batch = tf.get_static_value(self._batch_size)
        merged_batch = None if static_batch is None else static_batch * self._beam_width
        merged = tf.reshape(
            t, tf.concat(([self._batch_size * self._beam_width], tf.shape(t)[2:]), 0)
        )
        merged.set_shape(tf.TensorShape([merged_batch]).concatenate(s))
        return merged

    def _split_batch_beams(self, t, s=None):
        """``[batch_size * beam_width, s]`` -> ``[batch_size, beam_width, s]``.

        Raises:
          ValueError: the static shapes do not fit (an initial state not tiled by beam_width).
        """
        s = _depth_shape(s)
        split = tf.reshape(t, tf.concat(([self._batch_size, self._beam_width], tf.shape(t)[1:]), 0))
        expected = tf.TensorShape(
            [tf.get_static_value(self._batch_size), self._beam_width]
        ).concatenate(s)
        if not split.shape.is_compatible_with(expected):
            raise ValueError(
                f"A cell state of shape {t.shape} does not split into (batch_size, beam_width, "
                f"depth) == {expected}: tile the initial state and memory with "
                "tile_batch(..., multiplier=beam_width)."
            )
        split.set_shape(expected)
        return split

    def _maybe_split_batch_beams(self, t, s):
        if isinstance(t, tf.TensorArray):
            return t
        _check_rank_known(t)
        return self._split_batch_beams(t, s) if t.shape.ndims >= 1 else t

    def _maybe_merge_batch_beams(self, t, s):
        if isinstance(t, tf.TensorArray):
            return t
        _check_rank_known(t)
        return self._merge_batch_beams(t, s) if t.shape.ndims >= 2 else t

    def _maybe_sort_array_beams(self, t, parent_ids, sequence_length):
        """A ``TensorArray`` of per-beam elements stacked and re-ordered by beam; else ``t``."""
        if not isinstance(t, tf.TensorArray):
            return t
        shape = t.element_shape
        if shape.ndims is None or shape.ndims < 1:
            tf.logging.warn(
                "The TensorArray %s in the cell state is not re-ordered by beam: its elements' "
                "shape %s has no known rank >= 1.",
                t.handle.name,
                shape,
            )
            return t
        batch = tf.get_static_value(self._batch_size)
        beam = self._beam_width
        fits = (
            batch is None
            or shape[0] is None
            or shape[0] == batch * beam
            or (shape.ndims >= 2 and shape[0] == batch and shape[1] == beam)
        )
        if not fits:
            tf.logging.warn(
                "The TensorArray in the cell state is not re-ordered by beam: its elements' "
                "shape %s does not reshape to [%s, %s, -1]; set reorder_tensor_arrays=False "
                "to silence this.",
                shape,
                batch,
                beam,
            )
            return t
        stacked = t.stack()
        dims = tf.shape(stacked)
        flat = tf.equal(dims[1], self._batch_size * beam)
        if stacked.shape.ndims > 2:
            split = tf.logical_and(tf.equal(dims[1], self._batch_size), tf.equal(dims[2], beam))
            flat = tf.logical_or(flat, split)
        message = "TensorArray re-ordering needs elements of shape [batch_size, beam_width, -1]."
        with tf.control_dependencies([tf.Assert(flat, [message])]):
            return gather_tree_from_array(stacked, parent_ids, sequence_length)


def _check_rank_known(t) -> None:
    if t.shape.ndims is None:
        raise ValueError(f"Beam search needs cell states of known rank. Got: {t}")


def _depth_shape(s) -> tf.TensorShape:
    # A state size may be a tensor: AttentionWrapper's alignments size is the memory's
    # max_time, dynamic when the memory's is; TF 1.15 took its static value (None: unknown).
    if isinstance(s, tf.Tensor):
        return tf.TensorShape(tf.get_static_value(s))
    return tf.TensorShape(s)
