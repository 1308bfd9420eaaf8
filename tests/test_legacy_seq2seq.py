"""Tests for tf.contrib.seq2seq under the runner: decoders, helpers, beam search and attention.

tests/legacy_scripts/seq2seq_model.py (a TF1 Estimator learning to copy token sequences) runs
once through ``python -m tfest_kit.legacy``; its JSON is checked against TF 1.15's variable
names and against NumPy / ``tf.nn.dynamic_rnn`` reference computations.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import ROOT, run_program
from tfest_kit._tf import tf
from tfest_kit.legacy.contrib import seq2seq

VOCAB, EMBED, UNITS, EOS = 10, 8, 16, 2

# TF 1.15's names and shapes for seq2seq_model.py's model (tf.contrib.seq2seq's
# attention_wrapper.py / basic_decoder.py / decoder.py under a `decode` variable scope).
TF115_VARIABLES = {
    "embed/embeddings": [VOCAB, EMBED],
    "rnn/gru_cell/gates/kernel": [EMBED + UNITS, 2 * UNITS],
    "rnn/gru_cell/gates/bias": [2 * UNITS],
    "rnn/gru_cell/candidate/kernel": [EMBED + UNITS, UNITS],
    "rnn/gru_cell/candidate/bias": [UNITS],
    "decode/memory_layer/kernel": [UNITS, UNITS],
    "decode/decoder/attention_wrapper/basic_lstm_cell/kernel": [EMBED + 2 * UNITS, 4 * UNITS],
    "decode/decoder/attention_wrapper/basic_lstm_cell/bias": [4 * UNITS],
    "decode/decoder/attention_wrapper/bahdanau_attention/query_layer/kernel": [UNITS, UNITS],
    "decode/decoder/attention_wrapper/bahdanau_attention/attention_v": [UNITS],
    "decode/decoder/attention_wrapper/attention_layer/kernel": [2 * UNITS, UNITS],
    "decode/decoder/dense/kernel": [UNITS, VOCAB],
    "decode/decoder/dense/bias": [VOCAB],
    "global_step": [],
}


def _write_tf115_checkpoint(model_dir) -> None:
    """A checkpoint holding exactly TF 1.15's variable names, as TF 1.15 would have written."""
    rng = np.random.RandomState(0)
    with tf.Graph().as_default(), tf.Session() as sess:
        for name, shape in TF115_VARIABLES.items():
            if name == "global_step":
                tf.Variable(np.int64(5), name=name)
            else:
                tf.Variable(rng.randn(*shape).astype(np.float32) * 0.3, name=name)
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, str(model_dir / "model.ckpt"), global_step=5)


@pytest.fixture(scope="module")
def seq2seq_run(tmp_path_factory):
    """seq2seq_model.py under the runner; returns its JSON and the --report lines."""
    work_dir = tmp_path_factory.mktemp("seq2seq")
    tf115_dir = work_dir / "tf115"
    tf115_dir.mkdir()
    _write_tf115_checkpoint(tf115_dir)
    proc = run_program(
        [
            "-m",
            "tfest_kit.legacy",
            "--report",
            str(ROOT / "tests" / "legacy_scripts" / "seq2seq_model.py"),
            f"--work_dir={work_dir}",
            f"--tf115_dir={tf115_dir}",
        ],
        timeout=300,
    )
    assert "TensorFlow Addons" not in proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    return json.loads(lines[start]), "\n".join(lines[start + 1 :])


def _until_eos(row) -> list:
    row = list(row)
    return row[: row.index(EOS) + 1] if EOS in row else row


def test_seq2seq_estimator_learns_the_copy_task(seq2seq_run):
    result = seq2seq_run[0]["estimator"]
    # Held-out loss after 40 and after 200 steps.  Runs are not bit-reproducible (thread
    # scheduling), hence a wide margin: over 15 runs on TensorFlow 2.15 the last was at most
    # 0.11 of the first and greedy decoding at least 86 % exact; a model that does not learn
    # keeps a ratio near 1.
    first, last = result["losses"]
    assert last < 0.5 * first, result["losses"]
    target = [_until_eos(row) for row in result["target"]]
    for kind in ("greedy", "beam"):
        predicted = [_until_eos(row) for row in result["trained"][kind]]
        exact = np.mean([p == t for p, t in zip(predicted, target)])
        assert exact > 0.5, (kind, exact)  # chance is under 1 % for 3-5 tokens out of 7
    # A beam of width 1 is greedy decoding.
    greedy = [_until_eos(row) for row in result["trained"]["greedy"]]
    assert [_until_eos(row) for row in result["trained"]["beam1"]] == greedy


