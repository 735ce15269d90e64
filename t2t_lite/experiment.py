"""The record of one experiment in its model_dir: created from the flags, or resumed from what
the model_dir records (problem.json, hparams.json), with the flags checked against it, and
written once training starts, under the model_dir's lock (with the history of training-only
hparams changed on resume).

A model_dir remembers how it was made, so resuming, decoding and exporting never need those flags
again, and a flag that contradicts them is refused (but training-only hparams, which a resumed
run may change and records).
"""

import logging

from t2t_lite import registry
from t2t_lite.config import TRAINING_ONLY
from t2t_lite.model_dir import Experiment, ModelDir
from t2t_lite.training import warm_start
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import absolute

logger = logging.getLogger("t2t_lite")


class ExperimentRecord:
    """The experiment of ModelDir `model_dir` as this process runs it (`experiment`), and what
    of it is not yet recorded there: `unrecorded` is None when nothing is, else (the model_dir's
    records() when they were read; the training-only hparams changed on resume as {name: [old,
    new]}, or None to record the experiment anew)."""

    def __init__(self, model_dir, experiment, unrecorded=None):
        self.model_dir = model_dir
        self.experiment = experiment
        self.unrecorded = unrecorded

    @classmethod
    def read(cls, model_dir, data_dir=None):
        """The experiment saved in model_dir; data_dir overrides where its data now lives."""
        model_dir = ModelDir(model_dir)
        return cls(model_dir, model_dir.read_experiment(data_dir))

    @classmethod
    def create_or_resume(cls, model_dir, problem_name=None, hparams_set=None, overrides="",
                         data_dir=None, init_from=None, init_from_optimizer=False):
        """A new experiment from the flags, or the one saved in model_dir if there is one.

        Nothing is written until record() is called when training starts (the caller checks
        that model_dir can be made), so that a run
        refused by the lock or failing before it trains (e.g. on its data) changes no record.
        Until model_dir holds a checkpoint, the flags may change what it records (a first run
        that failed); after, only the training-only hparams may change.

        A new experiment `init_from` another model (t2t_lite.training.warm_start) takes that
        model's architecture, and its problem, hparams set and data_dir unless given."""
        model_dir = ModelDir(model_dir)
        records = model_dir.records()
        recorded = (model_dir.read_experiment(data_dir)  # names a record a checkpoint lacks
                    if model_dir.has_experiment() or model_dir.has_checkpoints() else None)
        if recorded and model_dir.has_checkpoints():
            record = cls(model_dir, recorded)
            record.check_flags_agree(problem_name, hparams_set, overrides, records)
            warm_start.check_resumed(recorded.init_from, init_from, init_from_optimizer,
                                     model_dir)
            return record
        source = warm_start.Source.find(init_from) if init_from else None
        if source:
            saved = source.experiment
            if not problem_name or problem_name == saved.problem:
                problem_name, data_dir = saved.problem, data_dir or saved.data_dir
            hparams = source.hparams(registry.hparams(hparams_set) if hparams_set else None,
                                     overrides)
            hparams_set = hparams_set or saved.hparams_set
        elif recorded:
            problem_name = problem_name or recorded.problem
            hparams = (registry.hparams(hparams_set) if hparams_set
                       else recorded.hparams).override(overrides)
            hparams_set = hparams_set or recorded.hparams_set
            data_dir = data_dir or recorded.data_dir
        elif not problem_name or not hparams_set:
            raise UserError(f"{model_dir} holds no experiment yet: pass --problem and "
                            "--hparams_set to start one (or --init_from another model)")
        else:
            hparams = registry.hparams(hparams_set).override(overrides)
        experiment = Experiment(problem_name, hparams_set, hparams,
                                absolute(data_dir or model_dir.default_data_dir),
                                init_from=source.record(init_from_optimizer) if source else None)
        return cls(model_dir, experiment,
                   (records, None) if experiment != recorded else None)

    def check_flags_agree(self, problem_name, hparams_set, overrides, records):
        """Refuses flags that contradict the recorded experiment; training-only hparams
        changed by `overrides` change the experiment, to be recorded by record()."""
        saved = self.experiment
        for flag, given, value in (("problem", problem_name, saved.problem),
                                   ("hparams_set", hparams_set, saved.hparams_set)):
            if given and given != value:
                raise UserError(f"{self.model_dir} was trained with --{flag}={value}, "
                                f"not {given}: use a new --model_dir or drop the flag")
        changed = saved.hparams.override(overrides)
        differing = sorted(k for k, v in saved.hparams.to_dict().items()
                           if changed.to_dict()[k] != v)
        refused = [name for name in differing if name not in TRAINING_ONLY]
        if refused:
            raise UserError(f"{self.model_dir} was trained with other values of "
                            f"{', '.join(refused)} (see its hparams.json), which shape the "
                            "model: use a new --model_dir or drop those --hparams (only "
                            f"{', '.join(TRAINING_ONLY)} may change on resume)")
        if differing:  # recorded by record(), with the step they apply from
            self.unrecorded = (records, {
                name: [getattr(saved.hparams, name), getattr(changed, name)]
                for name in differing})
            self.experiment = saved.replace(hparams=changed)

    def record(self, step, vocabulary=None):
        """Records the experiment in model_dir if it is new or changed since it was read: once
        training starts at `step`, under the model_dir's lock. Training-only hparams changed on
        resume are logged and recorded with `step`, the first they apply to. A new experiment
        records the fingerprint of its `vocabulary` (the Vocabulary it trains with)."""
        if self.unrecorded is None:
            return
        records, change = self.unrecorded
        if self.model_dir.records() != records:
            raise UserError(f"the records of {self.model_dir} (hparams.json, problem.json) "
                            "changed while this trainer started (another trainer?): run the "
                            "same command again")
        if change is None:
            if any(text is not None for text in records):
                logger.info("%s holds no checkpoint yet: recording this run's problem, hparams "
                            "and data_dir in place of those of an earlier run", self.model_dir)
            if vocabulary is not None:
                self.experiment = self.experiment.replace(vocabulary=vocabulary.fingerprint())
            self.model_dir.write_experiment(self.experiment)
        else:
            logger.info("from step %d on, %s", step, ", ".join(
                f"{name} {old} -> {new}" for name, (old, new) in change.items()))
            self.experiment = self.experiment.replace(
                changed_on_resume=self.experiment.changed_on_resume + ({"step": step, **change},))
            self.model_dir.write_hparams(self.experiment)
        self.unrecorded = None
