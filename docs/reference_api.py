"""The page of the Python API (reference/api.md): what a script or a notebook calls (the
Runner, the Translator it makes, the settings, the registry) and what a new problem overrides,
each with its signature and docstring as its source writes them.

Everything is read from the source (reference_code.py), not imported: the Translator's module
imports Keras, and with it TensorFlow or JAX, which the docs build does without. So the page
shows what the code says, a class's every public method included (a new one appears without an
edit here), and a name gone from the code fails the build.
"""

import ast
import re

from reference_code import (
    GENERATED_NOTE,
    as_written,
    assignment_comments,
    definition,
    docstring,
    escape,
    first_sentence,
    is_property,
    signature,
)

from t2t_lite.cli import trainer

SOURCES = ("`t2t_lite.runner`, `t2t_lite.decoding.translator`, `t2t_lite.config`, "
           "`t2t_lite.registry` and `t2t_lite.data.problem`")
# Where a Problem's methods stop being what a problem overrides (the comment in its class).
MACHINERY = "# Shared machinery."


def public_methods(dotted, before_line=None):
    """The public methods of the class `dotted`, in their order in its source (a property
    with a setter once), those above `before_line` only when given."""
    node, _ = definition(dotted)
    seen, methods = set(), []
    for child in node.body:
        if (isinstance(child, ast.FunctionDef) and not child.name.startswith("_")
                and child.name not in seen
                and (before_line is None or child.lineno < before_line)):
            seen.add(child.name)
            methods.append(child)
    return methods


def code(text):
    """`text` as inline code (in a code span nothing is escaped but its backticks)."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}"


def member(shown, node, path):
    """The Markdown of the function, method or property at `node` of the module at `path`,
    headed `shown`. One without a docstring that returns an expression shows it: a property
    `return self.experiment.problem` says what it is."""
    lines = [f"### `{shown}`", ""]
    if is_property(node):
        lines += ["*A property.*", ""]
    else:
        lines += ["```python", f"{shown}{signature(node, path)}", "```", ""]
    said = ast.get_docstring(node)
    if said is None and len(node.body) == 1 and isinstance(node.body[0], ast.Return):
        said = f"Returns {code(as_written(node.body[0].value, path))}."
    elif said is not None:
        said = escape(said)
    return lines + [said or "", ""]


def class_members(dotted, shown, before_line=None):
    _, path = definition(dotted)
    return [line for method in public_methods(dotted, before_line)
            for line in member(f"{shown}.{method.name}", method, path)]


def instance_attributes(dotted):
    """The public attributes the __init__ of the class `dotted` sets (`self.name = ...`)."""
    node, _ = definition(dotted + ".__init__")
    return [target.attr for statement in ast.walk(node) if isinstance(statement, ast.Assign)
            for target in statement.targets if isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name) and target.value.id == "self"
            and not target.attr.startswith("_")]


def constructor(dotted, shown):
    """The class `dotted`'s docstring and the call that makes one (its __init__'s
    parameters)."""
    init, path = definition(dotted + ".__init__")
    return ["```python", f"{shown}{signature(init, path)}", "```", "", escape(docstring(dotted)),
            ""]


def train_config_table():
    """The fields of TrainConfig: | field | type | default | meaning |, the meaning being the
    comment beside each, or else the help of the trainer's flag of that name."""
    node, path = definition("t2t_lite.config.TrainConfig")
    comments = assignment_comments(path, node.name)
    helps = {action.dest: action.help for action in trainer.build_parser()._actions}
    lines = ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
    for field in node.body:
        if isinstance(field, ast.AnnAssign):
            name = field.target.id
            lines.append(f"| `{name}` | {escape(as_written(field.annotation, path))} | "
                         f"{code(as_written(field.value, path))} | "
                         f"{escape(comments[name][1] or helps.get(name) or '')} |")
    return lines


def runner_section():
    runner = "t2t_lite.runner.Runner"
    attributes = ", ".join(f"`{name}`" for name in instance_attributes(runner))
    return ["## Runner", "", "`from t2t_lite.runner import Runner`", "",
            *constructor(runner, "Runner"),
            f"Attributes: {attributes}, and the properties below. Train with [`Runner.train`]"
            "(#runnertrain) and a [`TrainConfig`](#trainconfig); translate with the "
            "[Translator](#translator) that [`Runner.translator`](#runnertranslator) makes.", "",
            *class_members(runner, "Runner")]


