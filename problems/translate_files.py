"""Translation from the user's own parallel text, made into a problem with no Python code by
`t2t-lite-datagen --problem=NAME --files_dir=DIR ...` (or --train/--dev/--test): see
problems.own_files.
"""

import glob
import os

from t2t_lite.config import EOS_ID
from t2t_lite.data.corpus import read_parallel, read_tsv
from t2t_lite.problems.own_files import OwnFilesProblem, check_new_name
from t2t_lite.problems.translate import TranslationProblem
from t2t_lite.registry import register_problem
from t2t_lite.utils.errors import UserError

# File stems recognized in --files_dir, by split.
SPLIT_STEMS = {"train": ("train",), "dev": ("dev", "valid", "val", "validation"),
               "test": ("test",)}


@register_problem
class TranslateFiles(OwnFilesProblem, TranslationProblem):
    """Pairs read from line-aligned files (train.en + train.de) or TSV (train.tsv), per split.

    The spec gives, per split, either [source_path, target_path] or [tsv_path].
    """

    num_shards = {"train": 10, "dev": 1, "test": 1}
    how_to_make = ("translate_files is made from your own files: run `t2t-lite-datagen "
                   "--problem=NAME --files_dir=DIR --source_lang=en --target_lang=de "
                   "--data_dir=D`, then use --problem=NAME --data_dir=D")

    def __init__(self, name=None, spec=None):
        super().__init__(name, spec)
        self.vocab_type = spec["vocab_type"]
        self.target_language = spec["target_lang"]
        self.bpe_dropout = spec.get("bpe_dropout")  # {"alpha", "samples"}, or None

    def segmentations(self, split):
        """With BPE-dropout (Provilkov et al. 2020), `samples` random segmentations of each
        training pair: the trainer sees a pair segmented anew each epoch, a regularizer for
        small corpora seen for many epochs. Dev and test keep the one that decoding uses."""
        return self.bpe_dropout["samples"] if split == "train" and self.bpe_dropout else 1

    def could_sample_subwords(self):
        return self.vocab_type == "bpe" and not self.bpe_dropout

    def encode_pair(self, split, pair, vocabulary):
        """A random segmentation of both sides of a training pair with BPE-dropout, each merge
        dropped with probability `alpha`."""
        if split != "train" or not self.bpe_dropout:
            return super().encode_pair(split, pair, vocabulary)
        alpha = self.bpe_dropout["alpha"]
        return (vocabulary.encode_sampled(pair[0], alpha) + [EOS_ID],
                vocabulary.encode_sampled(pair[1], alpha) + [EOS_ID])

    @classmethod
    def create(cls, name, data_dir, *, files_dir=None, train=None, dev=None, test=None,
               source_lang=None, target_lang=None, vocab_size=8000, vocab_type="bpe",
               vocab_from=None, bpe_dropout=None, bpe_dropout_samples=16):
        """The problem `name` made of the given files, recorded in data_dir (see the module);
        `vocab_from`: the model_dir whose vocabulary (of vocab_size and vocab_type) datagen
        adopts (TranslationProblem.adopt_vocabulary) instead of learning one; `bpe_dropout`:
        the probability of dropping a merge in each of `bpe_dropout_samples` segmentations of
        every training pair (see segmentations)."""
        check_new_name(name)
        if bpe_dropout and vocab_type != "bpe":
            raise UserError(f"--bpe_dropout drops merges of a BPE vocabulary, and this one is "
                            f"{vocab_type}: drop --bpe_dropout, or use --vocab_type=bpe")
        languages = [source_lang, target_lang] if source_lang and target_lang else None
        if bool(source_lang) != bool(target_lang):
            raise UserError("pass both --source_lang and --target_lang, or neither (TSV files)")
        if files_dir:
            files = {split: _find_split(files_dir, split, languages) for split in SPLIT_STEMS}
        else:
            files = {split: _split_files(path, languages, split)
                     for split, path in (("train", train), ("dev", dev), ("test", test)) if path}
        files = {split: paths for split, paths in files.items() if paths}
        for split in ("train", "dev"):
            if split not in files:
                raise UserError(f"no {split} files: pass --{split}, or a --files_dir holding "
                                f"{_expected(split, languages)}")
        spec = {"problem_class": "translate_files", "source_lang": source_lang,
                "target_lang": target_lang, "files": files, "vocab_size": vocab_size,
                "vocab_type": vocab_type}
        if vocab_from:  # only then: the specs recorded before it existed stay the same
            spec["vocab_from"] = vocab_from
        if bpe_dropout:  # as vocab_from
            spec["bpe_dropout"] = {"alpha": bpe_dropout, "samples": bpe_dropout_samples}
        return cls.record(name, data_dir, spec)

    def text_pairs(self, split, raw_dir):
        paths = self.spec["files"][split]
        return read_tsv(paths[0]) if len(paths) == 1 else read_parallel(*paths)

    def expected_pairs(self, split, raw_dir):
        """The lines of the split's first file (a gigabyte counts in about a second)."""
        with open(self.spec["files"][split][0], "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _find_split(files_dir, split, languages):
    """The files of `split` in files_dir: STEM.tsv or STEM.SOURCE + STEM.TARGET."""
    if not os.path.isdir(files_dir):
        raise UserError(f"--files_dir={files_dir} is not a directory")
    for stem in SPLIT_STEMS[split]:
        prefix = os.path.join(files_dir, stem)
        if os.path.isfile(prefix + ".tsv"):
            return [os.path.abspath(prefix + ".tsv")]
        if glob.glob(glob.escape(prefix) + ".*") and languages:
            return _split_files(prefix, languages, split)
    if split == "train" and not languages:
        found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(files_dir, "train.*")))
        if found:
            raise UserError(f"{files_dir} has {', '.join(found)}: pass --source_lang and "
                            "--target_lang to say which file suffixes are the two sides")
    return None


def _split_files(path, languages, split):
    """--train=PATH and the like: a TSV file, or the prefix of PATH.SOURCE and PATH.TARGET."""
    if os.path.isfile(path):
        return [os.path.abspath(path)]
    if not languages:
        raise UserError(f"no such file: {path} (--{split}); for a pair of files PATH.SOURCE and "
                        "PATH.TARGET, pass --source_lang and --target_lang")
    paths = [f"{path}.{language}" for language in languages]
    for candidate in paths:
        if not os.path.isfile(candidate):
            raise UserError(f"no such file: {candidate} (the {split} files are expected to be "
                            f"{paths[0]} and {paths[1]})")
    return [os.path.abspath(p) for p in paths]


def _expected(split, languages):
    stems = SPLIT_STEMS[split]
    suffixes = f".{{{languages[0]},{languages[1]}}}" if languages else ".tsv"
    return " or ".join(stem + suffixes for stem in stems)

