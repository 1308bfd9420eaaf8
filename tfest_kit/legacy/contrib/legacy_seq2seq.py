"""``tf.contrib.legacy_seq2seq``: its RNN decoder and sequence losses, as TF 1.15 had them.

Written after TF 1.15's ``tensorflow/contrib/legacy_seq2seq/python/ops/seq2seq.py`` (Apache
2.0).  Character-level language models and other TF1 programs built on lists of per-step
tensors use ``rnn_decoder`` (one cell call per step, a ``loop_function`` feeding each output
back when sampling) and ``sequence_loss_by_example`` / ``sequence_loss``; TensorFlow 2 has no
such functions.  They are plain TensorFlow ops, served here with TF 1.15's arguments, results
and variable names (``rnn_decoder`` under ``rnn_decoder/``, or the ``scope`` given;
``basic_rnn_seq2seq``'s encoder under ``basic_rnn_seq2seq/rnn/``).

The embedding and attention models (``embedding_rnn_seq2seq``, ``attention_decoder``,
``embedding_attention_seq2seq``, ``model_with_buckets`` …) are not served: they are built on
contrib's ``EmbeddingWrapper`` / ``OutputProjectionWrapper`` and private ``_linear``, and
``tf.contrib.seq2seq`` (served) is what replaced them.

Example:

    outputs, state = tf.contrib.legacy_seq2seq.rnn_decoder(inputs, initial_state, cell)
    loss = tf.contrib.legacy_seq2seq.sequence_loss_by_example(
        [logits], [tf.reshape(targets, [-1])], [tf.ones([batch * steps])])
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Callable, Optional

from tfest_kit._tf import tf

__all__ = [
    "rnn_decoder",
    "basic_rnn_seq2seq",
    "tied_rnn_seq2seq",
    "sequence_loss_by_example",
    "sequence_loss",
    "BACKING",
    "OTHERS",
]

BACKING = dict.fromkeys(
    __all__[:5], "TF ops after TF 1.15's contrib/legacy_seq2seq (tfest_kit.legacy.contrib)"
)
OTHERS = (
    "tf.contrib.seq2seq (served: BasicDecoder, AttentionWrapper, BeamSearchDecoder, "
    "sequence_loss); TF 1.15's embedding and attention models of legacy_seq2seq are not served"
)


def rnn_decoder(
    decoder_inputs: Sequence[Any],
    initial_state: Any,
    cell: Any,
    loop_function: Optional[Callable[[Any, int], Any]] = None,
    scope: Any = None,
) -> tuple[list[Any], Any]:
    """Runs ``cell`` over ``decoder_inputs``, a list of ``[batch_size, input_size]`` tensors.

    Args:
      decoder_inputs: one 2-D tensor per step.
      initial_state: the cell's state before the first step.
      cell: an ``RNNCell``; its variables are made at the first step and reused after.
      loop_function: ``f(prev_output, i) -> next_input``; when given, every input but the
        first is replaced by it (sampling, or training on the model's own outputs).
      scope: the variable scope (default ``"rnn_decoder"``).

    Returns:
      ``(outputs, state)``: the list of the cell's outputs, one per step, and its last state.

    Example:

        inputs = tf.split(embedded, seq_length, axis=1)       # [batch, 1, dim] each
        inputs = [tf.squeeze(x, [1]) for x in inputs]
        outputs, last_state = rnn_decoder(inputs, cell.zero_state(batch, tf.float32), cell,
                                          scope="rnnlm")
    """
    with tf.variable_scope(scope or "rnn_decoder"):
        state = initial_state
        outputs = []
        prev = None
        for i, inp in enumerate(decoder_inputs):
            if loop_function is not None and prev is not None:
                with tf.variable_scope("loop_function", reuse=True):
                    inp = loop_function(prev, i)
            if i > 0:
                tf.get_variable_scope().reuse_variables()
            output, state = cell(inp, state)
            outputs.append(output)
            if loop_function is not None:
                prev = output
    return outputs, state


def basic_rnn_seq2seq(
    encoder_inputs: Sequence[Any],
    decoder_inputs: Sequence[Any],
    cell: Any,
    dtype: Any = tf.float32,
    scope: Any = None,
) -> tuple[list[Any], Any]:
    """Encodes with a copy of ``cell`` (``static_rnn``), decodes with ``cell`` from its state.

    Returns:
      ``(outputs, state)`` of :func:`rnn_decoder`.

    Example:

        outputs, state = basic_rnn_seq2seq(encoder_steps, decoder_steps, GRUCell(64))
    """
    with tf.variable_scope(scope or "basic_rnn_seq2seq"):
        enc_cell = copy.deepcopy(cell)
        _, enc_state = tf.nn.static_rnn(enc_cell, encoder_inputs, dtype=dtype)
        return rnn_decoder(decoder_inputs, enc_state, cell)


def tied_rnn_seq2seq(
    encoder_inputs: Sequence[Any],
    decoder_inputs: Sequence[Any],
    cell: Any,
    loop_function: Optional[Callable[[Any, int], Any]] = None,
    dtype: Any = tf.float32,
    scope: Any = None,
) -> tuple[list[Any], Any]:
    """Encodes and decodes with the same ``cell`` and the same variables.

    Returns:
      ``(outputs, state)`` of :func:`rnn_decoder`.

    Example:

        outputs, state = tied_rnn_seq2seq(encoder_steps, decoder_steps, GRUCell(64))
    """
    with tf.variable_scope("combined_tied_rnn_seq2seq"):
        scope = scope or "tied_rnn_seq2seq"
        _, enc_state = tf.nn.static_rnn(cell, encoder_inputs, dtype=dtype, scope=scope)
        tf.get_variable_scope().reuse_variables()
        return rnn_decoder(
            decoder_inputs, enc_state, cell, loop_function=loop_function, scope=scope
        )


def sequence_loss_by_example(
    logits: Sequence[Any],
    targets: Sequence[Any],
    weights: Sequence[Any],
    average_across_timesteps: bool = True,
    softmax_loss_function: Optional[Callable[..., Any]] = None,
    name: Optional[str] = None,
) -> Any:
    """The weighted cross-entropy of each sequence: ``[batch_size]``.

    Args:
      logits: one ``[batch_size, num_symbols]`` tensor per step.
      targets: one ``[batch_size]`` integer tensor per step.
      weights: one ``[batch_size]`` float tensor per step.
      average_across_timesteps: divide each sequence's sum by its total weight.
      softmax_loss_function: ``f(labels=…, logits=…)`` instead of the sparse softmax
        cross-entropy.
      name: the name scope (default ``"sequence_loss_by_example"``).

    Raises:
      ValueError: ``logits``, ``targets`` and ``weights`` are lists of different lengths.

    Example:

        loss = sequence_loss_by_example([logits], [tf.reshape(targets, [-1])],
                                        [tf.ones([batch_size * seq_length])])
        cost = tf.reduce_sum(loss) / batch_size / seq_length
    """
    if len(targets) != len(logits) or len(weights) != len(logits):
        raise ValueError(
            "Lengths of logits, weights, and targets must be the same "
            f"{len(logits)}, {len(weights)}, {len(targets)}."
        )
    with tf.name_scope(
        name, "sequence_loss_by_example", list(logits) + list(targets) + list(weights)
    ):
        log_perp_list = []
        for logit, target, weight in zip(logits, targets, weights):
            if softmax_loss_function is None:
                # TF 1.x callers pass [batch, 1] or scalar targets too.
                target = tf.reshape(target, [-1])
                crossent = tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=target, logits=logit
                )
            else:
                crossent = softmax_loss_function(labels=target, logits=logit)
            log_perp_list.append(crossent * weight)
        log_perps = tf.add_n(log_perp_list)
        if average_across_timesteps:
            total_size = tf.add_n(list(weights))
            total_size += 1e-12  # all-zero weights: no division by 0
            log_perps /= total_size
    return log_perps


def sequence_loss(
    logits: Sequence[Any],
    targets: Sequence[Any],
    weights: Sequence[Any],
    average_across_timesteps: bool = True,
    average_across_batch: bool = True,
    softmax_loss_function: Optional[Callable[..., Any]] = None,
    name: Optional[str] = None,
) -> Any:
    """The summed :func:`sequence_loss_by_example`, divided by the batch size by default.

    Example:

        loss = sequence_loss(step_logits, step_targets, step_weights)   # a scalar
    """
    with tf.name_scope(name, "sequence_loss", list(logits) + list(targets) + list(weights)):
        cost = tf.reduce_sum(
            sequence_loss_by_example(
                logits,
                targets,
                weights,
                average_across_timesteps=average_across_timesteps,
                softmax_loss_function=softmax_loss_function,
            )
        )
        if average_across_batch:
            batch_size = tf.shape(targets[0])[0]
            return cost / tf.cast(batch_size, cost.dtype)
        return cost
