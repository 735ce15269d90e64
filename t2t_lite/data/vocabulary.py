"""Vocabularies: text <-> ids, with the framework's fixed special ids, in Python (no TensorFlow);
each has an in-graph twin for the exported model (`in_graph()`,
t2t_lite.backends.tensorflow.vocabulary)."""

import hashlib
import io
import os
import re
import tempfile

import numpy as np
import sentencepiece
from google.protobuf.message import DecodeError
from sentencepiece import sentencepiece_model_pb2

from t2t_lite.config import EOS_ID, PAD_ID, UNK_ID
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import write_bytes_atomically


def strip_ids(ids):
    """The ids before the first EOS, without padding."""
    ids = np.asarray(ids).tolist()
    if EOS_ID in ids:
        ids = ids[: ids.index(EOS_ID)]
    return [i for i in ids if i != PAD_ID]


class Vocabulary:
    """Text <-> ids without EOS (the Problem appends it); PAD=0 and EOS=1 are never produced."""

    size = None
    _in_graph = None

    def encode(self, text):
        raise NotImplementedError

    def encode_target(self, text):
        """The ids of a target text; as a source text's unless the two sides differ (parsing)."""
        return self.encode(text)

    def decode(self, ids):
        """Text of `ids` up to the first EOS, padding ignored."""
        raise NotImplementedError

    def pieces(self, ids):
        """The token string of each id, for display (EOS is "</s>", PAD "<pad>")."""
        raise NotImplementedError

    def in_graph(self):
        """The in-graph twin of this vocabulary (a tf.Module, made once), which the exported
        model tokenizes and detokenizes with."""
        if self._in_graph is None:
            self._in_graph = self._make_in_graph()
        return self._in_graph

    def _make_in_graph(self):
        raise NotImplementedError

    def fingerprint(self):
        """A digest of the tokens, id by id: what a model_dir records of the vocabulary it was
        trained with, so that a data_dir of another corpus (another vocabulary of the same
        size) is refused rather than decoded into other words."""
        text = "\n".join(self.tokens()).encode("utf-8", "surrogateescape")
        return "sha256:" + hashlib.sha256(text).hexdigest()

    def tokens(self):
        """The distinct string of each id 0..size-1, for engines that take tokens, not ids."""
        raise NotImplementedError


# What tf.strings.split splits at, and the symbols that
# backends.tensorflow.vocabulary.InGraphSymbols accepts.
_ASCII_WHITESPACE = re.compile(r"[ \t\n\v\f\r]+")
_SYMBOL = re.compile(r"[0-9]{1,9}")


class SymbolVocabulary(Vocabulary):
    """Space-separated integer symbols 0..n-1, as in tensor2tensor's algorithmic problems.

    Symbol s has id s + 2, after PAD and EOS.
    """

    def __init__(self, num_symbols):
        self.num_symbols = num_symbols
        self.size = num_symbols + 2

    def encode(self, text):
        """Refuses what the exported model's InGraphSymbols refuses: tokens are split at ASCII
        whitespace only (a no-break space is inside a token) and have at most 9 digits."""
        ids = []
        for token in filter(None, _ASCII_WHITESPACE.split(text)):
            if not _SYMBOL.fullmatch(token) or int(token) >= self.num_symbols:
                raise UserError(f"{token!r} is not a symbol of this problem: expected integers "
                                f"0..{self.num_symbols - 1} separated by spaces")
            ids.append(int(token) + 2)
        return ids

    def decode(self, ids):
        return " ".join(str(i - 2) for i in strip_ids(ids))

    def pieces(self, ids):
        special = {PAD_ID: "<pad>", EOS_ID: "</s>"}
        return [special.get(i, str(i - 2)) for i in np.asarray(ids).tolist()]

    def _make_in_graph(self):
        from t2t_lite.backends.tensorflow.vocabulary import InGraphSymbols

        return InGraphSymbols(self.num_symbols)

    def tokens(self):
        return ["<pad>", "</s>"] + [str(symbol) for symbol in range(self.num_symbols)]


