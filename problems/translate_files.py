"""Translation from the user's own parallel text, made into a problem with no Python code.

`t2t-lite-datagen --problem=NAME --files_dir=DIR ...` (or --train/--dev/--test) records what NAME
is made of in DATA_DIR/NAME.problem.json; every later command that is given that data_dir finds
NAME through it (t2t_lite.registry.problem), and a datagen run that would change it is refused
once data was made from it.
"""

import glob
import json
import os
import re

from t2t_lite import registry
from t2t_lite.corpus import read_parallel, read_tsv
from t2t_lite.errors import UserError
from t2t_lite.files import write_text_atomically
from t2t_lite.registry import register_problem
from t2t_lite.problems.translate import TranslationProblem

# File stems recognized in --files_dir, by split.
SPLIT_STEMS = {"train": ("train",), "dev": ("dev", "valid", "val", "validation"),
               "test": ("test",)}


@register_problem
class TranslateFiles(TranslationProblem):
    """Pairs read from line-aligned files (train.en + train.de) or TSV (train.tsv), per split.

    The spec gives, per split, either [source_path, target_path] or [tsv_path].
    """

    num_shards = {"train": 10, "dev": 1, "test": 1}

    def __init__(self, name=None, spec=None):
        if spec is None:
            raise UserError(
                "translate_files is made from your own files: run `t2t-lite-datagen "
                "--problem=NAME --files_dir=DIR --source_lang=en --target_lang=de "
                "--data_dir=D`, then use --problem=NAME --data_dir=D")
        self.name = name
        self.spec = spec
        self.vocab_size = spec["vocab_size"]
        self.vocab_type = spec["vocab_type"]
        self.target_language = spec["target_lang"]
        self.num_shards = {split: type(self).num_shards[split] for split in spec["files"]}

    @classmethod
    def from_spec(cls, name, spec):
        return cls(name, spec)

    @classmethod
    def create(cls, name, data_dir, *, files_dir=None, train=None, dev=None, test=None,
               source_lang=None, target_lang=None, vocab_size=8000, vocab_type="bpe"):
        """The problem `name` made of the given files, recorded in data_dir (see the module)."""
        check_new_name(name)
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
        record_spec(name, data_dir, spec)
        return cls(name, spec)

    def text_pairs(self, split, raw_dir):
        paths = self.spec["files"][split]
        return read_tsv(paths[0]) if len(paths) == 1 else read_parallel(*paths)


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


def check_new_name(name):
    """A user's corpus needs a name of its own, usable in file names."""
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise UserError(f"--problem={name}: name your corpus with letters, digits and _")
    if name in registry.problems.names():
        raise UserError(f"--problem={name} is a built-in problem: give your corpus a new name")


def record_spec(name, data_dir, spec):
    """Writes the spec, unless data_dir already has data made from a different one."""
    path = registry.problem_spec_path(data_dir, name)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        made = glob.glob(os.path.join(glob.escape(data_dir), f"{name}[-.]*"))
        if saved != spec and set(made) - {path}:
            changed = ", ".join(sorted(k for k in spec if saved.get(k) != spec[k]))
            raise UserError(f"{data_dir} has data of {name} made with other {changed} (see "
                            f"{path}): use a new --problem name, or delete {data_dir}/{name}* "
                            "to remake it")
    write_text_atomically(path, json.dumps(spec, indent=2) + "\n")
