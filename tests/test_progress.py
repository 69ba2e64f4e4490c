"""Progress bars: on stderr with count, rate and ETA on a terminal; nothing at all otherwise."""

from __future__ import annotations

import io

from memray import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal_shows_count_rate_and_eta(monkeypatch):
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    with progress.bar(200, "embedding messages", unit="row") as shown:
        assert not shown.disable
        shown.update(50)
        shown.update(150)
    text = err.getvalue()
    assert "embedding messages" in text and "200/200" in text and "row/s" in text and "<00:00" in text


def test_no_terminal_no_bar(monkeypatch):
    err = io.StringIO()  # a pipe or a log file: isatty() is False
    monkeypatch.setattr("sys.stderr", err)
    with progress.bar(200, "embedding messages", unit="row") as shown:
        assert shown.disable
        shown.update(200)
    assert err.getvalue() == ""


def test_a_step_is_one_plain_line(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    progress.step("starting a local Ray")
    line = err.getvalue()
    assert line.endswith("] memray: starting a local Ray\n") and line.count("\n") == 1 and "\x1b" not in line
