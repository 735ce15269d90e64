"""The documentation: the site builds under `mkdocs build --strict` (a broken link or anchor, or
a page left out of the nav, fails it), its generated reference covers every flag of every
console script, every hparams set and every problem, every file and directory model_dir.py
names and every public method of the Runner, every flag says what it does, and the README stays
a front page that points into the site. The reference pages are made by docs/reference_pages.py
and the modules beside it, which these tests load as the site's hook does; none of it imports
TensorFlow, Keras or JAX, so these run in a few seconds."""

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from beside import import_beside

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# The constants of t2t_lite/model_dir.py that name no file or directory: keys and messages of
# its records. Every other one is a path the layout page shows.
NOT_PATHS = {"HPARAMS_HISTORY", "INIT_FROM_KEYS", "REPAIRS"}
FRAMEWORKS = ("tensorflow", "keras", "jax")


def pyproject_scripts():
    """{script: module} of [project.scripts] in pyproject.toml (read as text: tomllib is not in
    Python 3.10, which the project supports)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return {name: target.partition(":")[0] for name, target in
            re.findall(r'^([\w-]+)\s*=\s*"([^"]+)"', section, flags=re.MULTILINE)}


SCRIPTS = pyproject_scripts()


@pytest.fixture(scope="module")
def reference_pages():
    return import_beside(DOCS, "reference_pages")


def built_file(page):
    """Where MkDocs writes the page `page` (a path under docs/): a page as its folder's
    index.html, any other file as it is."""
    if not page.endswith(".md"):
        return page
    if page == "index.md" or page.endswith("/index.md"):
        return page.removesuffix("index.md") + "index.html"
    return page.removesuffix(".md") + "/index.html"


def parser_of(script):
    return importlib.import_module(SCRIPTS[script]).build_parser()


def test_the_site_builds_strictly(tmp_path, reference_pages):
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 0, result.stderr
    for page in reference_pages.pages():  # generated in memory by the hook, built like the rest
        assert (site / built_file(page)).is_file(), f"{page} was not built"


def test_every_console_script_has_a_reference_page(reference_pages):
    assert len(SCRIPTS) == 7
    assert reference_pages.console_scripts() == SCRIPTS  # as installed (else: pip install -e .)
    assert {f"reference/{script}.md" for script in SCRIPTS} <= set(reference_pages.pages())


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_the_cli_reference_lists_every_flag(script, reference_pages):
    page = reference_pages.cli_page(script, SCRIPTS[script])
    options = [option for action in parser_of(script)._actions
               for option in action.option_strings]
    assert options
    missing = [option for option in options if f"`{option}" not in page]  # its flag cell
    assert not missing, f"{script}'s reference lacks {missing}"


def test_the_hparams_and_problems_references_list_every_one(reference_pages):
    from t2t_lite import registry

    hparams, problems = reference_pages.hparams_page(), reference_pages.problems_page()
    assert registry.hparams_sets.names() and registry.problems.names()
    for name in registry.hparams_sets.names():
        assert f"\n### {name}\n" in hparams, name
    for name in registry.problems.names():
        assert f"\n## {name}\n" in problems, name


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_flag_has_help(script):
    """The reference is the parsers' help: a flag without one would be a blank row."""
    silent = [action.option_strings for action in parser_of(script)._actions
              if action.help in (None, argparse.SUPPRESS) or not action.help.strip()]
    assert not silent, f"{script}: flags without help: {silent}"


def test_the_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 210
    # CI runs its first three ```bash blocks (.ci/run); the guides are linked by path.
    assert readme.count("\n```bash\n") >= 3
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).is_file(), f"README links to {target}, which is not there"


