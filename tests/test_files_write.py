"""The one output-writing path (dispatchprof.results.files): regular files only, symlinks only to
the user's own regular files, permissions kept, temporaries removed on exceptions, Ctrl-C and
SIGTERM, and every command's outputs checked before any work."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from dispatchprof import OpCounter
from dispatchprof.cli import main
from dispatchprof.errors import UnsafeFileError
from dispatchprof.results import files
from dispatchprof.results.files import check_output_paths, write_atomic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOWED = r"an output is a new file, a regular file, or a symlink to a regular file you own"


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_devices_fifos_and_folders_are_refused_and_left_alone(tmp_path, fifo):
    """/dev/null, a FIFO and a folder are refused naming the path and what is allowed; none is replaced."""
    for path, kind in (("/dev/null", "a character device"), (fifo, r"a FIFO \(named pipe\)"),
                       (tmp_path, "a folder")):
        with pytest.raises(UnsafeFileError, match=rf"^{path}: is {kind}; {ALLOWED}$"):
            write_atomic(path, "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["pipe"]


def test_a_symlink_to_an_own_regular_file_writes_the_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    assert write_atomic(link, "new") == str(link)
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["link.txt", "real.txt"]


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "nowhere", r"a symlink to .*nowhere, which does not exist"),
    (lambda d: "/dev/null", r"a symlink to a character device \(/dev/null\)"),
    (lambda d: d, r"a symlink to a folder"),
])
def test_symlinks_to_anything_but_a_regular_file_are_refused(tmp_path, make, message):
    link = tmp_path / "out.txt"
    link.symlink_to(make(tmp_path))
    with pytest.raises(UnsafeFileError, match=rf"^{link}: {message}.*; {ALLOWED}$"):
        write_atomic(link, "x")
    assert link.is_symlink()


def test_a_symlink_to_another_users_file_is_refused(tmp_path, monkeypatch):
    target = tmp_path / "theirs.txt"
    target.write_text("theirs")
    link = tmp_path / "out.txt"
    link.symlink_to(target)
    monkeypatch.setattr(files.os, "getuid", lambda: os.stat(target).st_uid + 1)
    with pytest.raises(UnsafeFileError, match=rf"a symlink to {target}, which another user owns; {ALLOWED}"):
        write_atomic(link, "x")
    assert target.read_text() == "theirs"


def test_replacing_a_file_keeps_its_permissions(tmp_path):
    path = tmp_path / "secret.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    write_atomic(path, "new")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and path.read_text() == "new"


@pytest.mark.parametrize("fault", [KeyboardInterrupt, OSError("disk full"), MemoryError])
def test_a_fault_mid_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch, fault):
    path = tmp_path / "out.json"
    path.write_text("old")

    def fail(fd):
        raise fault

    monkeypatch.setattr(files.os, "fsync", fail)
    with pytest.raises(type(fault) if isinstance(fault, BaseException) else fault):
        write_atomic(path, "new")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["out.json"]


SIGTERM_MID_WRITE = """
import os, signal, sys, time
sys.path.insert(0, {root!r})
from dispatchprof.results import files
def fsync(fd):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
files.os.fsync = fsync
{call}
"""


@pytest.mark.parametrize("call, code", [
    ("files.write_atomic(sys.argv[1], 'new')", -signal.SIGTERM),        # the library: dies by the signal
    ("from dispatchprof.cli.options import emit\n"
     "from dispatchprof.cli import main\n"
     "import dispatchprof.cli.profile_command as p\n"
     "p.run = lambda argv: emit('new', sys.argv[1])\n"
     "sys.exit(main(['profile']))", 143),                                  # the CLI: exit status 143
])
def test_sigterm_mid_write_removes_the_temporary_and_keeps_the_old_file(tmp_path, call, code):
    path = tmp_path / "out.json"
    path.write_text("old")
    script = textwrap.dedent(SIGTERM_MID_WRITE).format(root=ROOT, call=call)
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stderr
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["out.json"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_check_output_paths_refuses_an_input_and_a_repeated_output(tmp_path):
    src = tmp_path / "in.json"
    src.write_text("{}")
    link = tmp_path / "alias.json"
    link.symlink_to(src)
    for out in (src, link):
        with pytest.raises(UnsafeFileError, match=rf"^{out}: the same file as the input {src}; an output never "
                                                  "overwrites an input or another output of the same run$"):
            check_output_paths([out], inputs=[src])
    with pytest.raises(UnsafeFileError, match=rf"{tmp_path / 'a.csv'}: the same file as the output "):
        check_output_paths([tmp_path / "a.csv", None, tmp_path / "a.csv"])
    with pytest.raises(UnsafeFileError, match=r"the folder .*missing does not exist"):
        check_output_paths([tmp_path / "missing" / "x.json"])
    check_output_paths([tmp_path / "new.json", None], inputs=[src, tmp_path / "absent.json"])
    assert src.read_text() == "{}"


@pytest.fixture
def saved(tmp_path):
    with OpCounter() as c:
        nn.Linear(2, 2)(torch.ones(1, 2))
    return c.profile.save(tmp_path / "p.json")


@pytest.mark.parametrize("argv, message", [
    (["report", "{p}", "--format", "csv", "-o", "{p}"], r"-o {p}: the same file as the input {p}"),
    (["report", "{p}", "--format", "csv", "-o", "/dev/null"], r"-o /dev/null: is a character device"),
    (["report", "{p}", "-o", "{d}"], r"-o {d}: is a folder"),
    (["calibrate", "-o", "/dev/null"], r"-o /dev/null: is a character device"),
    (["sweep", "llama-3.2-1b", "--device", "L4", "-o", "{d}/s.csv", "--plot", "{d}/s.csv"],
     r"{d}/s.csv: the same file as the output {d}/s.csv"),
    (["{p}", "--device", "L4", "--trace", "{p}"], r"--trace {p}: the same file as the input {p}"),
])
def test_commands_refuse_bad_outputs_before_any_work(capsys, tmp_path, saved, argv, message):
    """A bad destination or an output equal to an input: one line, exit 2, the input unchanged."""
    before = open(saved, "rb").read()
    code = main([a.format(p=saved, d=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("dispatchprof: error: ") and re.search(message.format(p=saved, d=tmp_path), err)
    assert open(saved, "rb").read() == before and sorted(os.listdir(tmp_path)) == ["p.json"]


def _swap_during_write(monkeypatch, swap):
    """Run ``swap()`` once, after the checks, while the temporary file is flushed to disk."""
    real = os.fsync

    def fsync(fd):
        real(fd)
        if not getattr(fsync, "done", False):
            fsync.done = True
            swap()
    monkeypatch.setattr(files.os, "fsync", fsync)


def test_a_folder_swapped_for_a_symlink_mid_write_cannot_redirect_the_write(tmp_path, monkeypatch):
    """The folder is opened once and the temporary is created and renamed relative to it (dir_fd)."""
    mine, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    mine.mkdir()
    elsewhere.mkdir()
    (elsewhere / "r.json").write_text("theirs")
    _swap_during_write(monkeypatch, lambda: (os.rename(mine, tmp_path / "moved"), os.symlink(elsewhere, mine)))
    write_atomic(mine / "r.json", "new")
    assert (tmp_path / "moved" / "r.json").read_text() == "new" and os.listdir(tmp_path / "moved") == ["r.json"]
    assert (elsewhere / "r.json").read_text() == "theirs" and os.listdir(elsewhere) == ["r.json"]


def test_a_name_swapped_for_a_symlink_before_the_rename_is_replaced_never_followed(tmp_path, monkeypatch):
    out, victim = tmp_path / "r.json", tmp_path / "victim"
    out.write_text("old")
    victim.write_text("precious")
    _swap_during_write(monkeypatch, lambda: (os.unlink(out), os.symlink(victim, out)))
    write_atomic(out, "new")
    assert not out.is_symlink() and out.read_text() == "new" and victim.read_text() == "precious"
    assert sorted(os.listdir(tmp_path)) == ["r.json", "victim"]


def test_a_name_that_became_a_fifo_after_the_check_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    real = files.output_target

    def check_then_swap(path):
        target = real(path)
        os.mkfifo(out)
        return target
    monkeypatch.setattr(files, "output_target", check_then_swap)
    with pytest.raises(UnsafeFileError, match=rf"^{out}: changed while being written \(now a FIFO \(named pipe\)\); "
                                              rf"{ALLOWED}$"):
        write_atomic(out, "new")
    assert os.listdir(tmp_path) == ["r.json"] and stat.S_ISFIFO(os.lstat(out).st_mode)


def test_a_signal_right_after_the_temporary_is_created_still_removes_it(tmp_path, monkeypatch):
    """Found by the fuzz campaign (2 of 625 signals mid-write left a temporary): the interrupt lands
    between the creation of the file and the next line; the name was recorded before the creation."""
    out = tmp_path / "out.json"
    out.write_text("old")
    real = os.open

    def open_then_interrupt(name, flags, mode=0o777, *, dir_fd=None):
        fd = real(name, flags, mode, dir_fd=dir_fd)
        if str(name).startswith(".dispatchprof-"):
            raise KeyboardInterrupt            # as a SIGINT handled at the next bytecode would
        return fd
    monkeypatch.setattr(files.os, "open", open_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(out, "new")
    assert os.listdir(tmp_path) == ["out.json"] and out.read_text() == "old"
