"""loss.png is drawn from events.jsonl read one line at a time into bounded curves: the file was read whole (a long
run's, or a sparse line of hundreds of MB, held in memory with its split lines), a named pipe in its place held the
end of training for good, and a line that was JSON but no event object (or not UTF-8) stopped the run's end with a
traceback."""

from __future__ import annotations

import json
import os
import threading

import pytest

from tests.peak_memory import traced_peak


@pytest.fixture(autouse=True)
def _imported():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401 - imported before memory is counted

    import engine.curves  # noqa: F401


def _log(step, loss):
    return json.dumps({"event": "log", "step": step, "loss": loss}) + "\n"


def test_a_long_run_is_drawn_in_bounded_memory(tmp_path, monkeypatch):
    from engine.train import plotting

    events = tmp_path / "events.jsonl"
    with open(events, "w") as fh:
        fh.writelines(_log(step, 2.0 - step / 400_000) for step in range(1, 300_001))
        fh.write(json.dumps({"event": "eval", "step": 300_000, "eval_loss": 1.5}) + "\n")
    import matplotlib.axes

    drawn = []

    plot = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", lambda self, *a, **k: drawn.append(a) or plot(self, *a, **k))
    written, peak = traced_peak(lambda: plotting.plot_loss(events, tmp_path / "loss.png"))
    assert peak < 16 << 20, f"{peak:,} bytes held for a {events.stat().st_size:,}-byte events file"
    assert written == tmp_path / "loss.png" and written.stat().st_size > 0
    steps, losses = drawn[0][:2]
    assert steps[0] == 1 and steps[-1] == 300_000 and len(steps) <= 4000  # first and last kept
    assert drawn[2][:2] == ((300_000,), (1.5,))


def test_a_sparse_line_is_passed_over(tmp_path):
    from engine.train.plotting import plot_loss

    events = tmp_path / "events.jsonl"
    with open(events, "wb") as fh:
        fh.write(_log(1, 2.0).encode())
        fh.truncate(256 << 20)  # a run of zero bytes, as a crash can leave
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n" + _log(2, 1.5).encode())
    written, peak = traced_peak(lambda: plot_loss(events, tmp_path / "loss.png"))
    assert written is not None and written.is_file()
    assert peak < 40 << 20, f"{peak:,} bytes held"


def test_lines_that_are_no_events_are_skipped(tmp_path):
    from engine.train.plotting import plot_loss

    events = tmp_path / "events.jsonl"
    events.write_bytes(b"".join([_log(1, 2.0).encode(), b"3\n", b'"text"\n', b'{"event": "log", "loss": 1.0}\n',
                                 b'{"event": "log", "step": "two", "loss": 1.0}\n', b'\xff\xfe not UTF-8\n',
                                 b'{"event": "log", "step": 3, "loss": true}\n', _log(4, 1.0).encode()]))
    assert plot_loss(events, tmp_path / "loss.png") == tmp_path / "loss.png"


def test_a_pipe_in_place_of_the_events_is_not_waited_on(tmp_path):
    from engine.train.plotting import plot_loss

    events = tmp_path / "events.jsonl"
    os.mkfifo(events)
    result, done = [], threading.Event()
    threading.Thread(target=lambda: (result.append(plot_loss(events, tmp_path / "loss.png")), done.set()),
                     daemon=True).start()
    if not done.wait(10):
        os.close(os.open(events, os.O_WRONLY | os.O_NONBLOCK))  # lets the reader go
        done.wait(10)
        pytest.fail("plot_loss waited on a named pipe")
    assert result == [None]
