"""The one exception base of tfest_kit."""

__all__ = ["TfestKitError"]


class TfestKitError(Exception):
    """A problem of the environment or of files (wrong arguments raise ValueError / TypeError)."""
