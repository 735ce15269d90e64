"""Problems, vocabularies, users' files and the input pipeline."""
