"""One error type for bad input: it always names the file, and the line and field when known."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input. Message format: ``FILE:LINE: field 'F': what is wrong``."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, field: str | None = None):
        self.file, self.line, self.field, self.detail = file, line, field, message
        where = file or "<input>"
        if line is not None:
            where += f":{line}"
        what = f"field '{field}': {message}" if field else message
        super().__init__(f"{where}: {what}")


class InputErrors(InputError):
    """Several problems found in one pass (validation reports all of them, not just the first)."""

    def __init__(self, errors: list[InputError]):
        self.errors = errors
        ValueError.__init__(self, "\n".join(str(e) for e in errors))