def translator_section():
    translator = "t2t_lite.decoding.translator.Translator"
    translation, _ = definition("t2t_lite.decoding.translation.Translation")
    fields = ", ".join(ast.literal_eval(translation.value.args[1]).split())
    return ["## Translator", "", "`t2t_lite.decoding.translator.Translator`, made by "
            "[`Runner.translator`](#runnertranslator): the engine's subclass of it or, for "
            "`engine=\"ctranslate2\"`, "
            "`t2t_lite.decoding.ctranslate2_translator.CTranslate2Translator`, of which its "
            "module says: *" + escape(first_sentence(docstring(
                "t2t_lite.decoding.ctranslate2_translator"))) + "*", "",
            *constructor(translator, "Translator"),
            f"It translates into `t2t_lite.decoding.translation.Translation({fields})`: in "
            "the words of its module,", "",
            escape(docstring("t2t_lite.decoding.translation").split("\n\n")[0]), "",
            *class_members(translator, "Translator")]


def settings_section():
    config = "t2t_lite.config."
    overview = docstring("t2t_lite.config").split("\n\n", 1)[1]
    return ["## Settings", "", escape(overview), "",
            "### TrainConfig", "", "`from t2t_lite.config import TrainConfig`", "",
            escape(docstring(config + "TrainConfig")), "",
            "Each field is the [t2t-lite-trainer](t2t-lite-trainer.md) flag of its name; a "
            "meaning in the table is the comment beside the field, or else the flag's help.", "",
            *train_config_table(), "",
            *class_members(config + "TrainConfig", "TrainConfig"),
            "### HParams", "", "`from t2t_lite.config import HParams`", "",
            "Its fields, their defaults, allowed values and meaning, and the registered sets "
            "of them: [hparams sets](hparams.md#the-hparams).", "",
            *class_members(config + "HParams", "HParams")]


def registry_section():
    registry = "t2t_lite.registry."
    lines = ["## The registry", "", "`from t2t_lite import registry`", "",
             escape(docstring("t2t_lite.registry")), ""]
    for name in ("register_problem", "register_hparams", "problem", "hparams",
                 "import_usr_dir"):
        node, path = definition(registry + name)
        if isinstance(node, ast.Assign):  # an alias: register_hparams = hparams_sets.register
            node, path = definition(f"{registry}Registry.{node.value.attr}")
        lines += member(f"registry.{name}", node, path)
    return lines


def problem_section():
    problem = "t2t_lite.data.problem.Problem"
    node, path = definition(problem)
    lines = path.read_text(encoding="utf-8").splitlines()
    machinery = next((number for number, line in enumerate(lines, 1)
                      if line.strip() == MACHINERY and number > node.lineno), None)
    if machinery is None:
        raise LookupError(f"{path}: no `{MACHINERY}` comment in Problem, which parts what "
                          "a problem overrides from what it inherits")
    comments = assignment_comments(path, "Problem")
    attributes = [child for child in node.body if isinstance(child, ast.Assign)
                  and child.lineno < machinery]
    table = ["| attribute | default | meaning |", "| --- | --- | --- |"]
    table += [f"| `{child.targets[0].id}` | {code(as_written(child.value, path))} | "
              f"{escape(comments[child.targets[0].id][1])} |" for child in attributes]
    return ["## Problem", "", "`from t2t_lite.data.problem import Problem`", "",
            escape(docstring(problem)), "",
            f"Below: what a problem sets and overrides, the class above its {code(MACHINERY)} "
            "comment (see [Adding a problem or an hparams set](../guides/extending.md)); the "
            "rest it inherits, its data files among it (see [the layout]"
            "(layout.md#a-data_dir)).", "",
            *table, "", *class_members(problem, "Problem", before_line=machinery)]


def api_page():
    """The Markdown of reference/api.md."""
    page = ["# Python API", "", GENERATED_NOTE.format(source=SOURCES) + " The command-line "
            "tools are built on these; the guides show them at work (e.g. [Decoding]"
            "(../guides/decoding.md), [Attention](../guides/attention.md)).", "",
            *runner_section(), *translator_section(), *settings_section(),
            *registry_section(), *problem_section()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(page))
