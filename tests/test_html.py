"""HTML pages: metadata, main text without chrome, blocks in reading order, limits."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import researchstore.ingest.html as html_mod
from researchstore.ingest import html_cleaning, html_container, html_rules, html_walk
from researchstore.ingest.html import parse_html
from researchstore.ingest.html_rules import choose_title, is_boilerplate, is_hidden
from researchstore.ingest.model import Block

PAGE = """<!DOCTYPE html>
<html lang="en-GB">
<head>
  <meta charset="utf-8">
  <title>Moth night at Alder Fen | Fenland Field Club</title>
  <meta name="description" content="Traps, lamps &amp; a record count of hawk-moths.">
  <meta property="og:title" content="Moth Night at Alder Fen">
  <meta property="article:published_time" content="2025-06-21T22:10:00+01:00">
  <style>.chromestyle { color: red; }</style>
  <script>var chromescript = 1;</script>
</head>
<body>
  <div class="cookie-banner">We use chromecookie crumbs. <button>OK</button></div>
  <header class="site-header"><p>Fenland Field Club chromeheader tagline</p></header>
  <nav><a href="/">Home</a> <a href="/trips">chromenav trips</a></nav>
  <nav aria-label="Breadcrumb"><a href="/">Home</a> › chromecrumb</nav>
  <main>
    <article>
      <header><h1>Moth Night at Alder Fen</h1><p>By the trapping team</p></header>
      <p>Three lamps ran from dusk until <b>two</b> in the morning &amp; the fen stayed warm.</p>
      <script>var inlinechromescript = 2;</script>
      <h2>Method</h2>
      <p>Each trap was emptied at dawn.<br>Every moth was counted twice.</p>
      <ol start="3">
        <li>Check the bulb.</li>
        <li>Lay out the <i>egg boxes</i>.
          <ul><li>Cardboard only</li><li>Never plastic</li></ul>
        </li>
      </ol>
      <h3>Kit</h3>
      <ul><li>Generator</li><li>White sheet</li></ul>
      <h2>Results</h2>
      <table>
        <caption>Counts by trap</caption>
        <thead><tr><th>Trap</th><th>Moths</th><th>Species</th></tr></thead>
        <tbody>
          <tr><td>North</td><td>&gt;100</td><td>31</td></tr>
          <tr><td>South</td><td>64</td><td>22</td></tr>
        </tbody>
      </table>
      <div>Loose text straight inside a div is kept. <p>Then a paragraph.</p> And a tail.</div>
      <pre><code>trap   count
north  104</code></pre>
      <blockquote><p>A poplar hawk-moth landed on my hand.</p>
        <p>It stayed a minute.</p></blockquote>
      <dl><dt>Sugaring</dt><dd>Painting a sweet mix on tree bark.</dd></dl>
      <figure><img src="moth.jpg" alt="a moth">
        <figcaption>An elephant hawk-moth at 1&nbsp;am.</figcaption></figure>
      <div class="share-buttons"><a href="#">chromeshare it</a></div>
      <form><label>Feedback</label><input name="q"> chromeform</form>
      <footer>Filed under moths, chromearticlefooter</footer>
    </article>
  </main>
  <aside><h2>Other trips</h2><p>chromeaside reading</p></aside>
  <div hidden>chromehidden text</div>
  <div style="display: none">chromedisplaynone</div>
  <div aria-hidden="true">chromeariahidden</div>
  <form class="newsletter">Sign up chromenewsletter</form>
  <footer>© Fenland Field Club chromefooter</footer>