def test_seq2seq_checkpoint_has_tf115_variable_names(seq2seq_run):
    variables = dict(seq2seq_run[0]["estimator"]["variables"])
    model = {
        name: shape
        for name, shape in variables.items()
        if "/Adam" not in name and not name.startswith("beta")
    }
    assert model == TF115_VARIABLES
    assert variables["decode/memory_layer/kernel/Adam"] == [UNITS, UNITS]


def test_seq2seq_tf115_named_checkpoint_restores_under_the_runner(seq2seq_run):
    restored = seq2seq_run[0]["estimator"]["tf115"]
    for kind in ("greedy", "beam", "beam1"):
        ids = np.array(restored[kind])
        assert ids.shape == (50, 6) and ids.min() >= 0 and ids.max() < VOCAB, kind
    # Its (random) weights are not the trained ones: the checkpoint really was read.
    assert restored["greedy"] != seq2seq_run[0]["estimator"]["trained"]["greedy"]


def test_seq2seq_report_names_the_port_and_its_tf_ops(seq2seq_run):
    report = seq2seq_run[1]
    for name in ("BeamSearchDecoder", "BahdanauAttention", "TrainingHelper", "sequence_loss"):
        assert name in report, report
    assert "a port of TF 1.15's" in report, report
    assert "TF ops after TF 1.15's contrib/seq2seq" in report, report
    assert "tensorflow_addons" not in report, report


def test_basic_decoder_with_training_helper_equals_dynamic_rnn(seq2seq_run):
    result = seq2seq_run[0]["reference"]["basic_decoder"]
    np.testing.assert_allclose(result["decoded"], result["reference"], atol=1e-6)
    np.testing.assert_allclose(result["h"], result["reference_h"], atol=1e-6)
    assert result["lengths"] == [3, 2]
    assert result["variables"] == ["decoder/basic_lstm_cell/kernel", "decoder/basic_lstm_cell/bias"]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gru(x, h, variables, prefix):
    gates = _sigmoid(
        np.concatenate([x, h], 1) @ variables[f"{prefix}/gates/kernel"]
        + variables[f"{prefix}/gates/bias"]
    )
    r, u = np.split(gates, 2, axis=1)
    c = np.tanh(
        np.concatenate([x, r * h], 1) @ variables[f"{prefix}/candidate/kernel"]
        + variables[f"{prefix}/candidate/bias"]
    )
    return u * h + (1 - u) * c


def _attention_reference(kind, memory, inputs, variables, lengths=(4, 2)):
    """AttentionWrapper(GRUCell(6), mechanism) over ``inputs``, in NumPy from the variables."""
    wrapper = "rnn/attention_wrapper"
    mask = np.arange(memory.shape[1])[None, :] < np.array(lengths)[:, None]
    values = memory * mask[:, :, None]
    keys = values @ variables["memory_layer/kernel"]
    h = np.zeros((memory.shape[0], 6), np.float32)
    attention = np.zeros_like(h)
    outputs, alignments_all = [], []
    for t in range(inputs.shape[1]):
        h = _gru(np.concatenate([inputs[:, t], attention], 1), h, variables, f"{wrapper}/gru_cell")
        if kind.startswith("bahdanau"):
            scope = f"{wrapper}/bahdanau_attention"
            query = h @ variables[f"{scope}/query_layer/kernel"]
            v = variables[f"{scope}/attention_v"]
            if kind.endswith("norm"):
                v = variables[f"{scope}/attention_g"] * v / np.sqrt(np.sum(v * v))
                score = np.sum(
                    v * np.tanh(keys + query[:, None] + variables[f"{scope}/attention_b"]), 2
                )
            else:
                score = np.sum(v * np.tanh(keys + query[:, None]), 2)
        else:
            score = np.einsum("bd,bmd->bm", h, keys)
            if kind.endswith("scaled"):
                score = score * variables[f"{wrapper}/luong_attention/attention_g"]
        score = np.where(mask, score, -np.inf)
        alignments = np.exp(score - score.max(1, keepdims=True))
        alignments /= alignments.sum(1, keepdims=True)
        attention = np.einsum("bm,bmd->bd", alignments, values)
        outputs.append(attention)
        alignments_all.append(alignments)
    return np.stack(outputs, 1), np.stack(alignments_all, 0)


