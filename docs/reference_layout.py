"""The page of what a model_dir and a data_dir hold (reference/layout.md), from the code that
owns each name.

Each row's paths are spelled by that code (t2t_lite/model_dir.py's constants, the data_dir's
path functions, called with placeholders such as NAME); what each one is, is the comment beside
its constant or the docstring of the function that spells it; what writes and what reads it are
named by their dotted names and shown with the first sentence of their docstrings, read from
the source (reference_code.py). So a name changed in the code changes the page, a function
renamed or gone fails the build, and the prose lives in the code: to say more of a file, say it
there. Every constant of model_dir.py is a row's or is one of NOT_PATHS, else the build fails.
"""

import ast
import dataclasses
import os
import re
import types

from reference_code import GENERATED_NOTE, definition, docstring, escape, first_sentence

from t2t_lite import model_dir as md
from t2t_lite.cli import datagen
from t2t_lite.data.problem import Problem
from t2t_lite.model_dir import ModelDir
from t2t_lite.problems.translate import sentencepiece_path
from t2t_lite.problems.tree_vocabulary import symbols_path
from t2t_lite.registry import problem_spec_path

MD = "t2t_lite.model_dir."
# The constants of model_dir.py that are no path: keys and messages inside its records.
NOT_PATHS = ("HPARAMS_HISTORY", "INIT_FROM_KEYS", "REPAIRS")
# The stand-in of a problem whose data_dir paths are shown: its name is NAME.
PROBLEM = types.SimpleNamespace(name="NAME", num_shards=Problem.num_shards)


@dataclasses.dataclass
class Row:
    paths: list  # as the code spells them
    owners: list  # the dotted names of what spells them: constants, functions
    writers: list  # the dotted names of what writes them
    readers: list  # ... and of what reads them
    note: str = ""  # what the row adds: a link, or what the code holds (the shard counts)


def constant(dotted):
    """The value of the constant `dotted`, read from its module's source, not imported (the
    module may import a framework)."""
    node, _ = definition(dotted)
    return ast.literal_eval(node.value)


