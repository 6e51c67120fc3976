"""Main-content selection and edge trimming decided by structure, in any language.

Each page here is small and written for the rule it checks: the wrong region
must lose on link density, paragraph text or position, never because of an
English word in it.
"""

from __future__ import annotations

import json

import pytest

from researchstore.ingest.decode import decode_text
from researchstore.ingest.edges import trim_edges
from researchstore.ingest.html import parse_html
from researchstore.ingest.html_rules import visible_date
from researchstore.ingest.model import Block

#: Norwegian prose, long enough to be a paragraph of an article.
NORSK = (
    "Forskerne talte humler langs elvebredden hver morgen i tre uker, og de fant "
    "flere arter enn noen gang tidligere registrert i kommunen. "
)
DEUTSCH = (
    "Die Forscherinnen zählten an jedem Morgen die Hummeln am Ufer, und sie fanden "
    "mehr Arten als je zuvor in der Gemeinde gezählt wurden. "
)


def page(body: str, head: str = "") -> bytes:
    return f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>".encode()


def text_of(data: bytes) -> str:
    return "\n".join(block.text for block in parse_html(data).blocks)


def links(words: list[str]) -> str:
    return "".join(f'<li><a href="/{word}">{word} {word}</a></li>' for word in words)


STRIP = ["Valgresultat", "Strømpris", "Fotballkamp", "Værmelding", "Kommunestyret", "Sykehuset"]


def test_a_related_links_strip_after_the_article_goes_by_its_links_not_its_words() -> None:
    body = (
        f"<div><h1>Humler ved elva</h1><p>{NORSK * 3}</p><p>{NORSK * 2}</p>"
        f"<h3>Les også</h3><ul>{links(STRIP)}</ul></div>"
    )
    text = text_of(page(body))
    assert "flere arter" in text
    assert "Strømpris" not in text and "Valgresultat" not in text
    # The heading of the strip goes with it: its section is left empty.
    assert "Les også" not in text


def test_a_link_list_inside_the_article_text_goes_but_a_plain_list_stays() -> None:
    body = (
        f"<article><p>{DEUTSCH * 3}</p><ul>{links(STRIP)}</ul>"
        "<ul><li>Erdhummel</li><li>Steinhummel</li><li>Ackerhummel</li></ul>"
        f"<p>{DEUTSCH * 2}</p></article>"
    )
    text = text_of(page(body))
    assert "Steinhummel" in text
    assert "Fotballkamp" not in text


def test_a_byline_and_date_line_above_the_article_goes_and_gives_the_date() -> None:
    body = (
        "<div><h1>Hummeln am Ufer</h1><p>Von Anna Berg | 19.03.2019 11:45</p>"
        f"<p>{DEUTSCH * 3}</p><p>{DEUTSCH * 2}</p></div>"
    )
    doc = parse_html(page(body))
    text = "\n".join(block.text for block in doc.blocks)
    assert "Hummeln am Ufer" in text and "mehr Arten" in text
    assert "Anna Berg" not in text
    assert (doc.date, doc.date_source) == ("2019-03-19", "byline")


def test_a_closing_line_of_the_article_stays() -> None:
    body = f"<div><p>{NORSK * 3}</p><p>{NORSK * 2}</p><p>Hilsen Kari</p></div>"
    assert text_of(page(body)).endswith("Hilsen Kari")


def test_a_section_of_a_manual_named_like_chrome_keeps_its_code_and_lists() -> None:
    # Manuals name each section for its title, so a word such as "sharing"
    # can name one; its text is steps, a list and code, not long
    # paragraphs. Code is what no share strip holds.
    steps = "".join(f"<li>Steg {n}: kopier filen til mappen</li>" for n in range(8))
    code = "\n".join(f"$ hg push --rev {n} ssh://server/repo" for n in range(9))
    body = (
        '<div class="body"><div class="section" id="intro"><h1>Manual</h1>'
        + "".join(f"<p>{DEUTSCH * 2}</p>" for _ in range(4))
        + '</div><div class="section" id="sharing-with-other-developers">'
        f"<h2>Sharing with other developers</h2><p>{NORSK * 2}</p>"
        f"<ul>{steps}</ul><pre>{code}</pre></div></div>"
    )
    text = text_of(page(body))
    assert "mehr Arten" in text
    assert "Sharing with other developers" in text and "flere arter" in text
    assert "Steg 7" in text and "--rev 8" in text


def test_a_wrapper_whose_class_reads_like_chrome_keeps_the_article_it_holds() -> None:
    # "share" and "widget" in a layout wrapper's classes: the prose decides.
    body = (
        '<nav><a href="/">Start</a></nav>'
        f'<div class="entry share"><div class="elementor-widget-container">'
        f"<p>{DEUTSCH * 3}</p><p>{DEUTSCH * 3}</p></div></div>"
        '<div class="share"><a href="/f">Teilen</a></div>'
    )
    text = text_of(page(body))
    assert "mehr Arten" in text
    assert "Teilen" not in text


