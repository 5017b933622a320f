"""The only reader and writer of user files: regular files only, bounded reads, atomic writes.

Reading (`read_text`, `read_json`): regular files only (a FIFO or a device is refused before any
byte is read, so nothing hangs), at most `READ_LIMITS` bytes per kind of file (the limit is in the
message), UTF-8 with or without a byte-order mark; every refusal names the file.

Writing (`write_atomic`, `check_output_paths`):

- a destination is a new file, an existing regular file, or a symlink to a regular file owned by
  the current user (then the target is written and the link kept); a character or block device
  (``/dev/null``), a FIFO, a socket, a folder, a dangling symlink or a symlink to another user's
  file is refused with `UnsafeFileError` naming the path and what is allowed;
- the data goes to a temporary file in the destination's folder, is flushed to disk (fsync) and
  renamed into place, so a reader never sees a half-written file and any failure leaves the old
  file untouched;
- the checked folder is opened once and every step after the check (re-check of the final name
  without following a symlink, temporary file, rename, clean-up) works relative to that open
  folder, so swapping a folder for a symlink mid-write cannot send the write elsewhere; a final
  name swapped in the instant before the rename is replaced as an entry, never followed or
  written through (`write_atomic`);
- an existing file keeps its permission bits; a new file gets what ``open(path, "w")`` would give:
  0666 less the process's umask (mkstemp's own 0600 is widened);
- the temporary file is removed on every exception, KeyboardInterrupt (SIGINT) included, and on
  SIGTERM (`terminate_raises`); an error names the path the caller gave, never the temporary file;
- `check_output_paths` runs these checks for all of a command's outputs before any work, and
  refuses an output that is the same file as one of its inputs or as another output.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import signal
import stat
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

from dispatchprof.errors import Terminated, UnsafeFileError

ALLOWED_OUTPUT = "an output is a new file, a regular file, or a symlink to a regular file you own"
#: The largest file of each kind read (bytes): far above a real one, low enough that reading and
#: parsing it stays within memory and seconds.
READ_LIMITS = {"profile": 256 << 20, "config": 16 << 20, "device profile": 256 << 10, "trace": 256 << 20}
DEFAULT_READ_LIMIT = 64 << 20
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """What a file mode describes, in words ("a regular file", "a character device", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "a regular file" if stat.S_ISREG(mode)
                else "not a regular file")


def output_target(path: str | os.PathLike) -> str:
    """The file a write to ``path`` replaces: ``path`` itself (new or regular), or the final target
    of a symlink to a regular file owned by the current user. Anything else raises UnsafeFileError."""
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as e:
        raise UnsafeFileError(f"{path}: cannot inspect the output ({e.strerror})") from None
    if stat.S_ISLNK(st.st_mode):
        target = os.path.realpath(path)
        try:
            tst = os.stat(target)
        except OSError:
            raise UnsafeFileError(f"{path}: a symlink to {target}, which does not exist; {ALLOWED_OUTPUT}") from None
        if not stat.S_ISREG(tst.st_mode):
            raise UnsafeFileError(f"{path}: a symlink to {kind_of(tst.st_mode)} ({target}); {ALLOWED_OUTPUT}")
        if tst.st_uid != os.getuid():
            raise UnsafeFileError(f"{path}: a symlink to {target}, which another user owns; {ALLOWED_OUTPUT}")
        return target
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(f"{path}: is {kind_of(st.st_mode)}; {ALLOWED_OUTPUT}")
    return path


def check_output_paths(paths: Iterable[str | os.PathLike | None],
                       inputs: Iterable[str | os.PathLike | None] = ()) -> None:
    """Refuse, before any work, an output (None entries are skipped) that `write_atomic` would refuse,
    whose folder is missing or not writable, that is the same file as one of ``inputs``, or that two
    outputs share. Raises UnsafeFileError naming the path."""
    seen: dict[tuple[int, int] | str, str] = {}
    for given in inputs:
        if given is not None and (key := _identity(os.fspath(given))) is not None:
            seen[key] = f"the input {os.fspath(given)}"
    for given in paths:
        if given is None or os.fspath(given) == "":
            continue
        path = os.fspath(given)
        target = output_target(path)
        folder = os.path.dirname(os.path.abspath(target))
        if not os.path.isdir(folder):
            raise UnsafeFileError(f"{path}: the folder {os.path.dirname(path) or '.'} does not exist")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UnsafeFileError(f"{path}: the folder {os.path.dirname(path) or '.'} is not writable")
        key = _identity(target) or os.path.abspath(target)
        if key in seen:
            raise UnsafeFileError(f"{path}: the same file as {seen[key]}; an output never overwrites "
                                  f"an input or another output of the same run")
        seen[key] = f"the output {path}"


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file ``path`` names, following symlinks; None if there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def write_atomic(path: str | os.PathLike, data: str | bytes) -> str:
    """Write ``data`` (str as UTF-8) to ``path`` by the rules of this module; returns ``path``.

    The checked destination's folder is opened once and the temporary file is created, renamed
    and removed relative to that open folder (``dir_fd``): a folder on the way swapped for a
    symlink after the check cannot redirect the write elsewhere, and the final name is re-checked
    there, without following a symlink. What no check can close is a swap of the final name in
    the instant between that re-check and the rename; rename() then replaces the new entry itself
    (a symlink is replaced, never followed; a device node is unlinked, never written), so the write
    still lands in the checked folder and nowhere else."""
    path = os.fspath(path)
    target = output_target(path)
    folder, name = os.path.split(os.path.abspath(target))
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with terminate_raises():
        try:
            dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise OSError(e.errno, f"cannot write here ({e.strerror})", path) from None
        try:
            _write_in(dfd, name, _kept_mode(dfd, name, path), payload, path)
        finally:
            os.close(dfd)
    return path


