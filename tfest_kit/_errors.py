"""The one exception base of tfest_kit."""

__all__ = ["TfestKitError", "DataError"]


class TfestKitError(Exception):
    """A problem of the environment or of files (wrong arguments raise ValueError / TypeError)."""


class DataError(TfestKitError, ValueError):
    """The data does not match what the builder was told: missing files, columns or keys, bad rows.

    A ``ValueError`` too, so ``except ValueError`` keeps working.
    """
