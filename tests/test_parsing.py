"""Parsing: trees read, cleaned and linearized reversibly; a small model that learns a
synthetic treebank; decoder and export agreeing; bad input. (The search's constraint against
brute force: test_tree_search.py.)"""

import itertools
import json
import logging
import re
import subprocess
import sys
import types

import numpy as np
import pytest
from cli_output import error_lines
from synthetic_treebank import write_treebank
from test_translate_files import run

from t2t_lite import registry
from t2t_lite.cli import datagen, decoder, exporter, trainer
from t2t_lite.evaluation import evalb
from t2t_lite.models.transformer import create_model
from t2t_lite.problems.trees import clean, delinearize, linearize, read_trees
from t2t_lite.runner import Runner
from t2t_lite.utils.errors import UserError

LDC_TREES = """\
( (S
    (NP-SBJ-1 (DT The) (NN cat) )
    (VP (VBD picked)
      (PRT (RP up) )
      (NP (-NONE- *-1) )
      (NP (DT the) (NN toy) ))
    (. .) ))
( (S (NP-SBJ (-LRB- -LRB-) (NNP Bob) (-RRB- -RRB-) )
    (VP (VBD left) (ADVP-TMP (RB early) )
      (SBAR (-NONE- 0) (S (-NONE- *T*-2) )))
    (. .) ))
( (FRAG (NP=2 (NP (NN unary)))) ) ( (X (-NONE- *)) )
(S (NP (PRP It)) (VP (VBZ works)))
"""
CLEANED = [
    "(TOP (S (NP (DT The) (NN cat)) (VP (VBD picked) (PRT (RP up)) (NP (DT the) (NN toy))) "
    "(. .)))",
    "(TOP (S (NP (-LRB- -LRB-) (NNP Bob) (-RRB- -RRB-)) (VP (VBD left) (ADVP (RB early))) "
    "(. .)))",
    "(TOP (FRAG (NP (NP (NN unary)))))",
    None,  # only a trace
    "(TOP (S (NP (PRP It)) (VP (VBZ works))))",
]


def test_ldc_trees_are_read_cleaned_and_linearized_reversibly(tmp_path):
    path = tmp_path / "wsj_0001.mrg"
    path.write_text(LDC_TREES, encoding="utf-8")
    trees = [clean(tree) for tree in read_trees(str(path))]
    assert [str(t) if t else None for t in trees] == CLEANED
    assert " ".join(linearize(trees[0])) == (
        "S NP DT NN /NP VP VBD PRT RP /PRT NP DT NN /NP /VP . /S")
    assert linearize(trees[2]) == "FRAG NP NP NN /NP /NP /FRAG".split()
    for tree in filter(None, trees):
        tags = {leaf.label for leaf in tree.preterminals()}
        labels = {s[1:] for s in linearize(tree) if s.startswith("/")}
        rebuilt, repaired = delinearize(linearize(tree), tree.words(), tags, labels)
        assert (str(rebuilt), repaired) == (str(tree), False)


def test_ill_formed_outputs_are_repaired_and_counted():
    words = "a b c".split()
    tags, labels = {"DT", "NN"}, {"NP", "S"}
    cases = {  # output -> tree, repaired
        "S NP DT NN /NP NN /S": ("(TOP (S (NP (DT a) (NN b)) (NN c)))", False),
        "S NP DT NN": ("(TOP (S (NP (DT a) (NN b))) (XX c))", True),
        "S DT /NP NN NN NN NN /S /S": ("(TOP (S (DT a) (NN b) (NN c)))", True),
        "NP /NP S DT NN NN ▁x /S": ("(TOP (S (DT a) (NN b) (NN c)))", True),
    }
    for output, expected in cases.items():
        assert tuple(map(str, delinearize(output.split(), words, tags, labels))) == tuple(
            map(str, expected))


@pytest.mark.parametrize("text, message", [
    ("( (S (NP (DT a))) )\n(S (NN b)))\n", r"t.mrg, line 2: a '\)' closes no bracket"),
    ("(S (NP (DT a))\n\n(S (NN b))\n", r"t.mrg, line 1: the tree that starts here has 1 "),
    ("(S (NP (DT a) b))\n", r"t.mrg, line 1: word 'b' beside other children"),
])
def test_bracket_errors_name_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "t.mrg"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        list(read_trees(str(path)))


