"""The progress bar of long work (escha_jit/progress.py): what it writes to a log and to a terminal."""
import io

from escha_jit.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_log_gets_a_line_per_step():
    out = io.StringIO()
    bar = Progress(3, "tune", stream=out)
    for what in ("a", "b", "c"):
        bar.update(what)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("tune [") and lines[0].endswith(" a")
    assert "3/3" in lines[2] and "#" * 30 in lines[2]


def test_log_lines_throttled_but_the_last_kept():
    out = io.StringIO()
    bar = Progress(1000, "tune: compile", stream=out, min_interval_s=3600.0)
    for i in range(1000):
        bar.update(f"spec{i}")
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "1000/1000" in lines[0] and lines[0].endswith("spec999")


def test_terminal_rewrites_one_line_and_ends_it():
    out = _Terminal()
    bar = Progress(2, "warmup", stream=out, min_interval_s=3600.0)
    bar.update("x")
    bar.update("y")
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n") and "2/2" in text     # a terminal is not throttled


def test_disabled_writes_nothing():
    out = io.StringIO()
    bar = Progress(2, "tune", stream=out, enabled=False)
    bar.update("x")
    bar.update("y")
    assert out.getvalue() == "" and bar.done == 2
