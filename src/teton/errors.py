"""The one error type users see: a bad input, reported as a single line."""

from __future__ import annotations


class SpecError(ValueError):
    """A bad spec or argument: names the field, the value and what is allowed.

    The CLI prints ``str(err)`` on one line and exits with code 2.
    """

    def __init__(self, field: str, value: object, allowed: str, where: str | None = None):
        self.field, self.value, self.allowed, self.where = field, value, allowed, where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}{field} = {value!r}: {allowed}")


def closest(name: str, choices: list[str] | tuple[str, ...] | set[str], n: int = 3) -> str:
    """'did you mean ...' text for an unknown name."""
    import difflib

    hits = difflib.get_close_matches(name, sorted(choices), n=n, cutoff=0.4)
    known = ", ".join(sorted(choices))
    if hits:
        return f"unknown; did you mean {' or '.join(hits)}? (known: {known})"
    return f"unknown; known: {known}"