def section_tree(section, number, i):
    """Tree i of the file wsj_SSNN.mrg, whose words name it."""
    return f"( (S (NP-SBJ (NN w{section:02d}{number:02d})) (VP (VBD left{i})) (. .)) )\n"


def test_parsing_wsj_finds_the_ldc_sections_and_writes_the_02_21_22_23_split(tmp_path,
                                                                            monkeypatch):
    """An LDC Treebank-3 tree in miniature: parsed/mrg/wsj/SS/wsj_SSNN.mrg beside tagged/pos and
    raw copies of the same sections (which are not trees) and Brown's parsed files. datagen
    with --raw_dir at the top finds parsed/mrg/wsj; sections 02-21 become train, 22 dev, 23
    test, and 00, 01, 24 nothing. The directory's name holds glob characters, as a copy's may."""
    top = tmp_path / "treebank_3 [LDC99T42]"
    wsj = top / "parsed" / "mrg" / "wsj"
    files = {(0, 0): 1, (1, 0): 1, (2, 0): 2, (2, 1): 1, (3, 0): 1, (21, 0): 1, (22, 0): 2,
             (22, 1): 1, (23, 0): 1, (24, 0): 1}  # (section, file) -> trees
    for (section, number), count in files.items():
        path = wsj / f"{section:02d}" / f"wsj_{section:02d}{number:02d}.mrg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(section_tree(section, number, i) for i in range(count)),
                        encoding="utf-8")
        for decoy in (top / "tagged" / "pos" / "wsj" / path.parent.name / f"{path.stem}.pos",
                      top / "raw" / "wsj" / path.parent.name / path.stem):
            decoy.parent.mkdir(parents=True, exist_ok=True)
            decoy.write_text("[ The/DT cat/NN ] sat/VBD ./.\n", encoding="utf-8")
    (wsj / "02" / "wsj_0299.mrg").write_text(LDC_TREES, encoding="utf-8")
    (wsj / "23" / "wsj_2300.mrg.orig").write_text("((", encoding="utf-8")
    (top / "parsed" / "mrg" / "brown" / "cf").mkdir(parents=True)
    (top / "parsed" / "mrg" / "brown" / "cf" / "cf01.mrg").write_text(
        section_tree(99, 0, 0), encoding="utf-8")

    def sentences(*keys):
        return [f"w{section:02d}{number:02d} left{i} ." for section, number in keys
                for i in range(files[section, number])]

    ldc_sentences = [" ".join(tree.words()) for tree in map(clean, read_trees(
        str(wsj / "02" / "wsj_0299.mrg"))) if tree]
    expected = {"train": sentences((2, 0), (2, 1)) + ldc_sentences + sentences((3, 0), (21, 0)),
                "dev": sentences((22, 0), (22, 1)), "test": sentences((23, 0))}
    problem_class = registry.problems.get("parsing_wsj")
    monkeypatch.setattr(problem_class, "vocab_size", 300)  # its 16000 needs the real treebank
    for raw_dir in (top, wsj):
        problem = problem_class()
        assert {split: [" ".join(tree.words()) for tree in problem.trees(split, str(raw_dir))]
                for split in expected} == expected

    data_dir = tmp_path / "data"
    datagen.main(["--problem=parsing_wsj", f"--raw_dir={top}", f"--data_dir={data_dir}"])
    problem = registry.problem("parsing_wsj", str(data_dir))
    vocabulary = problem.vocabulary(str(data_dir))
    for split, split_sentences in expected.items():
        examples = list(problem.examples(split, str(data_dir)))
        assert [vocabulary.decode(e["inputs"]) for e in examples] == split_sentences
        assert [vocabulary.decode(e["targets"]) for e in examples] == [
            " ".join(linearize(tree)) for tree in problem.trees(split, str(top))]
        with open(problem.stats_path(split, str(data_dir))) as f:
            assert json.load(f)["examples"] == len(split_sentences)


