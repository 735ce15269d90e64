"""The shape of the house (../shared/DESIGN.md, docs/design.md): dependencies run one way, no
import circles, no module over 400 lines, no logic in a package's __init__, TensorFlow and JAX
each in its wing, a few folders by concept, and the core reaches the built-in problems and
hparams sets only through the registry."""

import ast
import os
from pathlib import Path


PACKAGE = Path(__file__).resolve().parent.parent / "t2t_lite"

# Each module's layer, lowest first: a module imports only from its own layer or below. The
# scorers (metrics, EVALB) are leaves that problems use, below the Evaluator of their folder. The
# backends' wings sit beside the engines, above what they run (models, search, the update loop);
# as in Keras's own keras/src/backend/, their primitives sit at the level of what uses them: the
# quiet import at the bottom, the in-graph vocabularies and tf.data beside data/, checkpoint I/O
# beside training/.
LAYERS = [
    ("t2t_lite", "t2t_lite.utils", "t2t_lite.config", "t2t_lite.registry", "t2t_lite.model_dir",
     "t2t_lite.backends.tensorflow.quiet"),
    ("t2t_lite.models", "t2t_lite.data", "t2t_lite.evaluation.metrics",
     "t2t_lite.evaluation.evalb", "t2t_lite.backends.tensorflow.vocabulary",
     "t2t_lite.backends.tensorflow.pipeline"),
    ("t2t_lite.training", "t2t_lite.decoding", "t2t_lite.backends.tensorflow.checkpoints"),
    ("t2t_lite.evaluation", "t2t_lite.export", "t2t_lite.backends"),
    ("t2t_lite.runner", "t2t_lite.experiment", "t2t_lite.serving"),
    ("t2t_lite.cli",),
]
# Where each framework may be imported: TensorFlow in its wing and the SavedModel export (a
# TensorFlow format), JAX in its wing. Everything else is keras / keras.ops, or plain Python.
FRAMEWORK_HOMES = {
    "tensorflow": ("t2t_lite.backends.tensorflow", "t2t_lite.export.saved_model",
                   "t2t_lite.export.signatures"),
    "tensorflow_text": ("t2t_lite.backends.tensorflow",),
    "tensorflow_datasets": ("t2t_lite.backends.tensorflow",),
    "jax": ("t2t_lite.backends.jax",),
    "jaxlib": ("t2t_lite.backends.jax",),
}


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


def test_tensorflow_and_jax_are_imported_only_in_their_wings():
    stray = []
    for name, path in modules().items():
        for imported in imports(path):
            homes = FRAMEWORK_HOMES.get(imported.split(".")[0])
            if homes and not any(name == h or name.startswith(h + ".") for h in homes):
                stray.append(f"{name} imports {imported}")
    assert not stray, stray


def test_package_inits_hold_no_logic():
    long = {name: len(path.read_text(encoding="utf-8").splitlines())
            for name, path in modules().items() if path.name == "__init__.py"}
    assert not {name: n for name, n in long.items() if n > 40}


def test_no_module_over_400_lines_and_a_dozen_entries_at_the_top():
    long = {name: len(path.read_text(encoding="utf-8").splitlines())
            for name, path in modules().items()}
    assert not {name: n for name, n in long.items() if n > 400}
    entries = [entry for entry in os.listdir(PACKAGE)
               if entry not in ("__init__.py", "__pycache__")]
    assert len(entries) <= 15, sorted(entries)  # ../shared/DESIGN.md's shape
