"""Evaluator: the one owner of evaluation, modeled on OpenNMT-tf's `opennmt/evaluation.py`.

It scores a model on a split of its problem: teacher-forced loss, perplexity and accuracy (when
given the Trainer) and the problem's own metrics (`Problem.metric_names`: BLEU and chrF, F1, ...)
on the translations of a representative sample of the split, decoded by the same Translator as
the decoder's, on every local replica. It remembers every evaluation of a training run
(MODEL_DIR/eval/history.json, so a resumed run remembers too), keeps the best checkpoint, says
when to stop early and which checkpoints to average, and reports how the average compares.

The decoded sample is the whole split when it has at most `decode_examples` examples, otherwise
a fixed, seeded random sample of that many, in the split's own order: the batches of the input
pipeline come by length bucket, so a prefix of them is the short, easy part of the set.

It gets its collaborators (a problem, a translator, a data_dir, a trainer, model_dirs), never the
Runner that composes them.
"""

import collections
import contextlib
import logging
import os
import sys
import time

import numpy as np

from t2t_lite.data.corpus import tsv_text
from t2t_lite.evaluation.monitor import Monitor
from t2t_lite.training.checkpoint_list import checkpoint_step
from t2t_lite.training.model_dir_copy import save_model_dir
from t2t_lite.training.model_weights import restore_model
from t2t_lite.training.scalar_summaries import ScalarWriter
from t2t_lite.utils.errors import UserError, did_you_mean
from t2t_lite.utils.files import write_text_atomically
from t2t_lite.utils.progress import Progress

logger = logging.getLogger("t2t_lite")

DECODE_EXAMPLES = 3000  # a few thousand: newstest-sized dev sets are decoded whole (the
                        # trainer's --eval_decode_examples says this number)
SAMPLE_SEED = 0  # the same sample at every evaluation and in every run of a model_dir
TEACHER_FORCED_METRICS = ("loss", "perplexity", "accuracy")

Sample = collections.namedtuple("Sample", "sources references description")
# hypotheses: the translations as the user sees them (Problem.postprocess); outputs: as the model
# wrote them (for parsing, linearized trees), for alignments.
Decoded = collections.namedtuple("Decoded",
                                 "sources references hypotheses scores repaired outputs")


def read_sample(problem, vocabulary, data_dir, split, max_examples=None, seed=SAMPLE_SEED):
    """The detokenized sources and post-processed references of `split`: all of them, or a seeded
    random sample of max_examples in the split's order when it has more."""
    examples = [(example["inputs"], example["targets"])
                for example in problem.examples(split, data_dir)]
    total = len(examples)
    if max_examples is None or total <= max_examples:
        description = f"all {total:,} {split} examples"
    else:
        chosen = np.sort(np.random.default_rng(seed).choice(total, max_examples, replace=False))
        examples = [examples[i] for i in chosen]
        description = (f"a random sample of {max_examples:,} of the {total:,} {split} examples "
                       f"(seed {seed})")
    sources = [vocabulary.decode(inputs) for inputs, _ in examples]
    references = [problem.postprocess(source, vocabulary.decode(targets)).text
                  for source, (_, targets) in zip(sources, examples)]
    return Sample(sources, references, description)


