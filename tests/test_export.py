"""The exported SavedModel, loaded in a separate Python process, translates as in-process."""

import json
import subprocess
import sys

import numpy as np
import pytest

from t2t_lite import cli
from t2t_lite.cli import exporter
from t2t_lite.decoding.glossary import contains_term
from t2t_lite.utils.errors import UserError

INPUTS = ["1 2 3", "", "9 8 7 6 5 4 3 2", " ".join(["4"] * 100), "0", "5 5 1"]
# Items the vocabulary cannot encode, as bytes decoded with surrogateescape (JSON carries them).
INVALID_UTF8 = b"4 \xff 5".decode("utf-8", "surrogateescape")


def assert_bad_items_rejected_one_by_one(served, count, bad):
    """The first `count` items translate; each of `bad` (reason by index) is empty, scores 0."""
    assert served["errors"][:count] == [""] * count
    for index, reason in bad.items():
        assert (served["outputs"][index], served["scores"][index]) == ("", 0.0)
        assert served["errors"][index] == reason

LOAD_AND_TRANSLATE = """
import json, sys
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
texts = [text.encode("utf-8", "surrogateescape") for text in json.loads(sys.argv[2])]
strings = model.signatures["serving_default"](inputs=tf.constant(texts))
ids = model.signatures["translate_ids"](inputs=tf.constant(json.loads(sys.argv[3]), tf.int32))
print(json.dumps({
    "outputs": [s.decode("utf-8") for s in strings["outputs"].numpy()],
    "scores": strings["scores"].numpy().tolist(),
    "errors": [s.decode("utf-8") for s in strings["errors"].numpy()],
    "ids": ids["outputs"].numpy().tolist(), "id_scores": ids["scores"].numpy().tolist(),
    "id_errors": [s.decode("utf-8") for s in ids["errors"].numpy()]}))
"""


@pytest.fixture(scope="module")
def exported(trained_reverse, tmp_path_factory):
    export_dir = tmp_path_factory.mktemp("export")
    cli.run(exporter.main, [f"--model_dir={trained_reverse.model_dir}",
                            f"--export_dir={export_dir}"])
    (version,) = [p for p in export_dir.iterdir() if p.name.isdigit()]
    return str(version)


def test_the_exported_model_translates_exactly_as_in_process(trained_reverse, exported):
    runner = trained_reverse.runner
    translator = runner.translator()
    expected = translator.translate(INPUTS)
    token_lists = [runner.vocabulary.encode(text) for text in INPUTS]
    ids = np.zeros((len(INPUTS), max(map(len, token_lists))), "int32")
    for row, tokens in zip(ids, token_lists):
        row[: len(tokens)] = tokens
    # Rows that are not token ids: negative, past the vocabulary (12 ids), EOS, inner padding.
    # The first two failed the whole batch or translated as if valid.
    bad_rows = np.zeros((4, ids.shape[1]), "int32")
    bad_rows[:, :3] = [[3, -1, 4], [3, 12, 4], [3, 4, 1], [3, 0, 4]]
    ids = np.concatenate([ids, bad_rows])
    # Refused alike in process and by the export: a 10-digit number, a no-break space.
    bad = [INVALID_UTF8, "1 \N{GRINNING FACE} 2", "3 10", "-1", "0000000003 1",
           "1\N{NO-BREAK SPACE}2"]
    for text in bad[1:]:
        with pytest.raises(UserError, match="is not a symbol of this problem"):
            runner.vocabulary.encode(text)
    result = subprocess.run([sys.executable, "-c", LOAD_AND_TRANSLATE, exported,
                             json.dumps(INPUTS + bad), json.dumps(ids.tolist())],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.splitlines()[-1])
    symbols = "expected integers 0..9 separated by spaces"
    assert_bad_items_rejected_one_by_one(served, len(INPUTS), {
        len(INPUTS): "not valid UTF-8", len(INPUTS) + 1: symbols, len(INPUTS) + 2: symbols,
        len(INPUTS) + 3: symbols, len(INPUTS) + 4: symbols, len(INPUTS) + 5: symbols})
    assert served["id_errors"] == [""] * len(INPUTS) + [
        "expected token ids 2..11 without EOS, then padding (0)"] * 4
    assert all(row == [] or not any(row) for row in served["ids"][len(INPUTS):])
    assert served["id_scores"][len(INPUTS):] == [0.0] * 4
    served = {name: values[: len(INPUTS)] for name, values in served.items()}

    assert served["outputs"] == [t.text for t in expected]
    np.testing.assert_allclose(served["scores"], [t.score for t in expected], rtol=1e-5)
    assert served["outputs"][1] == "" and served["scores"][1] == 0.0
    reversals = [" ".join(text.split()[::-1]) for text in INPUTS]
    assert sum(a == b for a, b in zip(served["outputs"], reversals)) >= 4  # real translations
    assert [runner.vocabulary.decode(row) for row in served["ids"]] == served["outputs"]
    np.testing.assert_allclose(served["id_scores"], served["scores"], rtol=1e-6)


