"""The notebooks in colab/ are stored clean and run top to bottom.

Each runs in its own ipykernel on this Python, on CPU, with no network: cells tagged `colab`
(installation, downloads, TensorBoard in Colab) are skipped, the cell tagged `parameters` is
followed by one that sets the values in RUNS (a tiny model, a few steps), and a cell fails on
any Python error and on any `!command` that exits with a non-zero status. A new notebook needs an
entry in RUNS, and starts with the install cell the others have.
"""

import ast
import dataclasses
import itertools
import json
import os
import random
import re
import shlex
import sys
import types
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.notebooks

COLAB_DIR = Path(__file__).resolve().parent.parent / "colab"
NOTEBOOKS = sorted(path.name for path in COLAB_DIR.glob("*.ipynb"))
SKIP_TAG = "colab"
PARAMETERS_TAG = "parameters"
TINY_MODEL = ("d_model=32,d_ff=64,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,"
              "extra_length=5")

# What each kernel runs first: failing `!commands` fail their cell; t2t-lite commands run in the
# kernel's process.
CHECK_SHELL_COMMANDS = (Path(__file__).resolve().parent / "notebook_commands.py").read_text(
    encoding="utf-8")


# A toy English -> German corpus for translate_your_corpus: word-by-word translations of random
# phrases, in the files layout of docs/guides/own-corpus.md (Multi30k's in Colab).
WORDS = {"the": "die", "small": "kleine", "dog": "Hund", "sees": "sieht", "a": "eine",
         "red": "rote", "car": "Auto", "green": "grüne", "house": "Haus", "runs": "läuft",
         "to": "zu", "big": "große", "cat": "Katze", "sleeps": "schläft", "on": "auf",
         "street": "Straße", "water": "Wasser", "man": "Mann", "woman": "Frau", "and": "und"}


