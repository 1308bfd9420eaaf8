"""``tf.contrib.crf`` as TF 1.15 had it, from tensorflow-addons 0.23 (``tfa.text``).

tensorflow-addons carries contrib's linear-chain CRF on with the same functions, arguments and
return values (``crf_log_likelihood`` -> ``(log_likelihood, transition_params)``,
``crf_decode`` -> ``(decode_tags, best_score)``, ``viterbi_decode`` in NumPy).  One difference
is TF 1.15's, kept here: when ``crf_log_likelihood`` gets no ``transition_params`` it creates
them with ``tf.get_variable("transitions", [num_tags, num_tags])``, so the variable sits in the
caller's variable scope (``crf/transitions``) under TF 1.15's name, and reuse works as it did.

tensorflow-addons is imported when a script first reaches ``tf.contrib.crf``, without its
end-of-life notice.

Example:

    log_likelihood, transitions = tf.contrib.crf.crf_log_likelihood(logits, tags, lengths)
    tags, score = tf.contrib.crf.crf_decode(logits, transitions, lengths)
"""

from __future__ import annotations

from tfest_kit._tf import tf
from tfest_kit.legacy.contrib._addons import addons

_FROM_ADDONS = (
    "crf_sequence_score",
    "crf_log_norm",
    "crf_unary_score",
    "crf_binary_score",
    "crf_forward",
    "crf_decode",
    "crf_multitag_sequence_score",
    "viterbi_decode",
)

__all__ = [*_FROM_ADDONS, "crf_log_likelihood", "BACKING", "NOT_SERVED"]

BACKING = {
    **{name: f"tensorflow_addons.text.{name}" for name in _FROM_ADDONS},
    "crf_log_likelihood": (
        "tensorflow_addons.text.crf_log_likelihood (transitions made by tf.get_variable, "
        "as TF 1.15)"
    ),
}
NOT_SERVED = {
    name: "tf.contrib.crf.crf_forward / crf_decode (tfa.text's cells are Keras layers)"
    for name in ("CrfForwardRnnCell", "CrfDecodeForwardRnnCell", "CrfDecodeBackwardRnnCell")
}

_text = addons().text
for _name in _FROM_ADDONS:
    globals()[_name] = getattr(_text, _name)


def crf_log_likelihood(inputs, tag_indices, sequence_lengths, transition_params=None):
    """``tf.contrib.crf.crf_log_likelihood``: the log-likelihood of tag sequences under a CRF.

    Args:
      inputs: unary potentials ``[batch, max_seq_len, num_tags]``.
      tag_indices: the gold tags ``[batch, max_seq_len]``.
      sequence_lengths: ``[batch]`` lengths.
      transition_params: ``[num_tags, num_tags]``; None creates the variable
        ``transitions`` with ``tf.get_variable`` in the current variable scope.

    Returns:
      ``(log_likelihood, transition_params)``.

    Example:

        log_likelihood, transitions = crf_log_likelihood(logits, tags, lengths)
    """
    if transition_params is None:
        num_tags = tf.compat.dimension_value(inputs.shape[2])
        transition_params = tf.get_variable("transitions", [num_tags, num_tags])
    return _text.crf_log_likelihood(inputs, tag_indices, sequence_lengths, transition_params)