SCORE_AND_SAMPLE = """
import json, sys
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
pairs, id_pairs, inputs = json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
def strings(texts):
    return tf.constant([text.encode("utf-8", "surrogateescape") for text in texts])
def plain(result):
    return {name: (values.numpy().astype(str).tolist() if values.dtype == tf.string
                   else values.numpy().tolist()) for name, values in result.items()}
served = {"score": plain(model.signatures["score"](
              sources=strings([s for s, _ in pairs]), targets=strings([t for _, t in pairs]))),
          "score_ids": plain(model.signatures["score_ids"](
              sources=tf.constant(id_pairs[0], tf.int32),
              targets=tf.constant(id_pairs[1], tf.int32)))}
for name, call in (("score", lambda: model.signatures["score"](
                       sources=strings(["1 2", "3"]), targets=strings(["2 1"]))),
                   ("score_ids", lambda: model.signatures["score_ids"](
                       sources=tf.constant([[3, 4], [5, 6]]), targets=tf.constant([[4, 3]])))):
    try:
        call()
        served[f"unpaired_{name}"] = "scored"
    except tf.errors.InvalidArgumentError as error:
        served[f"unpaired_{name}"] = error.message
for name, (seed, temperature, top_k, top_p) in json.loads(sys.argv[5]).items():
    served[name] = plain(model.signatures["sample"](
        inputs=strings(inputs), seed=tf.constant(seed, tf.int64),
        temperature=tf.constant(temperature), top_k=tf.constant(top_k),
        top_p=tf.constant(top_p)))
inputs, constraints = json.loads(sys.argv[6])
served["constrained"] = plain(model.signatures["translate_constrained"](
    inputs=strings(inputs), constraints=tf.constant(constraints)))
print(json.dumps(served))
"""