class SentencePieceVocabulary(Vocabulary):
    """SentencePiece subwords (BPE or unigram) with PAD=0, EOS=1, UNK=2 and no BOS.

    Unknown characters fall back to UTF-8 bytes and the only normalization is to drop U+FEFF
    (byte order marks left inside crawled text), so decoding gives back the text as written,
    except that runs of spaces become one and leading or trailing ones go; BLEU is computed on
    real text.
    """

    MODEL_TYPES = ("bpe", "unigram")

    def __init__(self, model):
        """`model`: the bytes of a SentencePiece model file."""
        self.model_proto = model  # for exports that ship the tokenizer
        self._processor = sentencepiece.SentencePieceProcessor(model_proto=model)
        self.size = self._processor.get_piece_size()
        spec = sentencepiece_model_pb2.ModelProto.FromString(model).trainer_spec
        self.model_type = sentencepiece_model_pb2.TrainerSpec.ModelType.Name(
            spec.model_type).lower()

    @classmethod
    def load(cls, path):
        """The model in `path`; a damaged one (cut short, overwritten) is a UserError naming
        it, not SentencePiece's ParseFromArray traceback."""
        with open(path, "rb") as f:
            model = f.read()
        try:
            vocabulary = cls(model)
        except (RuntimeError, DecodeError):
            vocabulary = None
        if vocabulary is None or vocabulary.size <= UNK_ID:
            raise UserError(f"{path} is not a SentencePiece model (damaged or cut short): "
                            "restore it from a copy; the data shards need this very vocabulary")
        return vocabulary

    @classmethod
    def train(cls, path, sentences, size, model_type="bpe"):
        """Trains a `size`-piece vocabulary on the iterable `sentences`; writes it atomically
        to `path` and returns it."""
        if model_type not in cls.MODEL_TYPES:
            raise UserError(f"unknown vocabulary type '{model_type}': use bpe or unigram")
        model = io.BytesIO()
        # A rule table rather than "identity": with no table, tf_text logs that it has none.
        with tempfile.NamedTemporaryFile("w", suffix=".tsv") as rules:
            rules.write("FEFF\t\n")
            rules.flush()
            try:
                sentencepiece.SentencePieceTrainer.train(
                    sentence_iterator=iter(sentences), model_writer=model, vocab_size=size,
                    model_type=model_type, pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID,
                    bos_id=-1, byte_fallback=True, normalization_rule_tsv=rules.name,
                    num_threads=os.cpu_count(), minloglevel=2)
            except RuntimeError as error:
                raise UserError(_size_advice(str(error), size)) from None
        proto = sentencepiece_model_pb2.ModelProto.FromString(model.getvalue())
        proto.normalizer_spec.ClearField("normalization_rule_tsv")  # the temporary file's name
        write_bytes_atomically(path, proto.SerializeToString())
        return cls(proto.SerializeToString())

    def encode(self, text):
        return self._processor.encode(text)

    def encode_sampled(self, text, alpha):
        """One random segmentation of `text` (SentencePiece's own sampling): for a BPE model,
        BPE-dropout, each merge dropped with probability `alpha`. Not seedable: SentencePiece's
        sampling does not repeat across processes."""
        return self._processor.encode(text, enable_sampling=True, nbest_size=-1, alpha=alpha)

    def decode(self, ids):
        return self._processor.decode(strip_ids(ids))

    def pieces(self, ids):
        return [self._processor.id_to_piece(i) for i in np.asarray(ids).tolist()]

    def _make_in_graph(self):
        from t2t_lite.backends.tensorflow.vocabulary import InGraphSentencePiece

        return InGraphSentencePiece(self.model_proto)

    def tokens(self):
        return [self._processor.id_to_piece(i) for i in range(self.size)]


def _size_advice(message, size):
    """SentencePiece's complaint about a vocabulary size, as the user's fix."""
    too_high = re.search(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)",
                         message)
    if too_high:
        limit = int(too_high.group(1))
        return (f"the training text supports at most {limit} subwords, not {size}: choose a "
                f"smaller vocabulary size, e.g. {_round_down(limit)}")
    too_low = re.search(r"smaller than required_chars\. \d+ vs (\d+)", message)
    if too_low:
        return (f"a vocabulary of {size} cannot hold the {too_low.group(1)} characters, bytes "
                "and special ids the training text needs: choose a vocabulary size of at least "
                f"{too_low.group(1)}")
    return f"SentencePiece could not train the vocabulary: {message}"


def _round_down(n):
    """n rounded down to two significant digits: 541 -> 540, 12345 -> 12000."""
    unit = 10 ** max(len(str(n)) - 2, 0)
    return n // unit * unit
