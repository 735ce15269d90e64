"""The documentation: the site builds under `mkdocs build --strict` (a broken link or anchor, or
a page left out of the nav, fails it), its generated reference covers every flag of every
console script, every hparams set and every problem, every flag says what it does, and the
README stays a front page that points into the site. The reference pages are made by
docs/reference_pages.py, which these tests load as the site's hook does; none of it imports
TensorFlow, so these run in a few seconds."""

import argparse
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    spec = importlib.util.spec_from_file_location("reference_pages",
                                                  ROOT / "docs" / "reference_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        html = "index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html"
        assert (site / html).is_file(), f"{page} was not built"


def test_every_console_script_has_a_reference_page(reference_pages):
    assert len(SCRIPTS) == 6
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