class Evaluator:
    """Evaluates the model of `translator` on `split` of `problem`, whose data is in data_dir;
    see the module docstring. `translate` (default: translator.translate_tokens) translates
    token lists: e.g. on several replicas (t2t_lite.backends.tensorflow.replicated).

    With a `trainer` (of either backend; whose model the translator translates with)
    evaluations include the teacher-forced metrics over `eval_steps` batches (default: all).
    Those of a training run are recorded in `output_dir` (a ModelDir: the chief's model_dir,
    or a worker's temporary one): summaries in eval/, the history, and with keep_best_by the
    best checkpoint as the model_dir best/, which records the experiment of `model_dir` (the
    ModelDir trained; its history is the one resumed). `early_stopping` N: should_stop() once N
    evaluations have not improved keep_best_by by more than min_delta. `bleu_tokenize`:
    sacreBLEU's tokenizer for BLEU, if not the problem's own.
    """

    def __init__(self, problem, translator, data_dir, *, split="dev", trainer=None,
                 eval_steps=None, decode_examples=DECODE_EXAMPLES, keep_best_by=None,
                 early_stopping=0, min_delta=0.0, model_dir=None, output_dir=None,
                 bleu_tokenize=None, translate=None):
        self.problem = problem
        self.translator = translator
        self.data_dir = data_dir
        self.split = split
        self.trainer = trainer
        self.eval_steps = eval_steps
        self.decode_examples = decode_examples
        self.monitor = (Monitor.of_problem(keep_best_by, problem, min_delta) if keep_best_by
                        else None)
        self.early_stopping = early_stopping
        self.model_dir = model_dir
        self.output_dir = output_dir
        self.bleu_tokenize = bleu_tokenize
        self._check_options()
        self._translate = translate or translator.translate_tokens
        self._sample = None
        self._writer = ScalarWriter(output_dir.summaries("eval")) if output_dir else None
        self.history = self._read_history() if model_dir else []
        self.decoded = None  # the last evaluation's Decoded

    @property
    def keep_best_by(self):
        return self.monitor.metric if self.monitor else None

    def _check_options(self):
        """Fails early on a keep_best_by metric that evaluations will not report, and on a BLEU
        tokenizer for a problem that is not scored with BLEU."""
        if self.early_stopping and not self.monitor:
            raise UserError("--early_stopping needs --keep_best_by: the metric whose "
                            "improvement it watches (e.g. bleu or loss)")
        names = list(TEACHER_FORCED_METRICS if self.trainer else ())
        if self.decode_examples != 0:
            names += self.problem.metric_names
        if self.monitor and self.keep_best_by not in names:
            raise UserError(f"--keep_best_by={self.keep_best_by}: evaluations of "
                            f"{self.problem.name} report {', '.join(names)}"
                            f"{did_you_mean(self.keep_best_by, names)}")
        if self.bleu_tokenize and "bleu" not in self.problem.metric_names:
            raise UserError(f"--bleu_tokenize={self.bleu_tokenize}: {self.problem.name} is not "
                            f"scored with BLEU but with {', '.join(self.problem.metric_names)}")

    @property
    def sample(self):
        """The decoded examples, read once."""
        if self._sample is None:
            self._sample = read_sample(self.problem, self.translator.vocabulary, self.data_dir,
                                       self.split, self.decode_examples)
            logger.info("decoding %s at each evaluation, %s", self._sample.description,
                        self.search_name())
        return self._sample

    def search_name(self):
        sampling = getattr(self.translator, "sampling", None)
        if sampling:
            return (f"sampling (top-k {sampling.top_k}, top-p {sampling.top_p}, temperature "
                    f"{sampling.temperature}, seed {sampling.seed})")
        beam_size = self.translator.hparams.beam_size
        return "greedy" if beam_size == 1 else f"beam search of width {beam_size}"

    def decode(self, show_progress=False):
        """Translates the sample; returns its Decoded (also kept as self.decoded). With
        show_progress, the lines translated are shown on stderr as they go (utils.progress)."""
        sample = self.sample
        token_lists = [self.translator.vocabulary.encode(text) for text in sample.sources]
        with (Progress("translated", "lines", total=len(token_lists)) if show_progress
              else contextlib.nullcontext()) as progress:
            translations = self._translate(token_lists, progress)
        outputs = [self.problem.postprocess(source, t.text)
                   for source, t in zip(sample.sources, translations)]
        self.decoded = Decoded(sample.sources, sample.references, [o.text for o in outputs],
                               [t.score for t in translations], sum(o.repaired for o in outputs),
                               [t.text for t in translations])
        return self.decoded

    def evaluate(self, step=None, decode=True, show_progress=False):
        """The metrics of the model now; at a training `step` they are logged, written to
        TensorBoard and the history, and the checkpoint of `step` is kept if it is the best.
        show_progress: see decode."""
        metrics = {}
        decode = decode and self.decode_examples != 0
        if self.trainer:
            metrics.update(self.trainer.evaluate_split(self.problem, self.split, self.data_dir,
                                                       self.eval_steps))
        if decode:
            decoded = self.decode(show_progress)
            metrics.update(self.problem.decode_metrics(
                decoded.hypotheses, decoded.references, repaired=decoded.repaired,
                bleu_tokenize=self.bleu_tokenize))
        if step is None:
            return metrics
        logger.info("eval at step %d: %s", step, format_metrics(metrics))
        self.history = [entry for entry in self.history if entry["step"] < step]
        self.history.append({"step": step, "metrics": metrics, "decoded": decode})
        if self.output_dir:
            how = f"on {self.sample.description}, {self.search_name()}" if decode else None
            self._writer.scalars(step, metrics, {name: how for name in metrics
                                                 if name in self.problem.metric_names})
            self.output_dir.write_history(self.history)
            if self.keep_best_by in metrics:
                self.keep_if_best(step, metrics[self.keep_best_by])
        return metrics

    def _read_history(self):
        """The evaluations recorded in the model_dir, up to the step the trainer resumes at."""
        step = self.trainer.step if self.trainer else float("inf")
        return [entry for entry in self.model_dir.read_history() if entry["step"] <= step]

    def best(self, n=1):
        """(step, metrics) of the n best evaluations by keep_best_by, best first; earlier ones
        first among equals."""
        ranked = self.monitor.ranked(self.history)[:n]
        return [(entry["step"], entry["metrics"]) for entry in ranked]

    def should_stop(self):
        """Whether the last `early_stopping` evaluations did not improve keep_best_by."""
        if not self.early_stopping:
            return False
        values = [entry["metrics"][self.keep_best_by] for entry in self.history
                  if self.keep_best_by in entry["metrics"]]
        stale = self.monitor.evaluations_without_improvement(values)
        if stale < self.early_stopping:
            return False
        (best_step, best), = self.best()
        logger.info("early stopping: %s has not improved by more than %g in %d evaluations "
                    "(best %.4g at step %d)", self.keep_best_by, self.monitor.min_delta, stale,
                    best[self.keep_best_by], best_step)
        return True

    def keep_if_best(self, step, value):
        """Saves the trainer's checkpoint as the model_dir best/ if `value` of keep_best_by
        beats the one recorded there."""
        best_dir = self.output_dir.best
        best = best_dir.read_info()
        if best and best["metric"] == self.keep_best_by and not self.monitor.improves(
                value, best["value"], min_delta=0.0):
            return
        save_model_dir(self.trainer.write_checkpoint, step, self.model_dir, best_dir,
                       {"metric": self.keep_best_by, "value": value, "step": step},
                       replace=True)
        logger.info("best %s so far (%.4g): checkpoint of step %d kept in %s",
                    self.keep_best_by, value, step, best_dir)

    def final(self, step):
        """The evaluation of `step` with decoding: the last one if it was that, else a new one."""
        last = self.history[-1] if self.history else None
        if last and last["step"] == step and last.get("decoded"):
            return last["metrics"]
        return self.evaluate(step)

    def checkpoints_to_average(self, paths, *, last=0, best=0):
        """(the paths, oldest first, and how they were chosen) of the `last` N of the
        checkpoints `paths` (oldest first), or of the `best` N of them by keep_best_by."""
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
        return chosen, how

    def report_average(self, avg_dir, checkpoint, chosen, how):
        """Evaluates the average `checkpoint` written in the ModelDir avg_dir of the checkpoints
        `chosen` (as checkpoints_to_average said `how`), records its metrics in its info.json
        and logs them beside the last and the best checkpoint's; returns them."""
        metrics = self.evaluate_checkpoint(checkpoint)
        avg_dir.write_info({**avg_dir.read_info(), "split": self.split, "metrics": metrics})
        last_entry = self.history[-1]
        lines = [(f"last checkpoint (step {last_entry['step']})", last_entry["metrics"])]
        best_metrics = None
        if self.monitor:
            (best_step, best_metrics), = self.best()
            lines.append((f"best by {self.keep_best_by} (step {best_step})", best_metrics))
        name = os.path.basename(avg_dir.path)
        steps = ", ".join(str(checkpoint_step(path)) for path in chosen)
        lines.append((f"{name}/, the average of {how} (steps {steps})", metrics))
        for line, values in lines:
            logger.info("%s of the %s: %s", self.split, line, format_metrics(values))
        metric = self.keep_best_by
        if best_metrics and metric in metrics and self.monitor.improves(
                best_metrics[metric], metrics[metric], min_delta=0):
            # Averaging usually wins; when it does not on this sample, best/'s score is still
            # the highest of many evaluations on it, so optimistic (on parsing's 200 dev trees,
            # a 0.7 F1 lead became a 2 F1 loss on test: benchmarks/results/parsing.md).
            logger.warning("%s/ is worse than best/ by %s on %s (%.4g against %.4g), but best/ "
                           "is the highest of %d evaluations on that same sample: compare both "
                           "on data neither was chosen on before choosing (both are kept)",
                           name, metric, self.split, metrics[metric], best_metrics[metric],
                           len(self.history))
        return metrics

    def evaluate_checkpoint(self, path):
        """The metrics of the model weights of checkpoint `path` (e.g. an average), evaluated
        exactly as the trainer's model; the model's own weights are put back afterwards."""
        model = self.translator.model
        weights = [variable.numpy() for variable in model.weights]
        restore_model(model, path)
        try:
            return self.evaluate()
        finally:
            for variable, value in zip(model.weights, weights):
                variable.assign(value)


