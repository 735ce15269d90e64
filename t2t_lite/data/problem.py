"""Problem: where examples come from, how they become ids, and how they are batched and scored.

datagen writes each split as `{name}-{split}-NNNNN-of-MMMMM` TFRecord shards in data_dir, with a
`{name}-{split}.stats.json` beside them (example count, pairs skipped for an empty side, target
tokens of one encoding of each pair (a time budget counts epochs by them), a histogram of example
lengths, so the input pipeline can report what max_length drops without reading the data, and
each shard's record: see t2t_lite.data.shard_records), written by t2t_lite.data.split_writer.
Every file is written under a temporary name and renamed when complete, so an interrupted
datagen never leaves a shard that reads as finished; a finished split is written again only when
its shards no longer match their records.
"""

import collections
import glob
import logging
import os
import re
import time

from t2t_lite.config import EOS_ID
from t2t_lite.data import shard_records
from t2t_lite.data.buckets import training_length_limit
from t2t_lite.data.corpus import read_lines
from t2t_lite.data.split_writer import remove_incomplete, write_split, write_stats
from t2t_lite.evaluation.metrics import bleu
from t2t_lite.registry import snake_case
from t2t_lite.utils.backend import keras_backend
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import exclusive_lock, make_directory
from t2t_lite.utils.json_records import read_record

logger = logging.getLogger("t2t_lite")
# (data_dir, problem, split) whose unrecorded shards were warned about in this process.
_UNRECORDED_WARNED = set()

SPLITS = ("train", "dev", "test")

# What the user sees of a model output (Problem.postprocess), and whether it had to be repaired
# to become that (e.g. a tree that was not well-formed).
Postprocessed = collections.namedtuple("Postprocessed", "text repaired")


