"""File writes that an interruption cannot leave half-done, and a lock against a second writer."""

import contextlib
import fcntl
import os
import socket
import tempfile

from t2t_lite.utils.errors import UserError


def absolute(path):
    """`path` with `~` expanded, made absolute."""
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def make_directory(path, flag):
    """os.makedirs(path) for the directory of --flag, checked to be writable; the OS's refusal
    is a UserError naming the flag, the path and the fix."""
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        raise UserError(f"--{flag} {path} is a file, not a directory: pass a directory") from None
    except OSError as error:
        raise UserError(f"--{flag} {path} cannot be created ({error.strerror}): pass a "
                        "directory you can write to") from None
    if not os.access(path, os.W_OK):  # also false on a read-only file system, even for root
        raise UserError(f"--{flag} {path} is not writable (read-only file system or "
                        "permissions): pass a directory you can write to")


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temporary_directory(parent, prefix):
    """A new directory in parent with the permissions of os.makedirs (the umask's), not
    mkdtemp's 0700, so that it can become a directory other users read (e.g. a server)."""
    path = tempfile.mkdtemp(dir=parent, prefix=prefix)
    os.chmod(path, 0o777 & ~_umask())
    return path


def write_bytes_atomically(path, data):
    """Writes to a temporary file beside `path`, then renames it over `path`; the file gets
    the permissions of open() (the umask's), not mkstemp's 0600."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        os.chmod(temporary, 0o666 & ~_umask())
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.remove(temporary)
        raise


def write_text_atomically(path, text):
    write_bytes_atomically(path, text.encode("utf-8"))


@contextlib.contextmanager
def exclusive_lock(path, what):
    """Holds an advisory lock on `path` (created if missing) for the block, or fails at once
    with a UserError naming `what` is busy. The kernel drops the lock when its process dies,
    even by SIGKILL, so a killed run never leaves a stale lock behind."""
    handle = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise UserError(f"{what} is in use by {holder} (lock {path}): wait for it to end or "
                        "stop it, or use another directory") from None
    try:
        handle.truncate(0)
        handle.write(f"process {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        yield
    finally:
        handle.close()