def write_toy_corpus(directory):
    rng = random.Random(13)
    directory.mkdir()
    for split, size in (("train", 400), ("val", 24), ("test", 24)):
        phrases = [rng.choices(list(WORDS), k=rng.randint(2, 8)) for _ in range(size)]
        for lang, words in (("en", lambda phrase: phrase),
                            ("de", lambda phrase: [WORDS[word] for word in phrase])):
            lines = [" ".join(words(phrase)) for phrase in phrases]
            (directory / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")


def printed(notebook, containing):
    """What the code cell whose source contains `containing` printed on stdout (where
    `!command` puts the command's stdout and stderr alike)."""
    (cell,) = [cell for cell in notebook.cells
               if cell.cell_type == "code" and containing in cell.source]
    return "".join(output.get("text", "") for output in cell.outputs
                   if output.output_type == "stream" and output.get("name") == "stdout")


def decoder_lines(model_dir, sources, working_dir, *flags):
    """t2t-lite-decoder's translations of `sources`, run here as a user would."""
    from t2t_lite import cli
    from t2t_lite.cli import decoder

    source_file, output_file = working_dir / "check.src", working_dir / "check.hyp"
    source_file.write_text("".join(f"{line}\n" for line in sources), encoding="utf-8")
    cli.run(decoder.main, [f"--model_dir={model_dir}", f"--decode_from_file={source_file}",
                           f"--decode_to_file={output_file}", *flags])
    return output_file.read_text(encoding="utf-8").splitlines()


def check_quickstart(working_dir, notebook):
    """The translations the notebook prints (from its Translator, then from the SavedModel)
    are the decoder's, with the Translator's scores."""
    from t2t_lite.runner import Runner

    model_dir = working_dir / "t2t_demo"
    latest = (model_dir / "checkpoint").read_text().splitlines()[0]
    assert latest == 'model_checkpoint_path: "ckpt-40"'  # TRAIN_STEPS was overridden
    assert len([path for path in (model_dir / "export").iterdir() if path.name.isdigit()]) == 1
    sentences = ["1 2 3", "4 5 6 7 8", "9 0 9 0 1 1 2", "3 1 4 1 5 9 2 6 5 3"]
    texts = decoder_lines(model_dir, sentences, working_dir, "--beam_size=4")
    scores = [t.score for t in Runner.from_model_dir(str(model_dir)).translator(
        beam_size=4).translate(sentences)]
    expected = "".join(f"{sentence:>20}  ->  {text:<20}  score {score:7.3f}\n"
                       for sentence, text, score in zip(sentences, texts, scores))
    assert printed(notebook, "translator.translate(sentences)") == expected
    served = printed(notebook, 'signatures["serving_default"]').splitlines()
    assert [line.split("  ->  ")[1].rsplit("  score", 1)[0].strip() for line in served] == texts


def check_translate_your_corpus(working_dir, notebook):
    """avg/ averages the run's last AVERAGE_LAST checkpoints; each BLEU the decoder printed (for
    avg/ and best/) is sacreBLEU's, with the signature it printed, on the files written; the
    hypotheses are the decoder's translations; the exported model prints avg/'s."""
    import sacrebleu

    from t2t_lite.training.checkpoint_list import checkpoint_paths

    model_dir = working_dir / "multi30k_model"
    averaged = json.loads((model_dir / "avg" / "info.json").read_text())
    assert [os.path.basename(path) for path in averaged["averaged_checkpoints"]] == [
        os.path.basename(path) for path in checkpoint_paths(str(model_dir))[-3:]]
    sources, references = ((working_dir / "corpus" / f"test.{lang}").read_text(
        encoding="utf-8").splitlines() for lang in ("en", "de"))
    for model, hypotheses in (("avg", "test.hyp.de"), ("best", "test.best.hyp.de")):
        lines = (working_dir / hypotheses).read_text(encoding="utf-8").splitlines()
        assert lines == decoder_lines(model_dir / model, sources, working_dir)
        cell = f"--model_dir={{MODEL_DIR}}/{model} --decode_from_file"
        (report,) = [line for line in printed(notebook, cell).splitlines()
                     if line.startswith("BLEU = ")]
        score, signature = report.rsplit("  ", 1)
        tokenizer = re.search(r"\|tok:([^|]+)\|", signature)[1]
        bleu = sacrebleu.BLEU(tokenize=tokenizer)
        assert score == str(bleu.corpus_score(lines, [references]))
        assert signature == str(bleu.get_signature())
    hypotheses = (working_dir / "test.hyp.de").read_text(encoding="utf-8").splitlines()
    assert printed(notebook, "print(sacrebleu.corpus_bleu(").splitlines()[0] == str(
        sacrebleu.corpus_bleu(hypotheses, [references]))
    served = printed(notebook, 'signatures["serving_default"]').splitlines()[1::2]
    assert [line.split("  -> ", 1)[1].rsplit("  (score", 1)[0] for line in served] == (
        hypotheses[:3])


def embedded_pairs(html_path):
    """The attention records an attention_html page embeds, as dicts."""
    page = html_path.read_text(encoding="utf-8")
    (data,) = re.findall(r'<script type="application/json" id="[^"]*">(.*?)</script>', page,
                         re.DOTALL)
    return json.loads(data)


def check_attention(working_dir, notebook):
    import numpy as np
    from matplotlib.image import imread

    from t2t_lite.runner import Runner

    attention_dir = working_dir / "attention"
    for name in ("demo_grid", "demo_decoder_self", "demo_encoder_self", "corpus_grid",
                 "corpus_reference_head"):  # drawn heatmaps, not blank canvases
        image = imread(attention_dir / f"{name}.png")
        assert image.shape[0] > 100 and image.shape[1] > 100 and image.std() > 0.05, name

    # The demo page holds the weights of the demo model for its sentences and their reversals.
    pairs = embedded_pairs(attention_dir / "demo.html")
    sources = ["1 2 3 4 5", "3 1 4 1 5 9 2 6", "9 8 7 0 0 1"]
    targets = ["5 4 3 2 1", "6 2 9 5 1 4 1 3", "1 0 0 7 8 9"]
    assert [pair["source_pieces"] for pair in pairs] == [s.split() + ["</s>"] for s in sources]
    assert [pair["target_pieces"] for pair in pairs] == [t.split() + ["</s>"] for t in targets]
    runner = Runner.from_model_dir(str(working_dir / "t2t_demo"))
    for pair, record in zip(pairs, runner.attention(sources, targets), strict=True):
        for kind in ("encoder_decoder", "encoder_self", "decoder_self"):
            np.testing.assert_allclose(pair[kind], getattr(record, kind), atol=1e-4)

    # The corpus page: three test sentences with the model's translations, then with their
    # references, every row a distribution over the keys.
    pairs = embedded_pairs(attention_dir / "corpus.html")
    vocabulary = Runner.from_model_dir(str(working_dir / "multi30k_model")).vocabulary
    corpus = working_dir / "corpus"
    sources, references = ((corpus / f"test.{lang}").read_text(encoding="utf-8").splitlines()[:3]
                           for lang in ("en", "de"))
    expected_sources = [vocabulary.pieces(vocabulary.encode(text)) + ["</s>"]
                        for text in sources]
    assert [pair["source_pieces"] for pair in pairs] == expected_sources * 2
    assert [pair["target_pieces"] for pair in pairs[3:]] == [
        vocabulary.pieces(vocabulary.encode(text)) + ["</s>"] for text in references]
    for pair in pairs:
        for kind in ("encoder_decoder", "encoder_self", "decoder_self"):
            np.testing.assert_allclose(np.sum(pair[kind], axis=-1), 1.0, atol=1e-3)


def check_parsing(working_dir, notebook):
    """Every output line is a tree over exactly its sentence's words, the EVALB line the decoder
    printed is evalb.evaluate of the written trees, and dev F1 was computed at each evaluation."""
    from t2t_lite.evaluation import evalb
    from t2t_lite.problems.trees import clean, read_trees
    from t2t_lite.training.summaries import read_scalars

    sentences = (working_dir / "test.txt").read_text(encoding="utf-8").splitlines()
    trees = (working_dir / "test.trees").read_text(encoding="utf-8").splitlines()
    assert len(sentences) == len(trees) == 12
    for sentence, tree in zip(sentences, trees):
        depths = list(itertools.accumulate({"(": 1, ")": -1}.get(c, 0) for c in tree))
        assert tree.startswith("(TOP ") and depths[-1] == 0 and min(depths[:-1]) > 0, tree
        assert re.findall(r"\(\S+ ([^()\s]+)\)", tree) == sentence.split(), tree
    gold = [str(clean(tree)) for tree in read_trees(str(working_dir / "treebank" / "test.mrg"))]
    printed = (working_dir / "test.evalb").read_text().splitlines()[-1]  # after the log lines
    assert printed == str(evalb.evaluate(gold, trees))
    dev = read_scalars(str(working_dir / "parser_model"), "eval")
    assert dev["f1"][0] == [75, 150]
    best = json.loads((working_dir / "parser_model" / "best" / "info.json").read_text())
    assert best["metric"] == "f1" and best["value"] == pytest.approx(max(dev["f1"][1]))


@dataclasses.dataclass
class NotebookRun:
    overrides: dict  # parameter name -> value, for a run of about a minute
    check: callable  # check(working_dir, notebook): what the run must leave there and print
    prepare: callable = None  # prepare(working_dir): what Colab downloads


RUNS = {
    "quickstart.ipynb": NotebookRun(dict(
        HPARAMS=TINY_MODEL, TRAIN_STEPS=40, EVAL_EVERY=20, EVAL_EXAMPLES=32),
        check=check_quickstart),
    "translate_your_corpus.ipynb": NotebookRun(dict(
        CORPUS_DIR="corpus", VOCAB_SIZE=320, HPARAMS=TINY_MODEL, TRAIN_MINUTES=0.25,
        AVERAGE_LAST=3),
        check=check_translate_your_corpus,
        prepare=lambda working_dir: write_toy_corpus(working_dir / "corpus")),
    "attention.ipynb": NotebookRun(dict(
        DEMO_HPARAMS=TINY_MODEL, DEMO_STEPS=20, CORPUS_DIR="corpus", VOCAB_SIZE=320,
        CORPUS_HPARAMS_SET="transformer_tiny", CORPUS_HPARAMS=TINY_MODEL, CORPUS_STEPS=20,
        EVAL_EXAMPLES=0),
        check=check_attention,
        prepare=lambda working_dir: write_toy_corpus(working_dir / "corpus")),


    "parsing.ipynb": NotebookRun(dict(
        SYNTHETIC_TREES={"train": 200, "dev": 12, "test": 12}, VOCAB_SIZE=300,
        HPARAMS=TINY_MODEL.replace("extra_length=5", "extra_length=60,warmup_steps=30"),
        TRAIN_STEPS=150, EVAL_EVERY=75, EVAL_EXAMPLES=12, BEAM_SIZE=2),
        check=check_parsing),
}


def read(name):
    with open(COLAB_DIR / name, encoding="utf-8") as f:
        return nbformat.read(f, as_version=nbformat.NO_CONVERT)


def tags(cell):
    return cell.metadata.get("tags", [])


def test_there_are_notebooks_and_each_has_a_test_run():
    assert {"quickstart.ipynb", "translate_your_corpus.ipynb", "attention.ipynb"} <= set(
        NOTEBOOKS)
    assert set(RUNS) == set(NOTEBOOKS), "add each notebook of colab/ (and only those) to RUNS"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_valid_and_stored_without_outputs(name):
    notebook = read(name)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:200]
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    # Colab starts by installing t2t_lite; the tests (and Jupyter users) have it already.
    assert SKIP_TAG in tags(code_cells[0]) and "pip install" in code_cells[0].source
    for cell in code_cells:
        if SKIP_TAG not in tags(cell):
            assert "http" not in cell.source and "pip " not in cell.source, (
                f"tag this cell {SKIP_TAG!r}: the tests run without network\n{cell.source}")


