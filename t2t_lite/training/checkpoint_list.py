"""Which checkpoints a model_dir holds: its list of them (the `checkpoint` file that
tf.train.CheckpointManager keeps), the files there, the latest, and the one a command runs.

Nothing here imports TensorFlow, so that the decoder can find the checkpoint of a cached
CTranslate2 conversion in a fraction of a second; restoring and saving checkpoints is
t2t_lite.backends.tensorflow.checkpoints.
"""

import glob
import json
import logging
import os
import re

from google.protobuf import text_encoding

from t2t_lite.model_dir import CHECKPOINT_LIST, CHECKPOINT_MARKERS
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import write_text_atomically

logger = logging.getLogger("t2t_lite")

# A line of the list, a text-format CheckpointState proto: `field: "path"` or `field: number`.
_LIST_LINE = re.compile(r'\s*(\w+)\s*:\s*(?:"((?:[^"\\]|\\.)*)"|[-+0-9.eE]+)\s*')
_LIST_FIELDS = ("model_checkpoint_path", "all_model_checkpoint_paths",
                "all_model_checkpoint_timestamps", "last_preserved_timestamp")


class CheckpointList:
    """A model_dir's list of checkpoints: `latest` (model_checkpoint_path) and `paths`
    (all_model_checkpoint_paths, oldest first), relative ones joined to the model_dir."""

    def __init__(self, latest, paths):
        self.latest = latest
        self.paths = paths


