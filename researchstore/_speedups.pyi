"""Hot loops in C (``_speedups.c``); see ``speedups.py``."""

def words(
    texts: list[str], prefixes: frozenset[str], stopwords: frozenset[str], /
) -> list[tuple[list[int], list[int], list[str], list[int]] | None]: ...
def fragment(
    text: str, starts: list[int], ends: list[int], max_chars: int, words: list[str], /
) -> str: ...
def count_tokens(text: str, stopwords: frozenset[str], /) -> int | None: ...
def choose(
    found: list[tuple[list[int], list[int], list[str], list[str]] | None],
    stems: list[list[str]],
    terms: list[frozenset[str]],
    /,
) -> list[tuple[list[int], list[int], list[str] | None] | None]: ...
