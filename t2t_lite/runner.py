"""Runner: the one composer. From a ModelDir and the experiment it records
(t2t_lite.experiment), it builds the collaborators (problem, vocabulary, model, trainer,
Evaluator, translators of every engine) and wires them, as OpenNMT-tf's `runner.py` does;
nothing below it takes a Runner. Training is written once, against the Backend of the Keras
backend this process runs (t2t_lite.backends); where the work goes is a Distribution.

TensorFlow and Keras, and the modules built on them, are imported by the methods that use them:
translating with a CTranslate2 conversion already cached in the model_dir needs neither, and
starts in a fraction of a second instead of the seconds their import takes.
"""

import logging
import os

from t2t_lite import backends, registry
from t2t_lite.experiment import ExperimentRecord
from t2t_lite.export.engines import TrainedModel, make_engine, make_exporter
from t2t_lite.model_dir import ModelDir
from t2t_lite.training import warm_start
from t2t_lite.training.budget import TimeBudget
from t2t_lite.training.regularization import SizedRegularization, training_tokens
from t2t_lite.training.time_account import TimeAccount
from t2t_lite.training.checkpoint_list import (
    DamagedCheckpoint,
    checkpoint_paths,
    forget_checkpoint,
    latest_checkpoint,
    latest_step,
    resolve_checkpoint,
)
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import exclusive_lock, make_directory

logger = logging.getLogger("t2t_lite")


