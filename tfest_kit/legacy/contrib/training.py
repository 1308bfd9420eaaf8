"""``tf.contrib.training`` as TF 1.15 had it: ``HParams`` (a port), checkpoints, evaluation.

Nothing maintained carries ``HParams`` on, so this is a port of TF 1.15's behaviour: values
typed at ``add_hparam`` (the type of the value, or of a list's first element), overridden by
``parse("a=1,b=[x,y],c[0]=2")``, ``parse_json``, ``override_from_dict`` and ``set_hparam``,
which cast compatible values (an int for a float parameter) and refuse the rest (a float for
an int, a string for a number, a bool for anything else) with ``ValueError``; unknown names
raise ``KeyError`` from ``set_hparam``/``override_from_dict`` and ``ValueError`` from
``parse``.  ``to_json``, ``values``, ``get``, ``del_hparam``, ``in`` and ``str``/``repr`` match
TF 1.15.  The ``HParamDef`` proto (``hparam_def=``, ``to_proto``) is not served: its
``hparam_pb2`` module went with ``tf.contrib``.

The evaluation loop (``evaluate_once``, ``evaluate_repeatedly``, ``StopAfterNEvalsHook``,
``SummaryAtEndHook``, ``get_or_create_eval_step``) is ``tf_slim.training.evaluation`` and the
training helpers (``create_train_op``, ``train``, ``multiply_gradients``, ``clip_gradient_norms``
…) are ``tf_slim.training.training``: TF 1.15's modules, moved there unchanged; ``tf_slim`` is
imported when a script first reaches one of them.

Example:

    hparams = HParams(learning_rate=0.1, layers=[64, 32], activation="relu")
    hparams.parse("learning_rate=0.3,layers=[128,64]")
    hparams.to_json()      # '{"learning_rate": 0.3, "layers": [128, 64], "activation": "relu"}'
"""

from __future__ import annotations

import importlib
import json
import numbers
import re
from collections.abc import Mapping
from typing import Any, Callable, Optional

from tfest_kit._tf import tf

__all__ = [
    "HParams",
    "parse_values",
    "checkpoints_iterator",
    "wait_for_new_checkpoint",
    "BACKING",
]
# Served through __getattr__ below, from tf_slim.
_FROM_SLIM = (
    "evaluate_once",
    "evaluate_repeatedly",
    "StopAfterNEvalsHook",
    "SummaryAtEndHook",
    "get_or_create_eval_step",
)
# TF 1.15's contrib/training/python/training/training.py, tf_slim's training/training.py.
_FROM_SLIM_TRAINING = (
    "add_gradients_summaries",
    "clip_gradient_norms",
    "clip_gradient_norms_fn",
    "create_train_op",
    "multiply_gradients",
    "train",
)

BACKING = {
    "HParams": "tfest_kit.legacy.contrib.training.HParams (a port of TF 1.15's)",
    "parse_values": "tfest_kit.legacy.contrib.training.parse_values (a port of TF 1.15's)",
    "checkpoints_iterator": "tf.compat.v1.train.checkpoints_iterator",
    "wait_for_new_checkpoint": "tf.compat.v1.train.checkpoints_iterator",
    **{name: f"tf_slim.training.evaluation.{name}" for name in _FROM_SLIM},
    **{name: f"tf_slim.training.training.{name}" for name in _FROM_SLIM_TRAINING},
}


