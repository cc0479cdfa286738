"""Relational algebra over Z-sets: the form views take between parsing and incrementalization."""