@pytest.mark.parametrize("kind", ["bahdanau", "luong", "bahdanau_norm", "luong_scaled"])
def test_attention_equals_numpy_from_the_variables(seq2seq_run, kind):
    reference = seq2seq_run[0]["reference"]
    result = reference[kind]
    variables = {name: np.array(value) for name, value in result["variables"].items()}
    outputs, alignments = _attention_reference(
        kind, np.array(reference["memory"]), np.array(reference["inputs"]), variables
    )
    np.testing.assert_allclose(result["alignments"], alignments, atol=1e-5)
    np.testing.assert_allclose(result["outputs"], outputs, atol=1e-5)
    assert np.all(np.array(result["alignments"])[:, 1, 2:] == 0)  # masked past length 2


def test_monotonic_attention_variables_and_alignments():
    memory = np.random.RandomState(1).randn(2, 4, 6).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        results = {}
        for mechanism_class in (
            seq2seq.BahdanauMonotonicAttention,
            seq2seq.LuongMonotonicAttention,
        ):
            with tf.variable_scope(mechanism_class.__name__):
                mechanism = mechanism_class(
                    6, memory, memory_sequence_length=[4, 3], score_bias_init=-1.0
                )
                cell = seq2seq.AttentionWrapper(
                    tf.nn.rnn_cell.GRUCell(6), mechanism, alignment_history=True
                )
                _, state = tf.nn.dynamic_rnn(
                    cell,
                    memory[:, :3],
                    initial_state=cell.zero_state(2, tf.float32),
                    dtype=tf.float32,
                )
                results[mechanism_class.__name__] = state.alignment_history.stack()
        sess.run(tf.global_variables_initializer())
        values = sess.run(results)
        names = sorted(v.op.name for v in tf.global_variables())
    assert (
        "BahdanauMonotonicAttention/rnn/attention_wrapper/bahdanau_monotonic_attention/attention_score_bias"
        in names
    )
    assert (
        "LuongMonotonicAttention/rnn/attention_wrapper/luong_monotonic_attention/attention_score_bias"
        in names
    )
    for alignments in values.values():
        sums = alignments.sum(-1)
        assert np.all(sums <= 1 + 1e-5) and np.all(sums > 0)
        assert np.all(alignments[:, 1, 3] == 0)  # masked past length 3


def test_seq2seq_refuses_wrong_arguments_naming_them():
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicLSTMCell(4)
        state = cell.zero_state(2, tf.float32)
        with pytest.raises(TypeError, match="helper"):
            seq2seq.BasicDecoder(cell, "not a helper", state)
        with pytest.raises(TypeError, match="decoder"):
            seq2seq.dynamic_decode(cell)
        with pytest.raises(ValueError, match="start_tokens"):
            seq2seq.GreedyEmbeddingHelper(tf.zeros([5, 3]), [[1, 1]], 2)
        with pytest.raises(ValueError, match="end_token"):
            seq2seq.GreedyEmbeddingHelper(tf.zeros([5, 3]), [1, 1], [2])
        with pytest.raises(ValueError, match="sequence_length"):
            seq2seq.TrainingHelper(tf.zeros([2, 3, 4]), [[3, 3]])
        with pytest.raises(ValueError, match="coverage_penalty_weight"):
            seq2seq.BeamSearchDecoder(cell, tf.zeros([5, 3]), [1, 1], 2, state, 1, None, 0.0, 0.5)
        mechanism = seq2seq.LuongAttention(4, tf.zeros([2, 3, 4]))
        with pytest.raises(ValueError, match="attention_layer_size"):
            seq2seq.AttentionWrapper(cell, mechanism, 4, attention_layer=tf.layers.Dense(4))
        with pytest.raises(TypeError, match="attention_mechanism"):
            seq2seq.AttentionWrapper(cell, "luong")


# --- the arithmetic of _seq2seq_ops / _seq2seq_beam_search against NumPy ----------------------


def _run(fetches):
    with tf.Session() as sess:
        return sess.run(fetches)


