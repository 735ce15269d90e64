"""The shape of the house (../shared/DESIGN.md, README "Layout"): dependencies run one way, no
import circles, no module over 400 lines, a few folders by concept, and the core reaches the
built-in problems and hparams sets only through the registry."""

import ast
import os
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "t2t_lite"

# Each module's layer, lowest first: a module imports only from its own layer or below. The
# scorers (metrics, EVALB) are leaves that problems use, below the Evaluator of their folder.
LAYERS = [
    ("t2t_lite", "t2t_lite.utils", "t2t_lite.config", "t2t_lite.registry", "t2t_lite.model_dir"),
    ("t2t_lite.models", "t2t_lite.data", "t2t_lite.evaluation.metrics",
     "t2t_lite.evaluation.evalb"),
    ("t2t_lite.training", "t2t_lite.decoding"),
    ("t2t_lite.evaluation", "t2t_lite.export"),
    ("t2t_lite.runner",),
    ("t2t_lite.cli",),
]
# Backend-neutral: keras / keras.ops only, no TensorFlow (README "Layout"); the JAX path's
# modules among them, so that it runs where TensorFlow is not installed.
BACKEND_NEUTRAL = ("t2t_lite.models", "t2t_lite.decoding.search", "t2t_lite.decoding.sampling",
                   "t2t_lite.decoding.ensemble", "t2t_lite.decoding.visible_ending",
                   "t2t_lite.decoding.jax_translator", "t2t_lite.training.loss",
                   "t2t_lite.training.optimizer", "t2t_lite.training.loop",
                   "t2t_lite.training.jax_trainer",
                   "t2t_lite.training.jax_checkpoints", "t2t_lite.training.scalar_summaries",
                   "t2t_lite.training.model_dir_copy", "t2t_lite.training.stops",
                   "t2t_lite.model_dir", "t2t_lite.config", "t2t_lite.data.vocabulary",
                   "t2t_lite.data.corpus", "t2t_lite.data.records", "t2t_lite.data.buckets",
                   "t2t_lite.data.numpy_pipeline", "t2t_lite.evaluation.evaluator",
                   "t2t_lite.runner.jax_training", "t2t_lite.utils.backend")


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports(path):
    """The modules `path` imports anywhere in it (top level or inside functions)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def internal_imports(path, known):
    """The t2t_lite modules `path` imports (a package's submodule imported by name counts)."""
    return {name for name in imports(path) if name in known}


def layer(name):
    """The index of the most specific LAYERS prefix of module `name`."""
    best = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (
                    best is None or len(prefix) > len(best[1])):
                best = (index, prefix)
    assert best, f"{name} has no layer: add it to LAYERS"
    return best[0]


def test_every_import_points_down_or_sideways():
    known = modules()
    upward = []
    for name, path in known.items():
        for imported in internal_imports(path, known):
            if layer(imported) > layer(name):
                upward.append(f"{name} -> {imported}")
    assert not upward, upward


def test_no_import_circles():
    known = modules()
    graph = {name: internal_imports(path, known) - {name} for name, path in known.items()}
    graph = {name: {m for m in targets if not name.startswith(m + ".")}  # its own package
             for name, targets in graph.items()}
    visiting, done, cycles = set(), set(), []

    def visit(name, trail):
        if name in done:
            return
        if name in visiting:
            cycles.append(trail[trail.index(name):] + [name])
            return
        visiting.add(name)
        for imported in sorted(graph[name]):
            visit(imported, trail + [name])
        visiting.discard(name)
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert not cycles, cycles


def test_models_know_nothing_of_data_and_nothing_below_the_runner_takes_one():
    known = modules()
    for name, path in known.items():
        imported = internal_imports(path, known)
        if name.startswith("t2t_lite.models"):
            assert not {m for m in imported if m.startswith("t2t_lite.data")}, name
        if not name.startswith(("t2t_lite.cli", "t2t_lite.runner")):
            assert "t2t_lite.runner" not in imported, name


def test_the_core_reaches_problems_and_hparams_sets_through_the_registry():
    for name, path in modules().items():
        offending = {m for m in imports(path)
                     if m.startswith(("t2t_lite.problems", "t2t_lite.hparams"))}
        if name == "t2t_lite.registry":
            continue  # it imports the built-ins on the first lookup, by name
        assert not offending, (name, offending)


@pytest.mark.parametrize("name", BACKEND_NEUTRAL)
def test_backend_neutral_modules_import_no_tensorflow(name):
    known = modules()
    for module, path in known.items():
        if module == name or module.startswith(name + "."):
            tensorflow = {m for m in imports(path) if m.split(".")[0] in (
                "tensorflow", "tensorflow_text", "tensorflow_datasets")}
            assert not tensorflow, (module, tensorflow)


def test_no_module_over_400_lines_and_a_dozen_entries_at_the_top():
    long = {name: len(path.read_text(encoding="utf-8").splitlines())
            for name, path in modules().items()}
    assert not {name: n for name, n in long.items() if n > 400}
    entries = [entry for entry in os.listdir(PACKAGE)
               if entry not in ("__init__.py", "__pycache__")]
    assert len(entries) <= 12, sorted(entries)
