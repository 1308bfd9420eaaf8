"""Tests for tf.contrib.crf (tfest_kit.legacy.contrib.crf) against listing every tag path.

Each function runs in a graph on small random inputs and is compared with a NumPy
enumeration of all ``num_tags ** length`` tag sequences: scores, log Z, log-likelihood, the
Viterbi path and its score.  Lengths 0 and 1 inside a longer batch, a batch of one-step
sequences and an unknown ``max_seq_len`` take their own branches and are covered.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tfest_kit._tf import tf
from tfest_kit.legacy.contrib import crf

NUM_TAGS = 3


def _path_scores(unary, transitions, length):
    """Every tag path of ``length`` steps and its unnormalised score."""
    return {
        path: sum(unary[t, tag] for t, tag in enumerate(path))
        + sum(transitions[a, b] for a, b in zip(path, path[1:]))
        for path in itertools.product(range(unary.shape[1]), repeat=length)
    }


def _log_z(scores):
    values = np.array(list(scores.values()), np.float64)
    return values.max() + np.log(np.exp(values - values.max()).sum())


def _inputs(seed, batch=5, steps=4):
    rng = np.random.RandomState(seed)
    unary = rng.randn(batch, steps, NUM_TAGS).astype(np.float32)
    transitions = rng.randn(NUM_TAGS, NUM_TAGS).astype(np.float32)
    tags = rng.randint(0, NUM_TAGS, (batch, steps))
    return unary, transitions, tags


def _run(fetches):
    with tf.Session() as sess:
        return sess.run(fetches)


@pytest.mark.parametrize("known_steps", [True, False])
def test_crf_scores_and_log_likelihood_equal_enumeration(known_steps):
    unary, transitions, tags = _inputs(0)
    lengths = np.array([4, 1, 2, 0, 3])
    with tf.Graph().as_default():
        shape = [None, None if not known_steps else 4, NUM_TAGS]
        inputs = tf.placeholder_with_default(unary, shape)
        fetches = {
            "sequence": crf.crf_sequence_score(inputs, tags, lengths, transitions),
            "log_norm": crf.crf_log_norm(inputs, lengths, transitions),
            "log_likelihood": crf.crf_log_likelihood(inputs, tags, lengths, transitions)[0],
            "unary": crf.crf_unary_score(tags.astype(np.int64), lengths, inputs),
            "binary": crf.crf_binary_score(tags, lengths, transitions),
        }
        got = _run(fetches)
    for i, length in enumerate(lengths):
        if length == 0:  # TF 1.15: an empty sequence scores 0 and has log Z 0
            assert got["sequence"][i] == 0 and got["log_norm"][i] == 0
            continue
        scores = _path_scores(unary[i], transitions, length)
        gold = tuple(tags[i, :length])
        unary_part = sum(unary[i, t, tag] for t, tag in enumerate(gold))
        assert got["unary"][i] == pytest.approx(unary_part, abs=1e-5)
        assert got["binary"][i] == pytest.approx(scores[gold] - unary_part, abs=1e-5)
        assert got["sequence"][i] == pytest.approx(scores[gold], abs=1e-5)
        assert got["log_norm"][i] == pytest.approx(_log_z(scores), abs=1e-5)
        assert got["log_likelihood"][i] == pytest.approx(scores[gold] - _log_z(scores), abs=1e-5)


def test_crf_forward_returns_the_alphas_at_each_length():
    unary, transitions, _ = _inputs(1)
    lengths = np.array([4, 1, 2, 3, 4])
    with tf.Graph().as_default():
        alphas = _run(crf.crf_forward(unary[:, 1:], unary[:, 0], transitions, lengths))
    for i, length in enumerate(lengths):
        # alpha[tag] = log-sum-exp of the scores of the paths ending in `tag`.
        scores = _path_scores(unary[i], transitions, length)
        for tag in range(NUM_TAGS):
            ending = {p: s for p, s in scores.items() if p[-1] == tag}
            assert alphas[i, tag] == pytest.approx(_log_z(ending), abs=1e-5)


def test_crf_multitag_score_sums_the_allowed_paths():
    unary, transitions, _ = _inputs(2)
    lengths = np.array([4, 3, 1, 2, 4])
    allowed = np.random.RandomState(3).rand(5, 4, NUM_TAGS) < 0.6
    allowed[..., 0] = True  # at least one tag per step
    with tf.Graph().as_default():
        got = _run(crf.crf_multitag_sequence_score(unary, allowed, lengths, transitions))
        one_hot = np.eye(NUM_TAGS, dtype=bool)[_inputs(2)[2]]
        single = _run(crf.crf_multitag_sequence_score(unary, one_hot, lengths, transitions))
        sequence = _run(crf.crf_sequence_score(unary, _inputs(2)[2], lengths, transitions))
    for i, length in enumerate(lengths):
        scores = _path_scores(unary[i], transitions, length)
        kept = {
            p: s for p, s in scores.items() if all(allowed[i, t, tag] for t, tag in enumerate(p))
        }
        assert got[i] == pytest.approx(_log_z(kept), abs=1e-5)
    np.testing.assert_allclose(single, sequence, atol=1e-5)  # one-hot bitmaps: one path


@pytest.mark.parametrize("known_steps", [True, False])
def test_crf_decode_and_viterbi_decode_find_the_best_path(known_steps):
    unary, transitions, _ = _inputs(4)
    lengths = np.array([4, 1, 2, 0, 3])
    with tf.Graph().as_default():
        inputs = tf.placeholder_with_default(unary, [None, 4 if known_steps else None, NUM_TAGS])
        tags, best = _run(crf.crf_decode(inputs, transitions, lengths))
    assert tags.dtype == np.int32 and tags.shape == (5, 4)
    for i, length in enumerate(lengths):
        if length == 0:
            continue
        scores = _path_scores(unary[i], transitions, length)
        path = max(scores, key=scores.get)
        assert list(tags[i, :length]) == list(path)
        assert np.all(tags[i, length:] == 0)  # padding decodes to tag 0, as TF 1.15
        assert best[i] == pytest.approx(scores[path], abs=1e-5)
        viterbi, viterbi_score = crf.viterbi_decode(unary[i, :length], transitions)
        assert [int(tag) for tag in viterbi] == list(path)
        assert viterbi_score == pytest.approx(scores[path], abs=1e-5)


def test_crf_one_step_batches_skip_the_recursion():
    unary, transitions, tags = _inputs(5, steps=1)
    lengths = np.array([1, 1, 0, 1, 1])
    with tf.Graph().as_default():
        fetches = (
            crf.crf_log_likelihood(unary, tags, lengths, transitions)[0],
            crf.crf_decode(unary, transitions, lengths),
        )
        log_likelihood, (decoded, best) = _run(fetches)
    log_softmax = unary[:, 0] - np.log(np.exp(unary[:, 0]).sum(-1, keepdims=True))
    want = np.where(lengths > 0, log_softmax[np.arange(5), tags[:, 0]], 0.0)
    np.testing.assert_allclose(log_likelihood, want, atol=1e-5)
    np.testing.assert_array_equal(decoded[:, 0], unary[:, 0].argmax(-1))
    np.testing.assert_allclose(best, unary[:, 0].max(-1), atol=1e-6)


def test_crf_log_likelihood_makes_tf115_transitions_variable_and_trains():
    unary, _, tags = _inputs(6)
    lengths = np.array([4, 3, 2, 4, 1])
    with tf.Graph().as_default():
        with tf.variable_scope("crf"):
            log_likelihood, transitions = crf.crf_log_likelihood(unary, tags, lengths)
        with tf.variable_scope("crf", reuse=True):
            _, again = crf.crf_log_likelihood(unary, tags, lengths)
        loss = -tf.reduce_mean(log_likelihood)
        train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
        assert [v.op.name for v in tf.global_variables()] == ["crf/transitions"]
        assert again is transitions and transitions.shape == (NUM_TAGS, NUM_TAGS)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            first = sess.run(loss)
            for _ in range(20):
                sess.run(train)
            assert sess.run(loss) < first  # the gradient flows through the tf.scan recursion