def _gather_tree_reference(step_ids, parent_ids, lengths, end_token):
    """TF 1.15's GatherTree kernel, in NumPy: backtrack each beam, then end_token after the end."""
    max_time, batch_size, beam_width = step_ids.shape
    beams = np.full_like(step_ids, end_token)
    for b in range(batch_size):
        length = min(max_time, lengths[b])
        for beam in range(beam_width):
            if length <= 0:
                continue
            beams[length - 1, b, beam] = step_ids[length - 1, b, beam]
            parent = parent_ids[length - 1, b, beam]
            for t in range(length - 2, -1, -1):
                beams[t, b, beam] = step_ids[t, b, parent]
                parent = parent_ids[t, b, parent]
            ended = False
            for t in range(length):
                if ended:
                    beams[t, b, beam] = end_token
                ended = ended or beams[t, b, beam] == end_token
    return beams


def test_gather_tree_equals_tf115_kernel_semantics():
    # TF 1.15's own test case (beam_search_ops_test.py): -1 entries lie past the length.
    step_ids = np.array([[[1, 2, 3]], [[4, 5, 6]], [[7, 8, 9]], [[-1, -1, -1]]], np.int32)
    parent_ids = np.array([[[0, 0, 0]], [[0, 1, 1]], [[2, 1, 2]], [[-1, -1, -1]]], np.int32)
    rng = np.random.RandomState(0)
    random_ids = rng.randint(0, 6, (7, 4, 3)).astype(np.int32)  # end_token 2 appears
    random_parents = rng.randint(0, 3, (7, 4, 3)).astype(np.int32)
    lengths = np.array([7, 4, 0, 9], np.int32)  # past max_time is clipped to it
    with tf.Graph().as_default():
        got = _run(
            (
                seq2seq.gather_tree(step_ids, parent_ids, [3], 10),
                seq2seq.gather_tree(random_ids, random_parents, lengths, 2),
            )
        )
        with pytest.raises(tf.errors.InvalidArgumentError, match="parent id"):
            _run(seq2seq.gather_tree(step_ids, parent_ids + 5, [3], 10))
    want = np.array([[[2, 2, 2]], [[6, 5, 6]], [[7, 8, 9]], [[10, 10, 10]]])
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(
        got[1], _gather_tree_reference(random_ids, random_parents, lengths, 2)
    )
    assert np.all(got[1][:, 2] == 2)  # a length of 0 is all end_token


def _log_softmax(x):
    return (
        x
        - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - x.max(-1, keepdims=True)
    )


@pytest.mark.parametrize("length_penalty", [0.0, 0.6])
def test_beam_search_step_equals_numpy(length_penalty):
    from tfest_kit.legacy.contrib._seq2seq_beam_search import beam_search_step

    rng = np.random.RandomState(1)
    batch, beams, vocab, end = 2, 3, 5, 1
    logits = rng.randn(batch, beams, vocab).astype(np.float32)
    log_probs = -rng.rand(batch, beams).astype(np.float32) * 3
    finished = np.array([[False, True, False], [False, False, False]])
    lengths = np.array([[2, 1, 2], [2, 2, 2]], np.int64)
    cell_state = rng.randn(batch, beams, 4).astype(np.float32)
    state = seq2seq.BeamSearchDecoderState(cell_state, log_probs, finished, lengths, ())
    with tf.Graph().as_default():
        output, next_state = _run(
            beam_search_step(
                tf.constant(logits), cell_state, state, batch, beams, end, length_penalty
            )
        )
    step = _log_softmax(logits.astype(np.float64))
    # A finished beam continues only with end_token, at no cost.
    eos_row = np.where(np.arange(vocab) == end, 0.0, np.finfo(np.float32).min)
    step = np.where(finished[..., None], eos_row, step)
    total = log_probs[..., None] + step
    new_lengths = lengths[..., None] + (~finished[..., None] & (np.arange(vocab) != end))
    scores = total / (((5.0 + new_lengths) / 6.0) ** length_penalty)
    flat = scores.reshape(batch, -1)
    top = np.argsort(-flat, axis=1, kind="stable")[:, :beams]
    parents, words = top // vocab, top % vocab
    rows = np.arange(batch)[:, None]
    np.testing.assert_array_equal(output.predicted_ids, words)
    np.testing.assert_array_equal(output.parent_ids, parents)
    np.testing.assert_allclose(output.scores, flat[rows, top], rtol=1e-5)
    np.testing.assert_allclose(next_state.log_probs, total.reshape(batch, -1)[rows, top], rtol=1e-5)
    np.testing.assert_allclose(next_state.cell_state, cell_state[rows, parents])
    was_finished = finished[rows, parents]
    np.testing.assert_array_equal(next_state.finished, was_finished | (words == end))
    np.testing.assert_array_equal(next_state.lengths, lengths[rows, parents] + ~was_finished)


