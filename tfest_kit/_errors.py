"""The one exception base of tfest_kit."""

from __future__ import annotations

__all__ = ["TfestKitError"]


class TfestKitError(Exception):
    """Base class of errors raised by tfest_kit for problems of the environment or of files.

    Wrong arguments raise ``ValueError`` / ``TypeError`` as Python code usually does.
    """