def model_dir_rows():
    experiment = "t2t_lite.experiment.ExperimentRecord.record"
    evaluator = "t2t_lite.evaluation.evaluator.Evaluator."
    copy = "t2t_lite.training.model_dir_copy"
    tf_checkpoints, jax_checkpoints = ("t2t_lite.backends.tensorflow.checkpoints.",
                                       "t2t_lite.backends.jax.checkpoints.")
    state = constant("t2t_lite.training.model_weights.STATE")
    root = ModelDir(os.sep)  # its paths are shown by their names in it
    return [
        Row([md.HPARAMS_FILE], [MD + "HPARAMS_FILE", MD + "EXPERIMENT_FILES"],
            [experiment, MD + "ModelDir.write_hparams"], [MD + "ModelDir.read_experiment"]),
        Row([md.PROBLEM_FILE], [MD + "PROBLEM_FILE", MD + "EXPERIMENT_FILES"],
            [experiment, MD + "ModelDir.write_experiment"],
            [MD + "ModelDir.read_experiment", "t2t_lite.runner.Runner.from_model_dir"]),
        Row([md.CHECKPOINT_LIST], [MD + "CHECKPOINT_LIST"],
            ["t2t_lite.training.checkpoint_list.write_list"],
            ["t2t_lite.training.checkpoint_list.read_list",
             "t2t_lite.training.checkpoint_list.latest_checkpoint"]),
        Row([f"ckpt-STEP{md.CHECKPOINT_MARKERS[0]}", "ckpt-STEP.data-NNNNN-of-MMMMM"],
            [MD + "CHECKPOINT_MARKERS"], [tf_checkpoints + "save"],
            [tf_checkpoints + "restore_existing", "t2t_lite.training.model_weights.restore_model"]),
        Row([f"ckpt-STEP{md.KERAS_WEIGHTS}", f"ckpt-STEP{state}"],
            [MD + "KERAS_WEIGHTS", "t2t_lite.training.model_weights.STATE"],
            [jax_checkpoints + "save"],
            [jax_checkpoints + "restore", "t2t_lite.training.model_weights.restore_model"],
            "See [the JAX trainer's checkpoints](#the-jax-trainers-checkpoints)."),
        Row([md.HISTORY_FILE], [MD + "HISTORY_FILE"],
            [evaluator + "evaluate", MD + "ModelDir.write_history"],
            [MD + "ModelDir.read_history"]),
        Row([f"{run}/" for run in md.SUMMARY_RUNS],
            [MD + "SUMMARY_RUNS", MD + "ModelDir.summaries"],
            ["t2t_lite.backends.tensorflow.trainer.Trainer.train",
             "t2t_lite.training.scalar_summaries.ScalarWriter"],
            ["t2t_lite.training.summaries"]),
        Row([f"{md.BEST_DIR}/"], [MD + "BEST_DIR", MD + "ModelDir.best"],
            [evaluator + "keep_if_best", copy + ".save_model_dir"], [copy]),
        Row([f"{md.AVG_DIR}/"], [MD + "AVG_DIR", MD + "ModelDir.avg"],
            ["t2t_lite.runner.Runner.average", "t2t_lite.training.averaging.average_checkpoints"],
            [copy]),
        Row([os.path.join(directory, md.INFO_FILE) for directory in (md.BEST_DIR, md.AVG_DIR)],
            [MD + "INFO_FILE"], [copy + ".save_model_dir", evaluator + "report_average"],
            [MD + "ModelDir.read_info", evaluator + "keep_if_best"]),
        Row([f"{md.CTRANSLATE2_CACHE}/"],
            [MD + "CTRANSLATE2_CACHE", MD + "ModelDir.ctranslate2_cache"],
            ["t2t_lite.export.ctranslate2.cached_conversion"],
            ["t2t_lite.export.ctranslate2.cached_conversion"]),
        Row([f"{directory}/" for directory in md.EXPORT_DIRS.values()],
            [MD + "EXPORT_DIRS", MD + "ModelDir.export_dir"],
            ["t2t_lite.export.saved_model.export", "t2t_lite.export.ctranslate2.export",
             "t2t_lite.export.versions.new_version"], ["t2t_lite.export.versions"],
            "Formats: " + ", ".join(f"`{name}` in `{directory}/`"
                                    for name, directory in md.EXPORT_DIRS.items()) + "."),
        Row([os.path.basename(root.trainer_lock()),
             os.path.basename(root.trainer_lock("N", 2))], [MD + "ModelDir.trainer_lock"],
            ["t2t_lite.runner.Runner._lock"], ["t2t_lite.utils.files.exclusive_lock"]),
        Row([os.path.basename(root.default_data_dir) + "/"], [MD + "ModelDir.default_data_dir"],
            ["t2t_lite.runner.Runner.prepare_data"], [],
            "See [A data\\_dir](#a-data_dir)."),
    ]


