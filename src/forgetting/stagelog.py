"""A stage's log file: one line per event, also echoed to stderr when asked."""

from __future__ import annotations

import os
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
        if exc is not None:
            self.line(f"error: {exc}", echo=False)  # the caller reports it (the command line, workflow.job)
        self.close()
