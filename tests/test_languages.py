"""Search in the languages the material is in.

Each document is analysed in its own language (declared, else detected on its
text): stemmed for the languages Tantivy has a stemmer for, CJK runs as
character bigrams, any other language plainly. A query is analysed every
way, so it finds each document by the words of its language.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers import write_report

from researchstore import Store
from researchstore.indexes.index import INDEX_SCHEMA_VERSION, SearchIndex
from researchstore.ingest.inspect import describe_file
from researchstore.storage.index_folders import SIDECAR
from researchstore.text.analysis import MARK, analyze, index_terms, indexed_text, query_size
from researchstore.text.language import (
    ANALYSES,
    analysis_key,
    cjk_bigrams,
    cjk_bigrams_with_offsets,
    detect_language,
)

#: Sentences written for these tests, one a language, each holding the
#: inflected form that the query's base form must find.
#: (language tag, text, word in the text, query)
STEMMED = [
    ("en", "The universities shared their survey of rooftop hives.", "universities", "university"),
    ("nb", "Bøkene om elvemusling ligger på bordet i feltstasjonen.", "Bøkene", "bok"),
    ("nn", "Vi gjekk opp på fjellet og talde reirane der i juni.", "fjellet", "fjell"),
    ("sv", "Flickorna räknade humlorna i trädgården hela sommaren.", "Flickorna", "flicka"),
    ("da", "Bøgerne om vilde bier står på hylden i laboratoriet.", "Bøgerne", "bog"),
    ("de", "Die Häuser am Fluss wurden im Frühling gezählt.", "Häuser", "Haus"),
    ("fr", "Les chevaux broutaient près de la rivière au printemps.", "chevaux", "cheval"),
    ("es", "Los niños contaron las abejas del jardín en primavera.", "contaron", "contar"),
    ("pt", "As cidades do norte mediram a qualidade da água.", "mediram", "medir"),
    ("it", "I gatti dormivano accanto agli alveari del giardino.", "gatti", "gatto"),
    ("nl", "De huizen langs de rivier kregen nieuwe nestkasten.", "huizen", "huis"),
    ("fi", "Mehiläiset talvehtivat taloissa joen rannalla.", "taloissa", "talo"),
    ("ru", "Эти книги о пчёлах лежат на столе в лаборатории.", "книги", "книга"),
]

CHINESE = "今年两会期间，中国宇航员们在空间站完成了新的实验。代表们讨论了航天计划。"
CHINESE_OTHER = "国家宇航局发布了新的卫星图像，显示河流的变化。"
JAPANESE = "東京都庁の屋上で、ミツバチの巣箱を数えました。"
KOREAN = "서울시청 옥상에서 꿀벌 상자를 세었습니다."


def _page(title: str, body: str, lang: str | None) -> str:
    declared = f' lang="{lang}"' if lang else ""
    return (
        f"<!doctype html><html{declared}><head><title>{title}</title></head>"
        f"<body><main><p>{body}</p></main></body></html>"
    )


def _store_with(tmp_path: Path, pages: dict[str, tuple[str | None, str]]) -> Store:
    """A store holding one report per ``key: (declared language or None, text)``."""
    source = tmp_path / "source"
    for key, (lang, text) in pages.items():
        write_report(source, key, title=f"Notes {key}", date="2026-01-01", tags={},
                     files={"page.html": _page(f"Notes {key}", text, lang)})  # fmt: skip
    store = Store(tmp_path / "store.db", progress=False)
    store.ingest(source, name="source", progress=False)
    return store


def _search(store: Store, query: str, limit: int = 10) -> list[dict[str, Any]]:
    answer = store.call("research_chunk_search", {"query": query, "limit": limit})
    assert "result" in answer, answer
    hits: list[dict[str, Any]] = answer["result"]["hits"]
    return hits


def _keys(store: Store, hits: list[dict[str, Any]]) -> list[str]:
    keys = {row[0]: row[1] for row in store._conn.execute("SELECT report_id, key FROM reports")}
    return [keys[hit["report_id"]] for hit in hits]


def _languages(store: Store) -> dict[str, str | None]:
    rows = store._conn.execute(
        "SELECT r.key, d.language FROM documents d JOIN reports r USING (report_id)"
    )
    return {row[0]: row[1] for row in rows}


@pytest.fixture(scope="module")
def multilingual(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("multilingual")
    pages: dict[str, tuple[str | None, str]] = {lang: (lang, text) for lang, text, _, _ in STEMMED}
    pages.update(
        {
            "zh": ("zh", CHINESE),
            "zh-other": ("zh", CHINESE_OTHER),
            "ja": ("ja", JAPANESE),
            "ko": ("ko", KOREAN),
            "pl": ("pl", "Książki o pszczołach leżą na stole w pracowni."),
        }
    )
    with _store_with(folder, pages) as store:
        yield store


@pytest.mark.parametrize(("lang", "text", "word", "query"), STEMMED, ids=[s[0] for s in STEMMED])
def test_a_base_form_finds_the_inflected_form_in_each_language(
    multilingual: Store, lang: str, text: str, word: str, query: str
) -> None:
    if lang != "en":
        # English stemming alone would not have found it.
        assert analyze(word) != analyze(query)
    hits = _search(multilingual, query)
    assert _keys(multilingual, hits)[:1] == [lang]
    # The snippet highlights the word as analysed in that document's field.
    assert f"<b>{word}</b>" in hits[0]["snippet"]


def test_a_norwegian_query_needs_no_english_stemming(tmp_path: Path) -> None:
    text = "Bøkene om elvemusling ligger på bordet i feltstasjonen."
    pages = {"as-norwegian": ("nb", text), "as-english": ("en", text)}
    with _store_with(tmp_path, pages) as store:
        # The same words, declared English, are stemmed as English and missed.
        assert _keys(store, _search(store, "bok")) == ["as-norwegian"]
        assert _keys(store, _search(store, "bøker")) == ["as-norwegian"]
        # A word both analyses reduce alike finds both.
        assert set(_keys(store, _search(store, "elvemusling"))) == set(pages)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("两会", ["zh"]),
        ("航天", ["zh"]),
        ("都庁", ["ja"]),
        ("ミツバチ", ["ja"]),
        ("꿀벌", ["ko"]),
        # Inside the run 中国宇航员们; the other page has 宇航局 (space
        # agency), which shares the bigram 宇航 (and ranks below: next test).
        ("宇航员", ["zh", "zh-other"]),
        ("宇航", ["zh", "zh-other"]),
    ],
)
def test_cjk_words_inside_a_run_are_found(
    multilingual: Store, query: str, expected: list[str]
) -> None:
    assert sorted(_keys(multilingual, _search(multilingual, query))) == expected


def test_a_run_of_bigrams_ranks_pages_holding_more_of_them_first(multilingual: Store) -> None:
    # An unquoted run is its bigrams, asked for like words: the page holding
    # them all ranks first, a page sharing some follows.
    hits = _search(multilingual, "宇航员")
    assert hits[0]["score"] > 1.5 * hits[1]["score"]
    assert _keys(multilingual, _search(multilingual, "卫星 宇航员"))[0] == "zh-other"


def _scores(store: Store, query: str) -> dict[str, float]:
    hits = _search(store, query)
    return dict(zip(_keys(store, hits), (hit["score"] for hit in hits), strict=True))


def test_a_quoted_cjk_run_is_a_phrase(multilingual: Store) -> None:
    plain, quoted = _scores(multilingual, "中国宇航员"), _scores(multilingual, '"中国宇航员"')
    reversed_plain = _scores(multilingual, "宇航员中国")
    reversed_quoted = _scores(multilingual, '"宇航员中国"')
    # Its bigrams stand in order in that page: a phrase quoted, and near one
    # another unquoted (proximity), so both rank it above the same
    # characters out of order, which are no phrase anywhere.
    assert quoted["zh"] > reversed_quoted["zh"]
    assert plain["zh"] > reversed_plain["zh"]
    assert reversed_quoted["zh"] == pytest.approx(reversed_plain["zh"])
    assert quoted["zh-other"] == pytest.approx(plain["zh-other"])  # not in this one


def test_a_cjk_snippet_shows_the_text_with_the_word_marked(multilingual: Store) -> None:
    hit = _search(multilingual, "宇航员")[0]
    assert "中国<b>宇航员</b>们" in hit["snippet"]
    assert " " not in hit["snippet"]  # no bigram spaces leak out
    assert hit["snippet"].replace("<b>", "").replace("</b>", "") in CHINESE
    hit = _search(multilingual, "两会 航天")[0]
    assert "<b>两会</b>" in hit["snippet"] and "<b>航天</b>" in hit["snippet"]


def test_cjk_words_are_found_in_a_page_of_another_language(tmp_path: Path) -> None:
    text = "The delegation met the astronauts (宇航员们) after the session of 两会 in March."
    with _store_with(tmp_path, {"en": ("en", text)}) as store:
        assert _keys(store, _search(store, "宇航员")) == ["en"]
        assert _keys(store, _search(store, "astronaut")) == ["en"]


def test_another_language_is_folded_but_not_stemmed(multilingual: Store) -> None:
    assert _keys(multilingual, _search(multilingual, "ksiazki")) == ["pl"]
    assert _search(multilingual, "książka") == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Hauser", {"de"}),  # Häuser
        ("flickorna raknade", {"sv"}),  # räknade
        # French rivière and Dutch rivier share a stem: both are found.
        ("rivière", {"fr", "nl"}),
        ("riviere", {"fr", "nl"}),
        ("pchelakh", set()),  # no transliteration: Cyrillic stays Cyrillic
        ("boker", {"nb"}),  # bøker, folded, then stemmed as Norwegian
    ],
)
def test_accents_are_folded_in_every_analysis(
    multilingual: Store, query: str, expected: set[str]
) -> None:
    assert set(_keys(multilingual, _search(multilingual, query))) == expected


# Apart, the phrase's words stand farther apart than proximity reaches once
# the language's stop words are dropped (the phrase's own stop word among them).
@pytest.mark.parametrize(
    ("lang", "adjacent", "apart", "phrase"),
    [
        ("de", "Die Häuser am Fluss stehen leer, die Gärten am Hang blühen im Sommer.",
         "Die Gärten am Fluss blühen im Sommer, die Häuser am Hang stehen leer.",
         "Häusern am Fluss"),
        ("nb", "Bøkene om elvemusling ligger i hylla, heftene om laks ligger på bordet.",
         "Heftene om elvemusling ligger i hylla, bøkene om laks ligger på bordet.",
         "boka om elvemusling"),
        ("fr", "Les chevaux de la ferme broutent au pré, les vaches du village dorment.",
         "Les vaches de la ferme broutent au pré, les chevaux du village dorment.",
         "cheval de la ferme"),
    ],
)  # fmt: skip
def test_a_phrase_ranks_its_words_in_order_first_in_each_language(
    tmp_path: Path, lang: str, adjacent: str, apart: str, phrase: str
) -> None:
    pages: dict[str, tuple[str | None, str]] = {
        "adjacent": (lang, adjacent),
        "apart": (lang, apart),
    }
    with _store_with(tmp_path, pages) as store:
        # The same words in both; near one another, in order, in one only:
        # it ranks first unquoted (proximity) and quoted (a phrase).
        unquoted = _scores(store, phrase)
        assert unquoted["adjacent"] > unquoted["apart"]
        quoted = _scores(store, f'"{phrase}"')
        assert quoted["adjacent"] > quoted["apart"] == pytest.approx(unquoted["apart"])


def test_a_query_in_two_languages_finds_both(multilingual: Store) -> None:
    assert set(_keys(multilingual, _search(multilingual, "Haus cheval"))) == {"de", "fr"}


# -- stop words -------------------------------------------------------------------

#: Pages written for these tests: two about the query's words, others that
#: hold only its stop word, in their language, in another, or as a content
#: word of another ("men" is Norwegian for "but").
STOP_WORD_PAGES: dict[str, tuple[str | None, str]] = {
    "nb-book": ("nb", "Boka om naturvern i Nordland kom ut i fjor, skrevet av to biologer."),
    "nb-nature": ("nb", "Naturvern handler om å ta vare på myrene og skogene langs kysten."),
    "nb-weather": ("nb", "Vi snakket om været og om fisket, men det regnet hele kvelden."),
    "de-house": ("de", "Das Haus am See hat einen großen Garten mit alten Apfelbäumen."),
    "de-bread": ("de", "Wir kauften Brot und Käse und tranken danach einen Tee am Hafen."),
    "en-men": ("en", "Older men walked the coastal path every morning before the ferry left."),
}


@pytest.fixture(scope="module")
def stop_word_pages(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with _store_with(tmp_path_factory.mktemp("stop-words"), STOP_WORD_PAGES) as store:
        yield store


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # "om" is a Norwegian stop word: the page that merely holds it is no hit.
        ("bok om naturvern", ["nb-book", "nb-nature"]),
        ("Haus und Garten", ["de-house"]),  # "und": a German one
        # An English word, a Norwegian stop word: English pages are asked for it.
        ("men", ["en-men"]),
        ("om", []),
    ],
)
def test_each_language_drops_its_own_stop_words(
    stop_word_pages: Store, query: str, expected: list[str]
) -> None:
    assert _keys(stop_word_pages, _search(stop_word_pages, query)) == expected


def test_a_phrase_across_a_stop_word_matches_and_is_highlighted(stop_word_pages: Store) -> None:
    hits = _search(stop_word_pages, '"bok om naturvern"')
    assert _keys(stop_word_pages, hits)[0] == "nb-book"
    assert hits[0]["score"] > 2 * hits[1]["score"]  # the phrase, in the first only
    # The snippet is read as Norwegian: "Boka" is the query's "bok".
    assert "<b>Boka</b>" in hits[0]["snippet"] and "<b>naturvern</b>" in hits[0]["snippet"]


@pytest.mark.parametrize(
    ("analysis", "stop_word", "text"),
    [
        ("no", "om", "Boka om naturvern"),
        ("no", "på", "Fuglene på øya"),  # spelt with its accent
        ("sv", "och", "Husen och trädgårdarna"),
        ("da", "ikke", "Bøgerne er ikke her"),
        ("de", "und", "Häuser und Gärten"),
        ("fr", "avec", "Les chevaux avec les vaches"),
        ("es", "los", "Los niños del jardín"),
        ("pt", "não", "As cidades não mediram"),
        ("it", "della", "I gatti della casa"),
        ("nl", "het", "Het huis langs de rivier"),
        ("fi", "ollut", "Talo on ollut tyhjä"),
        ("ru", "не", "Эти книги не о пчёлах"),
    ],
)
def test_the_index_and_the_query_drop_the_same_stop_words(
    analysis: str, stop_word: str, text: str
) -> None:
    assert index_terms(stop_word, analysis) == []
    assert indexed_text(stop_word, analysis) == ""
    assert len(index_terms(text, analysis)) < len(index_terms(text))
    assert analyze(indexed_text(text, analysis)) == index_terms(text, analysis)
    # English keeps it (it is no English stop word), so the query's size is English's.
    assert index_terms(stop_word) != []
    assert query_size(text) == (len(index_terms(text)), 0)


def test_a_word_another_language_drops_is_weighed_as_common_as_it_is_there(
    tmp_path: Path,
) -> None:
    # "die" is in every German page (a stop word there, dropped) and in one
    # English page (a verb). Asked of English pages, it weighs as a word four
    # pages of five hold: the German page holding the query's other word
    # ranks first, far above the English page holding "die" alone.
    german = ["Die Katze schläft.", "Die Kinder lachen.", "Die Sonne scheint hell."]
    pages: dict[str, tuple[str | None, str]] = {
        f"de-{number}": ("de", text) for number, text in enumerate(german)
    }
    pages["de-houses"] = ("de", "Die Häuser stehen am Wasser.")
    pages["en-die"] = ("en", "Some seedlings die early in spring.")
    with _store_with(tmp_path, pages) as store:
        scores = _scores(store, "die Häuser")
        assert max(scores, key=lambda key: scores[key]) == "de-houses"
        assert scores["de-houses"] > 2 * scores["en-die"]


# -- choosing the language ------------------------------------------------------


def test_the_declared_language_wins_over_detection(tmp_path: Path) -> None:
    norwegian = "Bøkene om elvemusling ligger på bordet i feltstasjonen, og vi leser dem hver dag."
    pages = {"declared-en": ("en", norwegian), "undeclared": (None, norwegian),
             "declared-nb-NO": ("nb-NO", norwegian)}  # fmt: skip
    with _store_with(tmp_path, pages) as store:
        assert _languages(store) == {
            "declared-en": "en",
            "undeclared": "no",  # detected
            "declared-nb-NO": "nb-NO",  # kept as declared; analysed as Norwegian
        }
        assert sorted(_keys(store, _search(store, "bok"))) == ["declared-nb-NO", "undeclared"]
        # The tools return the language stored: declared, else detected.
        for hit in _search(store, "bok"):
            answer = store.call("get_document", {"id": hit["document_id"]})
            assert answer["result"]["document"]["language"] in ("no", "nb-NO")


def test_a_caption_and_a_text_declare_their_language(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "talk.vtt").write_text(
        "WEBVTT\nLanguage: de\n\n00:00:01.000 --> 00:00:04.000\nDie Häuser am Fluss.\n"
    )
    (source / "notes.txt").write_text("---\nlang: fr\n---\nLes chevaux broutaient.\n")
    with Store(tmp_path / "store.db", progress=False) as store:
        store.ingest(source, name="source", progress=False)
        assert _languages(store) == {"talk.vtt": "de", "notes.txt": "fr"}
        assert _keys(store, _search(store, "Haus")) == ["talk.vtt"]
        assert _keys(store, _search(store, "cheval")) == ["notes.txt"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello", None),  # too few letters to tell
        ("varroa mite", None),
        ("12:00 --> 13:00, 14:00 --> 15:00, 2025-03-01", None),
        ("", None),
        ("The colonies were inspected every week during the spring survey.", "en"),
        ("Vi telte kubene i mars, og alle bikubene hadde overlevd vinteren godt.", "no"),
        ("Eg likar å gå tur i fjellet om sommaren, og det gjer ho òg.", "nn"),
        ("Die Bienen wurden im Frühling jede Woche im Garten gezählt.", "de"),
        ("Les abeilles ont été comptées chaque semaine au printemps.", "fr"),
        (CHINESE, "zh"),
        (JAPANESE, "ja"),
        (KOREAN, "ko"),
        # Long enough for the look at English function words (40 words).
        (" ".join(STEMMED[0][1] for _ in range(6)), "en"),
        (" ".join(STEMMED[5][1] for _ in range(6)) + " the mites of the hive", "de"),
    ],
)
def test_detection(text: str, expected: str | None) -> None:
    assert detect_language(text) == expected


def test_a_short_undeclared_text_is_analysed_as_english(tmp_path: Path) -> None:
    with _store_with(tmp_path, {"short": (None, "Mites counted.")}) as store:
        assert _languages(store) == {"short": None}
        assert _keys(store, _search(store, "mite")) == ["short"]


@pytest.mark.parametrize(
    ("language", "analysis"),
    [
        (None, "en"),
        ("en", "en"),
        ("EN-us", "en"),
        ("nb", "no"),
        ("nb-NO", "no"),
        ("nn", "no"),
        ("no", "no"),
        ("de-CH", "de"),
        ("pt-BR", "pt"),
        ("zh-Hant-TW", "cjk"),
        ("ja", "cjk"),
        ("ko", "cjk"),
        ("pl", "plain"),
        ("x-klingon", "plain"),
    ],
)
def test_a_language_tag_chooses_its_analysis(language: str | None, analysis: str) -> None:
    assert analysis_key(language) == analysis


def test_parse_shows_the_detected_language(tmp_path: Path) -> None:
    page = tmp_path / "side.html"
    page.write_text(_page("Bier", "Die Bienen wurden im Frühling jede Woche gezählt.", None))
    assert describe_file(page)["language"] == "de"
    page.write_text(_page("Bier", "Die Bienen wurden im Frühling jede Woche gezählt.", "da"))
    assert describe_file(page)["language"] == "da"


# -- the pieces -----------------------------------------------------------------


def test_cjk_runs_become_bigrams_and_map_back() -> None:
    assert cjk_bigrams("中国宇航员") == " 中国 国宇 宇航 航员 "
    assert cjk_bigrams("会") == " 会 "
    assert cjk_bigrams("no runs here") == "no runs here"
    text = "abc 宇航员们, ok"
    indexed, origins = cjk_bigrams_with_offsets(text)
    assert indexed == cjk_bigrams(text)
    assert origins is not None and len(origins) == len(indexed)
    assert all(indexed[at] == text[origin] for at, origin in enumerate(origins) if origin >= 0)
    assert cjk_bigrams_with_offsets("plain") == ("plain", None)


@pytest.mark.parametrize("analysis", [a for a in ANALYSES if a != "en"])
def test_the_index_leaves_the_terms_of_another_language_as_they_are(analysis: str) -> None:
    # The index analyses every text as English; a chunk of another language
    # reaches it as its own terms, marked so that nothing changes them.
    texts = [text for _, text, _, _ in STEMMED] + [CHINESE, JAPANESE, KOREAN]
    texts.append("İnsan hakları, Ağaçlar ve Çiçekler; Straße, œuvre, Ærø, ﬁnance")
    for text in texts:
        terms = index_terms(text, analysis)
        assert all(term.endswith(MARK) for term in terms)
        assert analyze(indexed_text(text, analysis)) == terms
    # English chunks are given to the index as they are.
    assert indexed_text("The hives", "en") == "The hives"


def test_query_size_counts_cjk_bigrams_and_every_analysis_asks_no_more() -> None:
    assert query_size("宇航员") == (2, 0)
    assert query_size('"中国宇航员" bees') == (5, 1)
    # English stop words are dropped from the query in every analysis.
    assert query_size("the of and") == (0, 0)


# -- the index ------------------------------------------------------------------


def test_an_index_of_the_previous_schema_is_rebuilt_with_languages(tmp_path: Path) -> None:
    assert SearchIndex.schema_version == INDEX_SCHEMA_VERSION >= 5  # 5: stop words by language
    previous = INDEX_SCHEMA_VERSION - 1
    pages: dict[str, tuple[str | None, str]] = {"nb": ("nb", STEMMED[1][1]), "zh": ("zh", CHINESE)}
    with _store_with(tmp_path, pages):
        pass
    sidecar = tmp_path / "store.db.index" / SIDECAR
    data = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**data, "index_schema": previous}))
    # The copy the store file keeps is of that schema too, as an older
    # researchstore left it.
    with sqlite3.connect(tmp_path / "store.db") as conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'index_packed_schema'", (str(previous),)
        )
    with Store(tmp_path / "store.db", progress=False) as store:
        assert "index rebuilt on opening (older index schema)" in store.sync.repairs
        assert _keys(store, _search(store, "bok")) == ["nb"]
        assert _keys(store, _search(store, "宇航员")) == ["zh"]
