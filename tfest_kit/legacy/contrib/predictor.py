"""``tf.contrib.predictor`` as TensorFlow 1.15 had it, backed by ``tfest_kit.serving.Predictor``.

``from_saved_model`` and ``from_estimator`` take TF 1.15's arguments and return a predictor
called as TF 1.15's was: ``predictor(input_dict)`` feeds the keys it is given (a ``None`` value
is not fed), refuses keys the signature does not have with ``ValueError``, and returns output
key -> NumPy array.  An input the outputs do not depend on may be left out (a ``label_ids``
placeholder of a BERT serving receiver); one they need is refused, naming it.  Behind it is one
:class:`tfest_kit.serving.Predictor` (one session callable per call, inputs converted to the
signature's dtypes).

``from_contrib_estimator`` (for ``tf.contrib.learn`` estimators) is not served:
``tf.contrib.learn`` is out of scope.

Example:

    predict_fn = tf.contrib.predictor.from_saved_model(export_dir)
    predict_fn({"input_ids": ids, "input_mask": mask, "segment_ids": segments})["probabilities"]
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Mapping
from typing import Any, Callable, Optional, Union

from tfest_kit._predictor import Predictor, SignatureDef
from tfest_kit._tf import tf

__all__ = ["from_saved_model", "from_estimator", "ContribPredictor", "BACKING", "NOT_SERVED"]

DEFAULT_TAGS = "serve"

# What tfest_kit.legacy serves as tf.contrib.predictor.<name>, and the library behind it.
BACKING = {
    "from_saved_model": "tfest_kit.serving.Predictor (tfest_kit.legacy.contrib.predictor)",
    "from_estimator": (
        "Estimator.export_saved_model + tfest_kit.serving.Predictor "
        "(tfest_kit.legacy.contrib.predictor)"
    ),
}
NOT_SERVED = {
    "from_contrib_estimator": (
        "from_estimator (tf.contrib.learn estimators are out of scope: port the model to "
        "tf.estimator.Estimator)"
    ),
}


class ContribPredictor:
    """What ``tf.contrib.predictor``'s factories return: call it with a dict of inputs.

    Attributes:
      feed_tensors: input key -> ``Tensor`` of the loaded graph.
      fetch_tensors: output key -> ``Tensor``.
      graph: the graph the export was loaded into.
      session: the session that runs it.

    Example:

        predict_fn = from_saved_model(export_dir)
        outputs = predict_fn({"x": [[1.0, 2.0]]})
    """

    def __init__(self, predictor: Predictor, signature: SignatureDef) -> None:
        self._predictor = predictor
        self._keys = frozenset(signature.inputs)
        graph = predictor._graph
        self.feed_tensors = {
            k: graph.get_tensor_by_name(v.name) for k, v in signature.inputs.items()
        }
        self.fetch_tensors = {
            k: graph.get_tensor_by_name(v.name) for k, v in signature.outputs.items()
        }

    @property
    def graph(self):
        return self._predictor._graph

    @property
    def session(self):
        return self._predictor._session

    def __call__(self, input_dict: Mapping[str, Any]) -> dict:
        """Runs the signature on the keys of ``input_dict``.

        Args:
          input_dict: input key -> array-like; keys left out (or ``None``) are not fed.

        Returns:
          Output key -> NumPy array.

        Raises:
          ValueError: for a key the signature has no input for, or a missing input that the
            outputs need (``tfest_kit.serving.PredictorInputError``).
        """
        unexpected = set(input_dict) - self._keys
        if unexpected:
            raise ValueError(
                f"Got unexpected keys in input_dict: {sorted(unexpected)}; the signature's "
                f"inputs are {sorted(self._keys)}"
            )
        return self._predictor({k: v for k, v in input_dict.items() if v is not None})

    def __repr__(self) -> str:
        return f"<tf.contrib.predictor stand-in over {self._predictor!r}>"


def _tags(tags: Union[None, str, list, tuple]) -> list:
    if tags is None:
        return [DEFAULT_TAGS]
    if isinstance(tags, str):
        return [t.strip() for t in tags.split(",")]
    return list(tags)


def from_saved_model(
    export_dir: str,
    signature_def_key: Optional[str] = None,
    signature_def: Optional[SignatureDef] = None,
    input_names: Optional[Mapping[str, str]] = None,
    output_names: Optional[Mapping[str, str]] = None,
    tags: Union[None, str, list, tuple] = None,
    graph: Optional[Any] = None,
    config: Optional[Any] = None,
) -> ContribPredictor:
    """``tf.contrib.predictor.from_saved_model``: a predictor over an exported SavedModel.

    Args:
      export_dir: the SavedModel directory.
      signature_def_key: the signature to serve; default ``"serving_default"``.
      signature_def: a ``SignatureDef`` proto to serve instead.
      input_names: key -> tensor name of the inputs, with ``output_names`` instead of a
        signature.
      output_names: key -> tensor name of the outputs.
      tags: the MetaGraph tags, a comma-separated string or a list; default ``"serve"``.
      graph: the graph to load into; default a new one.
      config: a ``tf.compat.v1.ConfigProto`` for the session.

    Returns:
      A :class:`ContribPredictor`.

    Raises:
      ValueError: if more than one of ``signature_def_key``, ``signature_def`` and
        ``input_names``/``output_names`` is given, or only one of the last two; or if the
        signature is not in the export (the message lists those it has).

    Example:

        predict_fn = from_saved_model(export_dir)
        predict_fn({'x': [[1.0, 2.0]]})
    """
    if (input_names is None) != (output_names is None):
        raise ValueError(
            "`input_names` and `output_names` must both be given or both be None. Got: "
            f"input_names={input_names!r}, output_names={output_names!r}"
        )
    chosen = [
        n
        for n, v in (
            ("signature_def_key", signature_def_key),
            ("signature_def", signature_def),
            ("input_names/output_names", input_names),
        )
        if v is not None
    ]
    if len(chosen) > 1:
        raise ValueError(
            "Give at most one of `signature_def_key`, `signature_def` and "
            f"`input_names`/`output_names`. Got: {chosen}"
        )
    if input_names is not None:
        signature_def = SignatureDef()
        for key, name in input_names.items():
            signature_def.inputs[key].name = name
        for key, name in output_names.items():
            signature_def.outputs[key].name = name
    signature: Union[str, SignatureDef] = (
        signature_def
        if signature_def is not None
        else signature_def_key or tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
    )
    predictor = Predictor(
        export_dir, signature, tags=_tags(tags), session_config=config, graph=graph
    )
    return ContribPredictor(predictor, predictor._sig)


def from_estimator(
    estimator: Any,
    serving_input_receiver_fn: Callable[[], Any],
    output_key: Optional[str] = None,
    graph: Optional[Any] = None,
    config: Optional[Any] = None,
) -> ContribPredictor:
    """``tf.contrib.predictor.from_estimator``: a predictor over an Estimator's latest checkpoint.

    The Estimator is exported (``export_saved_model``) into a temporary directory, removed
    when the predictor is, and served as :func:`from_saved_model` serves an export.

    Args:
      estimator: a ``tf.estimator.Estimator`` with a checkpoint in its ``model_dir``.
      serving_input_receiver_fn: returns the ``ServingInputReceiver``.
      output_key: the export output to serve; default ``"serving_default"``.
      graph: the graph to load into; default a new one.
      config: a ``tf.compat.v1.ConfigProto`` for the session.

    Returns:
      A :class:`ContribPredictor`.

    Raises:
      TypeError: if ``estimator`` is not a ``tf.estimator.Estimator``.
      ValueError: if ``output_key`` is not one of the model's export outputs.

    Example:

        predict_fn = from_estimator(estimator, serving_input_receiver_fn)
    """
    if not isinstance(estimator, tf.estimator.Estimator):
        raise TypeError(
            f"`estimator` must be a tf.estimator.Estimator (tf.contrib.learn estimators are "
            f"not served). Got: {type(estimator).__name__}"
        )
    workdir = tempfile.mkdtemp(prefix="contrib_predictor_")
    try:
        export_dir = estimator.export_saved_model(workdir, serving_input_receiver_fn)
        predictor = from_saved_model(
            export_dir, signature_def_key=output_key, graph=graph, config=config
        )
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    # Assets (vocabularies) were read at load time; the files go with the predictor.
    weakref.finalize(predictor, shutil.rmtree, workdir, True)
    return predictor
