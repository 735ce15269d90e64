"""Generated algorithmic problems in the spirit of tensor2tensor's: no download, learnable in
minutes.

Sequences are space-separated integer symbols. The splits are disjoint by construction: a sequence
belongs to the split its hash selects, so held-out accuracy is never inflated by memorized examples.
"""

import random
import zlib

from t2t_lite.data.problem import Problem
from t2t_lite.data.vocabulary import SymbolVocabulary
from t2t_lite.registry import register_problem

_SPLIT_OF_HASH = {0: "dev", 1: "test"}  # hash % 20; every other value is train


def _split_of(sequence):
    return _SPLIT_OF_HASH.get(zlib.crc32(bytes(sequence)) % 20, "train")


class AlgorithmicProblem(Problem):
    """Random symbol sequences of length 1..max_sequence_length mapped by `target`."""

    num_symbols = 10
    max_sequence_length = 20
    num_examples = {"train": 100_000, "dev": 1_000, "test": 1_000}
    num_shards = {"train": 4, "dev": 1, "test": 1}
    self_contained = True

    def target(self, source):
        raise NotImplementedError

    def vocabulary(self, data_dir):
        return SymbolVocabulary(self.num_symbols)

    def text_pairs(self, split, raw_dir):
        rng = random.Random(f"{self.name}-{split}")
        produced = 0
        while produced < self.num_examples[split]:
            length = rng.randint(1, self.max_sequence_length)
            source = self.random_source(rng, length)
            if _split_of(source) == split:
                produced += 1
                yield _text(source), _text(self.target(source))

    def expected_pairs(self, split, raw_dir):
        return self.num_examples[split]

    def random_source(self, rng, length):
        return [rng.randrange(self.num_symbols) for _ in range(length)]


def _text(symbols):
    return " ".join(map(str, symbols))


@register_problem
class AlgorithmicCopy(AlgorithmicProblem):
    """The target is the source (tensor2tensor's algorithmic_identity)."""

    def target(self, source):
        return list(source)


@register_problem
class AlgorithmicReverse(AlgorithmicProblem):
    """The target is the source reversed: the embedded demo."""

    def target(self, source):
        return source[::-1]


@register_problem
class AlgorithmicAddition(AlgorithmicProblem):
    """Two decimal numbers, least significant digit first, joined by symbol 10 ('+'); the target
    is their sum, least significant digit first."""

    num_symbols = 11
    _PLUS = 10

    def random_source(self, rng, length):
        digits = [rng.randrange(10) for _ in range(max(2, length))]
        first = rng.randint(1, len(digits) - 1)
        return digits[:first] + [self._PLUS] + digits[first:]

    def target(self, source):
        plus = source.index(self._PLUS)
        total = _number(source[:plus]) + _number(source[plus + 1:])
        return [int(d) for d in reversed(str(total))]


def _number(little_endian_digits):
    return int("".join(map(str, reversed(little_endian_digits))))
