"""Exporting a trained model: SavedModel, CTranslate2, and the registry of engines."""
