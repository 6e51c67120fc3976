"""py3langid's model from the cache: the same answers, and never a damaged copy.

Real files throughout: the package's model, a cache folder in ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from researchstore.text import language_model
from researchstore.text.language import DETECTED_LANGUAGES
from researchstore.text.language_model import cache_path, load_identifier, read_cache

SAMPLES = [
    "Bikubene ble telt i mai, og honningen ble veid etter hver innhøsting i hagen.",
    "Bikubene vart talde i mai, og honningen vart vegen etter kvar hausting.",
    "Die Bienenstöcke wurden im Mai gezählt und der Honig nach jeder Ernte gewogen.",
    "Les ruches ont été comptées en mai et le miel pesé après chaque récolte.",
    "The hives were counted in May and the honey weighed after every harvest.",
    "Ульи пересчитали в мае, а мёд взвешивали после каждого сбора.",
    "蜂箱在五月被清点，每次收获后都称量蜂蜜。",
    "巣箱は五月に数えられ、収穫のたびに蜂蜜が量られた。",
    "Kupie zostały policzone w maju, a miód ważono po każdym zbiorze.",
    "",
    "12345 67890",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def identifiers(cache: Path) -> tuple[Any, Any]:
    """The package's identifier (which writes the cache) and the cache's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RESEARCHSTORE_CACHE_DIR", str(cache))
        package = load_identifier(DETECTED_LANGUAGES)
        cached = load_identifier(DETECTED_LANGUAGES)
    return package, cached


def _cache_file(cache: Path) -> Path:
    (written,) = cache.glob("py3langid-*.bin")
    return written


@pytest.mark.slow
def test_once_written_the_cache_is_read_not_the_package_model(
    identifiers: tuple[Any, Any], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from py3langid.langid import LanguageIdentifier

    package, cached = identifiers
    assert _cache_file(cache).stat().st_size > 40_000_000
    assert not cached.nb_ptc.flags.writeable  # read from the mapped file
    assert cached.nb_classes == package.nb_classes
    assert set(cached.nb_classes) <= set(DETECTED_LANGUAGES)

    def unpack(*args: object, **kwargs: object) -> None:
        raise AssertionError("the package's model was unpacked")

    monkeypatch.setattr(LanguageIdentifier, "from_model_file", unpack)
    monkeypatch.setenv("RESEARCHSTORE_CACHE_DIR", str(cache))
    again = load_identifier(DETECTED_LANGUAGES)
    assert [again.classify(text) for text in SAMPLES] == [
        package.classify(text) for text in SAMPLES
    ]


@pytest.mark.slow
@pytest.mark.parametrize("text", SAMPLES)
def test_the_cached_model_answers_as_the_package_model(
    identifiers: tuple[Any, Any], text: str
) -> None:
    package, cached = identifiers
    assert cached.classify(text) == package.classify(text)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_the_cached_model_answers_as_the_package_model_on_any_text(
    identifiers: tuple[Any, Any], text: str
) -> None:
    package, cached = identifiers
    assert cached.classify(text) == package.classify(text)


def _copy_cache(cache: Path, tmp_path: Path) -> tuple[Path, str]:
    source = _cache_file(cache)
    copy = tmp_path / source.name
    copy.write_bytes(source.read_bytes())
    return copy, source.name.split("-")[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage",
    ["a byte of the arrays", "the header", "the magic", "cut short", "empty", "another source"],
)
def test_a_damaged_cache_is_not_used(
    identifiers: tuple[Any, Any], cache: Path, tmp_path: Path, damage: str
) -> None:
    copy, prefix = _copy_cache(cache, tmp_path)
    digest = language_model._file_digest(_package_model())
    assert digest.startswith(prefix)
    assert read_cache(copy, source=digest, languages=DETECTED_LANGUAGES) is not None
    data = bytearray(copy.read_bytes())
    if damage == "a byte of the arrays":
        data[-1_000_000] ^= 0x01
    elif damage == "the header":
        at = data.index(b'"languages"')
        data[at + 1] = ord("L")
    elif damage == "the magic":
        data[0] ^= 0x20
    elif damage == "cut short":
        del data[len(data) // 2 :]
    elif damage == "empty":
        data.clear()
    copy.write_bytes(bytes(data))
    source = "0" * 64 if damage == "another source" else digest
    assert read_cache(copy, source=source, languages=DETECTED_LANGUAGES) is None
    assert read_cache(copy, source=digest, languages=DETECTED_LANGUAGES[:-1]) is None


@pytest.mark.slow
def test_a_damaged_cache_is_replaced_by_a_sound_one(
    identifiers: tuple[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package, _ = identifiers
    monkeypatch.setenv("RESEARCHSTORE_CACHE_DIR", str(tmp_path))
    digest = language_model._file_digest(_package_model())
    path = cache_path(digest, DETECTED_LANGUAGES)
    path.write_bytes(b"not a model")
    reloaded = load_identifier(DETECTED_LANGUAGES)
    assert all(reloaded.classify(text) == package.classify(text) for text in SAMPLES)
    assert read_cache(path, source=digest, languages=DETECTED_LANGUAGES) is not None
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


@pytest.mark.slow
def test_without_a_folder_to_write_the_package_model_is_used(
    identifiers: tuple[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package, _ = identifiers
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("RESEARCHSTORE_CACHE_DIR", str(blocked / "cache"))
    identifier = load_identifier(DETECTED_LANGUAGES)
    assert all(identifier.classify(text) == package.classify(text) for text in SAMPLES)
    assert blocked.read_text() == "not a folder"


def test_each_model_and_language_list_has_its_own_cache() -> None:
    first = cache_path("a" * 64, DETECTED_LANGUAGES)
    assert cache_path("b" * 64, DETECTED_LANGUAGES) != first
    assert cache_path("a" * 64, DETECTED_LANGUAGES[:-1]) != first
    assert cache_path("a" * 64, list(DETECTED_LANGUAGES)) == first


def _package_model() -> Path:
    from py3langid.langid import MODEL_DIR, MODEL_FILE

    return Path(MODEL_DIR, MODEL_FILE)
