"""A user's own parallel files made into a trainable problem by t2t-lite-datagen, with no Python
code; and every mistake in those files or flags is one line and exit status 2."""

import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys

import pytest
from cli_output import error_lines
from sentencepiece import sentencepiece_model_pb2

from t2t_lite import cli, registry
from t2t_lite.cli import datagen, decoder, trainer
from t2t_lite.backends.tensorflow.pipeline import read_examples
from t2t_lite.runner import Runner
from t2t_lite.utils.errors import UserError

# A word-for-word "translation": learnable in a few hundred steps, only by reading the source.
LEXICON = dict(zip(
    "the house is small big old new green red dog cat sees runs eats quickly slowly today "
    "tomorrow we you they have water bread good".split(),
    "das Haus ist klein groß alt neu grün rot Hund Katze sieht läuft isst schnell langsam heute "
    "morgen wir ihr sie haben Wasser Brot gut".split()))
SIZES = {"train": 2000, "dev": 60, "test": 20}
EMPTY_TRAIN_LINES = (5, 17)  # a blank line on one side, then on both
VOCAB_SIZE = 450  # enough for every word to be one piece


def sentence_pairs(split):
    rng = random.Random(split)
    pairs = []
    for i in range(SIZES[split]):
        words = [rng.choice(list(LEXICON)) for _ in range(rng.randint(2, 9))]
        pairs.append((" ".join(words), " ".join(LEXICON[w] for w in words)))
    if split == "train":
        pairs[EMPTY_TRAIN_LINES[0]] = (pairs[EMPTY_TRAIN_LINES[0]][0], "")
        pairs[EMPTY_TRAIN_LINES[1]] = ("", "  ")
    return pairs


