"""Every private TensorFlow / Keras / Estimator name tfest_kit uses is listed in _tf.py, and exists.

An upgrade that removes or renames one fails here, naming it, rather than deep inside a run.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from tests.conftest import ROOT
from tfest_kit._tf import PRIVATE_NAMES, estimator, tf, tf2


def _instance(path: str, tmp_path):
    """An instance of the class at ``path`` ("module:attr.Class"), in a fresh graph."""
    if path.endswith(":estimator.Estimator"):
        return estimator.Estimator(lambda features, labels, mode: None, str(tmp_path))
    if path.endswith(":Model"):
        keras = tf2.keras  # the package KERAS_PACKAGE names ("keras" beside tf-keras is Keras 3)
        inputs = keras.Input((2,))
        return keras.Model(inputs, keras.layers.Dense(1)(inputs))
    if path.endswith(":data.Dataset"):
        return tf2.data.Dataset.range(4).batch(2)
    if path.endswith(":Variable"):
        return tf.Variable(1.0)
    if path.endswith(":train.Saver"):
        tf.Variable(1.0)
        return tf.train.Saver()
    if path.endswith(":Session"):
        return tf.Session()
    module, _, attrs = path.partition(":")
    obj = importlib.import_module(module)
    for attr in attrs.split("."):
        obj = getattr(obj, attr)
    return obj()


@pytest.mark.parametrize("name", sorted(PRIVATE_NAMES))
def test_private_name_still_exists(name, tmp_path):
    if "#" in name:
        module, word = name.split("#")
        source = inspect.getsource(importlib.import_module(module))
        assert re.search(rf"\b{re.escape(word)}\b", source), f"{name}: not in {module}"
        return
    module, _, attrs = name.partition(":")
    with tf.Graph().as_default():
        if "()." in attrs:
            cls, attr = attrs.split("().")
            obj = _instance(f"{module}:{cls}", tmp_path)
            assert hasattr(obj, attr), f"{name}: {type(obj).__name__} has no {attr}"
            return
        obj = importlib.import_module(module)
        for attr in attrs.split("."):
            assert hasattr(obj, attr), f"{name}: {obj!r} has no {attr}"
            obj = getattr(obj, attr)


def test_private_modules_used_are_listed():
    # A private module read anywhere in the package must be one the list names.
    listed = {re.split("[:#]", name)[0] for name in PRIVATE_NAMES}
    private_module = re.compile(
        r"\b((?:tensorflow|tensorflow_estimator)\.(?:python|core)(?:\.\w+)*|keras\.src(?:\.\w+)*)"
    )
    unlisted = []
    for path in sorted((ROOT / "tfest_kit").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#")[0]
            if not re.match(r"\s*(from|import)\s", code) and "import_module(" not in code:
                continue
            for module in private_module.findall(code):
                # "from package import module" names the package: a listed module inside it.
                if not any(m == module or m.startswith(module + ".") for m in listed):
                    unlisted.append(f"{path.relative_to(ROOT)}:{number}: {module}")
    assert not unlisted, "private modules not in _tf.PRIVATE_NAMES:\n" + "\n".join(unlisted)
