"""A minimal progress bar on stderr (a line per update when stderr is not a terminal)."""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


class Progress:
    """``min_interval_s``: where the stream is not a terminal (a log), at most one line per this many
    seconds, and the last one (for bars of thousands of short steps, e.g. compiling)."""

    def __init__(self, total: int, label: str, stream: Optional[TextIO] = None, enabled: bool = True,
                 min_interval_s: float = 0.0):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = self.last = time.perf_counter()
        self.min_interval_s = min_interval_s

    def update(self, what: str = "", n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        if not self.tty and self.done < self.total and now - self.last < self.min_interval_s:
            return
        self.last = now
        frac = self.done / self.total
        bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
        line = f"{self.label} [{bar}] {self.done}/{self.total} {now - self.t0:6.1f}s {what}"
        if self.tty:
            self.stream.write("\r" + line[:150].ljust(150))
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