def write_corpus(directory, stems=None):
    directory.mkdir(parents=True, exist_ok=True)
    for split in SIZES:
        stem = (stems or {}).get(split, split)
        pairs = sentence_pairs(split)
        for side, language in enumerate(("en", "de")):
            (directory / f"{stem}.{language}").write_text(
                "".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    return directory


def run(main, argv, capsys):
    """(exit status, stderr) of a console script's main run as the CLI runs it."""
    try:
        cli.run(main, argv)
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"), {"dev": "valid"})


@pytest.fixture(scope="module")
def data_dir(corpus, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data"))
    datagen.main(["--problem=my_ende", f"--files_dir={corpus}", "--source_lang=en",
                  "--target_lang=de", f"--vocab_size={VOCAB_SIZE}", f"--data_dir={path}"])
    return path


def decoded(problem, split, data_dir):
    vocabulary = problem.vocabulary(data_dir)
    return sorted(
        tuple(vocabulary.decode(example[side]) for side in ("inputs", "targets"))
        for example in read_examples(problem.shard_paths(split, data_dir), shuffle=False)
        .as_numpy_iterator())


def test_datagen_records_the_problem_and_writes_every_nonempty_pair(corpus, data_dir):
    spec = json.loads(open(os.path.join(data_dir, "my_ende.problem.json")).read())
    assert spec["files"]["dev"] == [str(corpus / "valid.en"), str(corpus / "valid.de")]
    assert (spec["vocab_size"], spec["vocab_type"]) == (VOCAB_SIZE, "bpe")
    problem = registry.problem("my_ende", data_dir)
    assert problem.vocabulary(data_dir).size == VOCAB_SIZE
    for split in SIZES:
        expected = [pair for pair in sentence_pairs(split) if pair[0].strip() and pair[1].strip()]
        assert decoded(problem, split, data_dir) == sorted(expected)
    stats = json.loads(open(problem.stats_path("train", data_dir)).read())
    assert stats["skipped_empty"] == len(EMPTY_TRAIN_LINES)
    assert stats["examples"] == SIZES["train"] - len(EMPTY_TRAIN_LINES)


def test_tsv_files_named_explicitly_make_the_same_examples(tmp_path, data_dir):
    for split in ("train", "dev"):
        (tmp_path / f"{split}.tsv").write_text(
            "".join(f"{s}\t{t}\n" for s, t in sentence_pairs(split)), encoding="utf-8")
    tsv_dir = str(tmp_path / "data")
    datagen.main(["--problem=my_tsv", f"--train={tmp_path / 'train.tsv'}",
                  f"--dev={tmp_path / 'dev.tsv'}", f"--vocab_size={VOCAB_SIZE}",
                  f"--data_dir={tsv_dir}"])
    tsv, files = registry.problem("my_tsv", tsv_dir), registry.problem("my_ende", data_dir)
    assert tsv.splits() == ["train", "dev"]
    with pytest.raises(UserError, match="problem my_tsv has no test split, only train, dev"):
        tsv.dataset("test", tsv_dir, None, training=False)
    for split in ("train", "dev"):
        assert decoded(tsv, split, tsv_dir) == decoded(files, split, data_dir)


@pytest.fixture(scope="module")
def trained(data_dir, tmp_path_factory):
    """(model_dir, final metrics) of a small SentencePiece model trained 250 steps on my_ende:
    it has learned much but is still unsure of many words and lengths. Seeded, so that it is
    the same model in every run (without a seed the data order, and so the model, varies)."""
    model_dir = str(tmp_path_factory.mktemp("my_ende") / "model")
    metrics = trainer.main([
        "--problem=my_ende", f"--data_dir={data_dir}", "--hparams_set=transformer_tiny",
        "--hparams=d_model=64,d_ff=256,dropout=0.0,learning_rate=0.5,warmup_steps=100,"
        "batch_size=1024",
        f"--model_dir={model_dir}", "--train_steps=250", "--eval_every=0",
        "--eval_decode_examples=100", "--keep_best_by=bleu", "--random_seed=1"])
    return model_dir, metrics


def test_the_trainer_learns_the_users_problem_from_its_data_dir(corpus, data_dir, trained,
                                                                tmp_path, capsys):
    model_dir, metrics = trained
    # Words are single pieces drawn at random: without reading the source, a model could
    # predict little beyond where the sentence ends (EOS is 1 token in 7).
    assert metrics["accuracy"] > 0.75
    assert metrics["bleu"] > 10  # sacreBLEU of greedy translations of 100 dev sentences
    with open(os.path.join(model_dir, "best", "info.json"), encoding="utf-8") as f:
        assert json.load(f) == {"metric": "bleu", "value": metrics["bleu"], "step": 250}
    resumed = Runner.from_model_dir(model_dir)  # later commands need only the model_dir
    assert resumed.problem.name == "my_ende" and resumed.vocabulary.size == VOCAB_SIZE

    other_data_dir = str(tmp_path / "other_vocabulary")
    datagen.main(["--problem=my_ende", f"--files_dir={corpus}", "--source_lang=en",
                  "--target_lang=de", "--vocab_size=400", f"--data_dir={other_data_dir}"])
    code, err = run(trainer.main, [f"--model_dir={model_dir}", f"--data_dir={other_data_dir}",
                                   "--train_steps=300"], capsys)
    assert code == 2 and error_lines(err) == [
        f"t2t-lite: error: {other_data_dir} holds another 400-piece vocabulary than the one "
        f"{model_dir} was trained with (made from another corpus?): pass the --data_dir it was "
        "trained on"]

    # Another vocabulary of the same size (here: two of its pieces swapped, as another corpus
    # would order them) decoded every sentence into other words, exit 0.
    same_size = str(tmp_path / "same_size_vocabulary")
    shutil.copytree(data_dir, same_size)
    (model_file,) = glob.glob(os.path.join(same_size, "*.model"))
    with open(model_file, "rb") as f:
        proto = sentencepiece_model_pb2.ModelProto.FromString(f.read())
    proto.pieces[10].piece, proto.pieces[11].piece = proto.pieces[11].piece, proto.pieces[10].piece
    with open(model_file, "wb") as f:
        f.write(proto.SerializeToString())
    source = tmp_path / "source.txt"
    source.write_text("a sentence\n")
    code, err = run(decoder.main, [f"--model_dir={model_dir}", f"--data_dir={same_size}",
                                   f"--decode_from_file={source}"], capsys)
    assert code == 2 and error_lines(err) == [
        f"t2t-lite: error: {same_size} holds another {VOCAB_SIZE}-piece vocabulary than the one "
        f"{model_dir} was trained with (made from another corpus?): pass the --data_dir it was "
        "trained on"]


def test_the_ctranslate2_engine_translates_the_users_model_as_t2t_lite(trained, data_dir):
    """A SentencePiece model that is unsure of lengths, where length penalties matter: its
    CTranslate2 conversion is exact, and greedy translations and scores are the TensorFlow
    engine's. Beam translations mostly are (with CTranslate2's own length penalty at the
    best-matching exponent, 249 of these 300 were): CTranslate2's beam search drops a beam
    slot for each hypothesis that ends, t2t_lite's keeps beam_size alive ones beside the
    finished, so on a half-trained model t2t_lite's sometimes finds a better-scoring output
    (seen: 4 of these 300 with this seed, and on unseeded runs 0 to a few), never a worse one."""
    from test_ctranslate2 import assert_same_translations, check_exact, conversion

    runner = Runner.from_model_dir(trained[0], data_dir)
    model = runner.restored_model()
    sources = [source for split in ("dev", "test", "train")
               for source, _ in sentence_pairs(split)][:300]
    check_exact(model, runner.vocabulary, conversion(runner),
                [runner.vocabulary.encode(text) for text in sources[:20]])
    assert_same_translations(
        runner.translator(beam_size=1, engine="ctranslate2").translate(sources),
        runner.translator(model, beam_size=1).translate(sources))
    expected = runner.translator(model, beam_size=4).translate(sources)
    translated = runner.translator(beam_size=4, engine="ctranslate2").translate(sources)
    same = [i for i, (a, b) in enumerate(zip(translated, expected)) if a.text == b.text]
    assert len(same) >= 0.97 * len(sources)
    assert_same_translations([translated[i] for i in same], [expected[i] for i in same])
    for a, b in zip(translated, expected):
        assert b.score >= a.score - 1e-4, (a, b)


def test_every_file_an_own_corpus_adds_damaged_every_way_resumes_or_is_one_line(
        trained, data_dir, tmp_path):
    """Issue 47's sweep (tests/damage_sweep.py) over what a model of the user's own files adds
    to the tiny model's kinds of files: the data_dir's SentencePiece model and problem record,
    best/'s checkpoint and info.json. Each cut, emptied, flipped in place or deleted resumes
    from what is intact or is refused in one line naming the file, nothing changed."""
    from damage_sweep import Sweep, check, own_corpus_kinds

    pairs = "".join(f"{source}\t{target}\n" for source, target in sentence_pairs("test")[:3])
    sweep = Sweep(trained[0], data_dir, str(tmp_path), (
        "--eval_every=0", "--eval_steps=1", "--eval_decode_examples=8", "--keep_best_by=bleu",
        "--random_seed=3"), own_corpus_kinds, ("decoder", "best"), pairs)
    check(list(sweep.cases()), sweep.kinds)


def test_a_datagen_that_would_change_a_made_problem_is_refused(corpus, data_dir, capsys):
    code, err = run(datagen.main, ["--problem=my_ende", f"--files_dir={corpus}",
                                   "--source_lang=en", "--target_lang=de", "--vocab_size=400",
                                   f"--data_dir={data_dir}"], capsys)
    assert code == 2 and "has data of my_ende made with other vocab_size" in err
    code, err = run(datagen.main, ["--problem=my_ende", f"--data_dir={data_dir}"], capsys)
    assert code == 0  # the recorded problem, already made: nothing to do


def corrupt(directory, name, transform):
    path = directory / name
    path.write_bytes(transform(path.read_bytes()))


@pytest.mark.parametrize("change, flags, message", [
    (lambda d: corrupt(d, "train.de", lambda b: b.rsplit(b"\n", 3)[0] + b"\n"), {},
     r"train.en has 2000 lines but .*train.de has 1998: parallel files must be aligned"),
    (lambda d: corrupt(d, "train.de", lambda b: b.replace(b"\n", b"\nGr\xfc\xdfe ", 3)
                       .replace(b"\nGr\xfc\xdfe ", b"\n", 2)), {},
     r"train.de, line 4: invalid UTF-8 at byte 3 of the line: convert the file to UTF-8"),
    (lambda d: os.remove(d / "dev.de"), {}, r"no such file: .*dev.de \(the dev files are"),
    (None, {"--vocab_size": "100000"},
     r"supports at most \d+ subwords, not 100000: choose a smaller vocabulary size, e.g. \d+"),
    (None, {"--source_lang": None, "--target_lang": None},
     r"has train.de, train.en: pass --source_lang and --target_lang"),
    (lambda d: [os.remove(d / f"dev.{language}") for language in ("en", "de")], {},
     r"no dev files: pass --dev, or a --files_dir holding dev.\{en,de\} or valid.\{en,de\}"),
    (None, {"--problem": "translate_ende_wmt32k"}, "is a built-in problem"),
    (None, {"--vocab_type": "wordpiece"}, "invalid choice: 'wordpiece'"),
])
def test_mistakes_in_the_users_files_are_one_line(change, flags, message, tmp_path, capsys):
    files = write_corpus(tmp_path / "files")
    if change:
        change(files)
    data = tmp_path / "data"
    flags = {"--problem": "mine", "--files_dir": files, "--source_lang": "en",
             "--target_lang": "de", "--vocab_size": "300", "--data_dir": data, **flags}
    code, err = run(datagen.main, [f"{k}={v}" for k, v in flags.items() if v is not None], capsys)
    assert code == 2 and len(error_lines(err)) == 1, err
    assert re.search(message, err), err
    made = os.listdir(data) if data.exists() else []
    assert not [name for name in made if "-of-" in name or name.endswith(".model")]


def test_tsv_rows_must_have_two_columns(tmp_path, capsys):
    (tmp_path / "train.tsv").write_text("a\tb\nc\td\te\n", encoding="utf-8")
    code, err = run(datagen.main, ["--problem=mine", f"--train={tmp_path / 'train.tsv'}",
                                   f"--dev={tmp_path / 'train.tsv'}",
                                   f"--data_dir={tmp_path / 'data'}"], capsys)
    assert code == 2
    assert "train.tsv, line 2: expected source<TAB>target, found 3 tab-separated columns" in err


def test_names_that_are_not_problems_say_where_they_were_looked_for(data_dir, tmp_path, capsys):
    code, err = run(trainer.main, ["--problem=my_endee", f"--data_dir={data_dir}",
                                   "--hparams_set=transformer_tiny",
                                   f"--model_dir={tmp_path / 'model'}"], capsys)
    assert code == 2 and "unknown problem 'my_endee': it is neither registered" in err
    assert f"nor made from your files by t2t-lite-datagen in {data_dir}" in err
    code, err = run(datagen.main, ["--problem=translate_files", f"--data_dir={tmp_path}"], capsys)
    assert code == 2 and "translate_files is made from your own files: run `t2t-lite-datagen" in err
    reverse = registry.problem("test_short_reverse")
    with pytest.raises(UserError, match=r"no train data for problem test_short_reverse in .* "
                                        r"\(it holds my_ende\)"):
        reverse.dataset("train", data_dir, None, training=True)


def test_a_real_datagen_process_prints_one_line_for_bad_files(tmp_path):
    files = write_corpus(tmp_path / "files")
    corrupt(files, "test.en", lambda b: b + b"one more\n")
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-c", "from t2t_lite.cli.datagen import run; run()", "--problem=mine",
         f"--files_dir={files}", "--source_lang=en", "--target_lang=de", "--vocab_size=300",
         f"--data_dir={tmp_path / 'data'}"], capture_output=True, text=True, timeout=300,
        env=environment)
    assert result.returncode == 2
    (error,) = error_lines(result.stderr)  # and progress logs, but no traceback
    assert "Traceback" not in result.stderr and "test.en has 21 lines but" in error