def test_the_notebooks_install_and_download_alike():
    """One install cell (t2t_lite from the user's copy of the repository) in every notebook,
    and one Multi30k download in those that use the corpus."""
    def first_code_cell(name, containing=""):
        return next(cell.source for cell in read(name).cells
                    if cell.cell_type == "code" and containing in cell.source)

    install = first_code_cell(NOTEBOOKS[0])
    assert "T2T_LITE_SOURCE" in install and "OWNER" not in install
    assert all(first_code_cell(name) == install for name in NOTEBOOKS)
    downloads = {first_code_cell(name, "MULTI30K =") for name in NOTEBOOKS
                 if "MULTI30K =" in json.dumps(read(name))}
    assert len(downloads) == 1


def test_the_install_cell_installs_the_users_copy_in_colab(tmp_path, monkeypatch):
    """With T2T_LITE_SOURCE a Drive folder, the install cell mounts Drive and pip-installs that
    folder, or stops with the reason where it holds no repository; with a URL it pip-installs
    the URL; outside Colab it does nothing."""
    from IPython.core.inputtransformer2 import TransformerManager
    from packaging.requirements import Requirement

    install = next(cell.source for cell in read(NOTEBOOKS[0]).cells if cell.cell_type == "code")
    default = 'T2T_LITE_SOURCE = "/content/drive/MyDrive/t2t_lite"'
    assert default in install
    python = TransformerManager().transform_cell(install)  # `!pip` -> get_ipython().system
    mounted = []

    def run(source):
        commands, namespace = [], {}
        shell = types.SimpleNamespace(system=lambda command: commands.append(
            command.format(**namespace)))  # IPython expands {names} of the cell's namespace
        namespace["get_ipython"] = lambda: shell
        exec(python.replace(default, f"T2T_LITE_SOURCE = {source!r}"), namespace)  # noqa: S102
        return [shlex.split(command) for command in commands]

    assert run("/content/drive/MyDrive/t2t_lite") == []  # not in Colab
    monkeypatch.setitem(sys.modules, "google.colab", types.SimpleNamespace(
        drive=types.SimpleNamespace(mount=mounted.append)))
    with pytest.raises(FileNotFoundError, match="no t2t_lite repository in /content/drive/"):
        run("/content/drive/MyDrive/t2t_lite")
    assert mounted == ["/content/drive"]

    (tmp_path / "pyproject.toml").write_text("")
    for source, url in ((str(tmp_path), f"file://{tmp_path}"),
                        ("git+https://example.org/me/t2t_lite", None)):
        ((*pip, argument),) = run(source)
        requirement = Requirement(argument)
        assert pip[:2] == ["pip", "install"] and (
            requirement.name, requirement.extras, requirement.url) == (
            "t2t_lite", {"notebooks"}, url or source)
    assert mounted == ["/content/drive"]  # only Drive paths mount Drive


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_test_run_overrides_parameters_the_notebook_has(name):
    (parameters,) = [cell for cell in read(name).cells if PARAMETERS_TAG in tags(cell)]
    assigned = {name.id for node in ast.parse(parameters.source).body
                if isinstance(node, ast.Assign) for target in node.targets
                for name in ast.walk(target) if isinstance(name, ast.Name)}
    assert set(RUNS[name].overrides) <= assigned


