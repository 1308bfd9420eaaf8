"""A generated tiny BERT config, vocabulary and sentence-pair task that a small model learns.

The task (MRPC layout, read by ``SampleProcessor``): two sentences built from a small word pool;
the label is ``1`` when both talk about the same topic (animals, food, music, travel) and
``0`` otherwise. Sentences mix capitals, punctuation, accents (``Café``), inflected
words that WordPiece splits (``cats`` -> ``cat ##s``, ``watching`` -> ``watch ##ing``) and an
occasional unknown name (``[UNK]``), so the whole tokeniser path is exercised.

Example:

    task = write_sample_task("/tmp/bert_sample", num_train=2000, num_dev=400, num_test=100)
    task.data_dir, task.vocab_file, task.bert_config_file
"""

from __future__ import annotations

import dataclasses
import os
import random

from recipes._bert.modeling import BertConfig
from tfest_kit._tf import tf

__all__ = ["SampleTask", "TOPICS", "sample_config", "sample_vocab", "write_sample_task"]

TOPICS = {
    "animals": ["cat", "dog", "horse", "bird", "fish", "rabbit", "tiger", "mouse"],
    "food": ["bread", "apple", "cheese", "soup", "rice", "cake", "pasta", "cafe"],
    "music": ["guitar", "piano", "drum", "violin", "song", "band", "choir", "trumpet"],
    "travel": ["train", "plane", "hotel", "airport", "ticket", "ship", "road", "map"],
}
_DETERMINERS = ["the", "a", "this", "that", "my", "our", "your", "every"]
_VERBS = ["watch", "like", "want", "paint", "visit", "miss", "call", "follow"]
_UNKNOWN_NAMES = ["Zorblax", "Qwyth", "Vrenk", "Jubbix"]
_PUNCTUATION = [".", ",", "!", "?", "'", "-"]
_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_SUFFIXES = ["##s", "##ing", "##ed"]


@dataclasses.dataclass(frozen=True)
class SampleTask:
    data_dir: str
    vocab_file: str
    bert_config_file: str


def sample_vocab() -> list[str]:
    """The vocabulary, special tokens first (``[PAD]`` is id 0, as in BERT)."""
    words = [w for topic in TOPICS.values() for w in topic]
    words += _DETERMINERS + _VERBS + ["and"]
    return _SPECIAL + _PUNCTUATION + sorted(set(words)) + _SUFFIXES


def sample_config(vocab_size: int) -> BertConfig:
    """A 2-layer, 64-wide, 2-head BERT that trains in seconds on a CPU."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=128,
        type_vocab_size=2,
        # Wider than BERT's 0.02: the same-topic label has no single-word signal, and larger
        # initial weights get a from-scratch model off that plateau sooner.
        initializer_range=0.05,
    )


def _noun(rng: random.Random, topic: str) -> str:
    word = rng.choice(TOPICS[topic])
    if word == "cafe":
        word = "café"  # lower-casing strips the accent back to the vocabulary's "cafe"
    return word + "s" if rng.random() < 0.3 else word


def _sentence(rng: random.Random, topic: str) -> str:
    # Five topic words in nine: sparser topic words make the comparison much slower to learn
    # from scratch (the label has no single-word signal, only the pair's).
    subject = rng.choice(_UNKNOWN_NAMES) if rng.random() < 0.1 else rng.choice(_DETERMINERS)
    verb = rng.choice(_VERBS) + rng.choice(["", "s", "ing", "ed"])
    nouns = [_noun(rng, topic) for _ in range(5)]
    words = [subject, nouns[0] + ",", nouns[1], "and", nouns[2], verb, nouns[3], "and", nouns[4]]
    text = " ".join(words) + rng.choice([".", "!", "?", " ."])
    return text[0].upper() + text[1:]


def _pairs(rng: random.Random, count: int) -> list[tuple[str, str, str]]:
    topics = sorted(TOPICS)
    rows = []
    for i in range(count):
        first = rng.choice(topics)
        same = i % 2 == 0
        second = first if same else rng.choice([t for t in topics if t != first])
        rows.append(("1" if same else "0", _sentence(rng, first), _sentence(rng, second)))
    rng.shuffle(rows)
    return rows


def _write_tsv(path: str, header: list[str], rows: list[list[str]]) -> None:
    with tf.io.gfile.GFile(path, "w") as f:
        for row in [header, *rows]:
            f.write("\t".join(row) + "\n")


def write_sample_task(
    directory: str, num_train: int = 2000, num_dev: int = 400, num_test: int = 100, seed: int = 0
) -> SampleTask:
    """Writes ``train/dev/test.tsv`` (MRPC layout), ``vocab.txt`` and ``bert_config.json``.

    Args:
      directory: where to write (created if missing).
      num_train: training pairs.
      num_dev: evaluation pairs.
      num_test: prediction pairs (labels not written, as in GLUE's test files).
      seed: random seed; the same seed writes the same files.

    Returns:
      A :class:`SampleTask` with the three paths.

    Raises:
      ValueError: if a count is not a positive int.

    Example:

        task = write_sample_task(tempfile.mkdtemp())
    """
    for name, value in (("num_train", num_train), ("num_dev", num_dev), ("num_test", num_test)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive int. Got: {value!r}")
    tf.io.gfile.makedirs(directory)
    rng = random.Random(seed)
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    ids = iter(range(1, 10**9))
    for filename, count in (("train.tsv", num_train), ("dev.tsv", num_dev)):
        rows = [[label, str(next(ids)), str(next(ids)), a, b] for label, a, b in _pairs(rng, count)]
        _write_tsv(os.path.join(directory, filename), header, rows)
    test_rows = [
        [str(i), str(next(ids)), str(next(ids)), a, b]
        for i, (_, a, b) in enumerate(_pairs(rng, num_test))
    ]
    _write_tsv(os.path.join(directory, "test.tsv"), ["index", *header[1:]], test_rows)

    vocab = sample_vocab()
    vocab_file = os.path.join(directory, "vocab.txt")
    with tf.io.gfile.GFile(vocab_file, "w") as f:
        f.write("\n".join(vocab) + "\n")
    config_file = os.path.join(directory, "bert_config.json")
    with tf.io.gfile.GFile(config_file, "w") as f:
        f.write(sample_config(len(vocab)).to_json_string())
    return SampleTask(directory, vocab_file, config_file)