def test_the_trainers_generate_data_remakes_missing_data_from_the_record(data_dir, tmp_path):
    new_data_dir = tmp_path / "data"
    new_data_dir.mkdir()
    (new_data_dir / "my_ende.problem.json").write_text(
        open(os.path.join(data_dir, "my_ende.problem.json")).read())
    runner = Runner.create_or_resume(str(tmp_path / "model"), "my_ende", "transformer_tiny",
                                     data_dir=str(new_data_dir))
    with pytest.raises(UserError, match="run `t2t-lite-datagen --problem=my_ende"):
        runner.prepare_data()
    runner.prepare_data(generate=True)
    original = registry.problem("my_ende", data_dir)
    for split in SIZES:
        assert decoded(runner.problem, split, str(new_data_dir)) == decoded(original, split,
                                                                           data_dir)


def test_corpus_settings_without_corpus_files_are_refused(tmp_path, capsys):
    code, err = run(datagen.main, ["--problem=translate_ende_wmt32k", "--vocab_size=8000",
                                   f"--data_dir={tmp_path}"], capsys)
    assert code == 2 and "--vocab_size: only for your own corpus, made with --files_dir" in err


def write_domain_corpus(directory):
    """A new domain: half the general words, half words the general corpus never has."""
    words = dict(list(LEXICON.items())[::2] + list(zip(
        "river bridge boat fish swims flows under over".split(),
        "Fluss Brücke Boot Fisch schwimmt fließt unter über".split())))
    directory.mkdir()
    for split, size in (("train", 500), ("dev", 30)):
        rng = random.Random(f"domain-{split}")
        lines = []
        for _ in range(size):
            chosen = [rng.choice(list(words)) for _ in range(rng.randint(2, 7))]
            lines.append(f"{' '.join(chosen)}\t{' '.join(words[w] for w in chosen)}\n")
        (directory / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
    return [f"--train={directory / 'train.tsv'}", f"--dev={directory / 'dev.tsv'}"]


def test_domain_data_takes_the_models_vocabulary_or_shares_pieces_of_its_own(trained, tmp_path,
                                                                            capsys):
    """datagen --vocab_from encodes new data with the model's very vocabulary, which a model
    started from it keeps whole; with a vocabulary of its own, the pieces kept are exactly
    those the two share (counted here by brute force)."""
    model_dir = trained[0]
    source = Runner.from_model_dir(model_dir)
    files = write_domain_corpus(tmp_path / "domain")
    adopted = tmp_path / "adopted"
    datagen.main(["--problem=my_domain", *files, f"--vocab_from={model_dir}",
                  f"--data_dir={adopted}"])
    assert ((adopted / "my_domain.sentencepiece.model").read_bytes()
            == source.vocabulary.model_proto)
    own = tmp_path / "own"
    datagen.main(["--problem=my_domain", *files, "--vocab_size=300", f"--data_dir={own}"])
    counts, vocabularies = {}, {}
    for data_dir in (adopted, own):
        runner = Runner.create_or_resume(str(tmp_path / f"{data_dir.name}_model"), "my_domain",
                                         data_dir=str(data_dir), init_from=model_dir)
        runner.trainer()
        counts[data_dir.name] = runner.experiment.init_from["vocabulary"]
        vocabularies[data_dir.name] = runner.vocabulary
    assert counts["adopted"] == {"kept": VOCAB_SIZE, "added": 0, "dropped": 0}
    shared = len(set(source.vocabulary.tokens()) & set(vocabularies["own"].tokens()))
    assert 100 < shared < 300
    assert counts["own"] == {"kept": shared, "added": 300 - shared, "dropped": VOCAB_SIZE - shared}

    for flags, message in (
            ([f"--vocab_from={model_dir}", "--vocab_size=300"], "drop --vocab_size"),
            ([f"--vocab_from={tmp_path}"], f"{tmp_path} is not a t2t_lite model_dir"),
            ([f"--vocab_from={model_dir}", f"--data_dir={own}"],
             "has data of my_domain made with other vocab_from, vocab_size")):
        code, err = run(datagen.main, ["--problem=my_domain", *files,
                                       f"--data_dir={tmp_path / 'new'}", *flags], capsys)
        assert code == 2 and len(error_lines(err)) == 1 and message in err, err