@pytest.mark.parametrize("name", NOTEBOOKS)
@pytest.mark.parametrize("gpu", [False, True])
def test_the_models_colab_trains_exist(name, gpu):
    """The parameters the tests override are Colab's: their hparams set and overrides are valid
    on either runtime."""
    from t2t_lite import registry

    (parameters,) = [cell for cell in read(name).cells if PARAMETERS_TAG in tags(cell)]
    values = {"GPU": gpu}
    exec(parameters.source, values)  # noqa: S102 -- the notebook's own settings
    for name in [name for name in values if name.endswith("HPARAMS_SET")]:  # e.g. DEMO_...
        registry.hparams(values[name]).override(values.get(name[:-len("_SET")], ""))


def with_overrides(notebook, overrides):
    """The notebook with a cell that sets `overrides` after its parameters cell (as papermill
    does), and a first cell that makes failing shell commands fail."""
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))
    index = next(i for i, cell in enumerate(notebook.cells) if PARAMETERS_TAG in tags(cell))
    assignments = "\n".join(f"{name} = {value!r}" for name, value in overrides.items())
    notebook.cells.insert(index + 1, nbformat.v4.new_code_cell(assignments))
    notebook.cells.insert(0, nbformat.v4.new_code_cell(CHECK_SHELL_COMMANDS))
    return notebook


