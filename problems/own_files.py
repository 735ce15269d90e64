"""Problems made from the user's own files by t2t-lite-datagen, with no Python code.

`t2t-lite-datagen --problem=NAME ...` records what NAME is made of (its spec: the files per split,
the vocabulary size, ...) in DATA_DIR/NAME.problem.json; every later command that is given that
data_dir finds NAME through it (t2t_lite.registry.problem), and a datagen run that would change it
is refused once data was made from it.
"""

import glob
import json
import os
import re

from t2t_lite import registry
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import write_text_atomically
from t2t_lite.utils.json_records import read_record


class OwnFilesProblem:
    """Mixin (before the Problem class) for a problem rebuilt from its recorded spec, whose
    "files" name the splits it has. `how_to_make` is the error for using the registered class
    itself, which has no files."""

    how_to_make = ""

    def __init__(self, name=None, spec=None):
        if spec is None:
            raise UserError(self.how_to_make)
        super().__init__()
        self.name = name
        self.spec = spec
        self.vocab_size = spec["vocab_size"]
        self.num_shards = {split: type(self).num_shards[split] for split in spec["files"]}

    @classmethod
    def from_spec(cls, name, spec):
        return cls(name, spec)

    @classmethod
    def record(cls, name, data_dir, spec):
        """The problem `name` made of `spec`, which is written to data_dir, unless data_dir
        already has data made from a different one."""
        path = registry.problem_spec_path(data_dir, name)
        if os.path.exists(path):
            made = glob.glob(os.path.join(glob.escape(data_dir), f"{name}[-.]*"))
            saved = read_record(path, dict, f"restore it from a copy, or delete "
                                f"{data_dir}/{name}* to make that data again")
            if saved != spec and set(made) - {path}:
                changed = ", ".join(sorted(k for k in spec.keys() | saved.keys()
                                           if saved.get(k) != spec.get(k)))
                raise UserError(f"{data_dir} has data of {name} made with other {changed} (see "
                                f"{path}): use a new --problem name, or delete "
                                f"{data_dir}/{name}* to remake it")
        write_text_atomically(path, json.dumps(spec, indent=2) + "\n")
        return cls(name, spec)


def check_new_name(name):
    """A user's corpus needs a name of its own, usable in file names."""
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise UserError(f"--problem={name}: name your corpus with letters, digits and _")
    if name in registry.problems.names():
        raise UserError(f"--problem={name} is a built-in problem: give your corpus a new name")