def test_the_layout_page_shows_every_path_model_dir_names(reference_pages):
    from t2t_lite import model_dir

    page = reference_pages.reference_layout.layout_page()
    spans = re.findall(r"`([^`]+)`", page.replace("\\`", ""))  # code spans, not escaped `
    constants = {name: value for name, value in vars(model_dir).items() if name.isupper()}
    assert NOT_PATHS < set(constants)
    for name, value in constants.items():
        if name in NOT_PATHS:
            continue
        assert f"model_dir.{name}" in spans, f"the layout page does not name {name}"
        paths = (value.values() if isinstance(value, dict) else
                 value if isinstance(value, tuple) else [value])
        for path in paths:
            assert any(span.rstrip("/").endswith(path) for span in spans), (name, path)
    for spelled in ("ckpt-STEP.weights.h5", "ckpt-STEP.state.npz", "NAME.sentencepiece.model",
                    "NAME.symbols.json", "NAME.problem.json", "NAME-SPLIT.stats.json"):
        assert spelled in spans, spelled


def test_a_name_the_reference_no_longer_finds_fails_the_build(reference_pages):
    layout = reference_pages.reference_layout
    rows = layout.model_dir_rows()
    layout.check_every_name_has_a_row(rows)
    with pytest.raises(LookupError, match="HPARAMS_FILE"):  # a row of model_dir.py dropped
        layout.check_every_name_has_a_row(rows[1:])
    with pytest.raises(LookupError, match="no_such_method"):  # a function renamed or gone
        layout.docstring("t2t_lite.runner.Runner.no_such_method")


def test_the_api_page_shows_every_public_method_of_the_runner(reference_pages):
    from t2t_lite.runner import Runner

    page = reference_pages.reference_api.api_page()
    public = [name for name in vars(Runner) if not name.startswith("_")]
    assert {"from_model_dir", "translator", "train"} <= set(public)
    for name in public:
        assert f"\n### `Runner.{name}`\n" in page, f"the API page lacks Runner.{name}"
    for name in ("translate", "translate_n_best", "score_tokens", "alignments"):
        assert f"\n### `Translator.{name}`\n" in page, name
    for name in ("register_problem", "register_hparams", "import_usr_dir"):
        assert f"\n### `registry.{name}`\n" in page, name
    for name in ("text_pairs", "vocabulary"):  # what docs/guides/extending.md's problem defines
        assert f"\n### `Problem.{name}`\n" in page, name


def test_the_reference_imports_no_framework():
    """The pages are made from the parsers, the registry and the source: a build of the site
    needs neither TensorFlow nor JAX (nor the seconds their import takes)."""
    script = ("import sys; import reference_pages; reference_pages.pages(); "
              f"print(sorted(set(sys.modules) & set({FRAMEWORKS!r})))")
    result = subprocess.run([sys.executable, "-c", script], cwd=DOCS, capture_output=True,
                            text=True, timeout=120,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_house_diagram_draws_every_part_in_its_layer_and_every_import_down_or_sideways():
    """docs/house_diagram.py's picture, read back from its SVG: each module of t2t_lite is in a
    drawn part (the longest one its name starts with), each part's row is its LAYERS layer
    (test_architecture.layer), and the arrows are exactly the imports between parts, each
    drawn from a row to the same or a lower one."""
    import test_architecture as rules

    svg = import_beside(DOCS, "house_diagram").house_svg()
    rows = {part: float(y) for part, y in re.findall(
        r'<g data-part="([^"]+)"><rect x="[^"]+" y="([^"]+)"', svg)}
    arrows = set(re.findall(r'<path data-from="([^"]+)" data-to="([^"]+)"', svg))
    known = rules.modules()

    def part(name):
        return max((p for p in rows if name == p or name.startswith(p + ".")), key=len,
                   default=None)

    assert all(part(name) for name in known if name != "t2t_lite"), sorted(known)
    by_layer = {}
    for drawn, y in rows.items():
        by_layer.setdefault(rules.layer(drawn), set()).add(y)
    assert all(len(ys) == 1 for ys in by_layer.values()), by_layer  # one row a layer
    assert sorted(by_layer, key=lambda level: -by_layer[level].pop()) == sorted(by_layer)
    imports = {(part(name), part(imported)) for name, path in known.items()
               for imported in rules.internal_imports(path, known)
               if "t2t_lite" not in (name, imported)} - {(p, p) for p in rows}
    assert arrows == imports
    assert all(rows[target] >= rows[source] for source, target in arrows)


@pytest.fixture(scope="module")
def results_pages():
    return import_beside(DOCS, "results_pages")


def test_results_md_is_what_the_records_give(results_pages):
    """benchmarks/RESULTS.md is written from benchmarks/results/ by `python
    docs/results_pages.py`: a record or page edited without running it fails here."""
    assert results_pages.main(["--check"]) == 0
    # Its links, written for the site, are made to work in the repository too.
    text = results_pages.RESULTS_MD.read_text(encoding="utf-8")
    anchors = {results_pages.slug(title) for title in re.findall(r"^#+ (.+)$", text, re.M)}
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path, _, anchor = target.partition("#")
        if path:
            assert (ROOT / "benchmarks" / path).resolve().is_file(), target
        else:
            assert anchor in anchors, target


def test_no_measured_number_is_written_twice(results_pages, reference_pages):
    """A number lives in its record: the topics' prose, the guides, the design page, the
    README and the docstrings and help texts the reference shows refer to the tables instead
    of repeating a measured value from them."""
    numbers = results_pages.record_numbers()
    assert len(numbers) > 300  # every topic's tables are read
    typed = [ROOT / "README.md", *sorted((ROOT / "benchmarks" / "results").glob("*.md")),
             *sorted(DOCS.glob("**/*.md"))]
    texts = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in typed}
    texts.update({page: text for page, text in reference_pages.pages().items()
                  if page.startswith("reference/")})
    repeated = {name: found for name, text in texts.items()
                if (found := results_pages.repeated_numbers(text, numbers))}
    assert not repeated, repeated