def test_a_declared_teaser_does_not_stand_in_for_the_story() -> None:
    # The only <article> is a teaser card of links; the story is a plain div.
    teaser = f'<article><a href="/x">{"Kort nytt om været i morgen. " * 2}</a></article>'
    body = f'{teaser}<div id="x"><p>{NORSK * 4}</p><p>{NORSK * 3}</p></div>'
    text = text_of(page(body))
    assert "flere arter" in text
    assert "været i morgen" not in text


def test_the_article_body_the_page_declares_wins_over_longer_comments() -> None:
    comments = "".join(
        f"<div><p>{DEUTSCH * 2}Leser {n} meint das auch.</p></div>" for n in range(8)
    )
    body = (
        f'<div><div itemprop="articleBody"><p>{NORSK * 3}</p><p>{NORSK * 2}</p></div>'
        f'<div id="leserbriefe">{comments}</div></div>'
    )
    text = text_of(page(body))
    assert "flere arter" in text
    assert "meint das auch" not in text


def test_a_declared_article_body_keeps_its_lead_paragraph() -> None:
    lead = "Ein kurzer Vorspann fasst die Geschichte zusammen, bevor der Text beginnt."
    body = (
        f'<div class="story"><h1>Hummeln</h1><p class="lead">{lead}</p>'
        f'<div itemprop="articleBody"><p>{DEUTSCH * 4}</p><p>{DEUTSCH * 3}</p></div>'
        f'<ul class="tags">{links(STRIP)}</ul></div>'
    )
    text = text_of(page(body))
    assert lead in text and "mehr Arten" in text
    assert "Strømpris" not in text


def test_an_article_body_declared_in_parts_is_read_whole() -> None:
    # articleBody on each run of paragraphs, with a picture between: every
    # part is the article, up to the end of the last one.
    part = '<section itemprop="articleBody">{}</section>'
    body = (
        '<div class="story"><h1>Hummeln</h1>'
        + part.format(f"<p>Erster Teil. {DEUTSCH * 3}</p><p>{DEUTSCH * 2}</p>")
        + '<figure><img src="/h.jpg"><figcaption>Eine Hummel</figcaption></figure>'
        + part.format(f"<p>Zweiter Teil. {NORSK * 3}</p><p>{NORSK * 2}</p>")
        + part.format(f"<p>Dritter Teil. {DEUTSCH * 3}</p>")
        + f'<ul class="tags">{links(STRIP)}</ul></div>'
        + f'<div class="mer"><p>{NORSK * 4} Les mer i morgen.</p></div>'
    )
    text = text_of(page(body))
    assert "Erster Teil" in text and "Zweiter Teil" in text and "Dritter Teil" in text
    assert "Strømpris" not in text and "Les mer i morgen" not in text


def test_a_page_wide_header_around_the_main_content_is_not_removed() -> None:
    body = f"<header><div><main><p>{NORSK * 3}</p><p>{NORSK * 2}</p></main></div></header>"
    assert "flere arter" in text_of(page(body))


def test_a_heading_control_in_brackets_goes_but_the_words_stay() -> None:
    body = (
        '<article><h2>Ziele<span>[<a href="/edit">bearbeiten</a>]</span></h2>'
        f"<p>{DEUTSCH * 3}</p><h2>Anmerkung [1]</h2><p>{DEUTSCH * 2}</p></article>"
    )
    headings = [b.text for b in parse_html(page(body)).blocks if b.kind == "heading"]
    assert headings == ["Ziele", "Anmerkung [1]"]


def test_mathml_reads_inline_and_ruby_readings_go() -> None:
    formula = "<math><mi>x</mi><mo>=</mo><mn>2</mn><annotation>x=2</annotation></math>"
    body = (
        f"<article><p>When {formula} holds, the sum is even. {NORSK}</p>"
        f"<p><ruby>漢<rt>かん</rt>字<rt>じ</rt></ruby>を読む。{NORSK * 2}</p></article>"
    )
    blocks = parse_html(page(body)).blocks
    assert blocks[0].text.startswith("When x=2 holds, the sum is even.")  # once, not twice
    assert blocks[1].text.startswith("漢字を読む。")


def test_soft_hyphens_and_zero_width_spaces_do_not_split_words() -> None:
    body = (
        f"<article><p>Mit\u00adtel\u00adal\u00adter und Zeit\u200bung. {DEUTSCH * 2}</p></article>"
    )
    assert text_of(page(body)).startswith("Mittelalter und Zeitung.")


