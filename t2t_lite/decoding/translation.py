"""What a translator of every engine returns for an input: its text and its score (the
length-penalized log-probability; see t2t_lite.decoding.search). Kept apart from the engines so
that using one (CTranslate2) imports nothing of another (TensorFlow)."""

import collections

Translation = collections.namedtuple("Translation", "text score")
