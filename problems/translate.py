"""Translation problems: text pairs -> one SentencePiece vocabulary shared by both languages (as
in the paper) -> sharded TFRecords; the WMT data of tensor2tensor's problems through
tensorflow-datasets.
"""

import glob
import logging
import os

from t2t_lite.data.corpus import sample_sentences
from t2t_lite.data.problem import Problem
from t2t_lite.data.vocabulary import SentencePieceVocabulary
from t2t_lite.evaluation.metrics import bleu, bleu_tokenizer_for, chrf
from t2t_lite.registry import register_problem
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import write_bytes_atomically

logger = logging.getLogger("t2t_lite")


class TranslationProblem(Problem):
    """Subclasses define `text_pairs`; the vocabulary is learned from the training pairs, and
    decodes are scored with sacreBLEU on detokenized text."""

    vocab_size = 2**15  # tensor2tensor's "32k"
    vocab_type = "bpe"
    # Pairs sampled to train the vocabulary: bounds its time and memory on large corpora.
    vocab_sample_pairs = 500_000
    num_shards = {"train": 100, "dev": 1, "test": 1}
    metric_names = ("bleu", "chrf")
    target_language = None  # an ISO 639-1 code; it picks BLEU's tokenizer (zh, ja-mecab, 13a)

    def vocabulary_path(self, data_dir):
        return sentencepiece_path(self, data_dir)

    def vocabulary(self, data_dir):
        return SentencePieceVocabulary.load(sentencepiece_path(self, data_dir, must_exist=True))

    def bleu_tokenizer(self, requested=None):
        """`requested` (--bleu_tokenize), or the target language's tokenizer."""
        return requested or bleu_tokenizer_for(self.target_language)

    def decode_metrics(self, hypotheses, references, *, repaired=0, bleu_tokenize=None):
        """Corpus BLEU (cased, with the target language's tokenizer unless `bleu_tokenize`) and
        chrF, in 0..100."""
        score, _ = bleu(hypotheses, references, self.bleu_tokenizer(bleu_tokenize))
        return {"bleu": score.score, "chrf": chrf(hypotheses, references)}

    def build_vocabulary(self, data_dir, raw_dir):
        """Trains the vocabulary once; an existing one is reused if it is the one requested."""
        path = self.vocabulary_path(data_dir)
        if os.path.exists(path):
            vocabulary = SentencePieceVocabulary.load(path)
            if (vocabulary.size, vocabulary.model_type) != (self.vocab_size, self.vocab_type):
                raise UserError(
                    f"{path} is a {vocabulary.size}-piece {vocabulary.model_type} vocabulary, "
                    f"not the {self.vocab_size}-piece {self.vocab_type} one asked for: use "
                    f"another --data_dir, or delete {data_dir}/{self.name}* to rebuild")
            return vocabulary
        if glob.glob(os.path.join(glob.escape(data_dir), f"{self.name}-*-of-?????")):
            raise UserError(
                f"{data_dir} has {self.name} shards but not the vocabulary they were encoded "
                f"with ({path}): restore it, or delete {data_dir}/{self.name}* to start over")
        logger.info("training a %d-piece %s vocabulary on up to %s training pairs",
                    self.vocab_size, self.vocab_type, f"{self.vocab_sample_pairs:,}")
        sentences = sample_sentences(self.text_pairs("train", raw_dir), self.vocab_sample_pairs)
        if not sentences:
            raise UserError(f"{self.name} has no training text to learn a vocabulary from")
        return SentencePieceVocabulary.train(path, sentences, self.vocab_size, self.vocab_type)

    def adopt_vocabulary(self, data_dir, vocabulary):
        """Makes `vocabulary` (a SentencePieceVocabulary: another model's) the one this problem's
        data in data_dir is encoded with, in place of learning one (datagen --vocab_from)."""
        path = self.vocabulary_path(data_dir)
        if not os.path.exists(path):
            write_bytes_atomically(path, vocabulary.model_proto)
        elif SentencePieceVocabulary.load(path).model_proto != vocabulary.model_proto:
            raise UserError(f"{path} is another vocabulary than that of --vocab_from: use "
                            f"another --data_dir, or delete {data_dir}/{self.name}* to remake it")


def sentencepiece_path(problem, data_dir, must_exist=False):
    """Where `problem` keeps its SentencePiece model in data_dir; with must_exist, a missing one
    is a UserError saying how to make it."""
    path = os.path.join(data_dir, f"{problem.name}.sentencepiece.model")
    if must_exist and not os.path.exists(path):
        raise UserError(f"no vocabulary {path}: run {problem.datagen_command(data_dir)}")
    return path


class TfdsTranslationProblem(TranslationProblem):
    """Pairs of a tensorflow-datasets translation data set, prepared in raw_dir.

    raw_dir is the TFDS data_dir (a ~/tensorflow_datasets that already holds the data set is
    used as it is), its downloads go to raw_dir/downloads, and archives already downloaded
    by hand are taken from raw_dir itself under their original names, without network.
    """

    tfds_name = None
    source_language = None
    target_language = None
    _TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}

    def text_pairs(self, split, raw_dir):
        import tensorflow_datasets as tfds  # slow to import; only datagen needs it

        builder = tfds.builder(self.tfds_name, data_dir=raw_dir)
        try:
            builder.download_and_prepare(
                download_dir=os.path.join(raw_dir, "downloads"),
                download_config=tfds.download.DownloadConfig(manual_dir=raw_dir))
        except OSError as error:  # requests' ConnectionError is one
            raise UserError(
                f"could not download {self.tfds_name} into {raw_dir} ({type(error).__name__}): "
                "check the network, or put the data set's archives in --raw_dir") from None
        examples = builder.as_dataset(split=self._TFDS_SPLITS[split], shuffle_files=False)
        for example in examples.as_numpy_iterator():
            yield (example[self.source_language].decode("utf-8"),
                   example[self.target_language].decode("utf-8"))

    def expected_pairs(self, split, raw_dir):
        """The prepared data set's own count (text_pairs has prepared it by then)."""
        import tensorflow_datasets as tfds

        splits = tfds.builder(self.tfds_name, data_dir=raw_dir).info.splits
        name = self._TFDS_SPLITS[split]
        return splits[name].num_examples if name in splits else None  # mock data has none


@register_problem
class TranslateEndeWmt32k(TfdsTranslationProblem):
    """WMT English -> German as in tensor2tensor and the paper: europarl v7, commoncrawl and
    news-commentary v13 to train, newstest2013 for dev, newstest2014 for test."""

    tfds_name = "wmt_t2t_translate/de-en"
    source_language = "en"
    target_language = "de"


@register_problem
class TranslateEnfrWmt32k(TfdsTranslationProblem):
    """WMT14 English -> French: europarl v7, commoncrawl, UN, news-commentary v9 and giga-fren to
    train, newstest2013 for dev, newstest2014 for test."""

    tfds_name = "wmt14_translate/fr-en"
    source_language = "en"
    target_language = "fr"