def test_first_beam_search_step_expands_only_the_first_beam():
    from tfest_kit.legacy.contrib._seq2seq_beam_search import beam_search_step

    logits = np.random.RandomState(2).randn(1, 3, 6).astype(np.float32)
    state = seq2seq.BeamSearchDecoderState(
        (),
        np.array([[0.0, -np.inf, -np.inf]], np.float32),
        np.zeros((1, 3), bool),
        np.zeros((1, 3), np.int64),
        (),
    )
    with tf.Graph().as_default():
        output, _ = _run(beam_search_step(tf.constant(logits), (), state, 1, 3, 5, 0.0))
    assert output.parent_ids.tolist() == [[0, 0, 0]]
    assert output.predicted_ids[0].tolist() == list(np.argsort(-logits[0, 0])[:3])


def _monotonic_reference(p_choose, previous):
    """attention[i] = p[i] * q[i], q[i] = (1 - p[i - 1]) * q[i - 1] + previous[i]."""
    attention = np.zeros_like(p_choose)
    for b in range(p_choose.shape[0]):
        q = 0.0
        for i in range(p_choose.shape[1]):
            q = (1 - p_choose[b, i - 1]) * q + previous[b, i] if i else previous[b, 0]
            attention[b, i] = p_choose[b, i] * q
    return attention


def test_attention_arithmetic_equals_numpy():
    from tfest_kit.legacy.contrib import _seq2seq_ops as ops

    rng = np.random.RandomState(3)
    query, keys = rng.randn(2, 4).astype(np.float32), rng.randn(2, 5, 4).astype(np.float32)
    v, b = rng.randn(4).astype(np.float32), rng.randn(4).astype(np.float32)
    p_choose = rng.uniform(0.1, 0.9, (2, 5)).astype(np.float32)
    previous = rng.dirichlet(np.ones(5), 2).astype(np.float32)
    hard_p = (rng.rand(2, 5) > 0.5).astype(np.float32)
    hard_previous = np.eye(5, dtype=np.float32)[[0, 2]]
    score = rng.randn(2, 5).astype(np.float32)
    with tf.Graph().as_default():
        got = _run(
            {
                "luong": ops.luong_score(query, keys, 2.0),
                "bahdanau": ops.bahdanau_score(query, keys, v),
                "normed": ops.bahdanau_score(query, keys, v, 0.5, b),
                "recursive": seq2seq.monotonic_attention(p_choose, previous, "recursive"),
                "parallel": seq2seq.monotonic_attention(p_choose, previous, "parallel"),
                "hard": seq2seq.monotonic_attention(hard_p, hard_previous, "hard"),
                "hardmax": seq2seq.hardmax(score),
                "cumprod": seq2seq.safe_cumprod(p_choose, axis=1, exclusive=True),
                "masked": ops.maybe_mask_score(score, [5, 2], -1e9),
                "memory": ops.prepare_memory(keys, [5, 2]),
            }
        )
        with pytest.raises(ValueError, match="mode"):
            seq2seq.monotonic_attention(p_choose, previous, "soft")
    np.testing.assert_allclose(got["luong"], 2.0 * np.einsum("bd,btd->bt", query, keys), rtol=1e-5)
    want = np.sum(v * np.tanh(keys + query[:, None]), 2)
    np.testing.assert_allclose(got["bahdanau"], want, rtol=1e-5)
    normed_v = 0.5 * v / np.sqrt(np.sum(v * v))
    want = np.sum(normed_v * np.tanh(keys + query[:, None] + b), 2)
    np.testing.assert_allclose(got["normed"], want, rtol=1e-5)
    want = _monotonic_reference(p_choose, previous)
    np.testing.assert_allclose(got["recursive"], want, atol=1e-6)
    np.testing.assert_allclose(got["parallel"], want, atol=1e-5)
    np.testing.assert_allclose(got["hard"], _monotonic_reference(hard_p, hard_previous), atol=0)
    np.testing.assert_array_equal(got["hardmax"], np.eye(5)[score.argmax(1)])
    exclusive = np.concatenate([np.ones((2, 1)), np.cumprod(p_choose, 1)[:, :-1]], 1)
    np.testing.assert_allclose(got["cumprod"], exclusive, rtol=1e-5)
    np.testing.assert_array_equal(got["masked"][1, 2:], -1e9)
    np.testing.assert_array_equal(got["masked"][:, :2], score[:, :2])
    assert np.all(got["memory"][1, 2:] == 0) and np.all(got["memory"][0] == keys[0])


