"""ModelDir: the layout of a model_dir and what it records, with no TensorFlow in it.

A model_dir holds one experiment (an `Experiment`: its problem, hparams set, final hparams,
data_dir, the training-only hparams changed on resume, and the model its weights started from, if
any), recorded in hparams.json and problem.json so that later commands need no other flag; its
checkpoints (named ckpt-STEP); TensorBoard summaries in train/ and eval/; the history of its
evaluations in eval/history.json; and model_dirs of its own, best/ (the best checkpoint by a
metric) and avg/ (an average of checkpoints), each with an info.json saying what it is. The
decoder keeps its CTranslate2 conversions in ctranslate2/, and the exporter writes export/
(SavedModel) or export_ctranslate2/. Every one of these names is spelled here only; whatever
reads or writes a model_dir asks a ModelDir. The comment beside each name, or the docstring of
the ModelDir member that gives its path, says what it is; the site's page of the layout
(docs/reference_layout.py) shows them.
"""

import dataclasses
import glob
import json
import os

from t2t_lite.config import HParams, HParamsError
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import absolute, write_text_atomically
from t2t_lite.utils.json_records import damaged, read_record

# The experiment's hparams, every one (HParams.to_dict()), and those changed on resume.
HPARAMS_FILE = "hparams.json"
HPARAMS_HISTORY = "changed_on_resume"  # in HPARAMS_FILE: [{"step": N, name: [old, new]}, ...]
# The experiment's problem, hparams set and data_dir, the model its weights started from, if
# any, and the fingerprint of the vocabulary it was trained with.
PROBLEM_FILE = "problem.json"
EXPERIMENT_FILES = (HPARAMS_FILE, PROBLEM_FILE)
# In PROBLEM_FILE, where a model started from another's weights came from (warm_start.Source).
INIT_FROM_KEYS = {"init_from": str, "model_dir": str, "checkpoint": str, "step": int,
                  "optimizer": bool}
# What a derived model_dir is: best/'s metric, value and step; an average's checkpoints.
INFO_FILE = "info.json"
CHECKPOINT_LIST = "checkpoint"  # TensorFlow's list of the checkpoints (ckpt-STEP.index, ...)
# The JAX trainer's checkpoint P is P.weights.h5, Keras's own format, which every backend
# reads, and P.state.npz, what resuming needs besides (t2t_lite.backends.jax.checkpoints).
KERAS_WEIGHTS = ".weights.h5"
# A checkpoint P is there when its TensorFlow index (P.index: the TensorFlow trainer's, whose
# values are in P.data-NNNNN-of-MMMMM beside it) or its Keras weights (P.weights.h5: the JAX
# trainer's, t2t_lite.backends.jax.checkpoints) is.
CHECKPOINT_MARKERS = (".index", KERAS_WEIGHTS)
# Every evaluation of the trainer: its step and metrics, so that a resumed run knows the best.
HISTORY_FILE = os.path.join("eval", "history.json")
BEST_DIR = "best"
AVG_DIR = "avg"
CTRANSLATE2_CACHE = "ctranslate2"
EXPORT_DIRS = {"saved_model": "export", "ctranslate2": "export_ctranslate2"}
SUMMARY_RUNS = ("train", "eval")
# How to mend each record when it is damaged (a bad copy, an edit by hand).
REPAIRS = {
    HPARAMS_FILE: "restore it from a copy, or repair it by hand: a JSON object of hparam "
                  'values, e.g. {"d_model": 512, ...}',
    PROBLEM_FILE: 'restore it from a copy, or repair it by hand: a JSON object of "problem", '
                  '"hparams_set" and "data_dir", as t2t-lite-trainer wrote it',
    HISTORY_FILE: "restore it from a copy, or delete it to start a new history of evaluations "
                  "(which of the earlier ones was best is then forgotten)",
    INFO_FILE: "restore it from a copy, or repair it by hand: a JSON object, as the trainer or "
               "t2t-lite-avg-checkpoints wrote it",
}


