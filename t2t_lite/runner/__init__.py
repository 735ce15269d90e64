"""Runner: the one composer. From a ModelDir and the Experiment it records, it builds the
collaborators (problem, vocabulary, model, Trainer, Evaluator, translators of every engine) and
wires them, as OpenNMT-tf's `runner.py` does; nothing below it takes a Runner.

TensorFlow and Keras, and the modules built on them, are imported by the methods that use them:
translating with a CTranslate2 conversion already cached in the model_dir needs neither, and
starts in a fraction of a second instead of the seconds their import takes.

A model_dir remembers how it was made, so resuming, decoding and exporting never need those flags
again, and a flag that contradicts them is refused (but training-only hparams, which a resumed
run may change and records).
"""

import logging
import os
import time

from t2t_lite import registry
from t2t_lite.config import TRAINING_ONLY
from t2t_lite.export.engines import TrainedModel, make_engine, make_exporter
from t2t_lite.model_dir import Experiment, ModelDir
from t2t_lite.training.checkpoint_list import (
    checkpoint_paths,
    forget_checkpoint,
    latest_checkpoint,
    latest_step,
    resolve_checkpoint,
)
from t2t_lite.training import warm_start
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.backend import keras_backend
from t2t_lite.utils.files import absolute, exclusive_lock, make_directory
from t2t_lite.utils.quiet_tensorflow import import_tensorflow_quietly

logger = logging.getLogger("t2t_lite")


