"""Evaluator: the one owner of evaluation, modeled on OpenNMT-tf's `opennmt/evaluation.py`.

It scores a model on a split of its problem: teacher-forced loss, perplexity and accuracy (when
given the Trainer) and the problem's own metrics (`Problem.metric_names`: BLEU and chrF, F1, ...)
on the translations of a representative sample of the split, decoded by the same Translator as
the decoder's, on every local replica. It remembers every evaluation of a training run
(MODEL_DIR/eval/history.json, so a resumed run remembers too), keeps the best checkpoint, and
says when to stop early.

The decoded sample is the whole split when it has at most `decode_examples` examples, otherwise
a fixed, seeded random sample of that many, in the split's own order: the batches of the input
pipeline come by length bucket, so a prefix of them is the short, easy part of the set.
"""

import collections
import json
import logging
import os

import numpy as np
import tensorflow as tf

from t2t_lite.training.checkpoints import (
    average_checkpoints,
    checkpoint_paths,
    checkpoint_step,
    restore_existing,
    save_model_dir,
)
from t2t_lite.training.trainer import worker_index
from t2t_lite.utils.errors import UserError, did_you_mean
from t2t_lite.utils.files import write_text_atomically

logger = logging.getLogger("t2t_lite")

DECODE_EXAMPLES = 3000  # a few thousand: newstest-sized dev sets are decoded whole (the
                        # trainer's --eval_decode_examples says this number)
SAMPLE_SEED = 0  # the same sample at every evaluation and in every run of a model_dir
TEACHER_FORCED_METRICS = ("loss", "perplexity", "accuracy")
BEST_DIR = "best"  # the model_dir of the best checkpoint by keep_best_by
AVG_DIR = "avg"  # the model_dir of the checkpoints averaged at the end of training
HISTORY_FILE = os.path.join("eval", "history.json")

Sample = collections.namedtuple("Sample", "sources references description")
Decoded = collections.namedtuple("Decoded", "sources references hypotheses scores")


def read_sample(problem, vocabulary, data_dir, split, max_examples=None, seed=SAMPLE_SEED):
    """The detokenized sources and post-processed references of `split`: all of them, or a seeded
    random sample of max_examples in the split's order when it has more."""
    examples = [(example["inputs"], example["targets"])
                for example in problem.examples(split, data_dir).as_numpy_iterator()]
    total = len(examples)
    if max_examples is None or total <= max_examples:
        description = f"all {total:,} {split} examples"
    else:
        chosen = np.sort(np.random.default_rng(seed).choice(total, max_examples, replace=False))
        examples = [examples[i] for i in chosen]
        description = (f"a random sample of {max_examples:,} of the {total:,} {split} examples "
                       f"(seed {seed})")
    sources = [vocabulary.decode(inputs) for inputs, _ in examples]
    references = [problem.postprocess(source, vocabulary.decode(targets))
                  for source, (_, targets) in zip(sources, examples)]
    return Sample(sources, references, description)


def evaluations_without_improvement(values, lower_is_better=False, min_delta=0.0):
    """How many of the last `values` did not beat the best value before them by more than
    min_delta (OpenNMT-tf's early stopping rule)."""
    sign = -1 if lower_is_better else 1
    best, count = None, 0
    for value in values:
        if best is None or sign * (value - best) > min_delta:
            best, count = value, 0
        else:
            count += 1
    return count


class ReplicatedTranslation:
    """Translates token lists with `translator`, one batch on each local replica of `strategy`
    at a time, through one traced function that every evaluation reuses."""

    def __init__(self, translator, strategy):
        self.translator = translator
        self.strategy = strategy
        self.replicas = strategy.num_replicas_in_sync // worker_index(strategy)[1]
        self._step = tf.function(
            lambda ids: strategy.experimental_local_results(
                strategy.run(lambda replica_ids: translator.translate_ids(replica_ids),
                             args=(ids,))),
            reduce_retracing=True)

    def __call__(self, token_lists):
        if self.replicas == 1:
            return self.translator.translate_tokens(token_lists)
        results = [None] * len(token_lists)
        batches = list(self.translator.batches(token_lists))
        for start in range(0, len(batches), self.replicas):
            group = batches[start:start + self.replicas]
            group += group[-1:] * (self.replicas - len(group))  # every replica takes part
            ids = self.strategy.experimental_distribute_values_from_function(
                lambda context, group=group: group[
                    context.replica_id_in_sync_group % self.replicas][1])
            for (chunk, _), translated in zip(group, self._step(ids)):
                self.translator.collect(results, chunk, translated)
        return results


