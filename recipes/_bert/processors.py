"""GLUE-format TSV tasks: MRPC, CoLA, SST-2, and the built-in sample sentence-pair task.

Each processor reads ``train.tsv``, ``dev.tsv`` and ``test.tsv`` from a data directory in the
layout the GLUE download uses, and returns :class:`InputExample` lists:

* MRPC — header; ``Quality  #1 ID  #2 ID  #1 String  #2 String``; test: ``index`` instead of
  ``Quality``. Sentence pairs, labels ``0`` / ``1``.
* CoLA — no header in train / dev: ``source  label  original-label  sentence``; test has a
  header ``index  sentence``. Single sentences, labels ``0`` / ``1``.
* SST-2 — header ``sentence  label``; test: header ``index  sentence``. Single sentences.
* sample — the MRPC layout (see ``sample_data``).

Example:

    processor = get_processor("mrpc")
    examples = processor.get_train_examples("glue_data/MRPC")
"""

from __future__ import annotations

import csv
import dataclasses
import os
from typing import Optional

from tfest_kit._tf import tf

__all__ = [
    "ColaProcessor",
    "DataProcessor",
    "InputExample",
    "MrpcProcessor",
    "PROCESSORS",
    "SampleProcessor",
    "Sst2Processor",
    "get_processor",
]


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example: ``text_b`` is None for single-sentence tasks; ``label`` is a label string."""

    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: Optional[str] = None


class DataProcessor:
    """Base class: reads a task's TSV files from ``data_dir``."""

    name = ""
    labels: tuple = ("0", "1")

    def get_labels(self) -> list[str]:
        """The label strings, in class-id order."""
        return list(self.labels)

    def get_train_examples(self, data_dir: str) -> list[InputExample]:
        return self._create_examples(self._read_tsv(data_dir, "train.tsv"), "train")

    def get_dev_examples(self, data_dir: str) -> list[InputExample]:
        return self._create_examples(self._read_tsv(data_dir, "dev.tsv"), "dev")

    def get_test_examples(self, data_dir: str) -> list[InputExample]:
        return self._create_examples(self._read_tsv(data_dir, "test.tsv"), "test")

    def _create_examples(self, lines: list[list[str]], set_type: str) -> list[InputExample]:
        raise NotImplementedError

    def _read_tsv(self, data_dir: str, filename: str) -> list[list[str]]:
        path = os.path.join(data_dir, filename)
        if not tf.io.gfile.exists(path):
            present = sorted(tf.io.gfile.listdir(data_dir)) if tf.io.gfile.isdir(data_dir) else []
            raise ValueError(
                f"`data_dir` has no {filename} for task {self.name!r}. Got: {data_dir!r} "
                f"containing {present[:10]}"
            )
        with tf.io.gfile.GFile(path, "r") as f:
            # GLUE text contains stray quotes; they are part of the sentence.
            return [line for line in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if line]

    def _row(self, line: list[str], width: int, set_type: str, i: int) -> list[str]:
        if len(line) < width:
            raise ValueError(
                f"{self.name} {set_type}.tsv line {i + 1}: expected at least {width} "
                f"tab-separated columns. Got: {line!r}"
            )
        return line

    def _label(self, label: str, set_type: str, i: int) -> str:
        if label not in self.labels:
            raise ValueError(
                f"{self.name} {set_type}.tsv line {i + 1}: label must be one of "
                f"{list(self.labels)}. Got: {label!r}"
            )
        return label


class MrpcProcessor(DataProcessor):
    """Microsoft Research Paraphrase Corpus (GLUE): is sentence 2 a paraphrase of sentence 1?"""

    name = "mrpc"

    def _create_examples(self, lines, set_type):
        examples = []
        for i, line in enumerate(lines):
            if i == 0:
                continue  # header
            line = self._row(line, 5, set_type, i)
            label = "0" if set_type == "test" else self._label(line[0], set_type, i)
            examples.append(InputExample(f"{set_type}-{i}", line[3], line[4], label))
        return examples


class ColaProcessor(DataProcessor):
    """Corpus of Linguistic Acceptability (GLUE): is the sentence grammatical?"""

    name = "cola"

    def _create_examples(self, lines, set_type):
        examples = []
        for i, line in enumerate(lines):
            if set_type == "test":
                if i == 0:
                    continue  # only the test file has a header
                line = self._row(line, 2, set_type, i)
                examples.append(InputExample(f"{set_type}-{i}", line[1], None, "0"))
            else:
                line = self._row(line, 4, set_type, i)
                label = self._label(line[1], set_type, i)
                examples.append(InputExample(f"{set_type}-{i}", line[3], None, label))
        return examples


class Sst2Processor(DataProcessor):
    """Stanford Sentiment Treebank, binary (GLUE): is the sentence positive?"""

    name = "sst2"

    def _create_examples(self, lines, set_type):
        examples = []
        for i, line in enumerate(lines):
            if i == 0:
                continue  # header
            if set_type == "test":
                line = self._row(line, 2, set_type, i)
                examples.append(InputExample(f"{set_type}-{i}", line[1], None, "0"))
            else:
                line = self._row(line, 2, set_type, i)
                label = self._label(line[1], set_type, i)
                examples.append(InputExample(f"{set_type}-{i}", line[0], None, label))
        return examples


class SampleProcessor(MrpcProcessor):
    """The built-in sentence-pair task (MRPC layout): do both sentences share a topic?"""

    name = "sample"


PROCESSORS = {
    "mrpc": MrpcProcessor,
    "cola": ColaProcessor,
    "sst2": Sst2Processor,
    "sst-2": Sst2Processor,
    "sample": SampleProcessor,
}


def get_processor(task_name: str) -> DataProcessor:
    """Returns the processor for ``task_name`` (case-insensitive).

    Raises:
      ValueError: for an unknown task name (the message lists the known ones).
    """
    key = str(task_name).lower()
    if key not in PROCESSORS:
        raise ValueError(f"`task_name` must be one of {sorted(PROCESSORS)}. Got: {task_name!r}")
    return PROCESSORS[key]()