def test_a_record_a_script_writes_is_the_table_the_page_shows(tmp_path, results_pages):
    """benchmarks/record.py (what `--record` writes) and docs/results_pages.py (what reads
    it) agree: the machine, date, load and command are filled in, floats keep their column's
    digits, ints get thousands separators, a run that extends a record adds its row."""
    record = import_beside(ROOT / "benchmarks", "record")
    path = tmp_path / "topic" / "speed.json"
    columns = ["engine", {"name": "sentences/s", "digits": 2}, "tokens/s"]
    record.write_record(path, "Speed", columns, [["ctranslate2", 56.1, 4738]], extend=True)
    record.write_record(path, "Speed", columns, [["tensorflow", 40.0, None]], extend=True)
    written = results_pages.load_record(path)
    assert written["source"] == "written by the script" and "load average" in written["load"]
    assert written["machine"].endswith("no GPU") and "Python" in written["software"]
    assert results_pages.table(written)[2:] == ["| ctranslate2 | 56.10 | 4,738 |",
                                               "| tensorflow | 40.00 |  |"]
    assert results_pages.significant_numbers("56.10 and 4,738 at beam 4 of 500") == [
        "56.1", "4738"]
    numbers = {"2018": "quality/steps", "1719": "quality/steps"}  # years are not measurements
    assert results_pages.repeated_numbers("Post & Vilar 2018; 2,018 and 1,719 steps",
                                          numbers) == [("2018", "quality/steps"),
                                                       ("1719", "quality/steps")]
    # A run that extends keeps the record's own title and source, whoever wrote them, and
    # lists its machine only when it is another.
    edited = dict(written, title="Speed, edited", source="transcribed", machine="another CPU",
                  notes=["the first runs' flags"])
    path.write_text(json.dumps(edited), encoding="utf-8")
    record.write_record(path, "Speed", columns, [["jax", 42.0, 3100]], extend=True,
                        notes=["this run's flags", "the first runs' flags"])
    extended = results_pages.load_record(path)
    assert extended["notes"] == ["the first runs' flags", "this run's flags"]  # each once
    assert (extended["title"], extended["source"]) == ("Speed, edited", "transcribed")
    assert extended["machine"].startswith("another CPU; ") and extended["machine"].endswith(
        "no GPU") and extended["software"] == written["software"]
    assert [row[0] for row in extended["rows"]] == ["ctranslate2", "tensorflow", "jax"]
    record.write_record(path, "Speed", columns, [["tensorflow", 41.0, 3000]])  # replaces
    assert results_pages.load_record(path)["rows"] == [["tensorflow", 41.0, 3000]]
