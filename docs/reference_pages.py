"""The site's generated pages: the reference of every console script's flags (from its
build_parser), of every registered hparams set (its values and docstring) and of every
registered problem (its docstring), what a model_dir and a data_dir hold (reference_layout.py),
the Python API (reference_api.py), the results pages (results_pages.py) and the pages made of
README.md's text.

They are generated at each build, never typed, so that they cannot drift from the code or be
written twice: docs/hooks.py hands them to MkDocs, and tests/test_docs.py checks them. Nothing
here imports TensorFlow, Keras or JAX (the parsers and the registry do not need them, and what
imports them is read as source: reference_code.py), so the docs build in a second or two.
argparse has no public way to list a parser's flags: as sphinx-argparse does, the CLI pages read
`parser._actions` and its groups, and let argparse's own HelpFormatter write the usage and
metavars, so that they read as `--help` does.

The modules beside this one are imported by their names: MkDocs puts this folder on sys.path
while it loads the hook, and tests/test_docs.py imports this module the same way.
"""

import argparse
import dataclasses
import importlib
import importlib.metadata
import inspect
import posixpath
import re
from pathlib import Path

import reference_api
import reference_layout
import results_pages
from reference_code import GENERATED_NOTE, ROOT, assignment_comments, escape

README = ROOT / "README.md"
# The README links into the docs by their paths in the repository; on the site they are pages.
README_TARGETS = {"docs/": "", "benchmarks/RESULTS.md": "results/index.md"}


def console_scripts():
    """{script name: module} of the package's console scripts, as pip installed them (the
    [project.scripts] of pyproject.toml)."""
    entry_points = importlib.metadata.distribution("t2t_lite").entry_points
    return {entry.name: entry.value.partition(":")[0] for entry in entry_points
            if entry.group == "console_scripts"}


def flag_cell(action, formatter):
    """`--name METAVAR` for each of an option's spellings, as --help writes them."""
    spellings = []
    for option in action.option_strings:
        if action.nargs == 0:
            spellings.append(f"`{option}`")
        else:
            metavar = formatter._format_args(action, action.dest.upper())
            spellings.append(f"`{option} {metavar}`")
    return ", ".join(spellings)


def default_cell(action, defaults):
    """What leaving the flag out gives: the parser's default, or where that is None (not
    given, which the trainer tells apart for a resumed run) the module's DEFAULTS (the
    trainer's: TrainConfig's); blank where there is none, and the help says what happens."""
    default = action.default
    if default is None:
        default = defaults.get(action.dest)
    if default is None or default is False or default == "" or default == argparse.SUPPRESS:
        return ""
    return f"`{default}`"


def cli_page(script, module_name):
    """The Markdown reference of one console script: its description, usage and every flag,
    by the parser's argument groups."""
    module = importlib.import_module(module_name)
    parser, defaults = module.build_parser(), getattr(module, "DEFAULTS", {})
    formatter = argparse.HelpFormatter(parser.prog, width=100)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    source = f"`{module_name}.build_parser()`"
    lines = [f"# {script}", "", GENERATED_NOTE.format(source=source) +
             f" `{script} --help` prints the same.", "", escape(parser.description or ""), "",
             "```text", formatter.format_help().strip(), "```", ""]
    for group in parser._action_groups:
        actions = [action for action in group._group_actions if action.help != argparse.SUPPRESS]
        if not actions:
            continue
        lines += [f"## {group.title[:1].upper()}{group.title[1:]}", ""]
        if group.description:
            lines += [escape(group.description), ""]
        lines += ["| flag | default | meaning |", "| --- | --- | --- |"]
        lines += [f"| {flag_cell(action, formatter)} | {default_cell(action, defaults)} | "
                  f"{escape(action.help or '')} |" for action in actions]
        lines.append("")
    return "\n".join(lines)


def allowed(field):
    """An hparam's allowed values, from the metadata its checks read."""
    if "choices" in field.metadata:
        return ", ".join(f"`{choice}`" for choice in field.metadata["choices"])
    low, high, above, below = field.metadata["range"]
    if high is None:
        return f"{'>' if above else '>='} {low}"
    return f"{'(' if above else '['}{low}, {high}{')' if below else ']'}"