@pytest.fixture(scope="module")
def parser(tmp_path_factory):
    """A small model trained by the CLIs on a synthetic treebank (with punctuation and words of
    two tags) made into a problem by `t2t-lite-datagen --task=parsing`; the dev metrics (greedy,
    100 trees) of its best evaluation, as --keep_best_by kept it. 700 updates of 1,024-token
    batches (half the set's) at 2/3 of its learning rate, for the suite's time: dev F1 80.7
    and 97.2 at 350 and 700 on a 2-core AMD EPYC (2026-11-28). The former 1,000-update run gave
    66.3, 90.1, 98.7, 99.2 every 250 updates on an Intel CPU (70.0, 93.1, 97.4, 99.2 with
    --random_seed=2), and 94.3 and 98.4 at 500 and 1,000 on the AMD EPYC. At the set's rate
    93.5, 97.7, 98.5 at 500, 1,000, 1,500, and a higher one learns slower (0.5: 92.8 at 1,000;
    0.7: 65.6). F1 swings between nearby steps: hence the best of two."""
    root = tmp_path_factory.mktemp("treebank")
    (root / "train").mkdir()
    write_treebank(root / "train" / "a.mrg", 1500, 0, realistic=True)
    write_treebank(root / "train" / "b.mrg", 1500, 1, realistic=True)
    write_treebank(root / "dev.mrg", 100, 2, realistic=True)
    write_treebank(root / "test.mrg", 30, 3, realistic=True)
    data_dir, model_dir = str(root / "data"), str(root / "model")
    datagen.main(["--problem=synthetic_parse", "--task=parsing", f"--train={root / 'train'}",
                  f"--dev={root / 'dev.mrg'}", f"--test={root / 'test.mrg'}",
                  "--vocab_size=600", f"--data_dir={data_dir}"])
    trainer.main([
        "--problem=synthetic_parse", f"--data_dir={data_dir}",
        "--hparams_set=transformer_parsing_small",
        "--hparams=dropout=0.0,batch_size=1024,learning_rate=0.2", f"--model_dir={model_dir}",
        "--train_steps=700", "--eval_every=350", "--eval_decode_examples=100",
        "--keep_best_by=f1", "--random_seed=1"])
    with open(f"{model_dir}/best/info.json") as f:
        best = json.load(f)["step"]
    with open(f"{model_dir}/eval/history.json") as f:
        history = json.load(f)
    assert [entry["step"] for entry in history] == [350, 700]
    (metrics,) = [entry["metrics"] for entry in history if entry["step"] == best]
    return types.SimpleNamespace(root=root, model_dir=model_dir, metrics=metrics,
                                 runner=Runner.from_model_dir(model_dir))


def test_a_small_model_learns_the_synthetic_treebank(parser):
    # The same seeded run reaches dev F1 97-99 by 700-1,000 updates on the CPUs measured (see
    # the fixture; 94.8 at 1,000 in one AMD run, its float sums in another order); after 250
    # updates it was 66-70. EVALB leaves no sentence out: the tag dictionary gives every
    # punctuation word its own tag.
    assert parser.metrics["f1"] >= 90 and parser.metrics["evalb_errors"] == 0
    assert parser.metrics["repaired"] == 0
    assert parser.runner.problem.metric_names == tuple(
        name for name in parser.metrics if name in parser.runner.problem.metric_names)
    with open(f"{parser.model_dir}/best/info.json") as f:
        assert json.load(f)["metric"] == "f1"


def test_random_model_with_the_constraint_outputs_trees_of_the_input_words(parser):
    runner = parser.runner
    model = create_model(runner.hparams, runner.vocabulary.size)
    sentences = ["the cat", "a boyman of the roadman builden the planling again .",
                 "x " * 30, "zzz"]
    repaired = []
    for beam_size in (1, 4):
        translator = runner.translator(model, beam_size=beam_size, extra_length=40)
        for sentence, translation in zip(sentences, translator.translate(sentences)):
            tree, was_repaired = runner.problem.postprocess(sentence, translation.text)
            assert tree.count("(") == tree.count(")")
            assert re.findall(r"\(\S+ ([^()\s]+)\)", tree) == sentence.split()
            repaired.append(was_repaired)
    assert not any(repaired)  # none needed repair


