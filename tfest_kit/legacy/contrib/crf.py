"""``tf.contrib.crf`` as TF 1.15 had it: a linear-chain CRF in TensorFlow ops.

Written after TF 1.15's ``tensorflow/contrib/crf/python/ops/crf.py`` (Apache 2.0): the same
functions, arguments and results (``crf_log_likelihood`` -> ``(log_likelihood,
transition_params)``, ``crf_decode`` -> ``(decode_tags, best_score)``, ``viterbi_decode`` in
NumPy).  The forward and Viterbi recursions run in ``tf.scan`` where TF 1.15 ran
``dynamic_rnn`` over its ``Crf*RnnCell`` classes, so one code path serves every supported
TensorFlow.  When ``crf_log_likelihood`` gets no ``transition_params`` it creates them with
``tf.get_variable("transitions", [num_tags, num_tags])``, as TF 1.15 did: the variable sits in
the caller's variable scope (``crf/transitions``) and reuse works as it did.

Sequences of length 1 in a longer batch take their first step's alphas (earlier TF 1.x
``crf_forward`` read one step too far for them); tests compare every function with listing
all tag paths in NumPy.

Example:

    log_likelihood, transitions = tf.contrib.crf.crf_log_likelihood(logits, tags, lengths)
    tags, score = tf.contrib.crf.crf_decode(logits, transitions, lengths)
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tfest_kit._tf import tf

__all__ = [
    "crf_sequence_score",
    "crf_log_norm",
    "crf_unary_score",
    "crf_binary_score",
    "crf_forward",
    "crf_decode",
    "crf_multitag_sequence_score",
    "viterbi_decode",
    "crf_log_likelihood",
    "BACKING",
    "NOT_SERVED",
]

_PORT = "TF ops after TF 1.15's contrib/crf (tfest_kit.legacy.contrib.crf)"
BACKING = {
    **{name: _PORT for name in __all__[:-2]},
    "viterbi_decode": "NumPy after TF 1.15's contrib/crf (tfest_kit.legacy.contrib.crf)",
    "crf_log_likelihood": f"{_PORT}; transitions made by tf.get_variable, as TF 1.15",
}
NOT_SERVED = {
    name: "tf.contrib.crf.crf_forward / crf_decode (the same recursions, in tf.scan)"
    for name in ("CrfForwardRnnCell", "CrfDecodeForwardRnnCell", "CrfDecodeBackwardRnnCell")
}


def _int32(value, name: str):
    return tf.cast(tf.convert_to_tensor(value, name=name), tf.int32)


def _one_or_many_steps(inputs, single: Callable, multi: Callable):
    """TF 1.15's branch: a batch whose sequences have one step skips the recursion."""
    steps = tf.compat.dimension_value(inputs.shape[1])
    if steps is not None:
        return single() if steps == 1 else multi()
    return tf.cond(tf.equal(tf.shape(inputs)[1], 1), single, multi)


def _zero_where_empty(values, sequence_lengths):
    return tf.where(tf.less_equal(sequence_lengths, 0), tf.zeros_like(values), values)


def crf_unary_score(tag_indices, sequence_lengths, inputs):
    """The summed unary potentials of ``tag_indices``, up to each sequence's length.

    Args:
      tag_indices: ``[batch_size, max_seq_len]`` tag indices.
      sequence_lengths: ``[batch_size]`` true lengths.
      inputs: ``[batch_size, max_seq_len, num_tags]`` unary potentials.

    Returns:
      ``[batch_size]`` unary scores.

    Example:

        unary = crf_unary_score(tags, lengths, logits)
    """
    inputs = tf.convert_to_tensor(inputs, name="inputs")
    tag_indices = _int32(tag_indices, "tag_indices")
    scores = tf.gather(inputs, tag_indices, axis=2, batch_dims=2)
    masks = tf.sequence_mask(
        _int32(sequence_lengths, "sequence_lengths"),
        maxlen=tf.shape(tag_indices)[1],
        dtype=scores.dtype,
    )
    return tf.reduce_sum(scores * masks, 1)


def crf_binary_score(tag_indices, sequence_lengths, transition_params):
    """The summed transition potentials between consecutive tags, within each length.

    Args:
      tag_indices: ``[batch_size, max_seq_len]`` tag indices.
      sequence_lengths: ``[batch_size]`` true lengths.
      transition_params: ``[num_tags, num_tags]`` transition potentials (from, to).

    Returns:
      ``[batch_size]`` binary scores.

    Example:

        binary = crf_binary_score(tags, lengths, transitions)
    """
    tag_indices = _int32(tag_indices, "tag_indices")
    pairs = tf.stack([tag_indices[:, :-1], tag_indices[:, 1:]], axis=-1)
    scores = tf.gather_nd(tf.convert_to_tensor(transition_params), pairs)
    masks = tf.sequence_mask(
        _int32(sequence_lengths, "sequence_lengths"),
        maxlen=tf.shape(tag_indices)[1],
        dtype=scores.dtype,
    )
    return tf.reduce_sum(scores * masks[:, 1:], 1)


def crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params):
    """The unnormalised score of ``tag_indices``: unary plus binary scores.

    Args:
      inputs: ``[batch_size, max_seq_len, num_tags]`` unary potentials.
      tag_indices: ``[batch_size, max_seq_len]`` tag indices.
      sequence_lengths: ``[batch_size]`` true lengths; a length of 0 scores 0.
      transition_params: ``[num_tags, num_tags]`` transition potentials.

    Returns:
      ``[batch_size]`` sequence scores.

    Example:

        scores = crf_sequence_score(logits, tags, lengths, transitions)
    """
    inputs = tf.convert_to_tensor(inputs, name="inputs")
    tag_indices = _int32(tag_indices, "tag_indices")
    sequence_lengths = _int32(sequence_lengths, "sequence_lengths")

    def single():
        scores = tf.gather(inputs[:, 0], tag_indices[:, 0], axis=1, batch_dims=1)
        return _zero_where_empty(scores, sequence_lengths)

    def multi():
        unary = crf_unary_score(tag_indices, sequence_lengths, inputs)
        return unary + crf_binary_score(tag_indices, sequence_lengths, transition_params)

    return _one_or_many_steps(inputs, single, multi)


def crf_multitag_sequence_score(inputs, tag_bitmap, sequence_lengths, transition_params):
    """The log-sum-exp score of every tag sequence allowed by ``tag_bitmap``.

    One-hot rows in ``tag_bitmap`` give ``crf_sequence_score``'s result.

    Args:
      inputs: ``[batch_size, max_seq_len, num_tags]`` unary potentials.
      tag_bitmap: ``[batch_size, max_seq_len, num_tags]`` booleans, the allowed tags per step.
      sequence_lengths: ``[batch_size]`` true lengths.
      transition_params: ``[num_tags, num_tags]`` transition potentials.

    Returns:
      ``[batch_size]`` scores.

    Example:

        scores = crf_multitag_sequence_score(logits, allowed, lengths, transitions)
    """
    inputs = tf.convert_to_tensor(inputs, name="inputs")
    filtered = tf.where(
        tf.cast(tag_bitmap, tf.bool),
        inputs,
        tf.fill(tf.shape(inputs), tf.constant(-np.inf, inputs.dtype)),
    )
    return _one_or_many_steps(
        inputs,
        lambda: tf.reduce_logsumexp(filtered, axis=[1, 2]),
        lambda: crf_log_norm(filtered, sequence_lengths, transition_params),
    )


def crf_forward(inputs, state, transition_params, sequence_lengths):
    """The forward algorithm's alphas at each sequence's last step.

    Args:
      inputs: ``[batch_size, max_seq_len - 1, num_tags]`` unary potentials after the first step.
      state: ``[batch_size, num_tags]`` the first step's alphas (its unary potentials).
      transition_params: ``[num_tags, num_tags]`` transition potentials.
      sequence_lengths: ``[batch_size]`` true lengths of the whole sequences.

    Returns:
      ``[batch_size, num_tags]`` alphas.

    Example:

        alphas = crf_forward(logits[:, 1:], logits[:, 0], transitions, lengths)
    """
    state = tf.convert_to_tensor(state, name="state")
    last_index = tf.maximum(0, _int32(sequence_lengths, "sequence_lengths") - 1)
    transitions = tf.expand_dims(tf.convert_to_tensor(transition_params), 0)

    def step(alphas, unary):
        return unary + tf.reduce_logsumexp(tf.expand_dims(alphas, 2) + transitions, [1])

    all_alphas = tf.scan(step, tf.transpose(inputs, [1, 0, 2]), state)
    all_alphas = tf.concat([tf.expand_dims(state, 0), all_alphas], 0)
    return tf.gather(tf.transpose(all_alphas, [1, 0, 2]), last_index, axis=1, batch_dims=1)


def crf_log_norm(inputs, sequence_lengths, transition_params):
    """log Z, the log-sum-exp of the scores of all tag sequences.

    Args:
      inputs: ``[batch_size, max_seq_len, num_tags]`` unary potentials.
      sequence_lengths: ``[batch_size]`` true lengths; a length of 0 gives 0.
      transition_params: ``[num_tags, num_tags]`` transition potentials.

    Returns:
      ``[batch_size]`` log normalisers.

    Example:

        log_z = crf_log_norm(logits, lengths, transitions)
    """
    inputs = tf.convert_to_tensor(inputs, name="inputs")
    sequence_lengths = _int32(sequence_lengths, "sequence_lengths")
    first = inputs[:, 0]

    def multi():
        return crf_forward(inputs[:, 1:], first, transition_params, sequence_lengths)

    alphas = _one_or_many_steps(inputs, lambda: first, multi)
    return _zero_where_empty(tf.reduce_logsumexp(alphas, [1]), sequence_lengths)