def format_metrics(metrics):
    return "  ".join(f"{name} {value:.4g}" for name, value in sorted(metrics.items()))


def score_split(evaluator, output_path=None, align=None):
    """Translates the evaluator's sample (the decoder's --split: all of it) and scores it;
    writes the hypotheses to output_path (default: stdout) and, beside it, the sources
    (.src), references (.ref) and all side by side with the scores (.tsv), and with `align`
    (sources, model outputs -> [alignment]) each one's alignment. Returns the metrics and their
    one-line summary."""
    start = time.perf_counter()
    metrics = evaluator.evaluate(show_progress=True)
    decoded = evaluator.decoded
    logger.info("translated %d lines in %.1f s", len(decoded.sources),
                time.perf_counter() - start)
    hypotheses = "".join(f"{h}\n" for h in decoded.hypotheses)
    if output_path:
        columns = [decoded.sources, decoded.references, decoded.hypotheses,
                   [f"{score:.6f}" for score in decoded.scores]]
        header = ["source", "reference", "hypothesis", "score"]
        if align:
            columns.append(align(decoded.sources, decoded.outputs))
            header.append("alignment")
        table = tsv_text(zip(*columns), header=header)
        for name, text in ((output_path + ".src", "".join(f"{s}\n" for s in decoded.sources)),
                           (output_path + ".ref", "".join(f"{r}\n" for r in decoded.references)),
                           (output_path + ".tsv", table), (output_path, hypotheses)):
            write_text_atomically(name, text)
        logger.info("wrote %s and its .src, .ref and .tsv", output_path)
    else:
        sys.stdout.write(hypotheses)
    tokenizer = evaluator.problem.bleu_tokenizer(evaluator.bleu_tokenize)
    note = f", sacreBLEU tokenize={tokenizer}" if "bleu" in metrics else ""
    summary = (f"{evaluator.split} ({evaluator.sample.description}, {evaluator.search_name()}"
               f"{note}): {format_metrics(metrics)}")
    return metrics, summary