def _kept_mode(dfd: int, name: str, path: str) -> int:
    """Permission bits for the new file: those of the regular file ``name`` in the open folder, or
    0666 less the umask when there is none. Anything else there now (the check passed, then the
    entry changed) is refused."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return 0o666 & ~current_umask()
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(f"{path}: changed while being written (now {kind_of(st.st_mode)}); {ALLOWED_OUTPUT}")
    return stat.S_IMODE(st.st_mode)


def _write_in(dfd: int, name: str, mode: int, payload: bytes, path: str) -> None:
    """Temporary file in the open folder, fsync, rename over ``name``. The temporary's name is
    recorded before the file is created, so an exception or a signal at any point after (even
    between the creation and the next line) removes it. Errors name ``path``, never the temporary."""
    tmp = None
    try:
        for _ in range(100):
            tmp = f".dispatchprof-{secrets.token_hex(8)}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                             0o600, dir_fd=dfd)
                break
            except FileExistsError:
                tmp = None                      # another file's name: never ours to remove
            except OSError as e:
                tmp = None
                raise OSError(e.errno, f"cannot write here ({e.strerror})", path) from None
        else:
            raise OSError(errno.EEXIST, "cannot write here (no free temporary name)", path)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = None
    except OSError as e:
        if e.filename is not None and e.filename in (tmp, name):
            raise OSError(e.errno, e.strerror, path) from None
        raise
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except FileNotFoundError:
                pass


@contextmanager
def terminate_raises() -> Iterator[None]:
    """While inside, SIGTERM raises `Terminated` where the program is, so ``finally`` blocks run.

    Only on the main thread and only while SIGTERM has its default action (a program that handles
    SIGTERM itself, such as the CLI, keeps its handler). On leaving, the default action is restored,
    and a Terminated that escaped is delivered again as SIGTERM: the process still ends as the
    signal asked, after the cleanup."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def raise_terminated(signum: int, frame: Any) -> None:
    """A signal handler that raises `Terminated` (SIGTERM as an exception, so cleanup runs)."""
    raise Terminated(f"terminated by signal {signum}")


def current_umask() -> int:
    """The process's umask (read by setting it and restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read_text(path: str | os.PathLike, what: str, error: type[Exception] = ValueError,
              limit: int | None = None) -> str:
    """The text of a regular file of kind ``what``, at most ``limit`` bytes (default ``READ_LIMITS[what]``).

    The file is opened without blocking and checked before a byte is read, so a FIFO or a device
    (``/dev/zero``) is refused at once; a larger file is refused naming the limit; the text is UTF-8
    (a leading byte-order mark is dropped) and any other encoding is refused naming the file and
    the offset of the first bad byte. Every refusal raises ``error``."""
    path = os.fspath(path)
    limit = READ_LIMITS.get(what, DEFAULT_READ_LIMIT) if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"{path}: cannot read the {what} ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{path}: is {kind_of(mode)}; a {what} is read from a regular file")
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise error(f"{path}: cannot read the {what} ({e.strerror})") from None
    if len(data) > limit:
        raise error(f"{path}: a {what} is at most {_size(limit)} (a limit that keeps memory and time bounded); "
                    f"this file is larger")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{path}: a {what} is UTF-8 text; byte 0x{data[e.start]:02x} at offset {e.start} "
                    f"is not UTF-8") from None


def read_json(path: str | os.PathLike, what: str, error: type[Exception] = ValueError,
              limit: int | None = None) -> Any:
    """Parse a JSON file read by `read_text`; a truncated or corrupt file raises ``error`` naming it."""
    text = read_text(path, what, error, limit)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{os.fspath(path)}: not a complete JSON {what} (truncated or corrupt: {e.msg} at "
                    f"line {e.lineno} column {e.colno})") from None


def _size(n: int) -> str:
    """A byte count in KiB or MiB, as the limits are written."""
    return f"{n >> 20:,} MiB" if n >= 1 << 20 else f"{n >> 10:,} KiB" if n >= 1 << 10 else f"{n:,} bytes"