def test_a_utf8_page_with_one_stray_byte_stays_utf8() -> None:
    data = ("<p>Sprzeciw wobec ataków na Fundację " * 20 + "</p>").encode() + b"\xc3(" + b"."
    text, encoding = decode_text(data)
    assert encoding == "utf-8"
    assert "ataków" in text and "\ufffd" in text
    legacy = "Grüße aus Köln, schöne Tage. ".encode("cp1252") * 20
    assert decode_text(legacy) == ("Grüße aus Köln, schöne Tage. " * 20, "cp1252")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("19.03.2019 11:45 | von Inga Buller", "2019-03-19", id="dotted"),
        pytest.param("Publisert 2024-11-05 kl. 08.00", "2024-11-05", id="iso"),
        pytest.param("1. 2. 2021", "2021-02-01", id="spaced"),
        pytest.param("03/04/2019", None, id="slashes-are-ambiguous"),
        pytest.param("31.02.2020", None, id="not-a-day"),
        pytest.param("Version 1.2.3456", None, id="not-a-year"),
    ],
)
def test_visible_date(text: str, expected: str | None) -> None:
    assert visible_date(text) == expected


def test_trim_edges_keeps_a_page_without_prose_as_it_is() -> None:
    blocks = [Block("Pris", "paragraph"), Block("- A\n- B", "list")]
    assert trim_edges(blocks, [1.0, 1.0]) == blocks