@dataclasses.dataclass(frozen=True)
class Experiment:
    """How a model_dir's model is made: everything but the weights."""

    problem: str
    hparams_set: str
    hparams: HParams
    data_dir: str
    changed_on_resume: tuple = ()  # ({"step": N, name: [old, new], ...}, ...)
    # The model its weights started from (the trainer's --init_from), as recorded in
    # problem.json: {"init_from", "model_dir", "checkpoint", "step", "optimizer", ...}; None
    # for a model trained from scratch.
    init_from: dict | None = None
    # Vocabulary.fingerprint() of the vocabulary it was trained with (None: recorded before
    # model_dirs recorded it).
    vocabulary: str | None = None

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


class ModelDir:
    """The model_dir at `path` (made absolute, `~` expanded)."""

    def __init__(self, path):
        self.path = absolute(path)

    def __fspath__(self):
        return self.path

    def __str__(self):
        return self.path

    def __repr__(self):
        return f"ModelDir({self.path!r})"

    def __eq__(self, other):
        return isinstance(other, ModelDir) and other.path == self.path

    def __hash__(self):
        return hash(self.path)

    def join(self, *parts):
        return os.path.join(self.path, *parts)

    # The layout.

    @property
    def best(self):
        """The model_dir of the best checkpoint by the trainer's --keep_best_by."""
        return ModelDir(self.join(BEST_DIR))

    @property
    def avg(self):
        """The model_dir of the checkpoints averaged at the end of training."""
        return ModelDir(self.join(AVG_DIR))

    @property
    def default_data_dir(self):
        """The data_dir of an experiment started without --data_dir."""
        return self.join("data")

    @property
    def ctranslate2_cache(self):
        """Where the decoder keeps the CTranslate2 conversion of a checkpoint."""
        return self.join(CTRANSLATE2_CACHE)

    def export_dir(self, format_name):
        """Where the exporter writes versions in `format_name` by default."""
        return self.join(EXPORT_DIRS[format_name])

    def summaries(self, run):
        """The TensorBoard directory of `run`: train or eval."""
        assert run in SUMMARY_RUNS, run
        return self.join(run)

    def trainer_lock(self, worker=0, workers=1):
        """The lock file that keeps a second trainer (of this worker) out."""
        return self.join(".trainer.lock" if workers == 1 else f".trainer-worker-{worker}.lock")

    # The experiment.

    def has_experiment(self):
        return os.path.exists(self.join(HPARAMS_FILE))

    def has_checkpoints(self):
        """Whether a checkpoint was ever saved here: their list or a checkpoint's index (or
        Keras weights) is here, even a damaged one."""
        return (os.path.exists(self.join(CHECKPOINT_LIST))
                or any(glob.glob(os.path.join(glob.escape(self.path), f"*{marker}"))
                       for marker in CHECKPOINT_MARKERS))

    def records(self):
        """The bytes of the files recording the experiment (None for one missing), to tell
        whether they changed; read_experiment says what is wrong with a damaged one."""
        texts = []
        for path in self.experiment_files():
            try:
                with open(path, "rb") as f:
                    texts.append(f.read())
            except (FileNotFoundError, NotADirectoryError):
                texts.append(None)
        return tuple(texts)

    def read_experiment(self, data_dir=None):
        """The Experiment recorded here; `data_dir` overrides where its data now lives."""
        try:
            values = self._read_json(HPARAMS_FILE, dict)
            saved = self._read_json(PROBLEM_FILE, dict)
        except FileNotFoundError as error:
            if self.has_checkpoints():
                raise UserError(f"{self.path} is not a t2t_lite model_dir as it is "
                                f"({error.filename} is missing: deleted, or a bad copy?): restore "
                                "that file from a copy; its checkpoints need it") from None
            raise UserError(f"{self.path} is not a t2t_lite model_dir ({error.filename} is "
                            "missing): train one there with t2t-lite-trainer") from None
        for key in ("problem", "hparams_set") + (() if data_dir else ("data_dir",)):
            if not isinstance(saved.get(key), str):
                raise self._damaged(PROBLEM_FILE, f'no "{key}" string in it' + (
                    " (or pass --data_dir)" if key == "data_dir" else ""))
        init_from = saved.get("init_from")
        if init_from is not None and not (isinstance(init_from, dict) and all(
                type(init_from.get(key)) is kind for key, kind in INIT_FROM_KEYS.items())):
            raise self._damaged(PROBLEM_FILE, '"init_from" is not an object of ' + ", ".join(
                f'"{key}"' for key in INIT_FROM_KEYS))
        vocabulary = saved.get("vocabulary")
        if vocabulary is not None and not isinstance(vocabulary, str):
            raise self._damaged(PROBLEM_FILE, '"vocabulary" is not a string')
        history = values.pop(HPARAMS_HISTORY, [])
        if not isinstance(history, list):
            raise self._damaged(HPARAMS_FILE, f'"{HPARAMS_HISTORY}" is not a list')
        try:  # as strictly as --hparams: a value set by hand must not exhaust memory or hang
            hparams = HParams.from_dict(values)
        except HParamsError as error:
            raise UserError(f"{self.join(HPARAMS_FILE)}: {error}: correct that value in the "
                            "file") from None
        return Experiment(saved["problem"], saved["hparams_set"], hparams,
                          absolute(data_dir) if data_dir else saved["data_dir"], tuple(history),
                          init_from, vocabulary)

    def write_experiment(self, experiment):
        """Records a new `experiment` (atomically, file by file)."""
        self.write_hparams(experiment)
        record = {"problem": experiment.problem, "hparams_set": experiment.hparams_set,
                  "data_dir": experiment.data_dir}
        if experiment.init_from is not None:
            record["init_from"] = experiment.init_from
        if experiment.vocabulary is not None:
            record["vocabulary"] = experiment.vocabulary
        write_text_atomically(self.join(PROBLEM_FILE), json.dumps(record, indent=2) + "\n")

    def write_hparams(self, experiment):
        """Records the hparams of `experiment` and their changes on resume; what the model_dir
        records of its problem and data_dir stays (a --data_dir given later is not recorded)."""
        values = experiment.hparams.to_dict()
        if experiment.changed_on_resume:
            values[HPARAMS_HISTORY] = list(experiment.changed_on_resume)
        write_text_atomically(self.join(HPARAMS_FILE),
                              json.dumps(values, indent=2, sort_keys=True) + "\n")

    def experiment_files(self):
        """The paths of the files that record the experiment, for a copy of it elsewhere."""
        return [self.join(name) for name in EXPERIMENT_FILES]

    # Evaluations and what a derived model_dir is.

    def read_history(self):
        """The evaluations recorded by the trainer, oldest first ([] before the first)."""
        try:
            history = self._read_json(HISTORY_FILE, list)
        except FileNotFoundError:
            return []
        for number, entry in enumerate(history, 1):
            if not (isinstance(entry, dict) and isinstance(entry.get("step"), int)
                    and isinstance(entry.get("metrics"), dict)):
                raise self._damaged(HISTORY_FILE, f'its entry {number} is not an object with '
                                    '"step" and "metrics"')
        return history

    def write_history(self, history):
        """Records the evaluations `history`, oldest first (the trainer's, after each one)."""
        write_text_atomically(self.join(HISTORY_FILE), json.dumps(history, indent=1) + "\n")

    def read_info(self):
        """What a derived model_dir (best/, avg/, an average) says it is, or None."""
        try:
            return self._read_json(INFO_FILE, dict)
        except FileNotFoundError:
            return None

    def write_info(self, info):
        """Records what this derived model_dir is (`info`, a dict)."""
        write_text_atomically(self.join(INFO_FILE), json.dumps(info, indent=2) + "\n")

    def _read_json(self, name, kind):
        """The value in the record `name`, which must be of type `kind` (dict or list); one
        that is not is a UserError naming it and how to mend it (see utils.json_records)."""
        return read_record(self.join(name), kind, REPAIRS[name])

    def _damaged(self, name, what):
        return damaged(self.join(name), what, REPAIRS[name])