@pytest.mark.parametrize(
    "flags, reduce",
    [
        ({}, lambda loss, w: loss.sum() / w.sum()),
        ({"average_across_timesteps": False, "average_across_batch": False}, lambda loss, w: loss),
        ({"average_across_batch": False}, lambda loss, w: loss.sum(1) / w.sum(1)),
        ({"average_across_timesteps": False}, lambda loss, w: loss.sum(0) / w.sum(0)),
        (
            {
                "average_across_timesteps": False,
                "average_across_batch": False,
                "sum_over_timesteps": True,
                "sum_over_batch": True,
            },
            lambda loss, w: loss.sum() / np.count_nonzero(w),
        ),
        (
            {
                "average_across_timesteps": False,
                "average_across_batch": False,
                "sum_over_timesteps": True,
            },
            lambda loss, w: loss.sum(1) / np.count_nonzero(w, 1),
        ),
    ],
)
def test_sequence_loss_equals_numpy(flags, reduce):
    rng = np.random.RandomState(4)
    logits = rng.randn(3, 4, 6).astype(np.float32)
    targets = rng.randint(0, 6, (3, 4))
    weights = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [0.5, 2, 1, 0]], np.float32)
    with tf.Graph().as_default():
        got = _run(seq2seq.sequence_loss(logits, targets, weights, **flags))
    nll = -np.take_along_axis(_log_softmax(logits.astype(np.float64)), targets[..., None], -1)
    np.testing.assert_allclose(got, reduce(nll[..., 0] * weights, weights), rtol=1e-5)


def test_sequence_loss_and_tile_batch_refuse_bad_arguments():
    with tf.Graph().as_default():
        logits, targets = tf.zeros([2, 3, 4]), tf.zeros([2, 3], tf.int32)
        with pytest.raises(ValueError, match="logits"):
            seq2seq.sequence_loss(tf.zeros([2, 3]), targets, tf.ones([2, 3]))
        with pytest.raises(ValueError, match="average_across_timesteps"):
            seq2seq.sequence_loss(logits, targets, tf.ones([2, 3]), sum_over_timesteps=True)
        with pytest.raises(ValueError, match="rank"):
            seq2seq.tile_batch(tf.constant(1.0), 2)


def test_tile_batch_repeats_entries_in_place_and_keeps_static_shapes():
    with tf.Graph().as_default():
        tiled = seq2seq.tile_batch({"a": tf.constant([[1, 2], [3, 4]]), "b": tf.zeros([2, 5])}, 3)
        assert tiled["a"].shape.as_list() == [6, 2] and tiled["b"].shape.as_list() == [6, 5]
        got = _run(tiled["a"])
    assert got.tolist() == [[1, 2]] * 3 + [[3, 4]] * 3


def test_gather_tree_from_array_reorders_beams_like_gather_tree():
    from tfest_kit.legacy.contrib._seq2seq_ops import gather_tree_from_array

    rng = np.random.RandomState(5)
    parent_ids = rng.randint(0, 3, (4, 2, 3)).astype(np.int32)
    values = rng.randn(4, 2, 3, 2).astype(np.float32)
    lengths = np.full((2, 3), 4, np.int64)
    with tf.Graph().as_default():
        got = _run(gather_tree_from_array(values, parent_ids, lengths))
    beam_ids = np.broadcast_to(np.arange(3), (4, 2, 3)).astype(np.int32)
    order = _gather_tree_reference(beam_ids, parent_ids, [4, 4], 4)
    want = np.take_along_axis(values, order[..., None], axis=2)
    np.testing.assert_allclose(got, want)