def data_dir_rows():
    problem, problems = "t2t_lite.data.problem.Problem.", "t2t_lite.problems."
    raw_help = next(action.help for action in datagen.build_parser()._actions
                    if action.dest == "raw_dir")
    raw = re.search(r"default: DATA_DIR/(\w+)", raw_help)
    if raw is None:
        raise LookupError(f"t2t-lite-datagen's --raw_dir help no longer names its default: "
                          f"{raw_help!r}")
    shards = ", ".join(f"{split} {count}" for split, count in Problem.num_shards.items())
    return [
        Row([Problem.shard_paths(PROBLEM, "train", "")[0]], [problem + "shard_paths"],
            [problem + "generate_data"], [problem + "dataset", problem + "numpy_batches"],
            f"One file per shard of each split (`Problem.num_shards`; by default {shards})."),
        Row([Problem.stats_path(PROBLEM, "SPLIT", "")], [problem + "stats_path"],
            [problem + "generate_data"], [problem + "check_data", "t2t_lite.data.shard_records"]),
        Row([sentencepiece_path(PROBLEM, "")], [problems + "translate.sentencepiece_path"],
            [problems + "translate.TranslationProblem.build_vocabulary",
             problems + "translate.TranslationProblem.adopt_vocabulary",
             problems + "parsing.ParsingProblem.build_vocabulary"],
            [problem + "vocabulary", "t2t_lite.data.vocabulary.SentencePieceVocabulary.load"]),
        Row([symbols_path("", PROBLEM.name)], [problems + "tree_vocabulary.symbols_path"],
            [problems + "parsing.ParsingProblem.build_vocabulary"],
            [problems + "tree_vocabulary.ParsingVocabulary.load"]),
        Row([problem_spec_path("", PROBLEM.name)], ["t2t_lite.registry.problem_spec_path"],
            [problems + "own_files.OwnFilesProblem.record"], ["t2t_lite.registry.problem"]),
        Row([raw.group(1) + "/"], [], [problems + "translate.TfdsTranslationProblem"],
            [problem + "text_pairs"], f"t2t-lite-datagen's `--raw_dir`: {escape(raw_help)}."),
    ]


def short(dotted):
    return dotted.removeprefix("t2t_lite.")


def said(dotted):
    """`dotted` and the first sentence of what its source says it is."""
    text = first_sentence(docstring(dotted))
    return f"`{short(dotted)}`" + (f": {escape(text)}" if text else "")


def table(rows):
    lines = ["| path | written by | what it is, and what reads it |", "| --- | --- | --- |"]
    for row in rows:
        path = "<br>".join([f"`{path}`" for path in row.paths] +
                           [f"`{short(owner)}`" for owner in row.owners])
        what = [escape(first_sentence(docstring(owner))) for owner in row.owners]
        what = " ".join([text for text in what if text] + ([row.note] if row.note else []))
        readers = "<br>".join(said(reader) for reader in row.readers)
        if readers:
            what = "<br>".join(([what] if what else []) + [f"**Read by** {readers}"])
        lines.append(f"| {path} | {'<br>'.join(said(w) for w in row.writers) or '—'} | "
                     f"{what} |")
    return lines


def check_every_name_has_a_row(rows):
    """Fails the build on a constant of model_dir.py that no row shows, nor NOT_PATHS names:
    a file added to the layout must be added to the page."""
    owners = {owner.removeprefix(MD) for row in rows for owner in row.owners}
    names = [name for name in vars(md) if name.isupper() and name not in NOT_PATHS]
    missing = sorted(set(names) - owners)
    if missing:
        raise LookupError(f"docs/reference_layout.py shows no row of t2t_lite.model_dir's "
                          f"{', '.join(missing)}: add one (or to NOT_PATHS, if no path)")


def layout_page():
    """The Markdown of reference/layout.md."""
    rows = model_dir_rows()
    check_every_name_has_a_row(rows)
    overview = docstring("t2t_lite.model_dir").split("\n\n", 1)[1]
    data = docstring("t2t_lite.data.problem").split("\n\n", 1)[1]
    jax_checkpoints = docstring("t2t_lite.backends.jax.checkpoints")
    lines = ["# What a model_dir and a data_dir hold", "", GENERATED_NOTE.format(
        source="`t2t_lite/model_dir.py`, the data_dir's path functions and the docstrings of "
        "what writes and reads each file") + " Paths are relative to the model_dir or the "
        "data_dir; STEP, SPLIT, N and NAME (the problem's name) stand for their values.", "",
        "## A model_dir", "", escape(overview), "", *table(rows), "",
        "### The JAX trainer's checkpoints", "", escape(jax_checkpoints), "",
        "## A data_dir", "", escape(data), "", *table(data_dir_rows()), ""]
    return "\n".join(lines)
