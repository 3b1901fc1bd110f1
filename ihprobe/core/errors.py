"""The one exception type users see.

Every error that a user can fix (a bad path, an unsupported architecture, a probe that does not
fit the context) is an :class:`IhprobeError` whose message says what was wrong and what to do.
The CLI prints it as one line and exits with status 2.
"""


class IhprobeError(ValueError):
    """A problem with the caller's input; the message says how to fix it.

    Example:
        >>> raise IhprobeError("n=0: pass a positive probe length, e.g. n=32.")
        Traceback (most recent call last):
        ihprobe.core.errors.IhprobeError: n=0: pass a positive probe length, e.g. n=32.
    """
