"""tfest_kit: a thin compatibility layer over the TensorFlow Estimator API (TensorFlow 2.15, 2.21).

Submodules load on first use; ``import tfest_kit`` prints nothing and turns TensorFlow's
deprecation warnings off, as ``logs.setup`` does (``logs.setup(show_deprecations=True)``).
"""

import importlib
import sys
from typing import Any

from tfest_kit._checks import TfestKitError

try:
    from tfest_kit import _tf  # noqa: F401  (checks the TensorFlow version at import)
except ImportError:
    # `python -m tfest_kit doctor` explains this very error, so it must get to run.
    if sys.argv[:2] != ["-m", "doctor"]:
        raise
else:
    from tfest_kit.logs import _set_deprecation_warnings

    _set_deprecation_warnings(False)  # and the noise filter on; handlers are left alone

__version__ = "0.1.0"

_SUBMODULES = frozenset(
    """cluster config hooks inputs keras_bridge legacy
    logs metrics model_fn serving tpu training""".split()
)
_FUNCTIONS = {"train_and_evaluate": "training", "run_config": "config", "session_config": "config"}

__all__ = ["TfestKitError", "__version__", *sorted(_SUBMODULES), *sorted(_FUNCTIONS)]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"tfest_kit.{name}")
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(f"tfest_kit.{_FUNCTIONS[name]}"), name)
    raise AttributeError(f"module 'tfest_kit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
