"""SentencePiece vocabularies: lossless round trips, the fixed special ids, size errors."""

import numpy as np
import pytest

from t2t_lite.config import EOS_ID, PAD_ID, UNK_ID
from t2t_lite.data.corpus import sample_sentences
from t2t_lite.data.vocabulary import SentencePieceVocabulary
from t2t_lite.utils.errors import UserError

CORPUS = [
    "Die Katze schläft auf dem Sofa, während der Hund im Garten spielt.",
    "Le chat dort sur le canapé pendant que le chien joue dans le jardin.",
    "The cat sleeps on the sofa while the dog plays in the garden.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "Où est la bibliothèque ? C'est là-bas, à gauche de l'église.",
    "東京は日本の首都です。北京是中国的首都。",
] * 20

# Unseen words and scripts (Greek, Hebrew, emoji) exercise the byte fallback.
TEXTS = [
    "Grüße aus Köln: Ärger über Öl, süß & heiß!",
    "À l'hôtel « Le Château », ça coûte 15 € — très cher.",
    "東京で寿司を食べました。我爱北京天安门。",
    "Ελληνικά, עברית, emoji 🙂👍🏽 and\ttabs",
    "x",
    "",
]


@pytest.fixture(scope="module")
def vocabulary(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "v.model"
    return SentencePieceVocabulary.train(str(path), CORPUS, 400)


def test_special_ids_are_pad_eos_unk_and_there_is_no_bos(vocabulary):
    pieces = vocabulary.in_graph().tokenizer.id_to_string(np.array([PAD_ID, EOS_ID, UNK_ID]))
    assert pieces.numpy().tolist() == [b"<pad>", b"</s>", b"<unk>"]
    assert int(vocabulary.in_graph().tokenizer.string_to_id("<s>")) == UNK_ID  # no such piece
    assert vocabulary.size == 400 and vocabulary.model_type == "bpe"
    produced = {i for text in TEXTS + CORPUS for i in vocabulary.encode(text)}
    assert not produced & {PAD_ID, EOS_ID, UNK_ID}


def test_text_round_trips_in_python_and_in_graph(vocabulary):
    ids = [vocabulary.encode(text) for text in TEXTS]
    assert [vocabulary.decode(i) for i in ids] == TEXTS
    assert vocabulary.in_graph().encode(np.array(TEXTS)).to_list() == ids
    # Model outputs: EOS, then anything; padding after that.
    width = max(map(len, ids)) + 3
    outputs = np.array([i + [EOS_ID, 7] + [PAD_ID] * (width - len(i) - 2) for i in ids], "int32")
    assert [t.decode() for t in vocabulary.in_graph().decode(outputs).numpy()] == TEXTS
    assert [vocabulary.decode(row) for row in outputs] == TEXTS


def test_only_spaces_and_byte_order_marks_are_normalized_the_same_way_on_both_paths(vocabulary):
    text = "  zwei  Leerzeichen\ufeff   hier … ｆｕｌｌ "
    assert vocabulary.decode(vocabulary.encode(text)) == "zwei Leerzeichen hier … ｆｕｌｌ"
    assert vocabulary.in_graph().encode(np.array([text])).to_list() == [vocabulary.encode(text)]


def test_unigram_vocabularies_round_trip_too(tmp_path):
    vocabulary = SentencePieceVocabulary.train(str(tmp_path / "u.model"), CORPUS, 350, "unigram")
    assert vocabulary.model_type == "unigram" and vocabulary.size == 350
    assert [vocabulary.decode(vocabulary.encode(text)) for text in TEXTS] == TEXTS
    reloaded = SentencePieceVocabulary.load(str(tmp_path / "u.model"))
    assert [reloaded.encode(text) for text in TEXTS] == [vocabulary.encode(t) for t in TEXTS]


def test_a_size_the_text_cannot_support_is_refused_with_a_size_that_works(tmp_path):
    path = tmp_path / "v.model"
    with pytest.raises(UserError, match=r"supports at most \d+ subwords, not 5000") as error:
        SentencePieceVocabulary.train(str(path), CORPUS, 5000)
    assert not path.exists()
    suggested = int(str(error.value).rsplit(" ", 1)[-1])
    assert SentencePieceVocabulary.train(str(path), CORPUS, suggested).size == suggested
    with pytest.raises(UserError, match="cannot hold the .* characters"):
        SentencePieceVocabulary.train(str(tmp_path / "small.model"), CORPUS, 100)


def test_vocabulary_training_is_deterministic_on_a_bounded_sample(tmp_path):
    pairs = [(f"source {i} {CORPUS[i % 6]}", f"target {i}") for i in range(1000)]
    sample = sample_sentences(iter(pairs), 100)
    assert sample == sample_sentences(iter(pairs), 100) and len(sample) == 200
    sources = [int(s.split()[1]) for s in sample[::2]]
    assert len(set(sources)) == 100 and 400 < np.mean(sources) < 600  # uniform, not a prefix
    assert [f"target {i}" for i in sources] == sample[1::2]
    first, second = (SentencePieceVocabulary.train(str(tmp_path / name), sample, 500)
                     for name in ("a.model", "b.model"))
    assert (tmp_path / "a.model").read_bytes() == (tmp_path / "b.model").read_bytes()
    assert first.size == second.size == 500


def test_the_in_graph_tokenizer_survives_resetting_the_seed(vocabulary):
    import tensorflow as tf

    expected = vocabulary.in_graph().encode(np.array(TEXTS)).to_list()
    tf.random.set_seed(7)  # clears the eager kernel cache (tensorflow/text#570)
    assert vocabulary.in_graph().encode(np.array(TEXTS)).to_list() == expected
    assert [t.decode() for t in vocabulary.in_graph().decode(
        vocabulary.in_graph().encode(np.array(TEXTS)).to_tensor()).numpy()] == TEXTS


@pytest.mark.parametrize("damage", [lambda data: data[: len(data) // 2], lambda data: b"",
                                    lambda data: b"not a model\n" * 40])
def test_a_damaged_model_is_one_error_naming_it(vocabulary, tmp_path, damage):
    """A model cut short, emptied or overwritten: SentencePiece's ParseFromArray traceback
    (or, for an empty file, a model with no pieces) became a UserError naming the file."""
    intact = tmp_path / "intact.model"
    intact.write_bytes(vocabulary.model_proto)
    assert SentencePieceVocabulary.load(str(intact)).size == vocabulary.size
    damaged = tmp_path / "damaged.model"
    damaged.write_bytes(damage(vocabulary.model_proto))
    with pytest.raises(UserError, match=f"^{damaged} is not a SentencePiece model"):
        SentencePieceVocabulary.load(str(damaged))


@pytest.mark.parametrize("symbols", [
    '{"tags": ["NN"], "labels"', '["NN", "NP"]', '{"tags": ["NN"]}', "[" * 100_000,
    # Values of the wrong type or range: tracebacks, or (a depth no tree has) flat trees.
    '{"tags": "NN", "labels": ["NP"]}',
    '{"tags": ["NN"], "labels": ["NP"], "word_tags": ["NN"]}',
    '{"tags": ["NN"], "labels": ["NP"], "word_tags": {"the": 3}}',
    '{"tags": ["NN"], "labels": ["NP"], "word_tags": {"the": ["VB"]}}',
    '{"tags": ["NN"], "labels": ["NP"], "max_depth": 0}',
    '{"tags": ["NN"], "labels": ["NP"], "max_depth": 1e999}',
    '{"tags": ["NN"], "labels": ["NP"], "max_opens_in_a_row": 1099511627776}',
])
def test_a_parsing_vocabulary_names_its_damaged_file(vocabulary, tmp_path, symbols):
    """The treebank's words model (as above) and its symbols file: cut short, another JSON
    shape, a missing key, values of the wrong type or out of range; before, SentencePiece's or
    json's traceback, a KeyError or TypeError, or (max_depth 0) flat trees without a word."""
    from t2t_lite.problems.tree_vocabulary import ParsingVocabulary

    model, symbols_file = tmp_path / "words.model", tmp_path / "symbols.json"
    model.write_bytes(vocabulary.model_proto)
    symbols_file.write_text('{"tags": ["NN", "DT"], "labels": ["NP"]}')
    intact = ParsingVocabulary.load(str(model), str(symbols_file))
    assert intact.size == vocabulary.size + 2 + 2 * 1
    symbols_file.write_text(symbols)
    with pytest.raises(UserError, match=f"^{symbols_file} is damaged \\(.*\\): restore the "
                       "symbols file datagen wrote from a copy"):
        ParsingVocabulary.load(str(model), str(symbols_file))
    model.write_bytes(vocabulary.model_proto[:100])
    with pytest.raises(UserError, match=f"^{model} is not a SentencePiece model"):
        ParsingVocabulary.load(str(model), str(symbols_file))
