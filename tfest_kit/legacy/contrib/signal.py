"""``tf.contrib.signal`` as TF 1.15 had it: ``tf.signal``, which it was renamed to.

TF 1.15's package re-exported nine functions of ``tensorflow.python.ops.signal`` (``stft``,
``inverse_stft``, ``frame``, ``overlap_and_add``, the windows, the mel and MFCC helpers), all
in ``tf.signal`` since TF 1.13: the same functions.

Example:

    spectrogram = tf.abs(tf.contrib.signal.stft(audio, frame_length=400, frame_step=160))
"""

from __future__ import annotations

from tfest_kit._tf import tf

_SAME = (
    "frame",
    "hamming_window",
    "hann_window",
    "inverse_stft",
    "inverse_stft_window_fn",
    "linear_to_mel_weight_matrix",
    "mfccs_from_log_mel_spectrograms",
    "overlap_and_add",
    "stft",
)

__all__ = [*_SAME, "BACKING"]

BACKING = {name: f"tf.compat.v1.signal.{name}" for name in _SAME}

for _name in _SAME:
    globals()[_name] = getattr(tf.signal, _name)
