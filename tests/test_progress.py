"""The CLI's progress bar: drawn on a terminal, silent otherwise."""

import io

from conftest import Terminal
from dispatchprof.cli.progress import ProgressBar


def test_bar_on_a_terminal_and_silence_elsewhere():
    tty = Terminal()
    bar = ProgressBar(tty, width=10)
    bar(3, 4, "decode steps counted")
    bar(5, 0, "samples")
    bar.close()
    text = tty.getvalue()
    assert "\r[#######...] decode steps counted: 3 of 4" in text and "\rsamples: 5" in text
    pipe = io.StringIO()
    quiet = ProgressBar(pipe)
    quiet(1, 2, "x")
    quiet.close()
    assert pipe.getvalue() == ""
