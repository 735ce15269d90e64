"""File writes that an interruption cannot leave half-done, and a lock against a second writer."""

import contextlib
import errno
import fcntl
import os
import re
import shutil
import socket
import tempfile
import time
import zlib

from t2t_lite.utils.errors import UserError


# The OS's refusals to write, as strerror names them: TensorFlow's errors carry only the text.
NO_SPACE = tuple(os.strerror(code) for code in (errno.ENOSPC, errno.EDQUOT))
NO_PERMISSION = tuple(os.strerror(code) for code in (errno.EACCES, errno.EPERM, errno.EROFS))
TOO_LARGE = os.strerror(errno.EFBIG)


def error_cause(error):
    """The first line of an OSError's or TensorFlow error's text, without TensorFlow's op names
    around it: "{{function_node ...}} PATH; File too large [Op:SaveV2]" -> "PATH; File too
    large"."""
    if isinstance(error, OSError) and error.strerror:
        text = f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    else:
        text = str(getattr(error, "message", None) or error)
    text = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text)
    return re.sub(r"\s*\[Op:\w+\]$", "", text)


def write_failure(error, what, directory, size=None):
    """The one-line message of `what` (e.g. "export") failing in `directory` with `error`, an
    OSError or a TensorFlow error, with the fix for its cause; None when the cause is not one of
    the OS's refusals to write (no space, a file-size limit, no permission). With `size`, the
    bytes it writes, a disk with less free space counts as full whatever the error says."""
    cause = error_cause(error)
    where = f"cannot {what} in {directory} ({cause})"
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        free = None
    if cause.endswith(NO_SPACE) or (size is not None and free is not None and free < size):
        needs = f"it needs {size / 2**20:,.1f} MiB free there; " if size is not None else ""
        return f"{where}: {needs}free some space and run the same command again"
    if cause.endswith(TOO_LARGE):
        about = f" of about {size / 2**20:,.1f} MiB" if size is not None else ""
        return (f"{where}: it writes files{about}, over a file-size limit there (`ulimit -f`, "
                "or the file system's); raise it and run the same command again")
    # TensorFlow's PermissionDeniedError, named so without importing TensorFlow here.
    if cause.endswith(NO_PERMISSION) or type(error).__name__ == "PermissionDeniedError":
        return f"{where}: make it writable and run the same command again"
    return None


def save_failure(error, step, directory, size):
    """The one-line message of a checkpoint save (of either trainer) that failed with `error`
    (an OSError or a TensorFlow OpError) in `directory`, with the fix for its cause."""
    what = f"save the checkpoint of step {step}"
    return (write_failure(error, what, directory, size)
            or f"cannot {what} in {directory} ({error_cause(error)}): fix that and run the same "
            "command again")


@contextlib.contextmanager
def write_refusals_named(what, directory):
    """Turns an OS refusal to write raised inside (see write_failure) into a UserError naming
    `what`, `directory`, the cause and the fix; other errors pass through as they are."""
    try:
        yield
    except UserError:
        raise
    except Exception as error:
        refused = write_failure(error, what, directory)
        if refused:
            raise UserError(refused) from None
        raise


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


# A temporary directory this young without its lock file may be one being created right now.
_UNLOCKED_GRACE_SECONDS = 60
_LOCK_NAME = ".lock"


@contextlib.contextmanager
def locked_temporary_directory(parent, prefix):
    """A temporary directory (see temporary_directory) for the block, removed afterwards. It
    holds a lock its process keeps until the block ends, so that remove_stale_temporaries
    tells one a killed process left (the kernel drops a dead process's lock) from one in use."""
    path = temporary_directory(parent, prefix)
    try:
        with exclusive_lock(os.path.join(path, _LOCK_NAME), path):
            yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def file_crc32(path):
    """The CRC-32 of the file at `path`: what a cache or checkpoint records of a file that its
    format does not check itself (HDF5, CTranslate2's model.bin)."""
    crc = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            crc = zlib.crc32(block, crc)
    return crc


def unlock_for_rename(path):
    """Removes the lock file of the locked_temporary_directory at `path` (its lock stays held
    until the block ends) so that it is not part of what the directory is renamed to."""
    os.remove(os.path.join(path, _LOCK_NAME))


def remove_stale_temporaries(parent, prefix):
    """Removes the directories `prefix`* in parent that a killed process left behind (those
    of locked_temporary_directory whose lock no process holds); returns their paths."""
    removed = []
    for name in os.listdir(parent):
        path = os.path.join(parent, name)
        if not name.startswith(prefix) or not os.path.isdir(path):
            continue
        try:
            handle = open(os.path.join(path, _LOCK_NAME), encoding="utf-8")
        except FileNotFoundError:  # killed before it locked, or being created: wait a while
            with contextlib.suppress(OSError):
                if time.time() - os.stat(path).st_mtime > _UNLOCKED_GRACE_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
            continue
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a running process writes there
                continue
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def check_writable_file(path, flag):
    """Checks, before any work, that --flag's file can be written where it is meant to be (its
    directory is created if missing); the OS's refusal is a UserError naming flag and path."""
    if os.path.isdir(path):
        raise UserError(f"--{flag} {path} is a directory: pass the path of a file")
    directory = os.path.dirname(absolute(path))
    try:
        os.makedirs(directory, exist_ok=True)
    except FileExistsError:
        raise UserError(f"--{flag} {path} cannot be written: {directory} is a file, not a "
                        "directory: pass a path you can write to") from None
    except OSError as error:
        raise UserError(f"--{flag} {path} cannot be written: its directory cannot be created "
                        f"({error.strerror}): pass a path you can write to") from None
    try:
        handle, probe = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        os.close(handle)
        os.remove(probe)
    except OSError as error:
        raise UserError(f"--{flag} {path} cannot be written ({error.strerror}): pass a path "
                        "in a directory you can write to") from None


def write_bytes_atomically(path, data):
    """Writes to a temporary file beside `path`, then renames it over `path`; the file gets
    the permissions of open() (the umask's), not mkstemp's 0600. An OS error names `path`
    (a full disk's ENOSPC names no file, and the temporary's name would mean nothing)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        os.chmod(temporary, 0o666 & ~_umask())
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException as error:
        os.remove(temporary)
        if isinstance(error, OSError) and error.errno is not None:
            raise type(error)(error.errno, error.strerror, os.fspath(path)) from None
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
