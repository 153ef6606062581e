"""A minimal progress bar on stderr (a line per update when stderr is not a terminal)."""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


class Progress:
    def __init__(self, total: int, label: str, stream: Optional[TextIO] = None, enabled: bool = True):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()

    def update(self, what: str = "", n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        frac = self.done / self.total
        bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
        line = f"{self.label} [{bar}] {self.done}/{self.total} {time.perf_counter() - self.t0:6.1f}s {what}"
        if self.tty:
            self.stream.write("\r" + line[:150].ljust(150))
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