def test_the_exported_model_scores_and_samples_as_in_process(trained_reverse, exported):
    """`score` gives --score's numbers (token by token), `score_ids` the same from ids, each bad
    pair one error, and unpaired batches refused; `sample` at top_k 1 is greedy search, repeats
    with its seed, gives each sample the model's length-penalized log-probability (--score's,
    normalized as the search does), and refuses settings out of range item by item;
    `translate_constrained` gives the in-process outputs with target phrases, says which each
    output meets, and keeps an item the vocabulary cannot encode to itself."""
    from t2t_lite.decoding.scoring import target_score
    from t2t_lite.decoding.inputs import padded

    runner = trained_reverse.runner
    vocabulary, translator = runner.vocabulary, runner.translator()
    good = [("1 2 3", "3 2 1"), ("4 5 6 7 0", "0 7 6 5 4"), ("9 8", "1 2 3 4 5")]
    bad = {(INVALID_UTF8, "1"): "not valid UTF-8",
           ("1 2", "3 x"): "expected integers 0..9 separated by spaces",
           ("", "1"): "an empty source or target",
           (" ".join(["3"] * 300), "1"): f"the source has more than "
           f"{translator.max_input_tokens} tokens, the most the model reads"}
    pairs = good + list(bad)
    ids = [padded([vocabulary.encode(p[side]) for p in good] + [[3, 0, 4]], eos=False).tolist()
           for side in (0, 1)]
    inputs = ["1 2 3", "4 5 6 7 0", "", "9 8 7 6 5 4 3 2", "1 x"]
    samplings = {"greedy": (3, 1.0, 1, 1.0), "a": (7, 2.0, 0, 0.9), "a_again": (7, 2.0, 0, 0.9),
                 "b": (8, 2.0, 0, 0.9), "wrong": (7, 0.0, 0, 1.0)}
    constrained = (["1 2 3", "", "4 5 6", "9 8 7 6 5 4 3 2", "1 x"],
                   [["7", ""], ["3", ""], ["0 0", "4"], ["", ""], ["2", ""]])
    result = subprocess.run(
        [sys.executable, "-c", SCORE_AND_SAMPLE, exported, json.dumps(pairs), json.dumps(ids),
         json.dumps(inputs), json.dumps(samplings), json.dumps(constrained)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.splitlines()[-1])

    expected = translator.score_tokens([vocabulary.encode(s) for s, _ in good],
                                       [vocabulary.encode(t) for _, t in good])
    for name in ("score", "score_ids"):
        scored = served[name]
        for row, log_probs in enumerate(expected):
            assert scored["lengths"][row] == len(log_probs)
            np.testing.assert_allclose(scored["token_log_probs"][row][: len(log_probs)],
                                       log_probs, atol=1e-5)
            assert not any(scored["token_log_probs"][row][len(log_probs):])
            assert scored["scores"][row] == pytest.approx(sum(log_probs), abs=1e-4)
    assert served["score"]["errors"] == [""] * len(good) + list(bad.values())
    for name in ("score", "score_ids"):  # 2 sources, 1 target: refused, not broadcast
        assert "the sources and targets must be pairs" in served[f"unpaired_{name}"], served
    assert served["score"]["scores"][len(good):] == [0.0] * len(bad)
    assert served["score"]["lengths"][len(good):] == [0] * len(bad)
    assert served["score_ids"]["errors"][-1] == ("expected token ids 2..11 without EOS, then "
                                                 "padding (0)")

    greedy = runner.translator(beam_size=1).translate(inputs[:4])
    assert served["greedy"]["outputs"][:4] == [t.text for t in greedy]
    np.testing.assert_allclose(served["greedy"]["scores"][:4], [t.score for t in greedy],
                               atol=1e-5)
    assert served["a"] == served["a_again"] and served["a"]["outputs"] != served["b"]["outputs"]
    assert served["a"]["errors"] == ["", "", "", "", "expected integers 0..9 separated by spaces"]
    assert served["a"]["outputs"][2] == "" and served["a"]["scores"][2] == 0.0
    for source, text, score in zip(inputs[:4], served["a"]["outputs"], served["a"]["scores"]):
        if source and text:
            log_probs = translator.score_tokens([vocabulary.encode(source)],
                                                [vocabulary.encode(text)])[0]
            assert score == pytest.approx(target_score(log_probs, "gnmt",
                                                       runner.hparams.alpha), abs=1e-4)
    assert served["wrong"]["errors"] == ["expected temperature >= 1.18e-38, top_k >= 0 and "
                                         "top_p in (0, 1]"] * len(inputs)
    assert served["wrong"]["outputs"] == [""] * len(inputs)

    sources, phrases = constrained
    expected = [best[0] for best in translator.translate_constrained(
        [vocabulary.encode(s) for s in sources[:4]],
        [[p for p in row if p] for row in phrases[:4]])]
    got = served["constrained"]
    assert got["outputs"][:4] == [t.text for t in expected]
    np.testing.assert_allclose(got["scores"][:4], [t.score for t in expected], atol=1e-5)
    assert got["met"][:4] == [[not phrase or phrase not in t.unmet for phrase in row]
                              for row, t in zip(phrases, expected)]
    assert got["met"][1] == [False, True]  # the empty input meets no phrase
    for row in (0, 2):  # room enough: met, and there
        assert got["met"][row] == [True, True]
        assert all(contains_term(got["outputs"][row], p) for p in phrases[row] if p)
    assert got["errors"] == ["", "", "", "", "expected integers 0..9 separated by spaces"]


@pytest.mark.slow  # datagen, export and a second process: ~15 s
def test_a_sentencepiece_model_exports_with_its_tokenizer(tmp_path):
    """Tokenization and detokenization by tf_text inside the SavedModel give the in-process
    translations, in a process that only imports tensorflow_text before loading."""
    import tensorflow as tf

    from t2t_lite.cli import datagen
    from t2t_lite.config import EOS_ID
    from t2t_lite.runner import Runner

    words = "über Straße Öl café naïve 東京 the house is small grün schnell".split()
    for side in ("en", "de"):
        lines = [" ".join(words[(i * 7 + k * (3 if side == "de" else 5)) % len(words)]
                          for k in range(1 + i % 6)) for i in range(300)]
        for split in ("train", "dev"):
            (tmp_path / f"{split}.{side}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    data_dir, model_dir = str(tmp_path / "data"), str(tmp_path / "model")
    datagen.main(["--problem=tiny_ende", f"--files_dir={tmp_path}", "--source_lang=en",
                  "--target_lang=de", "--vocab_size=300", f"--data_dir={data_dir}"])
    runner = Runner.create_or_resume(model_dir, "tiny_ende", "transformer_tiny",
                                     "d_model=32,d_ff=64,extra_length=8", data_dir)
    runner.record_experiment()  # as train() would
    trainer = runner.trainer()
    # A zero EOS embedding gives EOS a zero logit, below the best of the random others, so
    # greedy search on this untrained model never stops early: its outputs are many pieces.
    # (Beam search would stop at once: EOS first is as likely as any one more piece.)
    embeddings = trainer.model.embedding.embeddings
    embeddings.assign(embeddings.numpy() * (np.arange(len(embeddings.numpy())) != EOS_ID)[:, None])
    tf.train.CheckpointManager(trainer.checkpoint, model_dir, 1).save()
    export_dir = tmp_path / "export"
    cli.run(exporter.main, [f"--model_dir={model_dir}", f"--export_dir={export_dir}",
                            "--beam_size=1"])
    (version,) = [p for p in export_dir.iterdir() if p.name.isdigit()]

    inputs = ["Die Straße ist grün.", "", "東京 café über Öl", "naïve " * 40]
    expected = runner.translator(beam_size=1).translate(inputs)
    script = "import tensorflow_text\n" + LOAD_AND_TRANSLATE
    result = subprocess.run([sys.executable, "-c", script, str(version),
                             json.dumps(inputs + [INVALID_UTF8]), json.dumps([[3, 4, 5]])],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.splitlines()[-1])
    assert_bad_items_rejected_one_by_one(served, len(inputs), {len(inputs): "not valid UTF-8"})
    served = {name: values[: len(inputs)] for name, values in served.items()}
    assert served["outputs"] == [t.text for t in expected]
    np.testing.assert_allclose(served["scores"], [t.score for t in expected], rtol=1e-5)
    assert served["outputs"][1] == ""  # an empty source
    assert all(len(served["outputs"][i]) >= 8 for i in (0, 2, 3))  # pieces were detokenized


def test_the_export_is_readable_as_the_umask_allows(exported):
    """TensorFlow Serving often runs as another user: the version directory and its files get
    the permissions of any new directory or file (the umask's), not a temporary one's 0700."""
    import os
    import stat

    umask = os.umask(0)
    os.umask(umask)
    def modes(names):
        return {stat.S_IMODE(os.stat(os.path.join(directory, name)).st_mode) for name in names}

    directory = os.path.dirname(exported)
    directories, files = modes([exported]), set()
    for directory, subdirectories, names in os.walk(exported):
        directories, files = directories | modes(subdirectories), files | modes(names)
    assert directories == {0o777 & ~umask} and files == {0o666 & ~umask}