</body>
</html>
"""


@pytest.fixture(scope="module")
def page_blocks() -> list[Block]:
    return parse_html(PAGE.encode()).blocks


def test_metadata() -> None:
    doc = parse_html(PAGE.encode())
    assert (doc.kind, doc.status, doc.reason, doc.encoding) == ("html", "ok", None, "utf-8")
    assert doc.title == "Moth Night at Alder Fen"  # og:title, as the page declares it
    assert doc.description == "Traps, lamps & a record count of hawk-moths."
    assert doc.language == "en-GB"
    assert doc.date == "2025-06-21"


def test_chrome_is_dropped(page_blocks: list[Block]) -> None:
    text = "\n".join(block.text for block in page_blocks).lower()
    assert "chrome" not in text


def test_blocks_in_reading_order(page_blocks: list[Block]) -> None:
    assert [(block.kind, block.text) for block in page_blocks] == [
        ("heading", "Moth Night at Alder Fen"),
        # "By the trapping team" is trimmed: a short story's byline
        # (test_html_structure: a few paragraphs that end a sentence are prose).
        ("paragraph", "Three lamps ran from dusk until two in the morning & the fen stayed warm."),
        ("heading", "Method"),
        ("paragraph", "Each trap was emptied at dawn.\nEvery moth was counted twice."),
        (
            "list",
            "3. Check the bulb.\n4. Lay out the egg boxes.\n  - Cardboard only\n  - Never plastic",
        ),
        ("heading", "Kit"),
        ("list", "- Generator\n- White sheet"),
        ("heading", "Results"),
        ("paragraph", "Counts by trap"),
        ("table", "Trap | Moths | Species\nNorth | >100 | 31\nSouth | 64 | 22"),
        ("paragraph", "Loose text straight inside a div is kept."),
        ("paragraph", "Then a paragraph."),
        ("paragraph", "And a tail."),
        ("code", "trap   count\nnorth  104"),
        ("quote", "A poplar hawk-moth landed on my hand.\nIt stayed a minute."),
        ("list", "Sugaring\n  Painting a sweet mix on tree bark."),
        # The figure's one-line caption is the picture's label, not text
        # (test_html_structure: one that reads as prose stays).
    ]


def test_heading_paths(page_blocks: list[Block]) -> None:
    paths = {block.text[:20]: block.heading_path for block in page_blocks}
    h1 = "Moth Night at Alder Fen"
    assert paths["Moth Night at Alder "] == ()
    assert paths["Three lamps ran from"] == (h1,)
    assert paths["Method"] == (h1,)
    assert paths["3. Check the bulb.\n4"] == (h1, "Method")
    assert paths["Kit"] == (h1, "Method")
    assert paths["- Generator\n- White "] == (h1, "Method", "Kit")
    # A new h2 replaces the h2 and everything below it.
    assert paths["Results"] == (h1,)
    assert paths["Trap | Moths | Speci"] == (h1, "Results")


def _page(body: str, head: str = "") -> bytes:
    return f"<html><head>{head}</head><body>{body}</body></html>".encode()


@pytest.mark.parametrize(
    ("head", "body", "title"),
    [
        pytest.param("<title> Just a title </title>", "", "Just a title", id="title"),
        pytest.param('<meta property="og:title" content="From OG">', "", "From OG", id="og"),
        pytest.param("", "<h1>From the <em>heading</em></h1>", "From the heading", id="h1"),
        pytest.param(
            '<title>Pond life - Our Blog</title><meta property="og:title" content="Pond life">',
            "",
            "Pond life",
            id="suffix-og-agrees",
        ),
        pytest.param(
            "<title>Our Blog | Pond life in May</title>",
            "<main><h1>Pond life in May</h1></main>",
            "Pond life in May",
            id="prefix-h1-agrees",
        ),
        pytest.param(
            '<title>Pond life - Our Blog</title><meta property="og:title" content="Newts">',
            "",
            "Newts",
            id="og-disagrees",
        ),
        # The article title a page declares in <meta> wins over <title>, in
        # Readability's order: Dublin Core, Open Graph, ..., Twitter, Parse.ly.
        pytest.param(
            '<title>Pond life - Our Blog</title><meta property="og:title" content="Newts">'
            '<meta name="dc:title" content="Newts in May">',
            "",
            "Newts in May",
            id="dc-before-og",
        ),
        pytest.param(
            '<title>Pond life | Our Blog</title><meta name="twitter:title" content="Pond life">',
            "",
            "Pond life",
            id="twitter",
        ),
        pytest.param(
            '<title>Site</title><meta property="x:foo og:title" content="Spaced out">',
            "",
            "Spaced out",
            id="space-separated-properties",
        ),
        pytest.param(
            '<title>Pond life</title><meta property="og:title" content="  ">',
            "",
            "Pond life",
            id="empty-og-is-ignored",
        ),
        pytest.param(
            "<title>Article about ponds | Site</title>",
            "<h1>Site</h1>",
            "Article about ponds | Site",
            id="logo-h1-is-not-the-title",
        ),
        pytest.param(
            '<title>Field Notes</title><meta property="og:site_name" content="Field Notes">'
            '<meta property="og:title" content="Spring frogspawn">',
            "",
            "Spring frogspawn",
            id="title-is-site-name",
        ),
        pytest.param("", "<p>No title anywhere.</p>", None, id="none"),
    ],
)
def test_title(head: str, body: str, title: str | None) -> None:
    assert parse_html(_page(body + "<p>Some text.</p>", head)).title == title


def test_choose_title_directly() -> None:
    assert choose_title("A – B", "", "") == "A – B"
    assert choose_title("", "", "") == ""
    assert choose_title("Newts and frogs :: Pond Club", "Newts and Frogs", "") == "Newts and frogs"


@pytest.mark.parametrize(
    ("head", "description"),
    [
        ('<meta name="description" content="  Plain   one ">', "Plain one"),
        ('<meta property="og:description" content="From &lt;OG&gt;">', "From <OG>"),
        (
            '<meta name="Description" content="First"><meta property="og:description" content="x">',
            "First",
        ),
        ("", None),
    ],
)
def test_description(head: str, description: str | None) -> None:
    assert parse_html(_page("<p>Text.</p>", head)).description == description


@pytest.mark.parametrize(
    ("html_tag", "language"),
    [
        ('<html lang="nb">', "nb"),
        ('<html lang="en-US">', "en-US"),
        ('<html lang="pt_BR">', "pt-BR"),
        ('<html lang="not a language">', None),
        ("<html lang>", None),
        ("<html>", None),
    ],
)
def test_language(html_tag: str, language: str | None) -> None:
    assert parse_html(f"{html_tag}<body><p>Text.</p></body></html>".encode()).language == language


@pytest.mark.parametrize(
    ("markup", "expected"),
    [
        pytest.param('<meta name="date" content="2024/03/02">', "2024-03-02", id="meta-date"),
        pytest.param('<time datetime="2023-11-05T10:00">5 Nov</time>', "2023-11-05", id="time"),
        pytest.param(
            '<script type="application/ld+json">{"@graph": [{"datePublished": "2022-01-31"}]}'
            "</script>",
            "2022-01-31",
            id="json-ld",
        ),
        pytest.param(
            '<meta name="date" content="Tue, 04 Mar 2025 08:00:00 GMT">', "2025-03-04", id="rfc2822"
        ),
        pytest.param('<meta name="date" content="2024-02-31">', None, id="impossible"),
        pytest.param('<meta name="date" content="last spring">', None, id="words"),
    ],
)
def test_date(markup: str, expected: str | None) -> None:
    assert parse_html(_page(f"{markup}<p>Text.</p>", markup)).date == expected


def test_main_container_by_text_density() -> None:
    links = "".join(f'<li><a href="/{n}">Story number {n} elsewhere</a></li>' for n in range(30))
    paragraphs = "".join(
        f"<p>Paragraph {n} of the field report, with commas, details, and numbers.</p>"
        for n in range(8)
    )
    body = f'<div class="col"><ul>{links}</ul></div><div class="col">{paragraphs}</div>'
    blocks = parse_html(_page(body)).blocks
    assert [block.text for block in blocks] == [
        f"Paragraph {n} of the field report, with commas, details, and numbers." for n in range(8)
    ]


def test_text_in_bare_divs_is_read() -> None:
    body = "<div id='story'>" + "".join(
        f"<div>Line {n} of a story told in bare divs, long enough to count.</div>" for n in range(5)
    )
    blocks = parse_html(_page(body + "</div>")).blocks
    assert len(blocks) == 5
    assert blocks[0].text == "Line 0 of a story told in bare divs, long enough to count."


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            "<table><tr><td><p>Layout cell text.</p></td></tr></table>",
            [("paragraph", "Layout cell text.")],
            id="one-column-layout-table",
        ),
        pytest.param(
            "<table><tr><td><table><tr><td>a</td><td>b</td></tr></table></td><td>c</td></tr>"
            "</table>",
            [("table", "a | b"), ("paragraph", "c")],
            id="nested-tables",
        ),
        pytest.param(
            "<ul><li>One<br>still one</li><li></li><li>Two</li></ul>",
            [("list", "- One still one\n- Two")],
            id="list-br-and-empty-item",
        ),
        pytest.param(
            "<li>An orphan item</li>", [("list", "- An orphan item")], id="orphan-list-item"
        ),
        pytest.param(
            "<blockquote>Outer<blockquote>Inner</blockquote></blockquote>",
            [("quote", "Outer\nInner")],
            id="nested-quotes",
        ),
        pytest.param(
            "<pre>\n\n  indented\n\tand tabbed\n</pre>",
            [("code", "  indented\n\tand tabbed")],
            id="pre-whitespace",
        ),
        pytest.param(
            "<p>Caf&eacute; &amp; cr&#232;me &#x2014; 5&nbsp;&lt;6&gt;</p>",
            [("paragraph", "Café & crème — 5 <6>")],
            id="entities",
        ),
        pytest.param(
            "<p>   </p><div>\n\t</div><p><img src=x></p><h2> </h2>", [], id="no-empty-blocks"
        ),
        pytest.param(
            "<div><p>Before.</p><?php share_button(); ?><p>After.</p></div>",
            [("paragraph", "Before."), ("paragraph", "After.")],
            id="processing-instruction",
        ),
    ],
)
def test_structures(body: str, expected: list[tuple[str, str]]) -> None:
    blocks = parse_html(_page(body)).blocks
    assert [(block.kind, block.text) for block in blocks] == expected


@pytest.mark.parametrize(
    ("attributes", "boilerplate"),
    [
        ({"class": "site-nav"}, True),
        ({"id": "leftSidebar"}, True),
        ({"class": "adBanner"}, True),
        ({"class": "cookie-consent"}, True),
        ({"role": "navigation"}, True),
        ({"aria-label": "Share this page"}, True),
        ({"class": "entry-content"}, False),
        ({"class": "shadow padded"}, False),
        ({"class": "MathJax CtxtMenu_Attached_0"}, False),
        ({"class": "header"}, False),
        # A word is a whole run of letters: digits, "-", "_" and non-ASCII bound it.
        ({"class": "top3ad"}, True),
        ({"id": "ad_box"}, True),
        ({"class": "x\u00e9menu\u00e9"}, True),
        ({"class": "adamant download"}, False),
        ({"class": "navigator"}, False),
        # A part gives it away inside a longer word.
        ({"class": "mysidebarright"}, True),
        ({"id": "SkipLinks"}, True),
        # ARIA and microdata the page declares.
        ({"role": "button"}, True),
        ({"aria-modal": "true"}, True),
        ({"itemprop": "author"}, True),
        ({"itemprop": "articleBody"}, False),
        ({"itemtype": "https://schema.org/Comment"}, True),
        ({"itemtype": "https://schema.org/NewsArticle"}, False),
    ],
)
def test_is_boilerplate(attributes: dict[str, str | None], boilerplate: bool) -> None:
    assert is_boilerplate(attributes) is boilerplate


@pytest.mark.parametrize(
    ("attributes", "hidden"),
    [
        ({"hidden": None}, True),
        ({"aria-hidden": "TRUE"}, True),
        ({"style": "color: red; display : none"}, True),
        ({"style": "visibility:hidden"}, True),
        ({"style": "overflow: hidden"}, False),
        ({"aria-hidden": "false"}, False),
    ],
)
def test_is_hidden(attributes: dict[str, str | None], hidden: bool) -> None:
    assert is_hidden(attributes) is hidden


def test_hidden_text_is_dropped_however_long() -> None:
    # More than half of the page's text, hidden: still never shown, still dropped.
    hidden = "<p>" + "Draft paragraph nobody sees on the page. " * 20 + "</p>"
    body = (
        f'<article><h1>Moths</h1><div style="visibility: hidden;">{hidden}{hidden}</div>'
        "<div><p>Hawk-moths came to the light trap after midnight, twelve of them.</p></div>"
        "</article>"
    )
    doc = parse_html(_page(body))
    text = "\n".join(block.text for block in doc.blocks)
    assert "Hawk-moths came" in text and "Draft paragraph" not in text


def test_a_hidden_wrapper_around_the_article_stays() -> None:
    # Pages that reveal their article with a script hide it in the markup.
    body = '<div style="display:none"><main><p>The article, shown by a script.</p></main></div>'
    doc = parse_html(_page(body))
    assert [block.text for block in doc.blocks] == ["The article, shown by a script."]


def test_hidden_inline_text_is_dropped() -> None:
    body = '<p>Seen <span aria-hidden="true">★</span><span style="display:none">unseen</span>.</p>'
    assert [block.text for block in parse_html(_page(body)).blocks] == ["Seen ."]


def test_a_wrapper_with_a_chrome_name_keeps_the_article() -> None:
    body = '<div class="has-sidebar"><p>The article lives in this wrapper.</p></div>'
    assert [block.text for block in parse_html(_page(body)).blocks] == [
        "The article lives in this wrapper."
    ]


def test_comments_set_as_articles_are_dropped() -> None:
    body = (
        "<article><p>The report itself, with its findings, in a long enough paragraph.</p>"
        '<section class="comments"><article class="comment"><p>chromecomment one</p></article>'
        "</section></article>"
    )
    assert [block.text for block in parse_html(_page(body)).blocks] == [
        "The report itself, with its findings, in a long enough paragraph."
    ]


def test_header_only_page_falls_back_to_all_text() -> None:
    doc = parse_html(_page("<header><p>Only words on the page.</p></header>"))
    assert [block.text for block in doc.blocks] == ["Only words on the page."]


def test_nodes_limited() -> None:
    body = "".join(f"<p>Paragraph number {n}.</p>" for n in range(500))
    doc = parse_html(_page(body), max_nodes=100)
    assert (doc.status, doc.reason) == ("partial", "nodes_limited")
    assert 0 < len(doc.blocks) < 500
    assert doc.blocks[0].text == "Paragraph number 0."
    assert "stopped after 100 nodes" in doc.skipped


def test_too_large_reads_the_first_part() -> None:
    body = "<p>Début – the first part.</p>" + "<p>Filler text.</p>" * 1000
    data = _page(body)
    doc = parse_html(data, max_bytes=len(data) // 2)
    assert (doc.status, doc.reason) == ("partial", "too_large")
    assert doc.encoding == "utf-8"
    assert doc.blocks[0].text == "Début – the first part."


def test_a_cut_multibyte_character_does_not_change_the_encoding() -> None:
    data = _page("<p>" + "ø" * 100 + "</p>")
    cut = data.index("ø".encode()) + 11  # inside the sixth "ø"
    doc = parse_html(data, max_bytes=cut)
    assert doc.encoding == "utf-8"
    assert doc.blocks[0].text == "ø" * 5


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["div", "span", "section", "x-box", "blockquote"])
def test_deep_nesting_does_not_recurse(tag: str) -> None:
    depth = 100_000
    data = _page(f"<{tag}>" * depth + "<p>bathyscaphe at the bottom</p>" + f"</{tag}>" * depth)
    doc = parse_html(data)
    assert doc.status == "ok"
    assert "bathyscaphe at the bottom" in "\n".join(block.text for block in doc.blocks)


@pytest.mark.parametrize(
    ("data", "status", "reason"),
    [
        pytest.param(b"", "empty", "no_text", id="empty"),
        pytest.param(b"   \n ", "empty", "no_text", id="blank"),
        pytest.param(
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8,
            "invalid",
            "binary",
            id="png",
        ),
        pytest.param(
            b"<html><head><title>Only chrome</title></head><body><nav>Menu</nav>"
            b"<script>x()</script></body></html>",
            "empty",
            "no_text",
            id="no-text",
        ),
    ],
)
def test_outcomes(data: bytes, status: str, reason: str) -> None:
    doc = parse_html(data)
    assert (doc.status, doc.reason) == (status, reason)
    assert doc.blocks == []


def test_title_is_kept_when_there_is_no_text() -> None:
    doc = parse_html(b"<title>Only chrome</title><body><nav>Menu</nav></body>")
    assert (doc.status, doc.title) == ("empty", "Only chrome")


@pytest.mark.parametrize(
    ("data", "encoding", "text"),
    [
        pytest.param(
            '<meta charset="gb2312"><p>北京的天气很好</p>'.encode(),
            "utf-8",
            "北京的天气很好",
            id="gb2312-declared-but-utf8",
        ),
        pytest.param(
            '<meta charset="gb2312"><p>北京的天气很好</p>'.encode("gbk"),
            "gbk",
            "北京的天气很好",
            id="real-gb2312",
        ),
        pytest.param(
            "<p>“Naïve” café — 5 €</p>".encode("cp1252"),
            "cp1252",
            "“Naïve” café — 5 €",
            id="cp1252",
        ),
        pytest.param(codecs.BOM_UTF8 + "<p>Søndag</p>".encode(), "utf-8", "Søndag", id="utf8-bom"),
        pytest.param(
            codecs.BOM_UTF16_LE + "<p>Søndag</p>".encode("utf-16-le"),
            "utf-16-le",
            "Søndag",
            id="utf16-bom",
        ),
    ],
)
def test_encodings(data: bytes, encoding: str, text: str) -> None:
    doc = parse_html(data)
    assert doc.encoding == encoding
    assert [block.text for block in doc.blocks] == [text]


def test_semantic_container_is_skipped_when_it_holds_little_text() -> None:
    body = (
        "<main><p>Teaser.</p></main><div>"
        + "".join(f"<p>Real paragraph {n}, long enough to carry the page.</p>" for n in range(6))
        + "</div>"
    )
    texts = [block.text for block in parse_html(_page(body)).blocks]
    assert "Real paragraph 5, long enough to carry the page." in texts


# -- class names ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "evidence"),
    [
        ("adBox", "name"),
        ("siteNav main", "region"),
        ("comment-list", "comments"),
        ("cookie-banner", "overlay"),
        ("top3ad", "name"),
        ("Navigation", "region"),
        ("shadow menuitem", None),
        ("CtxtMenu", None),
        ("entry-content", None),
        ("x" * 300 + " social-share", "name"),
        ("sídebar", None),
    ],
)
def test_class_names_say_how_they_mark_an_element(names: str, evidence: str | None) -> None:
    assert html_rules._read_names(names) == evidence


def _many_tags(body: str) -> bytes:
    """A page with more tags than the nesting check skips, around ``body``."""
    filler = "".join(f"<span>{n}</span>" for n in range(3000))
    return f"<html><body><div>{filler}</div>{body}</body></html>".encode()


@pytest.mark.parametrize(
    ("wrapper", "seen"),
    [
        ("<script>var cards = '{}';</script>", "var cards"),
        ("<SCRIPT type=module>const c = `{}`</SCRIPT >", "const c"),
        ("<style>/* {} */ p {{ color: red }}</style>", "color: red"),
        ("<!-- {} -->", "-->"),
        ("<noscript>{}</noscript>", "<div"),
        ("<textarea>{}</textarea>", "<div"),
    ],
)
def test_tags_inside_scripts_and_comments_are_no_elements(wrapper: str, seen: str) -> None:
    # Markup quoted in a script, a style or a comment, never closed there:
    # counted as elements, it looked nested past the limit, and the start
    # tags after it (the script's own, the article's) were dropped.
    quoted = "<div class=card>" * (html_rules.MAX_DEPTH + 100)
    article = f"<p>{'Forskerne talte humler langs elva hver morgen. ' * 4}</p>" * 3
    doc = parse_html(
        _many_tags(wrapper.format(quoted) + f"<article><h1>Humler</h1>{article}</article>")
    )
    assert not any("flattened" in note for note in doc.skipped), doc.skipped
    text = "\n".join(block.text for block in doc.blocks)
    assert "Forskerne talte humler" in text and seen not in text and "card" not in text


def test_a_script_left_open_masks_the_rest_of_the_page_in_linear_time() -> None:
    # Every start of a raw-text element is looked for once from where the
    # last one ended: many left open cost no more than one.
    text = "<div>" * 600 + "<script>" * 50_000 + "<style>" * 50_000
    masked = html_rules._mask_raw_text(text)
    assert len(masked) == len(text)
    assert masked.startswith("<div>" * 600 + "<script ") and masked.rstrip() == masked[:3007]
    notes: list[str] = []
    kept, _ = html_rules.limit_markup(text, max_nodes=200_000, notes=notes)
    assert "flattened 88 elements nested deeper than 512" in notes
    assert kept.count("<div>") == html_rules.MAX_DEPTH and "<script>" * 50_000 in kept


def test_markup_nested_past_the_limit_outside_scripts_is_still_flattened() -> None:
    deep = (
        "<div>" * (html_rules.MAX_DEPTH + 10) + "dyp tekst" + "</div>" * (html_rules.MAX_DEPTH + 10)
    )
    notes: list[str] = []
    kept, _ = html_rules.limit_markup(
        "<script>x = '<div>'</script>" * 3000 + deep, max_nodes=200_000, notes=notes
    )
    assert notes == [f"flattened 10 elements nested deeper than {html_rules.MAX_DEPTH}"]
    assert kept.count("<div>") == 3000 + html_rules.MAX_DEPTH and "dyp tekst" in kept


def test_elements_are_marked_by_the_attributes_pages_carry() -> None:
    """Each kind of evidence an element's attributes give (``boilerplate_evidence``)."""
    from selectolax.lexbor import LexborHTMLParser

    markup = (
        '<div role="navigation">a</div><div role="Main">b</div><div aria-label="Share">c</div>'
        '<div aria-modal="TRUE">d</div><div itemprop="name author">e</div>'
        '<div itemtype="https://schema.org/Comment">f</div><div class="cookie-banner">g</div>'
        '<div id="sidebar">h</div><div class="adBox">i</div><div class="entry">j</div>'
        '<span class="share">k</span><div class="sídebar">l</div>'
    )
    tree = LexborHTMLParser(f"<html><body>{markup}</body></html>", scripting=True)
    found = [(node.text(), evidence) for node, evidence in html_cleaning._marked_elements(tree)]
    assert found == [
        ("a", "role"), ("c", "role"), ("d", "role"), ("e", "role"), ("f", "comments"),
        ("g", "overlay"), ("h", "region"), ("i", "name"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("most", "marked"),
    [(0, []), (2, []), (3, ["c"]), (5, ["c", "d", ""]), (50, ["c", "d", "", "e"])],
)
def test_the_cap_on_marked_elements_counts_every_candidate(
    most: int, marked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap counts the elements the attribute selector finds, marked or
    not, in the head too (the <meta>), never an element of the tags it
    leaves out (the <span>, the <svg>'s <g>)."""
    from selectolax.lexbor import LexborHTMLParser

    markup = (
        '<html><head><meta itemprop="x"></head><body><div class="entry">a</div>'
        '<span class="share">b</span><nav id="sidebar">c</nav><p role="navigation">d</p>'
        '<svg class="ad"><g class="sidebar"></g></svg><div id="comments">e</div></body></html>'
    )
    tree = LexborHTMLParser(markup, scripting=True)
    monkeypatch.setattr(html_cleaning, "_MAX_CANDIDATES", most)
    found = [node.text() for node, _ in html_cleaning._marked_elements(tree)]
    assert found == marked


# -- paragraphs (``html_container._read_paragraphs``, ``_score_paragraphs``) -------

_TEXTS = st.sampled_from(
    [
        "A sentence of prose, with a comma, long enough to count as text.",
        "short",
        "   ",
        "\u00a0\u3000",
        "Wide，commas、here، and there",
        "Ünïcödé words\u2028and a line separator",
        "\ue000",
        "x" * 120,
    ]
)
_CONTAINERS = ["div", "section", "p", "td", "blockquote", "article", "main", "li", "h2", "x-card"]
_INLINES = ["span", "b", "a href=/x", "a name=n", "em", "math", "mi", "font"]


def _markup(
    texts: st.SearchStrategy[str] = _TEXTS,
    inlines: list[str] = _INLINES,
    containers: list[str] = _CONTAINERS,
) -> st.SearchStrategy[str]:
    """Nested markup: texts, comments, inline elements and containers (each
    tag may carry attributes: ``"a href=/x"``)."""

    def wrap(tags: list[str]) -> st.SearchStrategy[str]:
        return st.tuples(st.sampled_from(tags), st.lists(children, max_size=4)).map(
            lambda pair: f"<{pair[0]}>{''.join(pair[1])}</{pair[0].split()[0]}>"
        )

    children = st.deferred(
        lambda: texts | st.just("<!-- a comment -->") | wrap(inlines) | wrap(containers)
    )
    return st.lists(children, min_size=1, max_size=6).map("".join)


def test_paragraphs_are_read_by_their_nearest_block_and_scored() -> None:
    """A linked heading, text in links, an anchor without href, wide spaces,
    commas of other scripts: what the paragraphs and their scores are made of."""
    from selectolax.lexbor import LexborHTMLParser

    body = LexborHTMLParser(
        "<html><body><div><h2><a href=/s>Story</a></h2><p>Prose, with commas, <a href=/l>"
        "and a link</a> and <a name=x>an anchor</a>, long enough.</p><div>Bare\u00a0div，"
        "text、here، long enough to score</div><td>cell</td></div></body></html>"
    ).body
    assert body is not None
    paragraphs, headings, nodes = html_container._read_paragraphs(body, 10_000)
    assert len(paragraphs) == 3 and len(headings) == 1
    (heading, link), *_ = headings.items()
    assert (nodes[heading].tag, nodes[link].tag) == ("h2", "a")
    texts, links = list(paragraphs.values())[0]
    assert links == ["and a link"] and "an anchor" in "".join(texts)
    scores, direct, own, chars = html_container._score_paragraphs(paragraphs, nodes)
    assert scores and direct and own and chars
    # The bare div's wide commas count as commas: it outscores its length alone.
    bare = next(key for key in paragraphs if nodes[key].tag == "div")
    assert own[bare] == len("Bare div，text、here، long enough to score")


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_markup(), st.integers(min_value=1, max_value=200))
def test_paragraphs_are_read_within_the_node_budget(body: str, max_nodes: int) -> None:
    """Any markup and budget: every paragraph read is a paragraph-like element
    under the body, its texts are the page's, and its score is shared upwards
    to elements that hold it."""
    from selectolax.lexbor import LexborHTMLParser

    page = LexborHTMLParser(f"<html><body>{body}</body></html>").body
    assert page is not None
    paragraphs, _, nodes = html_container._read_paragraphs(page, max_nodes)
    whole = page.text()
    for key, (texts, links) in paragraphs.items():
        assert nodes[key].mem_id == key
        assert all(text in whole for text in texts + links)
    scores, direct, own, chars = html_container._score_paragraphs(paragraphs, nodes)
    assert set(own) <= set(paragraphs)
    assert all(chars[key] >= length for key, length in direct.items())
    assert all(score >= 0 for score in scores.values())  # 0: all its text in links


# -- the walk (``html_walk.Walker``) -----------------------------------------------

_WALK_TEXTS = st.sampled_from(
    [
        "Prose, with a comma.",
        "  spaced   out  ",
        "\u00a0wide\u3000space",
        "line\ue000break",
        "[edit]",
        "x" * 90,
        "",
    ]
)
_WALK_CONTAINERS = [
    "div", "section", "p", "figcaption", "blockquote", "h2", "h3", "ul", "ol", "ol start=4",
    "ol start=x", "menu", "li", "dl", "dt", "dd", "pre", "table", "tr", "td", "th", "caption",
    "summary", "address", "x-card", "table role=presentation",
]  # fmt: skip
_WALK_INLINES = ["span", "a href=/x", "a", "b", "img", "br", "math", "mi", "annotation"]


def _walk(body_markup: str, max_nodes: int = 10_000) -> html_walk.Walker:
    from selectolax.lexbor import LexborHTMLParser

    body = LexborHTMLParser(f"<html><body>{body_markup}</body></html>").body
    walker = html_walk.Walker(max_nodes)
    walker.walk(body)
    return walker


def test_the_walk_reads_each_kind_of_block() -> None:
    """Nested and numbered lists, an edit link after a heading, a quote, a
    credit under a picture, a data table and one for layout, code, definitions."""
    walker = _walk(
        "<h2>Aims [<a href=/e>edit</a>]</h2><ol start=9><li>nine<ul><li>inner</li></ul></li>"
        "<li>ten</li></ol><blockquote><p>Quoted.</p><p>Twice, <a href=/q>linked</a>.</p>"
        "</blockquote><figure><figcaption>Credit</figcaption></figure>"
        "<table><tr><td>a</td><td>b</td></tr></table><table><tr><td>layout</td></tr></table>"
        "<pre>  kept\n  as is</pre><dl><dt>term</dt><dd>meaning</dd></dl>"
        "<h3>two\ue000lines</h3>tail<br>text"
    )
    assert [(block.text, block.kind) for block in walker.blocks] == [
        ("Aims", "heading"),
        ("9. nine\n  - inner\n10. ten", "list"),
        ("Quoted.\nTwice, linked.", "quote"),
        ("a | b", "table"),
        ("layout", "paragraph"),
        ("  kept\n  as is", "code"),
        ("term\n  meaning", "list"),
        ("two lines", "heading"),
        ("tail\ntext", "paragraph"),
    ]
    assert walker.blocks[-1].heading_path == ("Aims", "two lines")
    # The quote's link share: "linked" of its text.
    quote = walker.link_shares[2]
    assert quote == pytest.approx(len("linked") / len("Quoted.\nTwice, linked."))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    _markup(_WALK_TEXTS, _WALK_INLINES, _WALK_CONTAINERS),
    st.integers(min_value=1, max_value=120),
)
def test_the_walk_keeps_to_its_node_budget(body: str, max_nodes: int) -> None:
    """Any markup and budget: one link share per block, each within [0, 1];
    a walk that ran out says so, and one that did not read every word."""
    walker = _walk(body, max_nodes)
    assert len(walker.link_shares) == len(walker.blocks)
    assert all(0.0 <= share <= 1.0 for share in walker.link_shares)
    assert all(block.text for block in walker.blocks)
    if not walker.limited:
        assert walker._budget >= 0


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(_markup(), st.sampled_from(["", "<template shadowrootmode=open><p>shadow</p></template>"]))
def test_a_page_read_from_its_bytes_reads_as_from_its_text(body: str, extra: str) -> None:
    """Lexbor is given a UTF-8 page's own bytes (``decode_exact``); read from
    its text instead, the page gives the same document."""
    page = (
        f"<html><head><title>t é</title></head><body><article>{body}{extra}"
        "<p>Tail paragraph with ünïcödé.</p></article></body></html>"
    ).encode()
    from_bytes = parse_html(page)
    original = html_mod.decode_exact
    try:
        html_mod.decode_exact = lambda data, **options: (*original(data, **options)[:2], False)
        from_text = parse_html(page)
    finally:
        html_mod.decode_exact = original
    assert from_bytes == from_text