def __getattr__(name: str) -> Any:
    # tf_slim costs a second to import: only when a script reaches one of its names.
    if name in _FROM_SLIM:
        return getattr(importlib.import_module("tf_slim.training.evaluation"), name)
    if name in _FROM_SLIM_TRAINING:
        return getattr(importlib.import_module("tf_slim.training.training"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


checkpoints_iterator = tf.train.checkpoints_iterator


def wait_for_new_checkpoint(checkpoint_dir, last_checkpoint=None, seconds_to_sleep=1, timeout=None):
    """``tf.contrib.training.wait_for_new_checkpoint``: the next checkpoint path, or None.

    Args:
      checkpoint_dir: directory of checkpoints.
      last_checkpoint: the last checkpoint path seen, or None.
      seconds_to_sleep: seconds between polls.
      timeout: seconds to wait at most; None waits forever.

    Returns:
      The new checkpoint's path, or None on timeout.

    Example:

        path = wait_for_new_checkpoint(model_dir, last_checkpoint, timeout=60)
    """
    for path in tf.train.checkpoints_iterator(
        checkpoint_dir, min_interval_secs=seconds_to_sleep, timeout=timeout
    ):
        if path != last_checkpoint:
            return path
    return None


# One clause of parse(): name, an optional [index], "=", then one value or a [list].
_CLAUSE = re.compile(
    r"(?P<name>[a-zA-Z][\w.]*)(\[\s*(?P<index>\d+)\s*\])?\s*=\s*"
    r"((?P<val>[^,\[]*)|\[(?P<vals>[^\]]*)\])($|,\s*)"
)


def _parse_error(name: str, kind: type, value: str, values: str) -> ValueError:
    return ValueError(
        f"Could not parse hparam '{name}' of type '{kind.__name__}' with value '{value}' in "
        f"{values}"
    )


def _parser(name: str, kind: type, values: str) -> Callable[[str], Any]:
    if kind is not bool:
        return kind

    def parse_bool(text: str) -> bool:
        if text in ("true", "True"):
            return True
        if text in ("false", "False"):
            return False
        try:
            return bool(int(text))
        except ValueError:
            raise _parse_error(name, kind, text, values) from None

    return parse_bool


def parse_values(values: str, type_map: Mapping[str, type], ignore_unknown: bool = False) -> dict:
    """Parses ``"name=value,list=[a,b],arr[1]=3"`` into ``{name: value}`` (TF 1.15's rules).

    Args:
      values: comma-separated ``name=value`` clauses; a list is ``[v1,v2]``; ``name[i]=v``
        sets one element (returned as ``{name: {i: v}}``).
      type_map: name -> type of the value (of a list's elements).
      ignore_unknown: skip names not in ``type_map`` instead of raising.

    Returns:
      name -> value, list of values, or ``{index: value}``.

    Raises:
      ValueError: for a malformed clause, an unknown name, a value that does not parse as its
        type, a list assigned to an index, or a name assigned twice.

    Example:

        parse_values('a=1,b=[2,3]', {'a': int, 'b': int})   # {'a': 1, 'b': [2, 3]}
    """
    result: dict = {}
    pos = 0
    while pos < len(values):
        match = _CLAUSE.match(values, pos)
        if not match:
            raise ValueError(f"Malformed hyperparameter value: {values[pos:]}")
        pos = match.end()
        name, index = match.group("name"), match.group("index")
        if name not in type_map:
            if ignore_unknown:
                continue
            raise ValueError(f"Unknown hyperparameter type for {name}")
        kind = type_map[name]
        parse = _parser(name, kind, values)
        if match.group("val") is not None:
            text = match.group("val")
            try:
                value = parse(text)
            except ValueError:
                raise _parse_error(name, kind, text, values) from None
            if index is None:
                if name in result:
                    raise ValueError(f"Multiple assignments to variable '{name}' in {values}")
                result[name] = value
            else:
                slots = result.setdefault(name, {})
                if not isinstance(slots, dict) or int(index) in slots:
                    which = name if not isinstance(slots, dict) else f"{name}[{index}]"
                    raise ValueError(f"Multiple assignments to variable '{which}' in {values}")
                slots[int(index)] = value
        elif match.group("vals") is not None:
            if index is not None:
                raise ValueError("Assignment of a list to a list index.")
            if name in result:
                raise ValueError(f"Multiple assignments to variable '{name}' in {values}")
            text = match.group("vals")
            try:
                result[name] = [parse(e) for e in re.split("[ ,]", text) if e]
            except ValueError:
                raise _parse_error(name, kind, text, values) from None
        else:
            raise _parse_error(name, kind, "", values)
    return result


def _cast(name: str, kind: type, value: Any) -> Any:
    """``value`` as ``kind`` where TF 1.15 allowed it (an int for a float, not the reverse)."""
    if type(value) is kind or issubclass(kind, type(None)):
        return value
    refused = (
        (issubclass(kind, (str, bytes)) and not isinstance(value, (str, bytes)))
        or (issubclass(kind, bool) != isinstance(value, bool))
        or (issubclass(kind, numbers.Integral) and not isinstance(value, numbers.Integral))
        or (issubclass(kind, numbers.Number) and not isinstance(value, numbers.Number))
    )
    if refused:
        raise ValueError(f"Could not cast hparam '{name}' of type '{kind}' from value {value!r}")
    return kind(value)


class HParams:
    """``tf.contrib.training.HParams``: named, typed hyperparameters (TF 1.15's behaviour).

    Args:
      hparam_def: not supported (the ``HParamDef`` proto went with ``tf.contrib``).
      model_structure: kept and returned by ``get_model_structure``.
      **kwargs: name -> value (int, float, bool, str, or a non-empty list of one of those).

    Raises:
      ValueError: for a ``hparam_def``, a reserved name (an attribute of the class) or an
        empty list.

    Example:

        hparams = HParams(batch_size=32, dropout=0.1)
        hparams.parse("batch_size=64")
    """

    _HAS_DYNAMIC_ATTRIBUTES = True

    def __init__(self, hparam_def: Any = None, model_structure: Any = None, **kwargs: Any):
        self._hparam_types: dict[str, tuple[type, bool]] = {}
        self._model_structure = model_structure
        if hparam_def is not None:
            raise ValueError(
                "`hparam_def` (an HParamDef proto) is not supported by the legacy runner: "
                "pass the values as keyword arguments or use HParams().parse_json(text). "
                f"Got: {type(hparam_def).__name__}"
            )
        for name, value in kwargs.items():
            self.add_hparam(name, value)

    def add_hparam(self, name: str, value: Any) -> None:
        """Adds a hyperparameter; its type is the value's (a list's: its first element's)."""
        if getattr(self, name, None) is not None:
            raise ValueError(f"Hyperparameter name is reserved: {name}")
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"Multi-valued hyperparameters cannot be empty: {name}")
            self._hparam_types[name] = (type(value[0]), True)
        else:
            self._hparam_types[name] = (type(value), False)
        setattr(self, name, value)

    def set_hparam(self, name: str, value: Any) -> None:
        """Sets an existing hyperparameter, casting a compatible value to its type.

        Raises:
          KeyError: if ``name`` is not a hyperparameter.
          ValueError: for a list given to a single value or the reverse, or a value of an
            incompatible type.
        """
        kind, is_list = self._hparam_types[name]
        if isinstance(value, list):
            if not is_list:
                raise ValueError(f"Must not pass a list for single-valued parameter: {name}")
            setattr(self, name, [_cast(name, kind, v) for v in value])
        else:
            if is_list:
                raise ValueError(f"Must pass a list for multi-valued parameter: {name}.")
            setattr(self, name, _cast(name, kind, value))

    def del_hparam(self, name: str) -> None:
        """Removes a hyperparameter; nothing happens if there is none of that name."""
        if hasattr(self, name):
            delattr(self, name)
            del self._hparam_types[name]

    def parse(self, values: str) -> HParams:
        """Overrides values from ``"name=value,…"`` (see :func:`parse_values`); returns self."""
        type_map = {name: kind for name, (kind, _) in self._hparam_types.items()}
        return self.override_from_dict(parse_values(values, type_map))

    def override_from_dict(self, values_dict: Mapping[str, Any]) -> HParams:
        """Sets each ``name: value`` with :meth:`set_hparam`; returns self."""
        for name, value in values_dict.items():
            if isinstance(value, dict):  # "arr[1]=3" from parse(): one element of a list
                current = list(getattr(self, name))
                for index, element in value.items():
                    current[index] = element
                value = current
            self.set_hparam(name, value)
        return self

    def set_from_map(self, values_map: Mapping[str, Any]) -> HParams:
        """Deprecated in TF 1.15: :meth:`override_from_dict`."""
        return self.override_from_dict(values_map)

    def set_model_structure(self, model_structure: Any) -> None:
        self._model_structure = model_structure

    def get_model_structure(self) -> Any:
        return self._model_structure

    def to_json(
        self, indent: Optional[int] = None, separators: Any = None, sort_keys: bool = False
    ) -> str:
        """The values as a JSON object (``json.dumps`` arguments as in TF 1.15)."""
        return json.dumps(self.values(), indent=indent, separators=separators, sort_keys=sort_keys)

    def parse_json(self, values_json: str) -> HParams:
        """Overrides values from a JSON object; returns self."""
        return self.override_from_dict(json.loads(values_json))

    def values(self) -> dict:
        """name -> value of every hyperparameter."""
        return {name: getattr(self, name) for name in self._hparam_types}

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` if it is a hyperparameter, else ``default``.

        Raises:
          ValueError: if ``key`` exists and ``default`` is not compatible with its type.
        """
        if key not in self._hparam_types:
            return default
        if default is not None:
            kind, is_list = self._hparam_types[key]
            described = f"list<{kind}>" if is_list else str(kind)
            problem = f"Hparam '{key}' of type '{described}' is incompatible with default={default}"
            if is_list != isinstance(default, list):
                raise ValueError(problem)
            try:
                for value in default if is_list else [default]:
                    _cast(key, kind, value)
            except ValueError as e:
                raise ValueError(f"{problem}. {e}") from None
        return getattr(self, key)

    def __contains__(self, key: str) -> bool:
        return key in self._hparam_types

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values().items())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self.values().items())})"
