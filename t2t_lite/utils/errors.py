"""User-facing errors: mistakes a user can fix, reported in one line instead of a traceback."""

import difflib


class UserError(Exception):
    """A mistake in flags, names or data; the CLIs print the message and exit with status 2."""


def did_you_mean(name, choices):
    """' (did you mean a, b?)' for the closest choices, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else ""