class Evaluator:
    """Evaluates the model of `translator` (from Runner.translator) on `split` of runner's
    problem; see the module docstring.

    With a `trainer` (whose model the translator translates with) evaluations include the
    teacher-forced metrics over `eval_steps` batches (default: all), and those of a training
    run, given its `output_dir` (the chief's model_dir), are recorded there: summaries in eval/,
    the history, and with keep_best_by the best checkpoint as the model_dir best/.
    `early_stopping` N: should_stop() once N evaluations have not improved keep_best_by by more
    than min_delta.
    """

    def __init__(self, runner, translator, *, split="dev", trainer=None, eval_steps=None,
                 decode_examples=DECODE_EXAMPLES, keep_best_by=None, early_stopping=0,
                 min_delta=0.0, output_dir=None):
        self.runner = runner
        self.problem = runner.problem
        self.translator = translator
        self.split = split
        self.trainer = trainer
        self.eval_steps = eval_steps
        self.decode_examples = decode_examples
        self.keep_best_by = keep_best_by
        self.early_stopping = early_stopping
        self.min_delta = min_delta
        self.output_dir = output_dir
        self.lower_is_better = ("loss", "perplexity") + tuple(self.problem.lower_is_better)
        self._check_metric_names()
        strategy = trainer.strategy if trainer else tf.distribute.get_strategy()
        self._translate = ReplicatedTranslation(translator, strategy)
        self._sample = None
        self._writer = (tf.summary.create_file_writer(os.path.join(output_dir, "eval"))
                        if output_dir else None)
        self.history = self._read_history() if output_dir else []
        self.decoded = None  # the last evaluation's Decoded

    def _check_metric_names(self):
        """Fails early on a keep_best_by metric that evaluations will not report."""
        if self.early_stopping and not self.keep_best_by:
            raise UserError("--early_stopping needs --keep_best_by: the metric whose "
                            "improvement it watches (e.g. bleu or loss)")
        names = list(TEACHER_FORCED_METRICS if self.trainer else ())
        if self.decode_examples != 0:
            names += self.problem.metric_names
        if self.keep_best_by and self.keep_best_by not in names:
            raise UserError(f"--keep_best_by={self.keep_best_by}: evaluations of "
                            f"{self.problem.name} report {', '.join(names)}"
                            f"{did_you_mean(self.keep_best_by, names)}")

    @property
    def sample(self):
        """The decoded examples, read once."""
        if self._sample is None:
            self._sample = read_sample(self.problem, self.translator.vocabulary,
                                       self.runner.data_dir, self.split, self.decode_examples)
            logger.info("decoding %s at each evaluation, %s", self._sample.description,
                        self.search_name())
        return self._sample

    def search_name(self):
        beam_size = self.translator.hparams.beam_size
        return "greedy" if beam_size == 1 else f"beam search of width {beam_size}"

    def decode(self):
        """Translates the sample; returns its Decoded (also kept as self.decoded)."""
        sample = self.sample
        token_lists = [self.translator.vocabulary.encode(text) for text in sample.sources]
        translations = self._translate(token_lists)
        hypotheses = [self.problem.postprocess(source, t.text)
                      for source, t in zip(sample.sources, translations)]
        self.decoded = Decoded(sample.sources, sample.references, hypotheses,
                               [t.score for t in translations])
        return self.decoded

    def evaluate(self, step=None, decode=True):
        """The metrics of the model now; at a training `step` they are logged, written to
        TensorBoard and the history, and the checkpoint of `step` is kept if it is the best."""
        metrics = {}
        decode = decode and self.decode_examples != 0
        if self.trainer:
            dataset = self.problem.dataset(self.split, self.runner.data_dir,
                                           self.runner.hparams, training=False)
            metrics.update(self.trainer.evaluate(dataset, self.eval_steps))
        if decode:
            decoded = self.decode()
            metrics.update(self.problem.decode_metrics(decoded.hypotheses, decoded.references))
        if step is None:
            return metrics
        logger.info("eval at step %d: %s", step, format_metrics(metrics))
        self.history = [entry for entry in self.history if entry["step"] < step]
        self.history.append({"step": step, "metrics": metrics, "decoded": decode})
        if self.output_dir:
            with self._writer.as_default(step=step):
                for name, value in metrics.items():
                    decoded = name in self.problem.metric_names
                    tf.summary.scalar(name, value, description=(
                        f"on {self.sample.description}, {self.search_name()}" if decoded
                        else None))
            self._writer.flush()
            write_text_atomically(os.path.join(self.output_dir, HISTORY_FILE),
                                  json.dumps(self.history, indent=1) + "\n")
            if self.keep_best_by in metrics:
                self.keep_if_best(step, metrics[self.keep_best_by])
        return metrics

    def _read_history(self):
        """The evaluations recorded in the model_dir, up to the step the trainer resumes at."""
        try:
            with open(os.path.join(self.runner.model_dir, HISTORY_FILE), encoding="utf-8") as f:
                history = json.load(f)
        except FileNotFoundError:
            return []
        step = self.trainer.step if self.trainer else float("inf")
        return [entry for entry in history if entry["step"] <= step]

    def _values(self, name):
        return [(entry["step"], entry["metrics"][name]) for entry in self.history
                if name in entry["metrics"]]

    def best(self, n=1, name=None):
        """(step, metrics) of the n best evaluations by `name` (default keep_best_by), best
        first; earlier ones first among equals."""
        name = name or self.keep_best_by
        sign = 1 if name in self.lower_is_better else -1
        ranked = sorted((entry for entry in self.history if name in entry["metrics"]),
                        key=lambda entry: (sign * entry["metrics"][name], entry["step"]))
        return [(entry["step"], entry["metrics"]) for entry in ranked[:n]]

    def should_stop(self):
        """Whether the last `early_stopping` evaluations did not improve keep_best_by."""
        if not self.early_stopping:
            return False
        values = [value for _, value in self._values(self.keep_best_by)]
        stale = evaluations_without_improvement(
            values, self.keep_best_by in self.lower_is_better, self.min_delta)
        if stale < self.early_stopping:
            return False
        (best_step, best), = self.best()
        logger.info("early stopping: %s has not improved by more than %g in %d evaluations "
                    "(best %.4g at step %d)", self.keep_best_by, self.min_delta, stale,
                    best[self.keep_best_by], best_step)
        return True

    def keep_if_best(self, step, value):
        """Saves the trainer's checkpoint as the model_dir best/ if `value` of keep_best_by
        beats the one recorded there."""
        best_dir = os.path.join(self.output_dir, BEST_DIR)
        name = self.keep_best_by
        try:
            with open(os.path.join(best_dir, "info.json"), encoding="utf-8") as f:
                best = json.load(f)
        except FileNotFoundError:
            best = None
        if best and best["metric"] == name:
            sign = -1 if name in self.lower_is_better else 1
            if sign * value <= sign * best["value"]:
                return
        save_model_dir(self.trainer.checkpoint, step, self.runner.model_dir, best_dir,
                       {"metric": name, "value": value, "step": step}, replace=True)
        logger.info("best %s so far (%.4g): checkpoint of step %d kept in %s", name, value, step,
                    best_dir)

    def final(self, step):
        """The evaluation of `step` with decoding: the last one if it was that, else a new one."""
        last = self.history[-1] if self.history else None
        if last and last["step"] == step and last.get("decoded"):
            return last["metrics"]
        return self.evaluate(step)

    def average(self, checkpoint_dir, *, last=0, best=0):
        """Averages the `last` N checkpoints of checkpoint_dir, or the `best` N by keep_best_by
        among those kept, into the model_dir checkpoint_dir/avg; evaluates it, records its
        metrics in its info.json and logs them beside the last and the best checkpoint's;
        returns them (None if no checkpoint was there to average)."""
        paths = checkpoint_paths(checkpoint_dir)
        if last:
            chosen, how = paths[-last:], f"the last {last}"
        else:
            by_step = {checkpoint_step(path): path for path in paths}
            ranked = [step for step, _ in self.best(len(self.history)) if step in by_step]
            chosen = sorted((by_step[step] for step in ranked[:best]), key=checkpoint_step)
            how = f"the {best} best by {self.keep_best_by}"
        if len(chosen) < (last or best):
            logger.warning("averaging %d checkpoints, not %s: only they are kept (see "
                           "--keep_checkpoints, --save_every)", len(chosen), how)
        if not chosen:
            return None
        avg_dir = os.path.join(checkpoint_dir, AVG_DIR)
        metrics = self.evaluate_checkpoint(average_checkpoints(self.runner, chosen, avg_dir,
                                                               replace=True))
        with open(os.path.join(avg_dir, "info.json"), encoding="utf-8") as f:
            info = json.load(f)
        write_text_atomically(os.path.join(avg_dir, "info.json"), json.dumps(
            {**info, "split": self.split, "metrics": metrics}, indent=2) + "\n")
        last_entry = self.history[-1]
        lines = [(f"last checkpoint (step {last_entry['step']})", last_entry["metrics"])]
        if self.keep_best_by:
            (best_step, best_metrics), = self.best()
            lines.append((f"best by {self.keep_best_by} (step {best_step})", best_metrics))
        steps = ", ".join(str(checkpoint_step(path)) for path in chosen)
        lines.append((f"{AVG_DIR}/, the average of {how} (steps {steps})", metrics))
        for name, values in lines:
            logger.info("%s of the %s: %s", self.split, name, format_metrics(values))
        return metrics

    def evaluate_checkpoint(self, path):
        """The metrics of the model weights of checkpoint `path` (e.g. an average), evaluated
        exactly as the trainer's model; the model's own weights are put back afterwards."""
        model = self.translator.model
        weights = [variable.numpy() for variable in model.weights]
        restore_existing(tf.train.Checkpoint(model=model), path)
        try:
            return self.evaluate()
        finally:
            for variable, value in zip(model.weights, weights):
                variable.assign(value)


def format_metrics(metrics):
    return "  ".join(f"{name} {value:.4g}" for name, value in sorted(metrics.items()))
