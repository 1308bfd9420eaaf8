"""``python -m tfest_kit predict EXPORT_DIR REQUEST``: answer a TF Serving REST request.

Reads ``{"instances": [...]}`` or ``{"inputs": {input: [...]}}`` from REQUEST (``-``: stdin),
answers ``{"predictions": [...]}`` or ``{"outputs": ...}``; binary strings and ``*_bytes``
outputs are ``{"b64": "..."}``. EXPORT_DIR: an export, a directory of exports or a model_dir
(its newest complete export, a best exporter's first).
"""

import argparse
import base64
import contextlib
import json
import sys
from typing import Any

import numpy as np

from tfest_kit._checks import positive_int_arg
from tfest_kit.cli import _subparser

__all__ = ["add_parser", "run", "features_from_request", "predictions_to_json", "outputs_to_json"]


class RequestError(ValueError):
    """The request JSON does not have the TF Serving REST shape."""


def _decode(value: Any) -> Any:
    """``value`` with each ``{"b64": ...}`` decoded."""
    if isinstance(value, dict) and set(value) == {"b64"}:
        try:
            return base64.b64decode(value["b64"])
        except ValueError as e:  # binascii.Error
            raise RequestError(f'Invalid "b64" value {value["b64"]!r:.60}: {e}') from None
    return [_decode(v) for v in value] if isinstance(value, list) else value


def features_from_request(request: Any, input_names: list[str]) -> dict:
    """A TF Serving REST request body as input (or feature) name -> per-instance values.

    ``input_names``: the signature's, for instances given as plain values. Raises
    :class:`RequestError` (a ``ValueError``) if the body is not a TF Serving request.
    """
    if not isinstance(request, dict) or len({"instances", "inputs"} & set(request)) != 1:
        raise RequestError(
            'The request must be a JSON object with either "instances" (rows) or "inputs" '
            f"(columns). Got: {request!r:.80}"
        )
    if "inputs" in request:
        inputs = request["inputs"]
        if isinstance(inputs, dict):
            return {k: _decode(v) for k, v in inputs.items()}
        instances = inputs
    else:
        instances = request["instances"]
        if not isinstance(instances, list) or not instances:
            raise RequestError(f'"instances" must be a non-empty list. Got: {instances!r:.80}')
        if all(isinstance(i, dict) and set(i) != {"b64"} for i in instances):
            keys = set(instances[0])
            if any(set(row) != keys for row in instances):
                raise RequestError('Every object in "instances" must have the same keys')
            return {k: [_decode(row[k]) for row in instances] for k in sorted(keys)}
    if len(input_names) != 1:
        raise RequestError(f"The signature has inputs {input_names}: name them in each row")
    return {input_names[0]: _decode(instances)}


def _jsonable(value: Any, binary: bool = False) -> Any:
    """``value`` as JSON; bytes that are not UTF-8, or all when ``binary``, as ``{"b64": ...}``."""
    if isinstance(value, np.ndarray):
        value = list(value) if value.dtype == object else value.tolist()
    if isinstance(value, list):
        return [_jsonable(v, binary) for v in value]
    if isinstance(value, bytes):
        with contextlib.suppress(UnicodeDecodeError):
            if not binary:
                return value.decode("utf-8")
        return {"b64": base64.b64encode(value).decode("ascii")}
    return value.item() if isinstance(value, np.generic) else value


def predictions_to_json(outputs: dict, count: int) -> dict:
    """:class:`Predictor` outputs for ``count`` instances as TF Serving's row-format response:
    ``{"predictions": [...]}``, an object per instance, or a value when there is one output."""

    def row(name, i):
        array = np.asarray(outputs[name])
        value = array[i] if array.ndim and array.shape[0] == count else array
        return _jsonable(value, name.endswith("_bytes"))

    names = sorted(outputs)
    if len(names) == 1:
        return {"predictions": [row(names[0], i) for i in range(count)]}
    return {"predictions": [{k: row(k, i) for k in names} for i in range(count)]}


def outputs_to_json(outputs: dict) -> dict:
    """:class:`Predictor` outputs as TF Serving's column-format response: ``{"outputs": {name:
    [...]}}``, or ``{"outputs": [...]}`` when there is one output."""
    # TF Serving's rule: DT_STRING does not say whether it holds text, an output name does.
    columns = {k: _jsonable(np.asarray(outputs[k]), k.endswith("_bytes")) for k in sorted(outputs)}
    return {"outputs": next(iter(columns.values())) if len(columns) == 1 else columns}


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``predict`` on an ``argparse`` subparsers object."""
    summary = "run an exported SavedModel on a TF Serving style JSON request"
    parser = _subparser(subparsers, run, summary)
    parser.add_argument("export_dir", metavar="EXPORT_DIR", help="an export, its base or model_dir")
    parser.add_argument("request", metavar="REQUEST", help='the request file, "-": stdin')
    parser.add_argument("--json", action="store_true", help="print JSON (as it always does)")
    parser.add_argument(
        "--signature",
        help='signature (default: the request\'s "signature_name", else serving_default)',
    )
    parser.add_argument(
        "--batch_size", type=positive_int_arg, default=1024, help="largest batch per run"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Runs ``predict``; returns 0, 1 if no export is loadable, 2 for a bad request or signature."""
    from tfest_kit._predictor import _first_cause
    from tfest_kit._tf import tf
    from tfest_kit.cli.signature import find_export
    from tfest_kit.serving import ExportLoadError, ExportNotFoundError, Predictor

    try:
        with sys.stdin if args.request == "-" else open(args.request) as f:
            request = json.load(f)
    except (OSError, ValueError) as e:
        text = " (JSON text goes on stdin: REQUEST -)" * args.request.lstrip().startswith("{")
        print(f"predict: cannot read the request {args.request!r}: {e}{text}", file=sys.stderr)
        return 2
    named = request.get("signature_name") if isinstance(request, dict) else None
    signature = args.signature or named or "serving_default"
    try:
        export_dir = find_export(args.export_dir, "predict")
        predictor = Predictor(export_dir, signature, batch_size=args.batch_size)
    except (ExportNotFoundError, ExportLoadError, ValueError) as e:
        print(f"predict: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1  # a ValueError: an unknown signature
    with predictor:
        try:
            features = features_from_request(request, list(predictor.inputs))
            outputs = predictor(features)
        except (ValueError, TypeError) as e:
            print(f"predict: {e}", file=sys.stderr)
            return 2
        except tf.errors.OpError as e:  # the graph refused the values (not an image, say)
            print(f"predict: the model rejected the request: {_first_cause(e)}", file=sys.stderr)
            return 2
    if "inputs" in request:
        response = outputs_to_json(outputs)
    else:
        response = predictions_to_json(outputs, len(next(iter(features.values()))))
    print(json.dumps(response))
    return 0