def crf_log_likelihood(inputs, tag_indices, sequence_lengths, transition_params=None):
    """``tf.contrib.crf.crf_log_likelihood``: the log-likelihood of tag sequences under a CRF.

    Args:
      inputs: unary potentials ``[batch, max_seq_len, num_tags]``.
      tag_indices: the gold tags ``[batch, max_seq_len]``.
      sequence_lengths: ``[batch]`` lengths.
      transition_params: ``[num_tags, num_tags]``; None creates the variable
        ``transitions`` with ``tf.get_variable`` in the current variable scope.

    Returns:
      ``(log_likelihood, transition_params)``; ``log_likelihood`` is ``[batch]``.

    Example:

        log_likelihood, transitions = crf_log_likelihood(logits, tags, lengths)
    """
    inputs = tf.convert_to_tensor(inputs, name="inputs")
    if transition_params is None:
        num_tags = tf.compat.dimension_value(inputs.shape[2])
        transition_params = tf.get_variable("transitions", [num_tags, num_tags])
    scores = crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params)
    log_norm = crf_log_norm(inputs, sequence_lengths, transition_params)
    return scores - log_norm, transition_params


def viterbi_decode(score, transition_params) -> tuple:
    """The best tag sequence of one sentence, in NumPy (for use outside the graph).

    Args:
      score: ``[seq_len, num_tags]`` unary potentials.
      transition_params: ``[num_tags, num_tags]`` transition potentials.

    Returns:
      ``(viterbi, viterbi_score)``: a list of ``seq_len`` tag indices and its score.

    Example:

        tags, best = viterbi_decode(unary[:length], transitions)
    """
    trellis = np.zeros_like(score)
    backpointers = np.zeros_like(score, dtype=np.int32)
    trellis[0] = score[0]
    for t in range(1, score.shape[0]):
        v = np.expand_dims(trellis[t - 1], 1) + transition_params
        trellis[t] = score[t] + np.max(v, 0)
        backpointers[t] = np.argmax(v, 0)
    viterbi = [np.argmax(trellis[-1])]
    for bp in reversed(backpointers[1:]):
        viterbi.append(bp[viterbi[-1]])
    viterbi.reverse()
    return viterbi, np.max(trellis[-1])


def _viterbi(potentials, transition_params, sequence_length):
    """Forward max-product pass, then the backtrack; padded tags come out 0, as TF 1.15."""
    steps = tf.maximum(0, sequence_length - 1)
    inputs = tf.transpose(potentials[:, 1:], [1, 0, 2])
    transitions = tf.expand_dims(tf.convert_to_tensor(transition_params), 0)

    def forward(carry, elems):
        _, score = carry
        unary, time = elems
        scores = tf.expand_dims(score, 2) + transitions
        backpointers = tf.argmax(scores, 1, output_type=tf.int32)
        # Past a sequence's end the score is carried and the backpointers are 0, as
        # dynamic_rnn's sequence_length did.
        live = time < steps
        return (
            tf.where(live, backpointers, tf.zeros_like(backpointers)),
            tf.where(live, unary + tf.reduce_max(scores, 1), score),
        )

    first = potentials[:, 0]
    initial = (tf.zeros_like(first, dtype=tf.int32), first)
    time = tf.range(tf.shape(inputs)[0])
    backpointers, scores = tf.scan(forward, (inputs, time), initial)
    last_score = scores[-1]
    backpointers = tf.reverse_sequence(backpointers, steps, seq_axis=0, batch_axis=1)
    last_tag = tf.argmax(last_score, 1, output_type=tf.int32)
    tags = tf.scan(lambda tag, bp: tf.gather(bp, tag, axis=1, batch_dims=1), backpointers, last_tag)
    tags = tf.concat([tf.expand_dims(last_tag, 0), tags], 0)
    tags = tf.reverse_sequence(tags, sequence_length, seq_axis=0, batch_axis=1)
    return tf.transpose(tags), tf.reduce_max(last_score, 1)


def crf_decode(potentials, transition_params, sequence_length):
    """The highest-scoring tag sequences, in the graph (Viterbi).

    Args:
      potentials: ``[batch_size, max_seq_len, num_tags]`` unary potentials.
      transition_params: ``[num_tags, num_tags]`` transition potentials.
      sequence_length: ``[batch_size]`` true lengths; tags past them are 0.

    Returns:
      ``(decode_tags, best_score)``: int32 ``[batch_size, max_seq_len]`` and ``[batch_size]``.

    Example:

        tags, best = crf_decode(logits, transitions, lengths)
    """
    potentials = tf.convert_to_tensor(potentials, name="potentials")
    sequence_length = _int32(sequence_length, "sequence_length")

    def single():
        tags = tf.argmax(potentials, 2, output_type=tf.int32)
        return tags, tf.reduce_max(potentials[:, 0], 1)

    return _one_or_many_steps(
        potentials, single, lambda: _viterbi(potentials, transition_params, sequence_length)
    )
