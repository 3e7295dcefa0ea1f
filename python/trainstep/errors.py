"""The exporter's error types: a capture that cannot be done says why, and
where in the user's code (capture_errors.py finds the place)."""


class CaptureError(Exception):
    """A step that cannot be captured. `where` is the user's 'FILE:LINE'
    when known; the CLI prints it in front of the message."""

    def __init__(self, message, where=None):
        super().__init__(message)
        self.where = where


class DataDependentError(CaptureError):
    """The step's Python code or shapes depend on tensor values."""


class InputWriteError(CaptureError):
    """The model writes in place into its example batch."""


class TensorSubclassError(CaptureError):
    """State or batch tensors of a type the capture cannot trace."""


class BatchLayoutError(CaptureError):
    """The example batch's tensors disagree on the batch dimension."""
