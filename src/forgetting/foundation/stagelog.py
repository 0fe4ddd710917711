"""A stage's log file: one line per event, also echoed to stderr when asked."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from types import TracebackType


class StageLog:
    """Append lines to ``path`` (created with its folders); ``None`` writes nowhere but ``echo``."""

    def __init__(self, path: str | os.PathLike[str] | None, *, echo: bool = False) -> None:
        self.path = Path(path) if path else None
        self.echo = echo
        self._fh = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def line(self, message: str, *, echo: bool | None = None) -> None:
        """Log one line (whitespace collapsed); ``echo`` overrides the log's own setting."""
        text = " ".join(str(message).split())
        if self._fh is not None:
            self._fh.write(text + "\n")
            self._fh.flush()
        if self.echo if echo is None else echo:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> StageLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is not None:  # in the file; whoever catches it prints it (one error line, not two)
            self.line(stop_line(exc), echo=False)
        self.close()


def stop_line(exc: BaseException) -> str:
    """The log line a stage stops on: ``error: …`` with the exception's message; an interrupt
    or a termination says so (their own messages are empty or a bare exit status), and an
    exception without a message is named by its type, so no log ends in a bare ``error:``."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (SIGINT); the next invocation redoes what did not finish"
    if isinstance(exc, SystemExit):
        code = exc.code
        how = f"exit status {code}"
        if isinstance(code, int) and code > 128:
            with contextlib.suppress(ValueError):
                how = f"{signal.Signals(code - 128).name}"
        return f"stopped ({how}); the next invocation redoes what did not finish"
    message = " ".join(str(exc).split())
    return f"error: {message or type(exc).__name__}"