class Problem:
    """Subclasses define `text_pairs` and `vocabulary`; the rest is shared machinery."""

    num_shards = {"train": 10, "dev": 1, "test": 1}
    # True when datagen needs no download, so the trainer may run it without being asked.
    self_contained = False

    # Prefix of the data files; the registered name, or the snake_case class name.
    name = "problem"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = snake_case(cls.__name__)

    def text_pairs(self, split, raw_dir):
        """Yields (source, target) text pairs of `split`, reading or downloading into raw_dir."""
        raise NotImplementedError

    def expected_pairs(self, split, raw_dir):
        """How many pairs text_pairs(split, raw_dir) yields, for datagen's ETA, or None if
        unknown; asked once text_pairs has yielded its first pair (downloads are done)."""
        return None

    def vocabulary(self, data_dir):
        """The Vocabulary this problem's data in data_dir was encoded with."""
        raise NotImplementedError

    def build_vocabulary(self, data_dir, raw_dir):
        """Creates the vocabulary in data_dir if the problem learns one; returns it."""
        return self.vocabulary(data_dir)

    def segmentations(self, split):
        """How many encodings of each pair of `split` datagen writes, one a pass over the split
        (t2t_lite.data.split_writer); own-corpus translation with BPE-dropout has several."""
        return 1

    def could_sample_subwords(self):
        """Whether datagen's --bpe_dropout could have written this problem's training split and
        did not (then a budget of many epochs suggests it: training.regularization)."""
        return False

    def encode_pair(self, split, pair, vocabulary):
        """The (inputs, targets) ids, EOS added, that datagen writes for a text pair of `split`."""
        return (vocabulary.encode(pair[0]) + [EOS_ID],
                vocabulary.encode_target(pair[1]) + [EOS_ID])

    # The names decode_metrics returns, and those of them where lower is better (loss and
    # perplexity, which every evaluation reports, are lower-is-better anyway).
    metric_names = ("sequence_accuracy",)
    lower_is_better = ()

    # What read_references calls the items of a references file, in messages.
    reference_unit = "lines"

    def decode_metrics(self, hypotheses, references, *, repaired=0, bleu_tokenize=None):
        """Metrics of postprocessed outputs against references; exact match by default.
        `repaired`: how many outputs postprocess had to repair; `bleu_tokenize`: sacreBLEU's
        tokenizer, for problems scored with BLEU (None: the problem's own)."""
        matches = sum(h == r for h, r in zip(hypotheses, references))
        return {"sequence_accuracy": matches / max(1, len(references))}

    def postprocess(self, source_text, output_text):
        """What the user sees of a detokenized model output (or dev/test reference) for
        `source_text`, as a Postprocessed: the text as it is here, a tree for parsing."""
        return Postprocessed(output_text, False)

    def bleu_tokenizer(self, requested=None):
        """sacreBLEU's tokenizer for this problem's outputs: `requested`, or 13a, WMT's."""
        return requested or "13a"

    def read_references(self, path):
        """The references of the decoder's --decode_reference: one per line."""
        return list(read_lines(path))

    def reference_report(self, hypotheses, references, *, repaired=0, bleu_tokenize=None,
                         lowercase=False):
        """The decoder's one-line score of postprocessed outputs against references:
        sacreBLEU's, with its signature."""
        score, signature = bleu(hypotheses, references, self.bleu_tokenizer(bleu_tokenize),
                                lowercase)
        return f"{score}  {signature}"

    # Decoding hooks of problems whose outputs have a structure (parsing: trees).

    def search_constraint(self, vocabulary):
        """A search constraint (see t2t_lite.decoding.search) every decode uses, or None."""
        return None

    def tf_postprocess(self, in_graph_vocabulary):
        """postprocess in-graph for the exported model (see Translator), given the
        vocabulary's in-graph twin, or None."""
        return None

    # Shared machinery.

    def shard_paths(self, split, data_dir):
        n = self.num_shards[split]
        return [os.path.join(data_dir, f"{self.name}-{split}-{i:05d}-of-{n:05d}")
                for i in range(n)]

    def stats_path(self, split, data_dir):
        return os.path.join(data_dir, f"{self.name}-{split}.stats.json")

    def splits(self):
        """The splits this problem has, of train, dev and test."""
        return [split for split in SPLITS if split in self.num_shards]

    def has_data(self, data_dir, split):
        return split in self.num_shards and all(
            os.path.exists(path) for path in self.shard_paths(split, data_dir))

    def prepare_data(self, data_dir, generate=False, raw_dir=None, chief=True, poll_seconds=2.0):
        """Runs datagen when the train or dev data is missing and `generate` (the user asked) or
        the problem needs no download; else a missing split is a UserError saying how to make
        it. A worker that is not the `chief` waits until the chief's data is complete."""
        make_directory(data_dir, "data_dir")
        if self._has_training_data(data_dir):
            return
        if not (generate or self.self_contained):
            raise UserError(f"no data for problem {self.name} in {data_dir}: run "
                            f"{self.datagen_command(data_dir)} or pass --generate_data")
        if not chief:
            logger.info("waiting for the chief to generate data for %s in %s", self.name,
                        data_dir)
            while not self._has_training_data(data_dir):
                time.sleep(poll_seconds)
            return
        from t2t_lite.backends.tensorflow.quiet import import_tensorflow_quietly

        # datagen writes TFRecords with TensorFlow, which a JAX machine may not have
        if import_tensorflow_quietly(if_installed=True) is None:
            missing = next((path for split in ("train", "dev")
                            for path in self.shard_paths(split, data_dir)
                            if not os.path.exists(path)), f"{data_dir}'s data")
            raise UserError(f"{missing} is missing, and writing {self.name}'s data needs "
                            "TensorFlow, which is not installed here: run "
                            f"{self.datagen_command(data_dir)} where it is")
        logger.info("generating data for %s in %s", self.name, data_dir)
        self.generate_data(data_dir, raw_dir)

    def _has_training_data(self, data_dir):
        return all(self.has_data(data_dir, split) for split in ("train", "dev"))

    def generate_data(self, data_dir, raw_dir=None):
        """Writes the vocabulary and every missing split to data_dir; finished work is kept.
        One datagen at a time per data_dir and problem: a second would remove the first's
        unfinished shards. Shards are written as NAME-SPLIT-*.incomplete and renamed when the
        split is complete; a datagen that fails or is interrupted removes its own, and one that
        starts removes those a killed datagen left (it holds the lock: none is in use)."""
        os.makedirs(data_dir, exist_ok=True)
        raw_dir = raw_dir or os.path.join(data_dir, "raw")
        with exclusive_lock(os.path.join(data_dir, f".{self.name}.datagen.lock"),
                            f"{data_dir} (datagen of {self.name})"):
            remove_incomplete(data_dir, self.name)
            vocabulary = self.build_vocabulary(data_dir, raw_dir)
            for split in self.splits():
                if self.has_data(data_dir, split) and self._verified(split, data_dir):
                    continue
                write_split(self, split, data_dir, raw_dir, vocabulary)

    def _verified(self, split, data_dir):
        """Whether the finished shards of `split` hold what datagen wrote: by their checksums,
        or, for shards written before records were kept, by reading them to the end and counting
        (records are then added). Logs what is damaged otherwise."""
        paths, stats = self.shard_paths(split, data_dir), self.stats(split, data_dir)
        records = stats.get("shards")
        if records:
            found = shard_records.damage(paths, records, checksums=True)
        else:
            import t2t_lite.backends.tensorflow.pipeline as pipeline  # old shards: TensorFlow's

            counts = pipeline.count_records(paths)
            found = [f"{path} does not read to its end" for path, count in zip(paths, counts)
                     if count is None]
            if not found and "examples" in stats and sum(counts) != stats["examples"]:
                found = [f"the {split} shards hold {sum(counts):,} examples, but datagen wrote "
                         f"{stats['examples']:,}"]
            if not found:  # recorded from now on; with no stats.json, as many as there are
                if "examples" not in stats:
                    logger.warning("%s was missing: the %s shards read to their end and are now "
                                   "recorded (a shard cut between two records reads as whole: "
                                   "if in doubt, delete them and run datagen again)",
                                   self.stats_path(split, data_dir), split)
                stats.setdefault("examples", sum(counts))
                stats["shards"] = {os.path.basename(path): shard_records.describe(path, count)
                                   for path, count in zip(paths, counts)}
                write_stats(self, split, data_dir, stats)
        for damage in found:
            logger.warning("%s: writing the %s split of %s again", damage, split, self.name)
        return not found

    def stats(self, split, data_dir):
        """The split's stats.json as a dict; {} when it is missing or damaged (nothing relies on
        it being there: datagen writes it again with the split)."""
        try:
            return read_record(self.stats_path(split, data_dir), dict, "")
        except (FileNotFoundError, UserError):
            return {}

    def dataset(self, split, data_dir, hparams, *, training, input_context=None, seed=None):
        """Batches of ({"inputs", "targets"}, targets) for `split`; see pipeline.make_dataset."""
        import t2t_lite.backends.tensorflow.pipeline as pipeline  # tf.data: imported when used

        # The training shards' checksums too: tf.data finds a shard changed in place only at
        # the record it reads, possibly hours in (the JAX path's reader checks what it reads).
        # The dev split's the trainer checked at its start (check_data); each evaluation reads
        # it whole, CRCs included.
        self._check_has_data(split, data_dir, checksums=training)
        if training:
            self._report_length_filter(data_dir, hparams.max_length)
        return pipeline.make_dataset(self.shard_paths(split, data_dir), hparams.batch_size,
                                     hparams.max_length, training=training,
                                     input_context=input_context, seed=seed)

    def numpy_batches(self, split, data_dir, hparams, *, training, seed=0, devices=1,
                      share=(0, 1)):
        """The JAX path's batches of `split`, read without TensorFlow: for training an endless
        data.numpy_pipeline.TrainingBatches (its position checkpointable) of `share` of the
        examples (a process's of a multi-host run: records.read_in_written_order), else every
        example once; rows for `devices` devices (see t2t_lite.data.numpy_pipeline)."""
        from t2t_lite.data import numpy_pipeline

        if training:  # packed rows (t2t_lite.data.packing) or length buckets
            from t2t_lite.data.packing import PackedBatches

            hparam, limit = training_length_limit(hparams)
            self._report_length_filter(data_dir, limit, hparam)
            examples = self.examples(split, data_dir, tensorflow=False, share=share)
            if hparams.packed_length:
                return PackedBatches(examples, limit, max(1, hparams.batch_size // limit),
                                     seed=seed, devices=devices, shared=share[1] > 1)
            return numpy_pipeline.TrainingBatches(examples, hparams.batch_size, limit, seed=seed,
                                                  devices=devices, shared=share[1] > 1)
        examples = self.examples(split, data_dir, tensorflow=False)
        return numpy_pipeline.evaluation_batches(examples, hparams.batch_size,
                                                 hparams.max_length, devices)

    def examples(self, split, data_dir, tensorflow=None, share=(0, 1)):
        """{"inputs", "targets"} numpy id sequences (with EOS) of `split`, one by one, in the
        order of its text pairs: unbatched, so that a sample of them is not biased by length
        buckets. Read by tf.data (which checks each record's CRC) on Keras's TensorFlow
        backend, else without TensorFlow (t2t_lite.data.records); `tensorflow` overrides."""
        records = self._check_has_data(split, data_dir)
        paths = self.shard_paths(split, data_dir)
        if tensorflow is None:
            tensorflow = keras_backend() == "tensorflow"
        if not tensorflow:
            from t2t_lite.data.records import read_in_written_order

            return read_in_written_order(paths, records, self._mend(split, data_dir), share)
        import t2t_lite.backends.tensorflow.pipeline as pipeline

        return pipeline.read_in_written_order(paths)

    def datagen_command(self, data_dir):
        """The command that writes (or checks and mends) this problem's data in data_dir, as
        messages quote it."""
        return f"`t2t-lite-datagen --problem={self.name} --data_dir={data_dir}`"

    def _mend(self, split, data_dir):
        """How an error about a damaged shard of `split` ends."""
        datagen = self.datagen_command(data_dir)
        return f"the {split} data is damaged; run {datagen} to write it again"

    def check_data(self, split, data_dir):
        """Refuses `split` where it is missing or its shards are not what datagen wrote (by size
        and SHA-256), in one line: what the trainer checks of the dev split before it writes
        anything (its reader would find the damage at the first evaluation)."""
        self._check_has_data(split, data_dir, checksums=True)

    def _check_has_data(self, split, data_dir, checksums=False):
        """Refuses a missing split or shards of another size (with `checksums`, other bytes)
        than datagen wrote; returns the shards' records ({} for shards without: they are read
        unchecked, with a warning)."""
        if split not in self.num_shards:
            raise UserError(f"problem {self.name} has no {split} split, only "
                            f"{', '.join(self.splits())}")
        datagen = self.datagen_command(data_dir)
        if not self.has_data(data_dir, split):
            others = sorted(set(problems_with_data(data_dir)) - {self.name})
            holds = f" (it holds {', '.join(others)})" if others else ""
            raise UserError(f"no {split} data for problem {self.name} in {data_dir}{holds}: run "
                            f"{datagen} or pass --generate_data to the trainer")
        records = self.stats(split, data_dir).get("shards", {})
        found = shard_records.damage(self.shard_paths(split, data_dir), records,
                                     checksums=checksums)
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise UserError(f"{found[0]}{more}: {self._mend(split, data_dir)}")
        if not records and (data_dir, self.name, split) not in _UNRECORDED_WARNED:
            _UNRECORDED_WARNED.add((data_dir, self.name, split))
            logger.warning("the %s shards of %s in %s have no record of what datagen wrote "
                           "(%s missing or damaged, or from an older datagen): a shard cut short "
                           "or changed cannot be found; run %s to check and record them", split,
                           self.name, data_dir, os.path.basename(self.stats_path(split, data_dir)),
                           datagen)
        return records

    def _report_length_filter(self, data_dir, limit, hparam="max_length"):
        """Logs how many training examples the limit (hparam `hparam`) drops; refuses all."""
        lengths = self.stats("train", data_dir).get("lengths")
        if not lengths:  # written by a datagen that kept no statistics
            return
        total = sum(lengths.values())
        dropped = sum(count for length, count in lengths.items() if int(length) > limit)
        if dropped == total:
            raise UserError(f"all {total:,} training examples of {self.name} are longer than "
                            f"{hparam}={limit}: raise it with --hparams={hparam}=N")
        if dropped:
            logger.info("%s=%d drops %s of %s training examples (%.2f%%)", hparam, limit,
                        f"{dropped:,}", f"{total:,}", 100 * dropped / total)


def problems_with_data(data_dir):
    """Names of the problems with training shards in data_dir."""
    names = (re.fullmatch(r"(.+)-train-\d{5}-of-\d{5}", os.path.basename(path))
             for path in glob.glob(os.path.join(glob.escape(data_dir), "*-train-*-of-*")))
    return [match.group(1) for match in names if match]
