"""``python -m tfest_kit signature EXPORT_DIR``: what an exported model takes and returns.

Prints each signature's inputs and outputs (name, dtype, shape; -1 = any), like
``saved_model_cli show --all``. EXPORT_DIR as for ``predict`` (the export used goes to stderr).
"""

import argparse
import json
import os
import sys

from tfest_kit.cli import _subparser

__all__ = ["add_parser", "run", "find_export", "format_signatures"]

_SIDES = ("inputs", "outputs")


def _as_dict(signatures: dict) -> dict:
    def tensor(spec) -> dict:
        shape = None if spec.shape.rank is None else [-1 if d is None else d for d in spec.shape]
        return {"dtype": spec.dtype.name, "shape": shape, "tensor": spec.name}

    def sides(sig) -> dict:
        return {side: {k: tensor(s) for k, s in sig[side].items()} for side in _SIDES}

    return {name: {"method": sig["method"], **sides(sig)} for name, sig in signatures.items()}


def find_export(path: str, command: str) -> str:
    """``path`` if an export, else the newest under it, else of a model_dir's (``inspect.exports``)
    a best exporter's newest, else the newest; named on stderr. Else ``ExportNotFoundError``."""
    from tfest_kit._predictor import _resolve_export_dir
    from tfest_kit.cli.inspect import exports
    from tfest_kit.serving import ExportNotFoundError

    try:
        export_dir = _resolve_export_dir(path)
    except ExportNotFoundError:
        if not (newest := [e for e in exports(path) if e["newest"]]):
            raise
        newest.sort(key=lambda e: (e["best_exporter"], int(os.path.basename(e["path"]))))
        export_dir = newest[-1]["path"]
    if export_dir != path:
        print(f"{command}: using the export {export_dir}", file=sys.stderr)
    return export_dir


def format_signatures(export_dir: str, signatures: dict) -> str:
    """Formats :func:`tfest_kit.serving.read_signatures` output as text, one tensor per line."""
    lines = [f"SavedModel: {export_dir}"]
    for name, sig in _as_dict(signatures).items():
        lines.append(f"\nsignature_def[{name!r}]  method: {sig['method']}")
        for side in _SIDES:
            lines.append(f"  {side}:")
            for key, t in sig[side].items():
                shape = "unknown rank" if t["shape"] is None else f"shape {t['shape']}"
                lines.append(f"    {key}: {t['dtype']} {shape}  ({t['tensor']})")
    return "\n".join(lines) + "\n"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Registers ``signature`` on an ``argparse`` subparsers object."""
    parser = _subparser(subparsers, run, "show inputs and outputs of an exported SavedModel")
    parser.add_argument("export_dir", metavar="EXPORT_DIR", help="an export, its base or model_dir")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def run(args: argparse.Namespace) -> int:
    """Runs ``signature``; returns 0, or 1 if no export is found or it cannot be loaded."""
    from tfest_kit.serving import ExportLoadError, ExportNotFoundError, read_signatures

    try:
        export_dir, signatures = read_signatures(find_export(args.export_dir, "signature"))
    except (ExportLoadError, ValueError, ExportNotFoundError) as e:  # ValueError: no "serve"
        print(f"signature: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"export_dir": export_dir, "signatures": _as_dict(signatures)}, indent=1))
    else:
        sys.stdout.write(format_signatures(export_dir, signatures))
    return 0