class Runner:
    """The experiment recorded in `record.model_dir` (an ExperimentRecord), as its experiment
    says it is made."""

    def __init__(self, record):
        self._record = record
        self.model_dir = record.model_dir
        self.problem = registry.problem(record.experiment.problem, record.experiment.data_dir)
        self._vocabulary = None

    @property
    def experiment(self):
        return self._record.experiment

    @experiment.setter
    def experiment(self, experiment):
        self._record.experiment = experiment

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
        """A new experiment from the flags, or the one saved in model_dir if there is one; see
        ExperimentRecord.create_or_resume. Recorded when train() starts training."""
        runner = cls(ExperimentRecord.create_or_resume(model_dir, problem_name, hparams_set,
                                                       overrides, data_dir, init_from,
                                                       init_from_optimizer))
        make_directory(runner.model_dir.path, "model_dir")  # checked now, written in train()
        return runner

    @classmethod
    def from_model_dir(cls, model_dir, data_dir=None):
        """The experiment saved in model_dir; data_dir overrides where its data now lives."""
        return cls(ExperimentRecord.read(model_dir, data_dir))

    def record_experiment(self):
        """Records the experiment in model_dir now, under its lock, as train() does when it
        starts training: for a model trained, or checkpoints saved, by other means."""
        with self._lock(None):
            self._record.record(latest_step(self.model_dir.path), self.vocabulary)

    @property
    def vocabulary(self):
        """The vocabulary of the data_dir; the one model_dir recorded it was trained with (a
        vocabulary of another size is named where the checkpoint does not fit it)."""
        if self._vocabulary is None:
            vocabulary = self.problem.vocabulary(self.data_dir)
            recorded = self.experiment.vocabulary
            if recorded and vocabulary.fingerprint() != recorded:
                raise UserError(f"{self.data_dir} holds another {vocabulary.size}-piece "
                                f"vocabulary than the one {self.model_dir} was trained with "
                                "(made from another corpus?): pass the --data_dir it was "
                                "trained on")
            self._vocabulary = vocabulary
        return self._vocabulary

    # Models and the engines that run them.

    def restored_model(self, checkpoint_path=None):
        """The model of checkpoint_path (a checkpoint or a directory of them), or of the latest
        checkpoint in model_dir; without its optimizer."""
        return self._restore_model(resolve_checkpoint(self.model_dir.path, checkpoint_path))

    def _restore_model(self, path):
        """The model of the checkpoint at `path`, an existing checkpoint prefix (of either
        trainer; see t2t_lite.training.model_weights)."""
        backends.current().import_framework()
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

    def translator(self, model=None, *, checkpoint_path=None, batch_size=32, engine=None,
                   quantization="float32", sampling=None, **decoding):
        """A translator of `engine` (see t2t_lite.export.engines; default: the backend's own)
        running `model` (default: restored from checkpoint_path or the latest checkpoint; a
        decoding.ensemble.Ensemble too) with the model_dir's decoding hparams changed by
        `decoding` (beam_size, alpha, extra_length); with `sampling` (a
        t2t_lite.decoding.sampling.Sampling) it draws samples instead of searching."""
        engine = make_engine(engine or backends.current().name)
        return engine.translator(self.trained_model(checkpoint_path, model),
                                 self.decoding_hparams(**decoding), batch_size, quantization,
                                 sampling)

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

    def evaluator(self, translator, split="dev", bleu_tokenize=None, translate=None):
        """An Evaluator of `translator` on all of `split`, as the decoder's --split scores it
        (`translate`: instead of translator.translate_tokens, e.g. with a glossary)."""
        from t2t_lite.evaluation.evaluator import Evaluator

        return Evaluator(self.problem, translator, self.data_dir, split=split,
                         decode_examples=None, bleu_tokenize=bleu_tokenize, translate=translate)

    def data_errors_named(self):
        """A context in which reading a damaged shard of the data_dir is a UserError naming it
        and the datagen run that mends it."""
        return backends.current().data_errors_named(self.problem, self.data_dir)

    # Data and training.

    def prepare_data(self, generate=False, raw_dir=None, distribution=None):
        """Runs datagen when data is missing and the user asked, or the problem needs no
        download (Problem.prepare_data); of the workers of a multi-worker `distribution`, only
        the chief generates."""
        chief = distribution is None or distribution.is_chief
        self.problem.prepare_data(self.data_dir, generate, raw_dir, chief)

    def trainer(self, distribution=None, jit_compile=False):
        """A trainer of this process's backend over `distribution` (default: the current
        one), restored from the newest intact checkpoint in model_dir, if any, or else started
        from the model of --init_from, if any."""
        from t2t_lite.training.model_weights import check_resumable

        backend = backends.current()
        trainer = backend.trainer(self.hparams, self.vocabulary.size,
                                  distribution or backend.distribution(), jit_compile)
        latest = latest_checkpoint(self.model_dir.path)
        if latest:
            check_resumable(latest, backend.name)
            try:
                trainer.restore(latest)
            except DamagedCheckpoint as error:
                logger.warning("%s: resuming from the newest intact one before it",
                               error.damage)
                forget_checkpoint(self.model_dir.path, latest)
                return self.trainer(distribution, jit_compile)
            except ValueError as error:  # e.g. the embeddings of another vocabulary size
                raise UserError(
                    f"{latest} does not fit a model for the {self.vocabulary.size}-piece "
                    f"vocabulary of {self.data_dir} ({error}): pass the --data_dir it was "
                    "trained on") from None
            logger.info("restored %s (step %d)", latest, trainer.step)
        elif self.experiment.init_from:  # a new model_dir, started from another model
            started = self.experiment.init_from
            if started["optimizer"]:
                check_resumable(started["checkpoint"], backend.name)
            source = Runner.from_model_dir(started["model_dir"])
            try:
                self.experiment = self.experiment.replace(init_from=warm_start.start(
                    trainer, started, source.vocabulary, self.vocabulary, self.data_dir,
                    source._restore_model))
            except DamagedCheckpoint as error:  # the trainer names checkpoints by --init_from
                raise UserError(error.fix("--init_from")) from None
            trainer.reload()  # the weights were set in the Keras variables
        return trainer

    def train(self, config, *, distribution=None, trainer=None):
        """Trains as the TrainConfig `config` says (to config.train_steps updates, or for
        config.train_minutes from now), checkpointing and evaluating on dev along the way;
        returns the final evaluation.

        Resumes from the latest checkpoint in model_dir, data position included. See
        t2t_lite.evaluation.evaluator for the evaluations, the best checkpoint (best/), early
        stopping and the average at the end (avg/). In a multi-worker `distribution` every
        worker runs this; only the chief writes into model_dir (the others write into a
        temporary directory).
        """
        account = TimeAccount()  # where the run's time goes, logged at its end
        # An explicit --save_every keeps its spacing; otherwise the budget spreads the
        # checkpoints --average_last averages over its cool-down.
        budget = None
        if config.train_minutes:
            corpus_tokens = training_tokens(self.problem.stats("train", self.data_dir))
            budget = TimeBudget(config.train_minutes, self.hparams.budget_cooldown,
                                averaged=0 if config.save_every else config.average_last,
                                corpus_tokens=corpus_tokens,
                                sized=SizedRegularization.of(self.hparams, corpus_tokens),
                                suggest_sampling=self.problem.could_sample_subwords())
        started = self.experiment.init_from
        if (started and started["optimizer"] and not latest_checkpoint(self.model_dir.path)
                and config.train_steps <= started["step"]):
            raise UserError(
                f"--init_from_optimizer carries over step {started['step']} of "
                f"{started['checkpoint']}, so --train_steps={config.train_steps} leaves nothing "
                f"to train: pass a --train_steps above {started['step']} (updates in all)")
        backend = backends.current()
        backend.import_framework()
        import keras

        from t2t_lite.evaluation.evaluator import Evaluator

        distribution = (trainer.distribution if trainer else
                        distribution or backend.distribution())
        with (self._lock(distribution), self.data_errors_named(),
              distribution.write_dir(self.model_dir.path) as write_path):
            output_dir = ModelDir(write_path)
            self.problem.check_data("dev", self.data_dir)  # every run ends evaluating on dev
            if config.keep_best_by:  # named before an update, not after the evaluation
                self.model_dir.best.read_info()
            if distribution.is_chief:  # a missing checkpoint is named; the list names those there
                latest_checkpoint(self.model_dir.path, repair=True)
            if trainer is None:
                if config.random_seed is not None:
                    keras.utils.set_random_seed(config.random_seed)
                trainer = self.trainer(distribution, config.jit_compile)
            resume_from = latest_checkpoint(self.model_dir.path)  # trainer() restored it
            if distribution.is_chief:
                self._record.record(trainer.step, self.vocabulary)
            translator = self.translator(trainer.model, engine=backend.name,
                                         beam_size=config.eval_beam_size)
            evaluator = Evaluator(
                self.problem, translator, self.data_dir, trainer=trainer,
                eval_steps=config.eval_steps, decode_examples=config.eval_decode_examples,
                keep_best_by=config.keep_best_by, early_stopping=config.early_stopping,
                min_delta=config.early_stopping_min_delta, model_dir=self.model_dir,
                output_dir=output_dir, bleu_tokenize=config.bleu_tokenize,
                translate=backend.translate_on_devices(translator, distribution))
            logger.info("training %s with %s parameters on %s, step %d of %d",
                        self.problem.name, f"{trainer.model.count_params():,}",
                        distribution.describe(), trainer.step, config.train_steps)
            if budget:
                logger.info(budget.describe())

            def evaluate_before_the_end(step):
                """Returns True to stop training early."""
                if step == config.train_steps:
                    return False
                with account.measuring("evaluations"):
                    evaluator.evaluate(step, decode=config.decodes_at(step))
                return evaluator.should_stop()

            if evaluator.should_stop():  # a resumed run that had stopped early
                step = trainer.step
            else:
                data = backend.training_data(self.problem, self.data_dir, self.hparams,
                                             config.random_seed, distribution)
                step = trainer.train(
                    data, config.train_steps, checkpoint_dir=write_path,
                    keep_checkpoints=config.keep_checkpoints, resume_from=resume_from,
                    save_every=config.save_interval, log_every=config.log_every,
                    periodic=[(config.eval_every, evaluate_before_the_end)],
                    summary_dir=output_dir.summaries("train"), budget=budget, account=account)
            with account.measuring("final evaluation"):
                metrics = evaluator.final(step)
            if config.average_last or config.average_best:
                with account.measuring("averaging"):
                    chosen, how = evaluator.checkpoints_to_average(
                        checkpoint_paths(write_path), last=config.average_last,
                        best=config.average_best)
                    if chosen:
                        evaluator.report_average(output_dir.avg, self.average(
                            chosen, output_dir.avg, replace=True), chosen, how)
            logger.info(account.describe())
            return metrics

    def average(self, paths, output_dir, info=None, replace=False):
        """Writes the average of the checkpoints `paths` as the model_dir output_dir (see
        t2t_lite.training.averaging); returns its checkpoint's path."""
        from t2t_lite.training.averaging import average_checkpoints

        trainer = backends.current().trainer(self.hparams, self.vocabulary.size)
        return average_checkpoints(trainer, paths, self.model_dir, output_dir, info, replace)

    def _lock(self, distribution):
        """One trainer per model_dir (and per worker of a multi-worker run)."""
        worker = (distribution.worker, distribution.workers) if distribution else (0, 1)
        os.makedirs(self.model_dir.path, exist_ok=True)
        return exclusive_lock(self.model_dir.trainer_lock(*worker), self.model_dir.path)
