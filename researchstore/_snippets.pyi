"""Snippets' hot loops in C (``_snippets.c``); see ``highlight.py``."""

def words(
    texts: list[str], prefixes: frozenset[str], stopwords: frozenset[str], /
) -> list[tuple[list[int], list[int], list[str], list[int]] | None]: ...
def fragment(
    text: str, starts: list[int], ends: list[int], max_chars: int, words: list[str], /
) -> str: ...