class Runner:
    """The experiment recorded in `model_dir` (a ModelDir), as `experiment` says it is made."""

    def __init__(self, model_dir, experiment):
        self.model_dir = model_dir
        self.experiment = experiment
        self.problem = registry.problem(experiment.problem, experiment.data_dir)
        self._vocabulary = None
        # What train() records in model_dir once it holds the lock, if this experiment is not
        # recorded there yet: (model_dir.records() when they were read; the training-only
        # hparams changed on resume as {name: [old, new]}, or None to record it anew).
        self._unrecorded = None

    @property
    def problem_name(self):
        return self.experiment.problem

    @property
    def hparams_set(self):
        return self.experiment.hparams_set

    @property
    def hparams(self):
        return self.experiment.hparams

    @property
    def data_dir(self):
        return self.experiment.data_dir

    @classmethod
    def create_or_resume(cls, model_dir, problem_name=None, hparams_set=None, overrides="",
                         data_dir=None, init_from=None, init_from_optimizer=False):
        """A new experiment from the flags, or the one saved in model_dir if there is one.

        Nothing is written until train() starts training under the model_dir's lock, so that a
        run refused by the lock or failing before it trains (e.g. on its data) changes no
        record. Until model_dir holds a checkpoint, the flags may change what it records (a
        first run that failed); after, only the training-only hparams may change.

        A new experiment `init_from` another model (t2t_lite.training.warm_start) takes that
        model's architecture, and its problem, hparams set and data_dir unless given."""
        model_dir = ModelDir(model_dir)
        records = model_dir.records()
        recorded = model_dir.read_experiment(data_dir) if model_dir.has_experiment() else None
        if recorded and model_dir.has_checkpoints():
            runner = cls(model_dir, recorded)
            runner._check_flags_agree(problem_name, hparams_set, overrides, records)
            warm_start.check_resumed(runner.experiment.init_from, init_from,
                                     init_from_optimizer, model_dir)
            return runner
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
        runner = cls(model_dir, experiment)
        make_directory(model_dir.path, "model_dir")  # checked now, written when training starts
        if experiment != recorded:
            runner._unrecorded = (records, None)
        return runner

    @classmethod
    def from_model_dir(cls, model_dir, data_dir=None):
        """The experiment saved in model_dir; data_dir overrides where its data now lives."""
        model_dir = ModelDir(model_dir)
        return cls(model_dir, model_dir.read_experiment(data_dir))

    def _check_flags_agree(self, problem_name, hparams_set, overrides, records):
        for flag, given, saved in (("problem", problem_name, self.problem_name),
                                   ("hparams_set", hparams_set, self.hparams_set)):
            if given and given != saved:
                raise UserError(f"{self.model_dir} was trained with --{flag}={saved}, "
                                f"not {given}: use a new --model_dir or drop the flag")
        changed = self.hparams.override(overrides)
        differing = sorted(k for k, v in self.hparams.to_dict().items()
                           if changed.to_dict()[k] != v)
        refused = [name for name in differing if name not in TRAINING_ONLY]
        if refused:
            raise UserError(f"{self.model_dir} was trained with other values of "
                            f"{', '.join(refused)} (see its hparams.json), which shape the "
                            "model: use a new --model_dir or drop those --hparams (only "
                            f"{', '.join(TRAINING_ONLY)} may change on resume)")
        if differing:  # recorded by train(), with the step they apply from
            self._unrecorded = (records, {
                name: [getattr(self.hparams, name), getattr(changed, name)]
                for name in differing})
            self.experiment = self.experiment.replace(hparams=changed)

    def record_experiment(self):
        """Records the experiment in model_dir now, under its lock, as train() does when it
        starts training: for a model trained, or checkpoints saved, by other means."""
        with self._lock(None):
            self._record(latest_step(self.model_dir.path))

    def _record(self, step):
        """Records the experiment in model_dir if it is new or changed since it was read: once
        training starts at `step`, under the model_dir's lock. Training-only hparams changed on
        resume are logged and recorded with `step`, the first they apply to."""
        if self._unrecorded is None:
            return
        records, change = self._unrecorded
        if self.model_dir.records() != records:
            raise UserError(f"the records of {self.model_dir} (hparams.json, problem.json) "
                            "changed while this trainer started (another trainer?): run the "
                            "same command again")
        if change is None:
            if any(text is not None for text in records):
                logger.info("%s holds no checkpoint yet: recording this run's problem, hparams "
                            "and data_dir in place of those of an earlier run", self.model_dir)
            self.model_dir.write_experiment(self.experiment)
        else:
            logger.info("from step %d on, %s", step, ", ".join(
                f"{name} {old} -> {new}" for name, (old, new) in change.items()))
            self.experiment = self.experiment.replace(
                changed_on_resume=self.experiment.changed_on_resume + ({"step": step, **change},))
            self.model_dir.write_hparams(self.experiment)
        self._unrecorded = None

    @property
    def vocabulary(self):
        if self._vocabulary is None:
            self._vocabulary = self.problem.vocabulary(self.data_dir)
        return self._vocabulary

    # Models and the engines that run them.

    def restored_model(self, checkpoint_path=None):
        """The model of checkpoint_path (a checkpoint or a directory of them), or of the latest
        checkpoint in model_dir; without its optimizer."""
        return self._restore_model(resolve_checkpoint(self.model_dir.path, checkpoint_path))

    def _restore_model(self, path):
        """The model of the checkpoint at `path`, an existing checkpoint prefix (of either
        trainer; see t2t_lite.training.model_weights)."""
        if keras_backend() == "tensorflow":
            import_tensorflow_quietly()
        from t2t_lite.models.transformer import create_model
        from t2t_lite.training.model_weights import restore_model

        model = create_model(self.hparams, self.vocabulary.size)
        restore_model(model, path, f"{self.model_dir}/hparams.json")
        logger.info("restored %s", path)
        return model

    def trained_model(self, checkpoint_path=None, model=None):
        """What an engine runs: `model`, or the model of checkpoint_path (default: the latest
        checkpoint), restored when first needed."""
        return TrainedModel(self.model_dir, self.problem, self.vocabulary, self.hparams,
                            self._restore_model, checkpoint_path, model)

    def decoding_hparams(self, **decoding):
        """The hparams with the decoding ones changed (beam_size, alpha, extra_length; None keeps
        a value)."""
        return self.hparams.replace(**{name: value for name, value in decoding.items()
                                       if value is not None})

    def translator(self, model=None, *, checkpoint_path=None, batch_size=32,
                   engine="tensorflow", quantization="float32", sampling=None, **decoding):
        """A translator of `engine` (see t2t_lite.export.engines) running `model` (default:
        restored from checkpoint_path or the latest checkpoint) with the model_dir's decoding
        hparams changed by `decoding` (beam_size, alpha, extra_length); with `sampling` (a
        t2t_lite.decoding.sampling.Sampling) it draws samples instead of searching."""
        return make_engine(engine).translator(self.trained_model(checkpoint_path, model),
                                              self.decoding_hparams(**decoding), batch_size,
                                              quantization, sampling)

    def export(self, format_name="saved_model", export_dir=None, *, checkpoint_path=None,
               quantization="float32", **decoding):
        """Writes the model as a new numbered version of export_dir (default: MODEL_DIR/export,
        or the format's own) in `format_name`; returns the version's path."""
        exporter = make_exporter(format_name)
        return exporter.export(self.trained_model(checkpoint_path),
                               self.decoding_hparams(**decoding),
                               export_dir or self.model_dir.export_dir(format_name),
                               quantization)

    def attention(self, sources, targets=None, *, translator=None, checkpoint_path=None):
        """The attention weights (t2t_lite.decoding.attention.Attention) of each source with
        its target, or without targets with its translation by `translator` (default: the
        decoder's beam search on checkpoint_path, or the latest checkpoint), whose model is
        explained. Targets are the target side's text, as the model outputs it before the
        problem's postprocess (for parsing: a linearized tree, `S NP DT NN /NP ... /S`)."""
        if translator is None:
            translator = self.translator(checkpoint_path=checkpoint_path)
        if targets is None:
            targets = [t.text for t in translator.translate(sources)]
        if len(targets) != len(sources):
            raise UserError(f"{len(sources)} sources but {len(targets)} targets: attention "
                            "needs one target per source")
        from t2t_lite.decoding.attention import attention_weights

        vocabulary = translator.vocabulary
        return attention_weights(translator, [vocabulary.encode(s) for s in sources],
                                 [vocabulary.encode_target(t) for t in targets])

    def evaluator(self, translator, split="dev", bleu_tokenize=None):
        """An Evaluator of `translator` on all of `split`, as the decoder's --split scores it."""
        from t2t_lite.evaluation.evaluator import Evaluator

        return Evaluator(self.problem, translator, self.data_dir, split=split,
                         decode_examples=None, bleu_tokenize=bleu_tokenize)

    # Data and training.

    def prepare_data(self, generate=False, raw_dir=None, strategy=None):
        """Runs datagen when data is missing and the user asked, or the problem needs no
        download (Problem.prepare_data); of the workers of a multi-worker `strategy`, only the
        chief generates."""
        chief = True
        if strategy is not None:  # tf.distribute's; the JAX trainer's runs have none
            from t2t_lite.training import distribution

            chief = distribution.worker_index(strategy)[0] == 0
        self.problem.prepare_data(self.data_dir, generate, raw_dir, chief)

    def trainer(self, strategy=None, jit_compile=False):
        """A Trainer restored from the latest checkpoint in model_dir, if any."""
        from t2t_lite.training.checkpoints import DamagedCheckpoint, restore_existing
        from t2t_lite.training.model_weights import check_resumable
        from t2t_lite.training.trainer import Trainer

        trainer = Trainer(self.hparams, self.vocabulary.size, strategy, jit_compile)
        latest = latest_checkpoint(self.model_dir.path)
        if latest:
            check_resumable(latest, "tensorflow")
            try:
                restore_existing(trainer.checkpoint, latest)
            except DamagedCheckpoint as error:
                logger.warning("%s: resuming from the newest intact one before it",
                               error.damage)
                forget_checkpoint(self.model_dir.path, latest)
                return self.trainer(strategy, jit_compile)
            except ValueError as error:  # e.g. the embeddings of another vocabulary size
                raise UserError(
                    f"{latest} does not fit a model for the {self.vocabulary.size}-piece "
                    f"vocabulary of {self.data_dir} ({error}): pass the --data_dir it was "
                    "trained on") from None
            logger.info("restored %s (step %d)", latest, trainer.step)
        elif self.experiment.init_from:  # a new model_dir, started from another model
            source = Runner.from_model_dir(self.experiment.init_from["model_dir"])
            self.experiment = self.experiment.replace(init_from=warm_start.start(
                trainer, self.experiment.init_from, source.vocabulary, self.vocabulary,
                self.data_dir, source._restore_model))
        return trainer

    def train(self, config, *, strategy=None, trainer=None):
        """Trains as the TrainConfig `config` says (to config.train_steps updates, or for
        config.train_minutes from now), checkpointing and evaluating on dev along the way;
        returns the final evaluation.

        Resumes from the latest checkpoint in model_dir, data position included. See
        t2t_lite.evaluation.evaluator for the evaluations, the best checkpoint (best/), early
        stopping and the average at the end (avg/). Under MultiWorkerMirroredStrategy every
        worker runs this; only the chief writes into model_dir (the others write into a
        temporary directory).
        """
        if keras_backend() == "jax":
            from t2t_lite.runner.jax_training import train_on_jax

            return train_on_jax(self, config)
        deadline = time.monotonic() + 60 * config.train_minutes if config.train_minutes else None
        tf = import_tensorflow_quietly()
        import keras

        from t2t_lite.decoding.replicated import ReplicatedTranslation
        from t2t_lite.evaluation.evaluator import Evaluator
        from t2t_lite.training import distribution

        strategy = trainer.strategy if trainer else strategy or tf.distribute.get_strategy()
        with (self._lock(strategy), self.problem.damaged_data_named(self.data_dir),
              distribution.write_dir(self.model_dir.path, strategy) as write_path):
            output_dir = ModelDir(write_path)
            chief = write_path == self.model_dir.path
            if chief:  # a missing checkpoint is named, and the list names those there
                latest_checkpoint(self.model_dir.path, repair=True)
            if trainer is None:
                if config.random_seed is not None:
                    keras.utils.set_random_seed(config.random_seed)
                trainer = self.trainer(strategy, config.jit_compile)
            resume_from = latest_checkpoint(self.model_dir.path)  # trainer() restored it
            if chief:
                self._record(trainer.step)
            translator = self.translator(trainer.model, beam_size=config.eval_beam_size)
            evaluator = Evaluator(
                self.problem, translator, self.data_dir, trainer=trainer,
                eval_steps=config.eval_steps, decode_examples=config.eval_decode_examples,
                keep_best_by=config.keep_best_by, early_stopping=config.early_stopping,
                min_delta=config.early_stopping_min_delta, model_dir=self.model_dir,
                output_dir=output_dir, bleu_tokenize=config.bleu_tokenize,
                translate=ReplicatedTranslation(translator, strategy))
            logger.info("training %s with %s parameters on %d replica(s), step %d of %d",
                        self.problem.name, f"{trainer.model.count_params():,}",
                        strategy.num_replicas_in_sync, trainer.step, config.train_steps)

            def dataset_fn(input_context):
                return self.problem.dataset("train", self.data_dir, self.hparams, training=True,
                                            input_context=input_context,
                                            seed=config.random_seed)

            def evaluate_before_the_end(step):
                """Returns True to stop training early."""
                if step == config.train_steps:
                    return False
                evaluator.evaluate(step, decode=config.decodes_at(step))
                return evaluator.should_stop()

            if evaluator.should_stop():  # a resumed run that had stopped early
                step = trainer.step
            else:
                step = trainer.train(
                    dataset_fn, config.train_steps, checkpoint_dir=write_path,
                    keep_checkpoints=config.keep_checkpoints, resume_from=resume_from,
                    save_every=config.save_interval, log_every=config.log_every,
                    periodic=[(config.eval_every, evaluate_before_the_end)],
                    summary_dir=output_dir.summaries("train"), deadline=deadline)
            metrics = evaluator.final(step)
            if config.average_last or config.average_best:
                chosen, how = evaluator.checkpoints_to_average(
                    checkpoint_paths(write_path), last=config.average_last,
                    best=config.average_best)
                if chosen:
                    evaluator.report_average(output_dir.avg, self.average(
                        chosen, output_dir.avg, replace=True), chosen, how)
            return metrics

    def average(self, paths, output_dir, info=None, replace=False):
        """Writes the average of the checkpoints `paths` as the model_dir output_dir (see
        t2t_lite.training.averaging); returns its checkpoint's path."""
        from t2t_lite.runner.jax_training import new_trainer
        from t2t_lite.training.averaging import average_checkpoints

        return average_checkpoints(new_trainer(self, keras_backend()), paths, self.model_dir,
                                   output_dir, info, replace)

    def _lock(self, strategy):
        """One trainer per model_dir (and per worker of a multi-worker run)."""
        worker = (0, 1)
        if strategy is not None:
            from t2t_lite.training import distribution

            worker = distribution.worker_index(strategy)
        os.makedirs(self.model_dir.path, exist_ok=True)
        return exclusive_lock(self.model_dir.trainer_lock(*worker), self.model_dir.path)