def test_beam_search_decoder_backtracks_beams_and_reorders_alignment_history():
    batch, beams, vocab, end, memory_time = 2, 3, 7, 1, 4
    rng = np.random.RandomState(6)
    memory = rng.randn(batch, memory_time, 5).astype(np.float32)
    with tf.Graph().as_default():
        runs = {}
        for reorder in (True, False):
            with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
                tiled = seq2seq.tile_batch(memory, beams)
                mechanism = seq2seq.LuongAttention(6, tiled, memory_sequence_length=[4] * 6)
                cell = seq2seq.AttentionWrapper(
                    tf.nn.rnn_cell.GRUCell(6), mechanism, alignment_history=True
                )
                decoder = seq2seq.BeamSearchDecoder(
                    cell,
                    tf.get_variable("embeddings", [vocab, 3]),
                    tf.fill([batch], 0),
                    end,
                    cell.zero_state(batch * beams, tf.float32),
                    beams,
                    tf.layers.Dense(vocab, name="project"),
                    length_penalty_weight=0.5,
                    reorder_tensor_arrays=reorder,
                )
                outputs, state, _ = seq2seq.dynamic_decode(
                    decoder, output_time_major=True, maximum_iterations=6
                )
            history = state.cell_state.alignment_history
            runs[reorder] = {
                "predicted": outputs.predicted_ids,
                "steps": outputs.beam_search_decoder_output,
                "lengths": state.lengths,
                "history": history if reorder else history.stack(),
            }
        with tf.Session() as sess:
            # Weights drawn here, not by the initializers: theirs follow the process's random state.
            for variable in sorted(tf.global_variables(), key=lambda v: v.name):
                variable.load(rng.uniform(-1, 1, variable.shape).astype(np.float32), sess)
            got = sess.run(runs)
    sorted_run, raw = got[True], got[False]
    steps, lengths = sorted_run["steps"], sorted_run["lengths"]
    np.testing.assert_array_equal(sorted_run["predicted"], raw["predicted"])  # same weights
    want = _gather_tree_reference(steps.predicted_ids, steps.parent_ids, lengths.max(1), end)
    np.testing.assert_array_equal(sorted_run["predicted"], want)
    # The history is re-ordered along the same backtrack, each beam's steps past its length kept.
    max_time = steps.parent_ids.shape[0]
    beam_ids = np.broadcast_to(np.arange(beams), steps.parent_ids.shape).astype(np.int32)
    order = _gather_tree_reference(beam_ids, steps.parent_ids, lengths.max(1), beams + 1)
    in_bounds = np.arange(max_time)[:, None, None] < lengths[None]
    order = np.where(in_bounds, order, beam_ids)
    assert not np.array_equal(order, beam_ids)  # the beams really were re-ordered
    raw_history = raw["history"].reshape(max_time, batch, beams, memory_time)
    want = np.take_along_axis(raw_history, order[..., None], axis=2)
    np.testing.assert_allclose(sorted_run["history"], want.reshape(max_time, -1, memory_time))


def test_beam_search_decoder_over_a_memory_of_dynamic_length():
    # NMT-style inference: the source batch is fed, so the memory's max_time (the attention
    # state's alignments size) is a tensor; TF 1.15 took its static value, unknown here.
    batch, beams, vocab = 2, 3, 7
    memory = np.random.RandomState(7).randn(batch, 4, 5).astype(np.float32)
    with tf.Graph().as_default():
        fed = tf.placeholder(tf.float32, [batch, None, 5])
        predicted = {}
        for name, source in (("static", tf.constant(memory)), ("dynamic", fed)):
            with tf.variable_scope("model", reuse=tf.AUTO_REUSE):
                mechanism = seq2seq.LuongAttention(6, seq2seq.tile_batch(source, beams))
                cell = seq2seq.AttentionWrapper(tf.nn.rnn_cell.GRUCell(6), mechanism)
                decoder = seq2seq.BeamSearchDecoder(
                    cell,
                    tf.get_variable("embeddings", [vocab, 3]),
                    tf.fill([batch], 0),
                    1,
                    cell.zero_state(batch * beams, tf.float32),
                    beams,
                    tf.layers.Dense(vocab, name="project"),
                )
                outputs, _, _ = seq2seq.dynamic_decode(decoder, maximum_iterations=5)
            predicted[name] = outputs.predicted_ids
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            got = sess.run(predicted, {fed: memory})
    assert got["dynamic"].shape[0] == batch and got["dynamic"].shape[2] == beams
    np.testing.assert_array_equal(got["dynamic"], got["static"])
