"""The C speedup of snippets' word search (``_snippets.c``); see ``highlight.py``."""

def ascii_words(
    texts: list[str], prefixes: frozenset[str], stopwords: frozenset[str], /
) -> list[tuple[list[int], list[int], list[str]] | None]: ...
def fragment(
    text: str, starts: list[int], ends: list[int], max_chars: int, words: list[str], /
) -> str: ...
