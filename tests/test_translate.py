"""The WMT problems on mocked tensorflow-datasets: the right data sets and splits reach the shards
through a shared SentencePiece vocabulary that is built once and never silently replaced."""

import os

import pytest
import requests
import tensorflow as tf
import tensorflow_datasets as tfds

from t2t_lite import registry
from t2t_lite.config import EOS_ID
from t2t_lite.backends.tensorflow.pipeline import read_examples
from t2t_lite.utils.errors import UserError

WORDS = {
    "en": "the old house small green garden today we see water bread good night".split(),
    "de": "das alte Haus kleine grüne Garten heute wir sehen Wasser Brot gute Nacht".split(),
    "fr": "la vieille maison petite verte jardin aujourd'hui nous voyons eau pain bonne nuit"
          .split(),
}
MOCK_EXAMPLES = {"train": 120, "validation": 7, "test": 5}


def mock_pairs(config, split):
    """Distinct sentences per data set, language and split: '<config> <split> <i>: words'."""
    sentences = []
    for i in range(MOCK_EXAMPLES[split]):
        sentence = {}
        for language in config.split("/")[1].split("-"):
            words = [WORDS[language][(i * 7 + k * 3) % len(WORDS[language])]
                     for k in range(2 + i % 6)]
            sentence[language] = f"{config} {split} {i}: {' '.join(words)}"
        sentences.append(sentence)
    return sentences


def mock_as_dataset(builder, split, **kwargs):
    pairs = mock_pairs(f"{builder.name}/{builder.builder_config.name}", split)
    signature = {language: tf.TensorSpec([], tf.string) for language in pairs[0]}
    return tf.data.Dataset.from_generator(lambda: iter(pairs), output_signature=signature)


def small(name, **changes):
    """The registered problem with a vocabulary the small mock corpus supports."""
    problem_class = registry.problems.get(name)
    attributes = {"name": name, "vocab_size": 300, **changes}
    return type(problem_class.__name__, (problem_class,), attributes)()


def decoded_shards(problem, split, data_dir):
    vocabulary = problem.vocabulary(data_dir)
    return sorted(
        tuple(vocabulary.decode(example[side]) for side in ("inputs", "targets"))
        for example in read_examples(problem.shard_paths(split, data_dir), shuffle=False)
        .as_numpy_iterator())


@pytest.mark.parametrize("name, dataset, target", [
    ("translate_ende_wmt32k", "wmt_t2t_translate/de-en", "de"),
    ("translate_enfr_wmt32k", "wmt14_translate/fr-en", "fr"),
])
def test_wmt_datagen_writes_the_tfds_splits_through_a_shared_vocabulary(
        name, dataset, target, tmp_path):
    problem = small(name)
    assert registry.problem(name).vocab_size == 2**15
    data_dir = str(tmp_path / "data")
    with tfds.testing.mock_data(as_dataset_fn=mock_as_dataset):
        problem.generate_data(data_dir, str(tmp_path / "raw"))
    assert len(problem.shard_paths("train", data_dir)) == 100
    for split, tfds_split in (("train", "train"), ("dev", "validation"), ("test", "test")):
        expected = sorted((pair["en"], pair[target]) for pair in mock_pairs(dataset, tfds_split))
        assert decoded_shards(problem, split, data_dir) == expected
    examples = read_examples(problem.shard_paths("dev", data_dir), shuffle=False)
    for example in examples.as_numpy_iterator():
        assert example["inputs"][-1] == example["targets"][-1] == EOS_ID
    vocabulary = problem.vocabulary(data_dir)
    assert (vocabulary.size, vocabulary.model_type) == (300, "bpe")


def data_file_stamps(data_dir):
    """{name: mtime} of data_dir's files but the lock datagen holds while it writes."""
    return {name: os.stat(os.path.join(data_dir, name)).st_mtime_ns
            for name in os.listdir(data_dir) if not name.endswith(".datagen.lock")}


def test_the_vocabulary_is_reused_and_a_different_request_is_refused(tmp_path):
    data_dir, raw_dir = str(tmp_path / "data"), str(tmp_path / "raw")
    with tfds.testing.mock_data(as_dataset_fn=mock_as_dataset):
        small("translate_ende_wmt32k").generate_data(data_dir, raw_dir)
        stamps = data_file_stamps(data_dir)
        small("translate_ende_wmt32k").generate_data(data_dir, raw_dir)
        assert data_file_stamps(data_dir) == stamps
        for changes, message in [({"vocab_size": 320}, "300-piece bpe vocabulary, not the 320"),
                                 ({"vocab_type": "unigram"}, "not the 300-piece unigram")]:
            with pytest.raises(UserError, match=message):
                small("translate_ende_wmt32k", **changes).generate_data(data_dir, raw_dir)
        vocabulary = small("translate_ende_wmt32k").vocabulary_path(data_dir)
        os.remove(vocabulary)
        with pytest.raises(UserError, match="shards but not the vocabulary they were encoded"):
            small("translate_ende_wmt32k").generate_data(data_dir, raw_dir)
    assert not os.path.exists(vocabulary)


def test_downloads_go_to_raw_dir_and_archives_there_are_used_without_network(tmp_path,
                                                                            monkeypatch):
    calls = []

    def offline(builder, download_dir, download_config):
        calls.append((builder.data_dir, download_dir, download_config.manual_dir))
        raise requests.exceptions.ConnectionError("Failed to resolve 'www.statmt.org'")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", offline)
    raw_dir = str(tmp_path / "raw")
    with pytest.raises(UserError, match="could not download wmt14_translate/fr-en into .*raw "
                                        r"\(ConnectionError\): check the network"):
        small("translate_enfr_wmt32k").generate_data(str(tmp_path / "data"), raw_dir)
    # TFDS prepares into raw_dir and takes archives found in its manual_dir instead of
    # downloading them.
    (prepared, downloads, manual), = calls
    assert prepared.startswith(os.path.join(raw_dir, "wmt14_translate", "fr-en"))
    assert (str(downloads), str(manual)) == (os.path.join(raw_dir, "downloads"), raw_dir)
    assert data_file_stamps(tmp_path / "data") == {}


def test_translation_decodes_are_scored_with_sacrebleu():
    import sacrebleu

    hypotheses = ["Das Haus ist klein.", "Er sagte: »Ja«."]
    references = ["Das Haus ist sehr klein.", "Er sagte: »Ja«."]
    metrics = registry.problem("translate_ende_wmt32k").decode_metrics(hypotheses, references)
    assert metrics == {"bleu": pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score),
                       "chrf": pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score)}
    assert 0 < metrics["bleu"] < 100
