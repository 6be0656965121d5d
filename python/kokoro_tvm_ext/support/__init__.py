"""Helpers every layer may use: the user cache and atomic writes, file hashes, importing without torch."""