def test_trim_edges_keeps_the_article_between_its_first_and_last_paragraph() -> None:
    prose = Block(NORSK * 2, "paragraph")
    blocks = [
        Block("Meny Nyheter Sport", "paragraph"),
        Block("Humler", "heading"),
        prose,
        Block("Kort.", "paragraph"),
        prose,
        Block("Hilsen Kari", "paragraph"),
        Block("Kilde NTB", "paragraph"),
    ]
    # Links before the article go; a short line inside it stays; right after
    # it, its closing line stays, and a short line past that goes.
    kept = trim_edges(blocks, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert [block.text for block in kept] == [
        "Humler",
        prose.text,
        "Kort.",
        prose.text,
        "Hilsen Kari",
    ]
    # A closing line that is a link is a strip's first item, not the end.
    kept = trim_edges(blocks, [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0])
    assert [block.text for block in kept] == ["Humler", prose.text, "Kort.", prose.text]


def test_an_aside_around_the_declared_article_body_is_not_dropped() -> None:
    body = (
        f'<nav><ul>{links(STRIP)}</ul></nav><aside class="layout"><article>'
        f'<div itemprop="articleBody"><p>{DEUTSCH * 3}</p><p>{DEUTSCH * 2}</p></div>'
        "</article></aside><aside><p>Werbung</p></aside>"
    )
    text = text_of(page(body))
    assert "mehr Arten" in text
    assert "Werbung" not in text and "Strømpris" not in text


def test_text_is_in_nfc_form() -> None:
    # U+09DF (য়) has no NFC form of its own: it is U+09AF U+09BC.
    body = f"<article><p>\u0995\u09c1\u09b7\u09cd\u099f\u09bf\u09df\u09be {NORSK * 2}</p></article>"
    assert text_of(page(body)).startswith("\u0995\u09c1\u09b7\u09cd\u099f\u09bf\u09af\u09bc\u09be ")


def test_the_short_line_that_introduces_a_link_strip_inside_the_article_goes_with_it() -> None:
    body = (
        f"<article><p>{NORSK * 3}</p><p><strong>Les også:</strong></p><p>{links(STRIP[:3])}</p>"
        f"<p><strong>Kort om humler</strong></p><p>{NORSK * 2}</p></article>"
    )
    text = text_of(page(body))
    assert "Valgresultat" not in text
    assert "Les også" not in text
    # A short line before running text is a subheading of the article: it stays.
    assert "Kort om humler" in text


def test_the_authors_box_declared_by_microdata_goes() -> None:
    bio = "Kari skriver om natur og dyreliv, og hun har fotografert humler i mange år."
    body = (
        f"<article><div class='entry'><p>{DEUTSCH * 3}</p><p>{DEUTSCH * 2}</p></div>"
        f"<div class='box' itemprop='author' itemscope><p>{bio}</p></div></article>"
    )
    text = text_of(page(body))
    assert "mehr Arten" in text
    assert "Kari skriver" not in text


def test_comments_declared_by_microdata_go() -> None:
    comment = "Takk for en fin artikkel om humlene ved elva, jeg har sett mange av dem i år."
    body = (
        f"<article><p>{NORSK * 3}</p><p>{NORSK * 2}</p>"
        f'<div itemscope itemtype="https://schema.org/Comment"><p>{comment}</p></div></article>'
    )
    assert "Takk for" not in text_of(page(body))


def test_a_control_or_a_modal_window_declared_by_aria_goes() -> None:
    body = (
        f"<div aria-modal='true'><p>{DEUTSCH}</p></div>"
        f"<article><p>{NORSK * 3}</p><div role='button'>Vis bildet</div>"
        f"<p>{NORSK * 2}</p></article>"
    )
    text = text_of(page(body))
    assert "flere arter" in text
    assert "Vis bildet" not in text and "mehr Arten" not in text


def test_a_short_figure_caption_goes_and_a_caption_that_reads_as_prose_stays() -> None:
    long_caption = NORSK.strip()
    body = (
        f"<article><p>{NORSK * 3}</p><figure><img src='a.jpg'><figcaption>Foto: Kari Nordmann"
        f"</figcaption></figure><p>{NORSK * 2}</p><figure><img src='b.jpg'>"
        f"<figcaption>{long_caption}</figcaption></figure><p>{NORSK * 2}</p></article>"
    )
    text = text_of(page(body))
    assert "Kari Nordmann" not in text
    assert text.count("flere arter") == 8


def test_an_article_whose_sections_sit_right_inside_the_body_is_read_whole() -> None:
    body = (
        f"<nav><ul>{links(STRIP)}</ul></nav>"
        f"<blockquote>{f'<p>{NORSK * 2}</p>' * 4}</blockquote>"
        f"<blockquote>{f'<p>{DEUTSCH * 2}</p>' * 2}</blockquote>"
        f"<blockquote><p>Kortere del. {NORSK * 2}</p></blockquote>"
    )
    text = text_of(page(body))
    assert "flere arter" in text and "mehr Arten" in text and "Kortere del" in text
    assert "Strømpris" not in text


def test_a_heading_after_the_articles_last_paragraph_goes() -> None:
    # What it heads holds no prose: the title of a teaser or a box, in any
    # language; the article's own sections hold paragraphs.
    body = (
        f"<article><h1>Humler ved elva</h1><p>{NORSK * 3}</p><h2>Metode</h2><p>{NORSK * 2}</p>"
        "<h3>Fra arkivet</h3><p>Humlene kom tilbake i år.</p></article>"
    )
    text = text_of(page(body))
    assert "Humler ved elva" in text and "Metode" in text
    assert "Fra arkivet" not in text


def teaser_cards(count: int, *, words: str = "Kort nytt om været i morgen, og mer om det. ") -> str:
    """``count`` alike boxes, each a heading linked to another page over an excerpt."""
    return "".join(
        f'<div class="kort"><h2><a href="/sak/{n}">Sak nummer {n}</a></h2><p>{words * 5}</p></div>'
        for n in range(count)
    )


STORY_HEAD = '<meta property="og:type" content="article">'


def test_teaser_cards_of_other_stories_do_not_outweigh_a_short_story() -> None:
    # Six excerpts under linked headings hold more prose than the story
    # itself; they are what a link to each story looks like, not this story.
    story = f'<div id="sak"><h1>Humler ved elva</h1><p>{NORSK * 2}</p></div>'
    body = f'<div id="side">{story}<div id="neste">{teaser_cards(6)}</div></div>'
    text = text_of(page(body, head=STORY_HEAD))
    assert "flere arter" in text
    assert "Kort nytt" not in text and "Sak nummer" not in text
    # A page that does not say it is one story: the story's text must then
    # hold its own against the teasers (a quarter of their text, here more).
    longer = f'<div id="sak"><h1>Humler ved elva</h1><p>{NORSK * 4}</p></div>'
    text = text_of(page(f'<div id="side">{longer}<div id="neste">{teaser_cards(6)}</div></div>'))
    assert "flere arter" in text and "Sak nummer" not in text


def test_teaser_cards_in_the_storys_own_box_go_with_their_excerpts() -> None:
    # "Recommended for you" set inside the box that holds the story: a list
    # of cards, each a linked title, an excerpt and its source. Not one card
    # is left, in the middle of the story or after it, while the story's
    # own text on both sides of the middle strip stays.
    cards = "".join(
        f'<li class="kort"><h3><a href="/sak/{n}">Sak nummer {n}</a></h3>'
        f"<p>{NORSK}</p><span>Kilde {n}</span></li>"
        for n in range(5)
    )
    body = (
        f'<div id="sak"><h1>Humler ved elva</h1><p>{DEUTSCH * 3}</p>'
        f'<ul class="les-ogsa">{cards}</ul><p>Zum Schluss. {DEUTSCH * 2}</p>'
        f'<h2>Anbefalt for deg</h2><ul class="strom">{cards}</ul></div>'
    )
    text = text_of(page(body, head=STORY_HEAD))
    assert "Humler ved elva" in text and "mehr Arten" in text and "Zum Schluss" in text
    assert "flere arter" not in text, text
    assert "Sak nummer" not in text and "Kilde" not in text and "Anbefalt" not in text
    # A page that does not say it is one story (a shop, a forum) keeps them.
    assert "Sak nummer 4" in text_of(page(body))


def test_a_listing_of_teaser_cards_keeps_them() -> None:
    # A listing page: its excerpts are what it says, whether alone or under
    # a short line of its own.
    cards = teaser_cards(4, words=NORSK)
    assert "flere arter" in text_of(page(f'<div id="liste">{cards}</div>'))
    intro = f'<div id="om"><p>{DEUTSCH}</p></div>'
    text = text_of(page(f'{intro}<div id="liste">{cards}</div>'))
    assert "flere arter" in text and "Sak nummer 3" in text


def test_sections_under_headings_that_link_nowhere_else_are_not_teasers() -> None:
    # Headings linked to their own anchors (a permalink to the section) and
    # sections too long for an excerpt are the article's own.
    sections = "".join(
        f'<section class="del"><h2><a href="#del{n}">Del {n}</a></h2><p>{DEUTSCH * 2}</p></section>'
        for n in range(4)
    )
    long_cards = teaser_cards(4, words=NORSK * 3)
    body = f'<div id="a">{sections}</div><div id="b"><p>{DEUTSCH}</p></div>'
    text = text_of(page(body))
    assert "Del 3" in text and "mehr Arten" in text
    assert "Sak nummer 3" in text_of(page(f'<div id="c">{long_cards}</div><p>{DEUTSCH}</p>'))


def test_the_hidden_pages_of_a_paged_article_are_its_text() -> None:
    # A gallery shows one page and hides its alike siblings until the reader
    # pages on; a hidden box of another kind is still dropped.
    shown = f"<h2>Del 0</h2><p>{NORSK} Side 0.</p>"
    hidden = "".join(
        f'<div class="side skjult" style="display: none"><h2>Del {n}</h2><p>{NORSK} Side {n}.</p>'
        "</div>"
        for n in range(1, 4)
    )
    box = f'<div class="innlogging" style="display:none"><p>{DEUTSCH * 2}</p></div>'
    body = f'<article><h1>Humler</h1><div id="g"><div class="side">{shown}</div>{hidden}</div>{box}'
    text = text_of(page(body + "</article>"))
    assert "Side 0." in text and "Side 3." in text
    assert "mehr Arten" not in text


def test_a_lead_set_beside_the_box_holding_the_rest_of_the_story_is_kept() -> None:
    # The story's first paragraphs sit right in its box; the rest is in a
    # nested "read more" box that holds most of the text.
    lead = f"<p>Innledning: {NORSK}</p><p>Andre avsnitt: {NORSK}</p>"
    rest = "".join(f"<p>{NORSK * 2}</p>" for _ in range(4))
    story = f'<div id="sak"><h1>Humler ved elva</h1>{lead}<div id="resten"><div>{rest}</div></div>'
    body = f'{story}</div><div id="annet"><p>{DEUTSCH}</p></div>'
    text = text_of(page(body))
    assert "Innledning:" in text and "Andre avsnitt:" in text and "flere arter" in text
    assert "mehr Arten" not in text


def test_an_article_built_of_boxes_named_like_chrome_is_found_again() -> None:
    # A page builder names every box of the article "widget": cleaning by
    # names takes each short one, and the page would show no prose at all.
    boxes = "".join(
        f'<div class="bygger-widget bygger-widget-tekst"><p>{NORSK}</p></div>' for _ in range(3)
    )
    body = f'<div id="innhold"><h1>Humler ved elva</h1>{boxes}</div><div class="meny">Hjem</div>'
    text = text_of(page(body))
    assert text.count("flere arter") == 3


def test_a_page_without_prose_anywhere_is_left_as_it_is() -> None:
    body = f'<div id="liste"><h1>Priser</h1><ul>{links(STRIP)}</ul><p>Oppdatert i dag.</p></div>'
    text = text_of(page(body))
    assert "Priser" in text and "Oppdatert i dag." in text


def test_an_anchor_without_href_is_no_link() -> None:
    # <a name> marks a place to link to: the text it wraps is the article's,
    # not a link strip's, so the container still grows over it.
    part = f'<a name="del2"><div><p>{NORSK * 3}</p><p>{NORSK * 3}</p></div></a>'
    body = (
        f'<div id="alt"><div><p>Første del: {NORSK * 2}</p></div>{part}'
        f"<div><p>Tredje del: {NORSK * 2}</p></div></div>"
    )
    text = text_of(page(body))
    assert "Første del:" in text and "Tredje del:" in text


def test_a_dialog_beside_the_declared_main_goes_however_much_it_holds() -> None:
    # A sign-in dialog outside <main>, longer than the story and holding
    # <article>s of its own: neither its size nor its articles make it the page's.
    dialog = (
        f'<div class="x-dialog-innlogging"><article><p>{DEUTSCH * 3}</p></article>'
        f"<article><p>{DEUTSCH * 3}</p></article></div>"
    )
    body = f"<main><article><h1>Humler</h1><p>{NORSK * 2}</p></article></main>{dialog}"
    text = text_of(page(body))
    assert "flere arter" in text
    assert "mehr Arten" not in text


def test_the_article_shipped_as_a_template_script_is_read_as_markup() -> None:
    # The article's body in a <script type="text/template"> that a script
    # renders (as some blog themes do); a template outside the article stays
    # a script, never text.
    template = f'<script type="text/template"><p>{NORSK * 2}</p><p>Siste avsnitt.</p></script>'
    other = '<script type="text/template"><p>{{ kommentar.tekst }}</p></script>'
    body = f'<div class="innlegg" itemprop="articleBody">{template}</div>{other}'
    text = text_of(page(body))
    assert "flere arter" in text and "Siste avsnitt." in text
    assert "kommentar" not in text


def test_the_heading_of_a_link_strip_inside_the_article_goes_with_the_strip() -> None:
    # A "more on this" box between two parts of the story: its links go,
    # and so does the heading right above them (with or without a label).
    body = (
        f"<article><h1>Humler ved elva</h1><p>{NORSK * 2}</p>"
        f"<h3>Mer om saken</h3><ul>{links(STRIP)}</ul>"
        f"<p>Fortsettelse: {NORSK * 2}</p>"
        f"<h4>Les også</h4><p>Utvalgt</p><ul>{links(STRIP[::-1])}</ul>"
        f"<h2>Neste del</h2><p>Slutten: {NORSK * 2}</p></article>"
    )
    text = text_of(page(body))
    assert "Fortsettelse:" in text and "Slutten:" in text and "Neste del" in text
    assert "Mer om saken" not in text and "Les også" not in text and "Utvalgt" not in text
    assert "Strømpris" not in text


def test_the_author_box_goes_but_a_wrapper_named_for_the_author_stays() -> None:
    # A bio under the story reads as prose, yet it is about the writer; a
    # post wrapper that a theme names after its author holds the story itself.
    bio = (
        '<div class="forfatter-boks author-box"><p>Kari Nordmann skriver om natur og miljø, '
        "og hun har fulgt humlene i kommunen i mange år før denne saken.</p></div>"
    )
    body = f'<div class="innlegg author-kari"><h1>Humler</h1><p>{NORSK * 3}</p>{bio}</div>'
    text = text_of(page(body))
    assert "flere arter" in text
    assert "Kari Nordmann" not in text


def test_a_carousel_of_quotes_does_not_outweigh_the_page_own_text() -> None:
    # A homepage: one paragraph about the firm, then a slider of short
    # quotes from clients, alike and many: what the firm's visitors said.
    quotes = "".join(
        f'<li class="omtale-slide"><blockquote><p>«Takk for god hjelp med saken, nummer {n}.»</p>'
        "<cite>E-post fra en klient</cite></blockquote></li>"
        for n in range(7)
    )
    body = (
        f'<div class="forside"><p class="ingress">Velkommen: {NORSK * 3}</p>'
        f'<div class="omtaler carousel"><ul class="slides">{quotes}</ul></div>'
        f"<div><p>Kontor: {DEUTSCH * 2}</p></div></div>"
    )
    text = text_of(page(body))
    assert "Velkommen:" in text
    assert "Takk for god hjelp" not in text


def test_reading_again_never_brings_back_a_named_box_beside_the_main() -> None:
    # The <main> holds a video's title and a short line, no prose; a
    # newsletter box beside it is prose, but the page's own names mark it.
    main = "<main><h1>Humler på video</h1><p>Se opptaket fra elva.</p></main>"
    box = f'<div class="nyhetsbrev newsletter"><p>{DEUTSCH * 2}</p><p>{DEUTSCH}</p></div>'
    text = text_of(page(main + box))
    assert "Humler på video" in text
    assert "mehr Arten" not in text


def test_reading_again_never_brings_back_a_consent_or_newsletter_box() -> None:
    # No <main>: the second reading keeps the article's "widget" boxes, but
    # what floats over a page or asks something of the reader still goes.
    boxes = "".join(
        f'<div class="bygger-widget bygger-widget-tekst"><p>{NORSK}</p></div>' for _ in range(2)
    )
    consent = f'<div class="cookie-samtykke"><p>{DEUTSCH * 3}</p><p>{DEUTSCH}</p></div>'
    text = text_of(page(f'<div id="innhold"><h1>Humler</h1>{boxes}</div>{consent}'))
    assert text.count("flere arter") == 2
    assert "mehr Arten" not in text


def test_a_declarative_shadow_root_is_read_and_an_inert_template_is_not() -> None:
    # <template shadowrootmode> is drawn by the browser where it stands; any
    # other <template> is never shown.
    card = (
        '<fakta-boks><template shadowrootmode="open"><h2>Fakta</h2>'
        f"<p>Skygge: {NORSK * 2}</p><slot></slot></template><p>Lys: {NORSK}</p></fakta-boks>"
    )
    inert = f"<template><p>Mal: {DEUTSCH * 2}</p></template>"
    text = text_of(page(f"<article><h1>Humler</h1>{card}{inert}</article>"))
    assert "Skygge:" in text and "Lys:" in text and "Fakta" in text
    assert "Mal:" not in text


def test_a_short_line_beside_the_story_does_not_widen_it_into_its_wrapper() -> None:
    # The wrapper holds the story, a copyright line of its own and a box of
    # plain items; one short line is no lead: the story's box stays the choice.
    story = f'<div id="sak"><h1>Humler</h1><p>{NORSK * 2}</p><p>{NORSK}</p></div>'
    box = "<div><ul><li>Strømpris i dag</li><li>Værmelding for helgen</li></ul></div>"
    body = f'<div id="ramme">{story}<p>© Avisa, alle rettigheter.</p>{box}</div>'
    text = text_of(page(body))
    assert "flere arter" in text
    assert "Strømpris" not in text


def test_reading_again_never_chooses_a_box_named_as_chrome() -> None:
    # The page's own text is short lines (a price list), no prose; a sidebar
    # beside it holds an "about us" paragraph that reads as prose.
    lines = "".join(f"<p>Humlehotell nr. {n}: 120 kr</p>" for n in range(12))
    about = f'<div class="sidebar"><div class="om-oss"><p>{NORSK * 2}</p></div></div>'
    text = text_of(page(f'<div id="innhold"><h1>Priser</h1>{lines}</div>{about}'))
    assert "Humlehotell nr. 11" in text
    assert "flere arter" not in text


def test_a_copyright_notice_after_the_story_goes_but_a_credit_run_into_it_stays() -> None:
    notice = (
        "© 2024 Avisa AS. Alt innhold er opphavsrettslig beskyttet, og gjengivelse uten "
        "skriftlig tillatelse fra redaksjonen er ikke lov."
    )
    body = (
        f"<article><h1>Humler</h1><p>© Foto: Kari Nordmann. {NORSK * 2}</p>"
        f"<p>Siste avsnitt: {NORSK}</p><p>{notice}</p></article>"
    )
    text = text_of(page(body))
    assert "© Foto: Kari Nordmann." in text and "Siste avsnitt:" in text
    assert "opphavsrettslig" not in text


def test_a_short_line_ending_in_a_colon_right_before_the_story_introduces_it() -> None:
    body = (
        "<article><h1>Humler</h1><p>Av Kari Nordmann</p><p>Det beste kommer nå:</p>"
        f"<p>{NORSK * 2}</p></article>"
    )
    text = text_of(page(body))
    assert "Det beste kommer nå:" in text and "flere arter" in text
    assert "Av Kari Nordmann" not in text  # a byline line is still trimmed


#: A short Chinese news story: each paragraph under 100 characters, though
#: as long as a Latin paragraph of two or three lines.
ZHONGWEN = [
    "本周三上午，市环保志愿者在河边进行了今年第一次野生蜜蜂调查，共发现十二个品种。",
    "调查人员表示，今年春天气温偏高，花期提前，因此蜜蜂的数量比去年同期明显增加。",
    "专家建议市民在阳台种植本地花卉，为野生蜜蜂提供更多食物来源。",
]
#: A short Norwegian news story: no paragraph reaches 100 characters.
KORTNYTT = [
    "Brannvesenet rykket ut til Storgata i natt etter melding om røyk fra en kjeller.",
    "Ingen personer ble skadd, men to leiligheter måtte evakueres i flere timer.",
    "Politiet vet ennå ikke hva som startet brannen, og etterforsker saken videre.",
]


@pytest.mark.parametrize(
    ("title", "byline", "paragraphs"),
    [
        pytest.param(
            "蜜蜂数量增加", ["记者 王小明 李华", "2024-05-03 10:20 来源：本报"], ZHONGWEN, id="zh"
        ),
        pytest.param(
            "Brann i Storgata", ["Av Kari Nordmann", "03.05.2024 kl. 10.20"], KORTNYTT, id="no"
        ),
    ],
)
def test_a_short_story_loses_its_byline_and_keeps_every_paragraph(
    title: str, byline: list[str], paragraphs: list[str]
) -> None:
    # Paragraphs short in characters, but a story all the same: CJK
    # characters weigh as words, and a few paragraphs that end a sentence,
    # one after another, are a short page's prose.
    lead = "".join(f"<p>{line}</p>" for line in byline)
    story = "".join(f"<p>{paragraph}</p>" for paragraph in paragraphs)
    doc = parse_html(page(f"<article><h1>{title}</h1>{lead}{story}</article>"))
    assert [block.text for block in doc.blocks] == [title, *paragraphs]
    assert (doc.date, doc.date_source) == ("2024-05-03", "byline")


def test_a_listing_of_short_teasers_is_not_taken_for_a_short_story() -> None:
    # Each excerpt ends a sentence, but they stand between links to their
    # stories: a listing, which has no article to trim around.
    teasers = "".join(
        f'<p>May {day}, 2024</p><p><a href="/{day}">Bees of the river bank, part {day}</a></p>'
        f"<p>The volunteers counted bees along the river on day {day} of the survey.</p>"
        for day in range(1, 5)
    )
    text = text_of(page(f'<div id="archive"><p>Page 1 of 3</p>{teasers}<p>Older posts</p></div>'))
    assert text.startswith("Page 1 of 3\nMay 1, 2024\nBees of the river bank, part 1\n")
    assert text.endswith("day 4 of the survey.\nOlder posts")


def test_trim_edges_keeps_a_page_of_few_short_sentences_as_it_is() -> None:
    # Two sentences are no story: a form's instructions around its labels.
    blocks = [
        Block("Name", "paragraph"),
        Block("Please fill in every field of the form below.", "paragraph"),
        Block("E-mail", "paragraph"),
        Block("We answer every message within two working days.", "paragraph"),
        Block("Message", "paragraph"),
    ]
    assert trim_edges(blocks, [0.0] * len(blocks)) == blocks


def json_ld(data: object) -> str:
    return f'<script type="application/ld+json">{json.dumps(data)}</script>'


FRAME = '<nav><a href="/">Start</a> <a href="/om">Om oss</a></nav><div id="app">Laster …</div>'


def test_a_page_its_script_renders_is_read_from_its_json_ld_article_body() -> None:
    # The markup holds only the frame the script fills; the page declares
    # the article for machines, paragraphs split by blank lines.
    article = {
        "@type": "NewsArticle",
        "articleBody": f"{NORSK * 3}\n\n{DEUTSCH * 3}\nR&amp;D &#8211; slutt",
    }
    doc = parse_html(page(f"<h1>Humler ved elva</h1>{FRAME}", head=json_ld(article)))
    texts = [block.text for block in doc.blocks]
    assert texts[0] == "Humler ved elva"
    assert texts[1] == (NORSK * 3).strip() and texts[2] == (DEUTSCH * 3).strip()
    assert texts[3] == "R&D – slutt"
    assert any("JSON-LD articleBody" in note for note in doc.skipped)


def test_a_page_that_shows_only_its_lead_keeps_it_before_the_declared_body() -> None:
    # A subscriber's article: the lead is shown, the rest is in the JSON-LD
    # (in an @graph, as markup); the offer box is not the article.
    lead = f"Innledning. {NORSK}"
    body = "".join(f"<p>Del {n}. {DEUTSCH * 2}</p>" for n in range(4))
    graph = {"@graph": [{"@type": "WebPage"}, {"@type": "Article", "articleBody": body}]}
    markup = (
        f'<article><h1>Humler ved elva</h1><p class="lead">{lead}</p>'
        '<div class="tilbud"><ul><li>Bare for nye kunder</li><li>Si opp når du vil</li></ul></div>'
        "</article>"
    )
    doc = parse_html(page(markup, head=json_ld(graph)))
    texts = [block.text for block in doc.blocks]
    assert texts[:2] == ["Humler ved elva", lead.strip()]
    assert [text[:5] for text in texts[2:]] == ["Del 0", "Del 1", "Del 2", "Del 3"]
    assert not any("<p>" in text for text in texts)


def test_an_article_the_markup_holds_is_read_from_the_markup() -> None:
    # The same article declared again, or a shorter or broken declaration:
    # the markup is what the reader sees, and it is read.
    paragraphs = f"<p>{NORSK * 3}</p><p>{DEUTSCH * 3}</p>"
    markup = f"<article><h1>Humler</h1>{paragraphs}<p>Bare på nettsiden.</p></article>"
    same = {"@type": "Article", "articleBody": f"{NORSK * 3}\n{DEUTSCH * 3}"}
    for head in (
        json_ld(same),
        json_ld({"@type": "Article", "articleBody": NORSK}),
        json_ld({"@type": "Article", "articleBody": ["ikke", "tekst"]}),
        '<script type="application/ld+json">{"articleBody": "uavsluttet</script>',
        json_ld({"articleBody": NORSK * 40}).replace('"articleBody"', '"articlebody"'),
    ):
        doc = parse_html(page(markup, head=head))
        assert doc.blocks[-1].text == "Bare på nettsiden.", head
        assert not any("JSON-LD" in note for note in doc.skipped)
