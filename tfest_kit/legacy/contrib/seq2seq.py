"""``tf.contrib.seq2seq``'s functions, from tensorflow-addons 0.23 (``tfa.seq2seq``).

tensorflow-addons carries on contrib's seq2seq functions with the same arguments and results:
``sequence_loss``, ``tile_batch``, ``gather_tree``, ``hardmax``, ``safe_cumprod``,
``monotonic_attention``; they are served as they are.

Not served: the helpers, decoders and attention mechanisms.  tensorflow-addons rewrote them as
Keras layers (``TrainingHelper`` became ``tfa.seq2seq.TrainingSampler``, ``BasicDecoder`` a
layer called on inputs, ``AttentionWrapper`` / ``BahdanauAttention`` layers whose variables
are named differently), so a TF 1.15 decoder cannot run unchanged on them; the error names the
tfa class to port to.

Example:

    loss = tf.contrib.seq2seq.sequence_loss(logits, targets, weights)
"""

from __future__ import annotations

from tfest_kit.legacy.contrib._addons import addons

_FROM_ADDONS = (
    "sequence_loss",
    "tile_batch",
    "gather_tree",
    "hardmax",
    "safe_cumprod",
    "monotonic_attention",
)

__all__ = [*_FROM_ADDONS, "BACKING", "NOT_SERVED"]

BACKING = {name: f"tensorflow_addons.seq2seq.{name}" for name in _FROM_ADDONS}

_LAYERS = "(a Keras layer in tensorflow-addons 0.23: other arguments and variable names)"
NOT_SERVED = {
    "TrainingHelper": f"tfa.seq2seq.TrainingSampler {_LAYERS}",
    "GreedyEmbeddingHelper": f"tfa.seq2seq.GreedyEmbeddingSampler {_LAYERS}",
    "SampleEmbeddingHelper": f"tfa.seq2seq.SampleEmbeddingSampler {_LAYERS}",
    "ScheduledEmbeddingTrainingHelper": f"tfa.seq2seq.ScheduledEmbeddingTrainingSampler {_LAYERS}",
    "InferenceHelper": f"tfa.seq2seq.InferenceSampler {_LAYERS}",
    "CustomHelper": f"tfa.seq2seq.CustomSampler {_LAYERS}",
    "BasicDecoder": f"tfa.seq2seq.BasicDecoder {_LAYERS}",
    "BeamSearchDecoder": f"tfa.seq2seq.BeamSearchDecoder {_LAYERS}",
    "dynamic_decode": f"tfa.seq2seq.dynamic_decode {_LAYERS}",
    "AttentionWrapper": f"tfa.seq2seq.AttentionWrapper {_LAYERS}",
    "BahdanauAttention": f"tfa.seq2seq.BahdanauAttention {_LAYERS}",
    "LuongAttention": f"tfa.seq2seq.LuongAttention {_LAYERS}",
    "BahdanauMonotonicAttention": f"tfa.seq2seq.BahdanauMonotonicAttention {_LAYERS}",
    "LuongMonotonicAttention": f"tfa.seq2seq.LuongMonotonicAttention {_LAYERS}",
}

_seq2seq = addons().seq2seq
for _name in _FROM_ADDONS:
    globals()[_name] = getattr(_seq2seq, _name)