@pytest.fixture
def kernel_name(tmp_path, monkeypatch):
    """A kernelspec for this Python, and a HOME, both in tmp_path: the kernel sees this venv's
    t2t_lite and console scripts, and writes nothing (IPython history, Keras and matplotlib
    settings, Jupyter runtime files) outside tmp_path."""
    name = "t2t_lite_tests"
    spec_dir = tmp_path / "jupyter" / "kernels" / name
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "t2t_lite tests", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    return name


@pytest.mark.slow  # each notebook trains and decodes in its kernel: 40-100 s
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(name, tmp_path, kernel_name):
    run = RUNS[name]
    working_dir = tmp_path / "work"
    working_dir.mkdir()
    if run.prepare:
        run.prepare(working_dir)
    notebook = with_overrides(read(name), run.overrides)

    NotebookClient(notebook, kernel_name=kernel_name, timeout=900,
                   skip_cells_with_tag=SKIP_TAG,
                   resources={"metadata": {"path": str(working_dir)}}).execute()

    for cell in notebook.cells:  # every plot was drawn
        if cell.cell_type == "code" and ("plt.show()" in cell.source
                                         or "display(plot_attention(" in cell.source):
            assert any("image/png" in output.get("data", {}) for output in cell.outputs)
        if cell.cell_type == "code" and "display(HTML(" in cell.source:  # and every page shown
            assert any("text/html" in output.get("data", {}) for output in cell.outputs)
    run.check(working_dir, notebook)