def hparams_page():
    """The Markdown reference of the hparams: every field of HParams (its default, allowed
    values and meaning), then every registered hparams set with its docstring and values."""
    from t2t_lite import config, registry

    defaults = config.HParams()
    comments = assignment_comments(Path(config.__file__), "HParams")
    fields = dataclasses.fields(config.HParams)
    lines = ["# hparams sets", "", GENERATED_NOTE.format(
        source="`t2t_lite/config.py` (`HParams`) and the registered hparams sets"), "",
        "Every setting is a typed field of `t2t_lite.config.HParams`, checked when it is made; "
        "its defaults are the paper's base model. An hparams set is a function returning an "
        "`HParams`, registered by name (see [Adding a problem or an hparams set]"
        "(../guides/extending.md)); `--hparams=name=value,...` overrides its values.", "",
        "## The hparams"]
    section = None
    for field in fields:
        if comments[field.name][0] != section:
            section = comments[field.name][0]
            lines += ["", f"### {escape(section)}", "",
                      "| hparam | type | default | allowed | meaning |",
                      "| --- | --- | --- | --- | --- |"]
        lines.append(f"| `{field.name}` | {field.type.__name__} | "
                     f"`{getattr(defaults, field.name)}` | {allowed(field)} | "
                     f"{escape(comments[field.name][1])} |")
    names = registry.hparams_sets.names()
    sets = {name: registry.hparams(name) for name in names}
    lines += ["", "## The registered sets", ""]
    for name in names:
        function = registry.hparams_sets.get(name)
        changed = [f"`{field.name}={getattr(sets[name], field.name)}`" for field in fields
                   if getattr(sets[name], field.name) != getattr(defaults, field.name)]
        lines += [f"### {name}", "", escape(inspect.getdoc(function) or ""), "",
                  f"Defined in `{function.__module__}`. Differs from the defaults in: "
                  f"{', '.join(changed) or 'nothing'}.", ""]
    lines += ["## All values", "", "Each set's value of each hparam; those that differ from the "
              "defaults are in bold.", "", "| hparam | " + " | ".join(names) + " |",
              "| --- |" + " --- |" * len(names)]
    for field in fields:
        cells = []
        for name in names:
            value = getattr(sets[name], field.name)
            bold = "**" if value != getattr(defaults, field.name) else ""
            cells.append(f"{bold}`{value}`{bold}")
        lines.append(f"| `{field.name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def problems_page():
    """The Markdown reference of the registered problems: each one's docstring and what it is
    scored by."""
    from t2t_lite import registry

    lines = ["# Problems", "", GENERATED_NOTE.format(source="the registered problems"), "",
             "A problem says where the data comes from, how it is tokenized and how outputs are "
             "scored. `translate_files` and `parsing_files` are the classes behind your own "
             "corpora: `t2t-lite-datagen` records them in the data_dir under the name you give "
             "(see [Your own corpus](../guides/own-corpus.md) and [Parsing]"
             "(../guides/parsing.md)).", ""]
    for name in registry.problems.names():
        problem = registry.problems.get(name)
        shards = ", ".join(f"{split} {count}" for split, count in problem.num_shards.items())
        lines += [f"## {name}", "", escape(inspect.getdoc(problem) or ""), "",
                  f"- class: `{problem.__module__}.{problem.__qualname__}`",
                  f"- metrics: {', '.join(f'`{m}`' for m in problem.metric_names)}",
                  f"- shards: {shards}",
                  "- data: generated, no download (the trainer makes it when missing)"
                  if problem.self_contained else "- data: `t2t-lite-datagen` makes it", ""]
    return "\n".join(lines)


def readme_links(markdown, page):
    """The README's links to docs/... and benchmarks/RESULTS.md, made relative to `page`."""

    def relink(match):
        target, hashmark, anchor = match.group(1).partition("#")
        for prefix, uri in README_TARGETS.items():
            if target.startswith(prefix):
                target = uri + target[len(prefix):]
                relative = posixpath.relpath(target, posixpath.dirname(page) or ".")
                return f"]({relative}{hashmark}{anchor})"
        return match.group(0)

    return re.sub(r"\]\(([^)\s]+)\)", relink, markdown)


def readme_sections():
    """README.md split at its `## ` headings (outside code blocks): [(title, text)], the
    first title "" for what comes before them."""
    sections, fenced = [("", [])], False
    for line in README.read_text(encoding="utf-8").splitlines():
        fenced ^= line.startswith("```")
        if line.startswith("## ") and not fenced:
            sections.append((line[3:].strip(), []))
        sections[-1][1].append(line)
    return [(title, "\n".join(lines) + "\n") for title, lines in sections]


def readme_pages():
    """index.md, the README without its Quick start, and guides/quick-start.md, that section:
    the site's landing page and first guide are the README's own text."""
    index, quick_start = [], ""
    for title, text in readme_sections():
        if title == "Quick start":
            quick_start = "# Quick start\n" + text.split("\n", 1)[1]
            index.append("## Quick start\n\nInstall, train, decode and export the embedded demo, "
                         "and run the tests: [Quick start](guides/quick-start.md).\n\n")
        else:
            index.append(text)
    return {"index.md": readme_links("".join(index), "index.md"),
            "guides/quick-start.md": readme_links(quick_start, "guides/quick-start.md")}


def pages():
    """{path under docs/: Markdown} of every generated page."""
    generated = {f"reference/{script}.md": cli_page(script, module)
                 for script, module in sorted(console_scripts().items())}
    generated["reference/hparams.md"] = hparams_page()
    generated["reference/problems.md"] = problems_page()
    generated["reference/layout.md"] = reference_layout.layout_page()
    generated["reference/api.md"] = reference_api.api_page()
    generated.update(results_pages.site_pages())
    generated.update(readme_pages())
    return generated