def test_no_output_of_a_random_model_is_an_evalb_error(parser, monkeypatch):
    """A barely trained model's trees: EVALB leaves none out, every training word keeps a tag it
    was seen with, and no unknown word gets a deleted punctuation tag; without the tag
    dictionary the same model's trees are errors. (Beam 2: the dictionary constrains every
    width alike, and an untrained model's outputs run to the length limit.)"""
    runner = parser.runner
    gold = [str(clean(tree)) for tree in read_trees(str(parser.root / "test.mrg"))]
    sentences = gold_sentences(parser.root / "test.mrg") + ["zork , the xyzzy qux ."]
    with open(f"{runner.data_dir}/synthetic_parse.symbols.json", encoding="utf-8") as f:
        word_tags = json.load(f)["word_tags"]
    model = create_model(runner.hparams, runner.vocabulary.size)
    trees = [runner.problem.postprocess(s, t.text).text for s, t in zip(
        sentences, runner.translator(model, beam_size=2).translate(sentences))]
    assert evalb.evaluate(gold, trees[:-1]).errors == 0
    for tree in trees:
        for tag, word in re.findall(r"\((\S+) ([^()\s]+)\)", tree):
            allowed = word_tags.get(word)
            assert tag in allowed if allowed else tag not in evalb.COLLINS.delete_labels
    monkeypatch.setattr(runner.vocabulary, "tag_dictionary", None)
    free = [runner.problem.postprocess(s, t.text).text for s, t in zip(
        sentences, runner.translator(model, beam_size=2).translate(sentences))]
    assert evalb.evaluate(gold, free[:-1]).errors > 0


def nesting_of(tree):
    """(depth, opens in a row) of a tree, counted on the tree: the most constituents above a word
    (the root not counted), and the most constituents that start at the same word."""
    depth, starts = 0, {}

    def walk(node, level, first_word):
        nonlocal depth
        if node.is_preterminal:
            return first_word + 1
        if level:
            depth = max(depth, level)
            starts[first_word] = starts.get(first_word, 0) + 1
        for child in node.children:
            first_word = walk(child, level + 1, first_word)
        return first_word

    walk(tree, 0, 0)
    return depth, max(starts.values(), default=0)


def test_outputs_keep_within_the_training_trees_nesting(parser, monkeypatch, tmp_path):
    """Datagen records the deepest nesting and the longest run of constituents opened at one word
    in the training trees; a random model's outputs keep within both, and without the limits
    the same model's outputs do not."""
    runner = parser.runner
    with open(f"{runner.data_dir}/synthetic_parse.symbols.json", encoding="utf-8") as f:
        symbols = json.load(f)
    training = [nesting_of(clean(tree)) for name in ("a", "b")
                for tree in read_trees(str(parser.root / "train" / f"{name}.mrg"))]
    limits = tuple(max(values) for values in zip(*training))
    assert (symbols["max_depth"], symbols["max_opens_in_a_row"]) == limits
    vocabulary = runner.vocabulary
    assert (vocabulary.max_depth, vocabulary.max_opens_in_a_row) == limits
    sentences = gold_sentences(parser.root / "test.mrg")[:10]
    model = create_model(runner.hparams, vocabulary.size)

    def output_nesting():
        translator = runner.translator(model, beam_size=1, extra_length=40)
        outputs = tmp_path / "outputs.mrg"
        outputs.write_text("".join(runner.problem.postprocess(s, t.text).text + "\n" for s, t
                                   in zip(sentences, translator.translate(sentences))))
        return [nesting_of(clean(tree)) for tree in read_trees(str(outputs))]

    assert all(d <= limits[0] and r <= limits[1] for d, r in output_nesting())
    monkeypatch.setattr(vocabulary, "max_depth", None)
    assert any(d > limits[0] or r > limits[1] for d, r in output_nesting())


def gold_sentences(path):
    return [" ".join(clean(tree).words()) for tree in read_trees(str(path))]


