"""Decoding: the search, the Translator and its engines, attention weights."""