def read_list(model_dir):
    """The CheckpointList of model_dir, or None for no list or one that cannot be read, as
    tf.train.get_checkpoint_state gives (parsed here: importing TensorFlow takes seconds)."""
    try:
        with open(os.path.join(model_dir, CHECKPOINT_LIST), "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    fields = {"model_checkpoint_path": [], "all_model_checkpoint_paths": []}
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _LIST_LINE.fullmatch(line)
        if not match or match[1] not in _LIST_FIELDS:
            return None
        if match[1] in fields:
            if match[2] is None:
                return None
            try:
                path = text_encoding.CUnescape(match[2]).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                return None
            fields[match[1]].append(path)
    if not fields["model_checkpoint_path"] or not fields["model_checkpoint_path"][-1]:
        return None  # TensorFlow: "Invalid checkpoint state"
    # os.path.join keeps an absolute path as it is.
    return CheckpointList(os.path.join(model_dir, fields["model_checkpoint_path"][-1]),
                          [os.path.join(model_dir, p) for p in
                           fields["all_model_checkpoint_paths"]])


def checkpoint_paths(model_dir):
    """The checkpoints CheckpointManager kept in model_dir, oldest first."""
    listed = read_list(model_dir)
    return listed.paths if listed else []


def checkpoint_step(path):
    """The step of a checkpoint the trainer saved (it numbers them by step): ckpt-1500 -> 1500."""
    return int(path.rsplit("-", 1)[1])


def latest_step(model_dir):
    """The step of the latest checkpoint in model_dir (0 without one)."""
    latest = _newest_there(model_dir)[0]
    return checkpoint_step(latest) if latest else 0


def latest_checkpoint(model_dir, repair=False):
    """The newest checkpoint in model_dir whose files are there, or None. Unlike
    tf.train.latest_checkpoint, which gives None (and the trainer starts over at step 0), a
    checkpoint of the list whose index is missing (deleted, or not copied), or a list that is
    missing or unreadable, is a warning naming it, and the newest checkpoint there is used.
    `repair` (for the trainer, which keeps the list) rewrites the list to name those there."""
    latest, missing, there = _newest_there(model_dir)
    if missing:
        named = (f"checkpoint {missing[0]} is" if len(missing) == 1 else
                 f"checkpoints {', '.join(missing)} are")
        logger.warning("%s missing (no .index or .weights.h5 file: deleted, or a bad copy?): "
                       "%s", named, f"using {latest}, the newest checkpoint there" if latest else
                       f"{model_dir} holds no other")
    elif latest and missing is None:
        logger.warning("%s is missing or unreadable: using %s, the newest checkpoint there",
                       os.path.join(model_dir, CHECKPOINT_LIST), latest)
    if repair and latest and missing != []:
        write_list(model_dir, there)
    return latest


def _newest_there(model_dir):
    """(the newest checkpoint whose index is there or None, the paths the list names that are
    not there (None when there is no readable list), the checkpoints there oldest first).

    An intact list is followed; a list that names a checkpoint not there (deleted, a bad copy,
    an edit) says nothing of the others, so then the files are scanned: the newest intact
    checkpoint on disk is used, and every one there is kept (not only those listed)."""
    listed_state = read_list(model_dir)
    if listed_state:
        listed = list(listed_state.paths)
        if listed_state.latest not in listed:
            listed.append(listed_state.latest)
        missing = [path for path in listed if not is_there(path)]
        if not missing:
            return listed[-1], [], listed
    indexed = {}
    for marker in CHECKPOINT_MARKERS:
        for found in glob.glob(os.path.join(glob.escape(model_dir), f"*-*{marker}")):
            path = found[:-len(marker)]
            if path.rsplit("-", 1)[1].isdigit():
                indexed[path] = checkpoint_step(path)
    there = sorted(indexed, key=indexed.get)
    return (there[-1] if there else None), (missing if listed_state else None), there


def is_there(path):
    """Whether checkpoint `path` (a prefix) of either trainer is there."""
    return any(os.path.exists(path + marker) for marker in CHECKPOINT_MARKERS)


def resolve_checkpoint(model_dir, checkpoint_path=None):
    """The checkpoint to load: checkpoint_path (a checkpoint prefix or a directory holding
    checkpoints), or else the latest in model_dir."""
    if checkpoint_path:
        if os.path.isdir(checkpoint_path):
            path = latest_checkpoint(checkpoint_path)
            if not path:
                raise UserError(f"--checkpoint_path {checkpoint_path} holds no checkpoint")
            return path
        if not is_there(checkpoint_path):
            raise UserError(f"--checkpoint_path {checkpoint_path} is not a checkpoint (no "
                            f"{os.path.basename(checkpoint_path)}.index or .weights.h5); `ls` "
                            "the model_dir for ckpt-N names")
        return checkpoint_path
    path = latest_checkpoint(model_dir)
    if not path:
        raise UserError(f"{model_dir} holds no checkpoint: train it with t2t-lite-trainer first")
    return path


def last_checkpoints(model_dir, n):
    """The last n checkpoints CheckpointManager kept in model_dir, oldest first."""
    paths = checkpoint_paths(model_dir)
    if not paths:
        raise UserError(f"{model_dir} holds no checkpoint: train it with t2t-lite-trainer first")
    if n > len(paths):
        raise UserError(f"--n={n} but {model_dir} keeps only {len(paths)} checkpoints (see the "
                        "trainer's --keep_checkpoints)")
    return paths[-n:]


def forget_checkpoint(model_dir, path):
    """Removes `path` from model_dir's list of checkpoints, so that the latest is the one
    before it; its files stay until a new checkpoint of that step replaces them."""
    write_list(model_dir, [p for p in _newest_there(model_dir)[2] if p != path])


def write_list(model_dir, paths):
    """Makes model_dir's list of checkpoints (the `checkpoint` text proto CheckpointManager
    reads) name `paths`, the last the latest, or removes it for none. Written here, not by
    tf.compat.v1.train.update_checkpoint_state, which prints a deprecation notice.

    Each checkpoint gets a timestamp after the list's last_preserved_timestamp: a
    CheckpointManager forgets (and so stops listing, and never rotates) the checkpoints whose
    timestamp is not after it, as it does all of them in a list without timestamps."""
    path = os.path.join(model_dir, CHECKPOINT_LIST)
    if not paths:
        os.remove(path)
        return
    names = [json.dumps(os.path.relpath(p, model_dir), ensure_ascii=False) for p in paths]
    times = []
    for checkpoint in paths:  # when each was written, kept in the order of the list
        written = max((os.path.getmtime(checkpoint + marker) for marker in CHECKPOINT_MARKERS
                       if os.path.exists(checkpoint + marker)), default=0.0)
        times.append(max([written, *times[-1:]]))
    write_text_atomically(path, f"model_checkpoint_path: {names[-1]}\n" + "".join(
        f"all_model_checkpoint_paths: {name}\n" for name in names) + "".join(
        f"all_model_checkpoint_timestamps: {time!r}\n" for time in times) +
        f"last_preserved_timestamp: {times[0] - 1.0!r}\n")


class CheckpointGone(UserError):
    """A checkpoint whose files were removed while it was read: the trainer's rotation
    (--keep_checkpoints) deletes the oldest as it saves a new one."""

    def __init__(self, path):
        self.path = path
        super().__init__(f"checkpoint {path} was removed while it was read (a trainer keeping "
                         "only its newest checkpoints?): run the same command again")


class DamagedCheckpoint(UserError):
    """A checkpoint whose files cannot be read back (a truncated copy or sync), of either
    trainer; `is_intact(path)` says which of the others read back."""

    def __init__(self, path, error, is_intact):
        intact = [p for p in reversed(checkpoint_paths(os.path.dirname(path)))
                  if p != path and is_intact(p)]
        self.newest_intact = intact[0] if intact else None
        self.damage = f"checkpoint {path} is damaged ({error}; a bad copy or sync?)"
        super().__init__(self.fix("--checkpoint_path"))

    def fix(self, flag):
        """The message, with the fix given to `flag` (the option that names a checkpoint)."""
        return self.damage + (f": pass {flag}={self.newest_intact}, the newest intact one"
                              if self.newest_intact else ": copy it again from where it was made")

