"""Prompt templates of the PACEvolve agent (``$name`` placeholders; a package so the files ship)."""
