"""tfest_kit: a thin compatibility layer over the TensorFlow Estimator API (TensorFlow 2.15).

Submodules are imported on first use, so ``import tfest_kit`` costs little more than importing
TensorFlow itself and prints nothing. Importing it turns TensorFlow's deprecation warnings
(and Keras' for the legacy ``tf.layers``) off for the whole process, as :func:`logs.setup`
does; ``logs.setup(show_deprecations=True)`` turns them back on.

Example:

    import tfest_kit
    from tfest_kit import model_fn, tpu

    estimator = tpu.TPUEstimator(model_fn.classifier(network, num_classes=2), ...)
    tfest_kit.train_and_evaluate(estimator, train_input_fn, eval_input_fn, max_steps=1000)
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from tfest_kit._errors import TfestKitError

try:
    from tfest_kit import _tf  # noqa: F401  (checks the TensorFlow version at import)
except ImportError:
    # `python -m tfest_kit doctor` says what to install for exactly this error, so it must get
    # to run (while Python imports the package to find its __main__, sys.argv[0] is "-m").
    if sys.argv[:2] != ["-m", "doctor"]:
        raise
else:
    from tfest_kit.logs import _quiet_by_default

    _quiet_by_default()

__version__ = "0.1.0"

_SUBMODULES = frozenset(
    {
        "cluster",
        "config",
        "hooks",
        "inputs",
        "keras_bridge",
        "legacy",
        "logs",
        "metrics",
        "model_fn",
        "serving",
        "tpu",
        "training",
    }
)
# Top-level conveniences and the submodule each comes from.
_FUNCTIONS = {
    "train_and_evaluate": "training",
    "run_config": "config",
    "session_config": "config",
}

__all__ = ["TfestKitError", "__version__", *sorted(_SUBMODULES), *sorted(_FUNCTIONS)]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"tfest_kit.{name}")
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(f"tfest_kit.{_FUNCTIONS[name]}"), name)
    raise AttributeError(f"module 'tfest_kit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