def in_process_trees(runner, sentences, beam_size):
    translator = runner.translator(beam_size=beam_size)
    return [runner.problem.postprocess(sentence, t.text).text
            for sentence, t in zip(sentences, translator.translate(sentences))]


def test_the_decoder_writes_trees_of_the_input_words_and_prints_evalb(parser, tmp_path,
                                                                     caplog):
    sentences = gold_sentences(parser.root / "test.mrg")
    (tmp_path / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    caplog.set_level(logging.INFO, logger="t2t_lite")
    printed = decoder.main([
        f"--model_dir={parser.model_dir}", f"--decode_from_file={tmp_path / 'sentences.txt'}",
        f"--decode_to_file={tmp_path / 'trees.txt'}",
        f"--decode_reference={parser.root / 'test.mrg'}", "--beam_size=4"])
    trees = (tmp_path / "trees.txt").read_text(encoding="utf-8").splitlines()
    assert trees == in_process_trees(parser.runner, sentences, 4)
    for sentence, tree in zip(sentences, trees):
        assert re.findall(r"\(\S+ ([^()\s]+)\)", tree) == sentence.split()
    gold = [str(clean(tree)) for tree in read_trees(str(parser.root / "test.mrg"))]
    summary = evalb.evaluate(gold, trees)
    assert printed == str(summary)
    assert summary.f1 > 85 and summary.errors == 0  # of 30 trees; dev F1 is asserted above
    assert "0 of 30 trees needed repair" in caplog.messages


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_parsers_data_records_damaged_every_way_resume_or_are_one_line(backend, parser,
                                                                         tmp_path):
    """Issue 47's sweep (tests/damage_sweep.py) over the records a parser's data_dir holds: its
    SentencePiece model, problem record and tag and label sets (NAME.symbols.json). Cut,
    emptied, flipped in place or deleted, the decoder writes the trees of the intact data_dir
    or is refused in one line naming the file: on TensorFlow in this process, with the parser;
    on JAX without TensorFlow, with a model trained two updates on its data (only JAX reads a
    JAX checkpoint, and what it outputs does not matter here)."""
    from damage_sweep import PARSER_INPUT, Sweep, check, data_record_kinds

    data_dir, model_dir = str(parser.root / "data"), parser.model_dir
    if backend == "tensorflow":
        sweep = Sweep(model_dir, data_dir, str(tmp_path), (), data_record_kinds,
                      pairs=PARSER_INPUT[0], decoder_flags=PARSER_INPUT[1])
        results = list(sweep.cases())
    else:
        from test_jax_training import run_jax, run_jax_sweep

        model_dir = str(tmp_path / "jax_model")
        run_jax("trainer", "--problem=synthetic_parse", f"--data_dir={data_dir}",
                f"--model_dir={model_dir}", "--hparams_set=transformer_parsing_small",
                "--hparams=d_model=32,d_ff=64,num_encoder_layers=1,num_decoder_layers=1,"
                "extra_length=20", "--train_steps=2", "--eval_every=0", "--eval_steps=1",
                "--eval_decode_examples=0")
        results = run_jax_sweep(model_dir, data_dir, tmp_path / "sweep",
                                "parser_data_record_kinds")
    check(results, data_record_kinds(model_dir, data_dir))


def test_a_parsers_attention_is_labeled_with_the_symbols_of_the_trees_it_wrote(parser,
                                                                             tmp_path):
    """The decoder's --attention_dir and Runner.attention on the parser: the target pieces are
    the linearization of the tree written for the line and EOS, the source pieces the
    sentence's subwords, and the weights attention_weights' for those ids. (Targets were
    encoded as sentences and trees had no pieces: NotImplementedError.)"""
    from t2t_lite.decoding.attention import attention_weights
    from t2t_lite.decoding.attention_plot import KINDS

    sentences = gold_sentences(parser.root / "test.mrg")[:4]
    (tmp_path / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    decoder.main([f"--model_dir={parser.model_dir}", "--beam_size=4",
                  f"--decode_from_file={tmp_path / 'sentences.txt'}",
                  f"--decode_to_file={tmp_path / 'trees.txt'}",
                  f"--attention_dir={tmp_path / 'attention'}"])
    linearized = [linearize(tree) for tree in read_trees(str(tmp_path / "trees.txt"))]
    runner, vocabulary = parser.runner, parser.runner.vocabulary
    translator = runner.translator(beam_size=4)
    expected = attention_weights(translator, [vocabulary.encode(s) for s in sentences],
                                 [vocabulary.encode_target(" ".join(t)) for t in linearized])
    in_process = runner.attention(sentences, translator=translator)
    for number, sentence, symbols, record, again in zip(
            itertools.count(1), sentences, linearized, expected, in_process):
        assert len(symbols) > len(sentence.split())  # a tag a word, and brackets
        assert (tmp_path / "attention" / f"{number}.png").read_bytes()[:4] == b"\x89PNG"
        with np.load(tmp_path / "attention" / f"{number}.npz") as saved:
            assert list(saved["target_pieces"]) == symbols + ["</s>"]
            source_pieces = list(saved["source_pieces"])
            for kind in KINDS:
                np.testing.assert_allclose(saved[kind], getattr(record, kind), atol=1e-6)
        assert source_pieces[-1] == "</s>"
        assert "".join(source_pieces[:-1]).replace("\u2581", " ").strip() == sentence
        assert again.target_pieces == symbols + ["</s>"]
        assert again.source_pieces == source_pieces
        for kind in KINDS:
            np.testing.assert_allclose(getattr(again, kind), getattr(record, kind), atol=1e-6)


EXPORTED_TREES = """
import json, sys
import tensorflow as tf
import tensorflow_text
model = tf.saved_model.load(sys.argv[1])
outputs = model.signatures["serving_default"](inputs=tf.constant(json.loads(sys.argv[2])))
print(json.dumps([s.decode("utf-8") for s in outputs["outputs"].numpy()]))
"""


def test_the_exported_model_returns_the_decoders_trees(parser, tmp_path):
    """Loaded in a process that imports only tensorflow and tensorflow_text."""
    exporter.main([f"--model_dir={parser.model_dir}", "--beam_size=4",
                   f"--export_dir={tmp_path}"])
    (version,) = [p for p in tmp_path.iterdir() if p.name.isdigit()]
    sentences = gold_sentences(parser.root / "test.mrg")[:10] + ["", "unknownword the cat ."]
    result = subprocess.run([sys.executable, "-c", EXPORTED_TREES, str(version),
                             json.dumps(sentences)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    exported = json.loads(result.stdout.splitlines()[-1])
    assert exported == in_process_trees(parser.runner, sentences, 4)
    assert exported[-2] == "" and exported[0].startswith("(TOP (S ")


def test_bad_treebanks_and_references_are_one_line_errors(parser, tmp_path, capsys):
    (tmp_path / "bad.mrg").write_text("( (S (NP (DT a) (NN b))\n  (VP (VBD c))) ))\n",
                                      encoding="utf-8")
    (tmp_path / "empty.mrg").write_text("\n", encoding="utf-8")
    (tmp_path / "wsj" / "02").mkdir(parents=True)
    good = parser.root / "dev.mrg"
    cases = [
        (datagen.main, ["--problem=bad", "--task=parsing", f"--train={tmp_path / 'bad.mrg'}",
                        f"--dev={good}"], r"bad.mrg, line 2: a '\)' closes no bracket"),
        (datagen.main, ["--problem=empty", "--task=parsing",
                        f"--train={tmp_path / 'empty.mrg'}", f"--dev={good}"],
         "no trees in the train files of empty"),
        (datagen.main, ["--problem=parsing_wsj", f"--raw_dir={tmp_path / 'wsj'}"],
         "holds no WSJ treebank: expected the Treebank-3"),
        (decoder.main, [f"--model_dir={parser.model_dir}", f"--decode_from_file={good}",
                        f"--decode_reference={parser.root / 'test.mrg'}"],
         "test.mrg has 30 references but .*dev.mrg has"),
    ]
    for main, argv, message in cases:
        if main is datagen.main:
            argv = argv + [f"--data_dir={tmp_path / 'data'}"]
        code, err = run(main, argv, capsys)
        assert code == 2 and len(error_lines(err)) == 1 and re.search(message, err), err
