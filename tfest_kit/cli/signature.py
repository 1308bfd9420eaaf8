"""``python -m tfest_kit signature EXPORT_DIR``: what an exported model takes and returns.

Prints every signature of the SavedModel with the name, dtype and shape of each input and output
(-1 = any size), like ``saved_model_cli show --all``. EXPORT_DIR may be one export or a
directory of numbered exports (the newest complete one is used).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["add_parser", "run", "format_signatures", "export_hint"]


def _subdirs(path: str) -> list[str]:
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    return [os.path.join(path, n) for n in names if os.path.isdir(os.path.join(path, n))]


def export_hint(path: str) -> str:
    """What to pass instead of ``path``, which holds no export (``""`` if nothing to suggest).

    A model_dir or its ``export/`` is the usual mistake: name the export bases below it. A base
    holding only ``temp-*`` directories has an export in progress (or one that crashed).
    """
    from tfest_kit._model_dir import complete_exports

    export = os.path.join(path, "export")
    bases = [
        d
        for d in [*_subdirs(path), *_subdirs(export)]
        if not os.path.basename(d).isdigit() and complete_exports(d)
    ]
    if export not in bases and complete_exports(export):
        bases.append(export)
    if bases:
        return f" Exports found below it: {bases}; pass one of those."
    temps = [
        d
        for parent in [path, export, *_subdirs(export)]
        for d in _subdirs(parent)
        if os.path.basename(d).startswith("temp-")
    ]
    if temps:
        return (
            f" {temps} are exports still being written or left by one that crashed: wait "
            "for the export to finish, or export again."
        )
    if os.path.exists(os.path.join(path, "checkpoint")):
        return (
            " It is a model_dir without exports: write one with "
            "Estimator.export_saved_model(MODEL_DIR/export, serving_input_receiver_fn) or an "
            "EvalSpec exporter (tfest_kit.serving.best_exporter)."
        )
    return ""


def _as_dict(signatures: dict) -> dict:
    def tensor(spec) -> dict:
        shape = None if spec.shape.rank is None else [-1 if d is None else d for d in spec.shape]
        return {"dtype": spec.dtype.name, "shape": shape, "tensor": spec.name}

    return {
        name: {
            "method": sig["method"],
            **{
                side: {k: tensor(s) for k, s in sig[side].items()} for side in ("inputs", "outputs")
            },
        }
        for name, sig in signatures.items()
    }


def format_signatures(export_dir: str, signatures: dict) -> str:
    """Formats :func:`tfest_kit.serving.read_signatures` output as text, one tensor per line."""
    lines = [f"SavedModel: {export_dir}"]
    for name, sig in _as_dict(signatures).items():
        lines.append(f"\nsignature_def[{name!r}]  method: {sig['method']}")
        for side in ("inputs", "outputs"):
            lines.append(f"  {side}:")
            for key, t in sig[side].items():
                shape = "unknown rank" if t["shape"] is None else f"shape {t['shape']}"
                lines.append(f"    {key}: {t['dtype']} {shape}  ({t['tensor']})")
    return "\n".join(lines) + "\n"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``signature`` on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "signature",
        help="show inputs and outputs of an exported SavedModel",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument("export_dir", metavar="EXPORT_DIR", help="an export or its base dir")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Runs ``signature``; returns 0, or 1 if no export is found or it cannot be loaded."""
    from tfest_kit.serving import ExportLoadError, ExportNotFoundError, read_signatures

    try:
        export_dir, signatures = read_signatures(args.export_dir)
    except (ExportLoadError, ValueError, ExportNotFoundError) as e:  # ValueError: no "serve"
        hint = export_hint(args.export_dir) if isinstance(e, ExportNotFoundError) else ""
        print(f"signature: {e}{hint}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"export_dir": export_dir, "signatures": _as_dict(signatures)}, indent=1))
    else:
        sys.stdout.write(format_signatures(export_dir, signatures))
    return 0
