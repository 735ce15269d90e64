"""Runner: one experiment in a model_dir (problem, hparams, data), trained and evaluated.

A model_dir remembers how it was made in hparams.json and problem.json, so resuming, decoding and
exporting never need those flags again, and a flag that contradicts them is refused.
"""

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time

import keras
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.config import TRAINING_ONLY, HParams
from t2t_lite.decoding.attention import attention_weights
from t2t_lite.decoding.translator import Translator
from t2t_lite.evaluation.evaluator import DECODE_EXAMPLES, Evaluator
from t2t_lite.training.checkpoints import (
    DamagedCheckpoint,
    checkpoint_step,
    forget_checkpoint,
    resolve_checkpoint,
    restore_existing,
)
from t2t_lite.training.trainer import Trainer, create_model, worker_index
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import exclusive_lock, make_directory, write_text_atomically

logger = logging.getLogger("t2t_lite")

HPARAMS_FILE = "hparams.json"
HPARAMS_HISTORY = "changed_on_resume"  # in HPARAMS_FILE: [{"step": N, name: [old, new], ...}]
PROBLEM_FILE = "problem.json"


class Runner:
    def __init__(self, model_dir, problem_name, hparams_set, hparams, data_dir):
        self.model_dir = model_dir
        self.problem_name = problem_name
        self.hparams_set = hparams_set
        self.problem = registry.problem(problem_name, data_dir)
        self.hparams = hparams
        self.data_dir = data_dir
        self._vocabulary = None

    @classmethod
    def create_or_resume(cls, model_dir, problem_name=None, hparams_set=None, overrides="",
                         data_dir=None):
        """A new experiment from the flags, or the one saved in model_dir if there is one."""
        model_dir = _absolute(model_dir)
        if os.path.exists(os.path.join(model_dir, HPARAMS_FILE)):
            runner = cls.from_model_dir(model_dir, data_dir)
            runner._check_flags_agree(problem_name, hparams_set, overrides)
            return runner
        if not problem_name or not hparams_set:
            raise UserError(f"{model_dir} holds no experiment yet: pass --problem and "
                            "--hparams_set to start one")
        hparams = registry.hparams(hparams_set).override(overrides)
        runner = cls(model_dir, problem_name, hparams_set, hparams,
                     _absolute(data_dir or os.path.join(model_dir, "data")))
        make_directory(model_dir, "model_dir")
        runner._write_hparams(history=[])
        write_text_atomically(
            os.path.join(model_dir, PROBLEM_FILE),
            json.dumps({"problem": problem_name, "hparams_set": hparams_set,
                        "data_dir": runner.data_dir}, indent=2) + "\n")
        return runner

    @classmethod
    def from_model_dir(cls, model_dir, data_dir=None):
        """The experiment saved in model_dir; data_dir overrides where its data now lives."""
        model_dir = _absolute(model_dir)
        try:
            hparams = HParams.from_dict(_read_hparams_file(model_dir)[0])
            with open(os.path.join(model_dir, PROBLEM_FILE), encoding="utf-8") as f:
                saved = json.load(f)
        except FileNotFoundError as error:
            raise UserError(f"{model_dir} is not a t2t_lite model_dir ({error.filename} is "
                            "missing): train one there with t2t-lite-trainer") from None
        return cls(model_dir, saved["problem"], saved["hparams_set"], hparams,
                   _absolute(data_dir) if data_dir else saved["data_dir"])

    def _check_flags_agree(self, problem_name, hparams_set, overrides):
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
                            f"{', '.join(refused)} (see its {HPARAMS_FILE}), which shape the "
                            "model: use a new --model_dir or drop those --hparams (only "
                            f"{', '.join(TRAINING_ONLY)} may change on resume)")
        if differing:
            self._change_training_hparams(changed, differing)

    def _change_training_hparams(self, changed, names):
        """Resumes with other values of training-only hparams, logged and recorded in
        HPARAMS_FILE with the step they apply from."""
        latest = tf.train.latest_checkpoint(self.model_dir)
        step = checkpoint_step(latest) if latest else 0
        change = {name: [getattr(self.hparams, name), getattr(changed, name)] for name in names}
        logger.info("from step %d on, %s", step, ", ".join(
            f"{name} {old} -> {new}" for name, (old, new) in change.items()))
        self.hparams = changed
        history = _read_hparams_file(self.model_dir)[1]
        self._write_hparams(history + [{"step": step, **change}])

    def _write_hparams(self, history):
        values = self.hparams.to_dict()
        if history:
            values[HPARAMS_HISTORY] = history
        write_text_atomically(os.path.join(self.model_dir, HPARAMS_FILE),
                              json.dumps(values, indent=2, sort_keys=True) + "\n")

    @property
    def vocabulary(self):
        if self._vocabulary is None:
            self._vocabulary = self.problem.vocabulary(self.data_dir)
        return self._vocabulary

    def restored_model(self, checkpoint_path=None):
        """The model of checkpoint_path (a checkpoint or a directory of them), or of the latest
        checkpoint in model_dir; without its optimizer."""
        path = resolve_checkpoint(self.model_dir, checkpoint_path)
        model = create_model(self.hparams, self.vocabulary.size)
        try:
            restore_existing(tf.train.Checkpoint(model=model), path)
        except AssertionError:
            raise UserError(f"{path} does not hold the weights of the model in "
                            f"{self.model_dir}/{HPARAMS_FILE}") from None
        logger.info("restored %s", path)
        return model

    def translator(self, model=None, *, checkpoint_path=None, batch_size=32,
                   engine="tensorflow", quantization="float32", **decoding):
        """A Translator of `model` (default: restored from checkpoint_path or the latest
        checkpoint) with the model_dir's decoding hparams changed by `decoding` (beam_size,
        alpha, extra_length; None keeps a value). engine="ctranslate2" gives a
        CTranslate2Translator of the checkpoint, in `quantization`, instead."""
        changes = {name: value for name, value in decoding.items() if value is not None}
        hparams = self.hparams.replace(**changes)
        if engine == "ctranslate2":
            from t2t_lite.decoding.ctranslate2_translator import ctranslate2_translator

            if self.problem.search_constraint(self.vocabulary) is not None:
                raise UserError(f"{self.problem.name} needs a constrained search (e.g. to well-"
                                "formed trees), which CTranslate2 cannot run: use "
                                "--engine=tensorflow")

            return ctranslate2_translator(self, checkpoint_path, hparams, batch_size,
                                          quantization)
        if model is None:
            model = self.restored_model(checkpoint_path)
        return Translator(model, self.vocabulary, hparams, batch_size,
                          self.problem.search_constraint(self.vocabulary),
                          self.problem.tf_postprocess(self.vocabulary))

    def attention(self, sources, targets=None, *, translator=None, checkpoint_path=None):
        """The attention weights (t2t_lite.decoding.attention.Attention) of each source with its target,
        or without targets with its translation by `translator` (default: the decoder's beam
        search on checkpoint_path, or the latest checkpoint), whose model is explained."""
        if translator is None:
            translator = self.translator(checkpoint_path=checkpoint_path)
        if targets is None:
            targets = [t.text for t in translator.translate(sources)]
        if len(targets) != len(sources):
            raise UserError(f"{len(sources)} sources but {len(targets)} targets: attention "
                            "needs one target per source")
        encode = translator.vocabulary.encode
        return attention_weights(translator, [encode(s) for s in sources],
                                 [encode(t) for t in targets])

    def use_bleu_tokenizer(self, name):
        """Scores BLEU with sacreBLEU's tokenizer `name`, not the target language's."""
        if not hasattr(self.problem, "bleu_tokenize"):
            raise UserError(f"--bleu_tokenize={name}: {self.problem.name} is not scored with "
                            f"BLEU but with {', '.join(self.problem.metric_names)}")
        self.problem.bleu_tokenize = name

    def prepare_data(self, generate=False, raw_dir=None, strategy=None, poll_seconds=2.0):
        """Runs datagen when data is missing and the user asked, or the problem needs no download.

        Of the workers of a multi-worker `strategy`, only the chief generates; the others wait
        until its data is complete."""
        make_directory(self.data_dir, "data_dir")
        if self._has_training_data():
            return
        if not (generate or self.problem.self_contained):
            raise UserError(
                f"no data for problem {self.problem.name} in {self.data_dir}: run "
                f"`t2t-lite-datagen --problem={self.problem.name} --data_dir={self.data_dir}` "
                "or pass --generate_data")
        if strategy is not None and worker_index(strategy)[0] != 0:
            logger.info("waiting for the chief to generate data for %s in %s",
                        self.problem.name, self.data_dir)
            while not self._has_training_data():
                time.sleep(poll_seconds)
            return
        logger.info("generating data for %s in %s", self.problem.name, self.data_dir)
        self.problem.generate_data(self.data_dir, raw_dir)

    def _has_training_data(self):
        return all(self.problem.has_data(self.data_dir, split) for split in ("train", "dev"))

    def trainer(self, strategy=None, jit_compile=False):
        """A Trainer restored from the latest checkpoint in model_dir, if any."""
        trainer = Trainer(self.hparams, self.vocabulary.size, strategy, jit_compile)
        latest = tf.train.latest_checkpoint(self.model_dir)
        if latest:
            try:
                restore_existing(trainer.checkpoint, latest)
            except DamagedCheckpoint as error:
                logger.warning("%s: resuming from the newest intact one before it",
                               error.damage)
                forget_checkpoint(self.model_dir, latest)
                return self.trainer(strategy, jit_compile)
            except ValueError as error:  # e.g. the embeddings of another vocabulary size
                raise UserError(
                    f"{latest} does not fit a model for the {self.vocabulary.size}-piece "
                    f"vocabulary of {self.data_dir} ({error}): pass the --data_dir it was "
                    "trained on") from None
            logger.info("restored %s (step %d)", latest, trainer.step)
        return trainer

    def train(self, train_steps, *, strategy=None, trainer=None, jit_compile=False, seed=None,
              eval_every=1000, save_every=None, eval_steps=None,
              decode_examples=DECODE_EXAMPLES, decode_every=None, beam_size=1,
              keep_best_by=None, early_stopping=0, min_delta=0.0, average_last=0,
              average_best=0, keep_checkpoints=20, log_every=100):
        """Trains to `train_steps`, checkpointing and evaluating on dev along the way; returns
        the final evaluation.

        Resumes from the latest checkpoint in model_dir, data position included. Evaluations
        every `decode_every` updates (default: each one) and the final one also decode a
        representative sample of at most `decode_examples` dev examples (greedy, or beam search
        when beam_size > 1) for the problem's metrics (see t2t_lite.evaluation.evaluator). With
        keep_best_by, the checkpoint with the best value of that metric so far is kept as the
        model_dir `best/`, and `early_stopping` N ends training after N evaluations that did not
        improve it by more than min_delta. `average_last` N (or `average_best` N, by
        keep_best_by) averages those checkpoints at the end into the model_dir `avg/` and
        reports its metrics beside the last and the best checkpoint's. `seed` makes
        initialization, dropout and the order of the data repeatable. Under
        MultiWorkerMirroredStrategy every worker runs this; only the chief writes into model_dir
        (the others write into a temporary directory).
        """
        if average_best and not keep_best_by:
            raise UserError("--average_best needs --keep_best_by: the metric that ranks the "
                            "checkpoints")
        strategy = trainer.strategy if trainer else strategy or tf.distribute.get_strategy()
        with self._lock(strategy), _write_dir(self.model_dir, strategy) as write_dir:
            if trainer is None:
                if seed is not None:
                    keras.utils.set_random_seed(seed)
                trainer = self.trainer(strategy, jit_compile)
            resume_from = tf.train.latest_checkpoint(self.model_dir)  # the one trainer() restored
            evaluator = Evaluator(
                self, self.translator(trainer.model, beam_size=beam_size), trainer=trainer,
                eval_steps=eval_steps, decode_examples=decode_examples,
                keep_best_by=keep_best_by, early_stopping=early_stopping, min_delta=min_delta,
                output_dir=write_dir)
            logger.info("training %s with %s parameters on %d replica(s), step %d of %d",
                        self.problem.name, f"{trainer.model.count_params():,}",
                        strategy.num_replicas_in_sync, trainer.step, train_steps)

            def dataset_fn(input_context):
                return self.problem.dataset("train", self.data_dir, self.hparams, training=True,
                                            input_context=input_context, seed=seed)

            def evaluate_before_the_end(step):
                """Returns True to stop training early."""
                if step == train_steps:
                    return False
                evaluator.evaluate(step, decode=not decode_every or step % decode_every == 0)
                return evaluator.should_stop()

            if evaluator.should_stop():  # a resumed run that had stopped early
                step = trainer.step
            else:
                step = trainer.train(
                    dataset_fn, train_steps, checkpoint_dir=write_dir,
                    keep_checkpoints=keep_checkpoints, resume_from=resume_from,
                    save_every=save_every or eval_every or train_steps, log_every=log_every,
                    periodic=[(eval_every, evaluate_before_the_end)],
                    summary_dir=os.path.join(write_dir, "train"))
            metrics = evaluator.final(step)
            if average_last or average_best:
                evaluator.average(write_dir, last=average_last, best=average_best)
            return metrics

    def _lock(self, strategy):
        """One trainer per model_dir (and per worker of a multi-worker run)."""
        index, workers = worker_index(strategy)
        name = ".trainer.lock" if workers == 1 else f".trainer-worker-{index}.lock"
        os.makedirs(self.model_dir, exist_ok=True)
        return exclusive_lock(os.path.join(self.model_dir, name), self.model_dir)


@contextlib.contextmanager
def _write_dir(model_dir, strategy):
    """model_dir on the chief; a temporary directory, removed at the end, on the other workers
    of a multi-worker run, which must save alongside the chief but not over its files."""
    if strategy.extended.should_checkpoint:
        yield model_dir
        return
    temporary = tempfile.mkdtemp(prefix=f"t2t_lite-worker-{worker_index(strategy)[0]}-")
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _read_hparams_file(model_dir):
    """(The values of the hparams a model_dir trains with, their HPARAMS_HISTORY)."""
    with open(os.path.join(model_dir, HPARAMS_FILE), encoding="utf-8") as f:
        values = json.load(f)
    return values, values.pop(HPARAMS_HISTORY, [])


def _absolute(path):
    return os.path.abspath(os.path.expanduser(path))

