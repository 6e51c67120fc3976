"""Text-level rules for HTML pages, apart from the parser (no selectolax here).

- :func:`limit_markup` bounds the work the HTML parser will do: markup far
  past the node budget is cut, nesting deeper than ``MAX_DEPTH`` is
  flattened, and attributes past ``MAX_ATTRIBUTES`` on a tag are dropped
  before Lexbor sees it;
- :func:`is_boilerplate` reads an element's id, class, role and aria-label
  for navigation, ads, share bars and cookie banners; :func:`is_hidden` its
  ``hidden``, ``aria-hidden`` and ``style`` for content nobody sees;
- :func:`choose_title`, :func:`json_ld_date` and :func:`iso_date` pick the
  title and publication date from what the page declares.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from datetime import date
from email.utils import parsedate_to_datetime
from functools import lru_cache
from itertools import accumulate

from researchstore.speedups import SPEEDUPS

__all__ = [
    "BREAK",
    "DATE_KEYS",
    "MAX_ATTRIBUTES",
    "MAX_DEPTH",
    "boilerplate_evidence",
    "choose_title",
    "collapse_spaces",
    "is_boilerplate",
    "is_hidden",
    "iso_date",
    "join_lines",
    "json_ld_body",
    "json_ld_date",
    "limit_markup",
    "visible_date",
]

_speedups = SPEEDUPS

#: Elements nested deeper than this are flattened before parsing.
MAX_DEPTH = 512
#: Below this many tags, nesting is not checked: even all nested, they parse
#: in a bounded time (5,000 nested elements: about 0.1 to 0.2 s), and most
#: pages stop here without a scan of their tags.
_DEPTH_CHECK_TAGS = 5000
#: Attributes one tag keeps: Lexbor compares each new attribute's name with
#: every earlier one's, so a tag costs the square of its attributes (40,000
#: on one element: seconds per parse). Real elements carry tens at most;
#: past this bound the rest of a tag's attributes are dropped before parsing.
MAX_ATTRIBUTES = 256
#: Tag-like things ("<x") read per node the walk may visit; markup beyond is cut.
_TAGS_PER_NODE = 4
_TAG_NAME = re.compile(r"<(/?[A-Za-z][^\s/>]*)")
_TAG_SPAN = re.compile(r"<(/?)([A-Za-z][^\s/>]*)[^>]*?(/?)>")
# Elements that do not deepen the tree: void ones, and those the parser
# closes when a sibling starts (<p>, <li>, <td>...).
#: Elements whose content the parser reads as text or script, never as tags
#: (``<noscript>`` among them: pages are parsed with scripting on). Flat too:
#: a script's own tag is never dropped, or what it holds would read as text.
_RAW_TEXT = tuple("script style textarea title xmp iframe noembed noframes noscript".split())
_FLAT_NAMES = (
    *"area base br col embed hr img input link meta param source track wbr keygen "
    "p li dt dd option optgroup tr td th thead tbody tfoot colgroup caption rb rt rp rtc "
    "html head body".split(),
    *_RAW_TEXT,
)


def _either_case(name: str) -> str:
    """A pattern for ASCII ``name`` with each letter in either case (not
    IGNORECASE, which also takes "ſ" for "s", as the HTML tokenizer does not)."""
    return "".join(f"[{letter}{letter.upper()}]" for letter in name)


#: What the scan for raw-text elements steps by: a comment's start, or a
#: tag's name as ``_TAG_NAME`` reads it (a "<" inside a name starts nothing).
_RAW_STEP = re.compile("<!--|" + _TAG_NAME.pattern)
_RAW_NAMES = frozenset(_RAW_TEXT)
_RAW_CLOSE = {name: re.compile(rf"</{_either_case(name)}(?=[\s/>])") for name in _RAW_TEXT}
_FLAT_TAGS = frozenset(
    tag for name in _FLAT_NAMES for tag in (name, name.upper(), f"/{name}", f"/{name.upper()}")
)


# The HTML tokenizer's reading of a tag (its whitespace is "\t\n\f\r "):
# what starts one, a comment or a bogus comment ("<!x", "<?", "</" and no
# letter) at a "<"; one attribute: "/" and whitespace before it, a name
# (which may start with "="), then "=" and a value, quoted or not, if any.
_MARKUP = re.compile(r"<(?:(!--)|[!?]|/(?![A-Za-z])|(/?)([A-Za-z][^\t\n\f\r />]*+))")
_ATTRIBUTE = re.compile(
    r"[\t\n\f\r /]*+[^\t\n\f\r />][^\t\n\f\r /=>]*+"
    r"(?:[\t\n\f\r ]*+=[\t\n\f\r ]*+(?:\"[^\"]*+\"?|'[^']*+'?|[^\t\n\f\r >]++)?+)?+"
)
_ATTRIBUTES = re.compile(f"(?:{_ATTRIBUTE.pattern})*+")
_TAG_CLOSE = re.compile(r"[\t\n\f\r /]*+>")
_COMMENT_CLOSE = re.compile(r"--!?>")
#: Where the text of a raw-text element ends, as the tokenizer reads it.
_RAW_END = {name: re.compile(rf"</{_either_case(name)}[\t\n\f\r />]") for name in _RAW_TEXT}
#: Elements inside which the parser reads a raw-text element's tag as any
#: other (SVG's and MathML's <style>, <title>, <script>): their text is markup.
_FOREIGN = ("svg", "math")


class _DepthSteps(dict[str, int]):
    """How a tag name changes the nesting depth: +1 opens, -1 closes, 0 flat.

    Filled as names are met, so the scan of a page is a map over a dict in
    C rather than a Python test per tag.
    """

    def __missing__(self, name: str) -> int:
        step = 0 if name in _FLAT_TAGS else -1 if name[0] == "/" else 1
        if len(self) < 10_000:  # a page of made-up tag names must not grow it forever
            self[name] = step
        return step


_DEPTH_STEPS = _DepthSteps()

_BOILERPLATE_ROLES = frozenset(
    "navigation menu menubar banner contentinfo complementary search dialog alertdialog "
    "toolbar tablist button".split()
)
#: Microdata properties that name what is about the article, not the article:
#: its author's box (a bio, a portrait, links to profiles).
_BOILERPLATE_ITEMPROPS = frozenset(("author", "creator"))
#: Microdata types of comments and reviews by readers.
_COMMENT_TYPE = re.compile(r"schema\.org/(?:Comment|Review|UserComments)\b", re.IGNORECASE)
# Whole words in an id or class (split at anything but letters).
_BOILERPLATE_WORDS = (
    "nav navs menu menus submenu navbar breadcrumb breadcrumbs crumbs sidebar share shares "
    "sharing social ad ads advert adverts advertisement sponsor sponsored promo promos cookie "
    "cookies consent gdpr newsletter subscribe popup modal dialog related comments comment disqus "
    "footer masthead toolbar pagination pager skip widget widgets outbrain taboola caption "
    "captions credit credits author authors slider sliders carousel testimonial "
    "testimonials"
).split()
# Parts of camelCase names ("adBox", "siteNav"), only for unambiguous words:
# "CtxtMenu" is MathJax's context-menu hook on every formula.
_CAMEL_WORDS = (
    "ad ads advert nav navbar sidebar share sharing social cookie consent breadcrumb "
    "breadcrumbs footer newsletter promo sponsor sponsored popup modal"
).split()
# Substrings of an id or class that give it away even inside a longer word.
_BOILERPLATE_PARTS = (
    "sidebar breadcrumb cookie consent navbar navigation advert newsletter disqus "
    "adsbygoogle sharethis socialshare social-share sharebuttons share-buttons skiplink "
    "skip-link"
).split()
# Comments by readers: prose that is not the article.
_COMMENT_WORDS = ("comment", "comments", "disqus")
# The regions of a page's layout that never hold its article (a sidebar,
# the footer, navigation), unlike a component's name ("widget", "share"):
# whole words, then the parts that give a region away inside a longer word.
_REGION_WORDS = (
    "nav navs menu menus submenu footer masthead breadcrumb breadcrumbs crumbs pagination "
    "pager toolbar skip"
).split()
_REGION_PARTS = ("sidebar", "navbar", "navigation", "breadcrumb", "skiplink", "skip-link")
# What floats over the page or asks the reader for something (consent, an
# address, a sign-in): never a layout box around the article.
_OVERLAY_WORDS = ("gdpr", "subscribe", "popup", "modal", "dialog")
_OVERLAY_PARTS = ("cookie", "consent", "newsletter")


def _words_or_parts(words: Sequence[str], parts: Sequence[str] = ()) -> re.Pattern[str]:
    """A whole word of ``words`` (bounded by anything but a letter: "nav-main",
    "ad_box", "top3ad"), or any of ``parts`` anywhere."""
    longest_first = sorted(map(re.escape, words), key=len, reverse=True)
    return re.compile(
        r"(?<![a-z])(?:"
        + "|".join(longest_first)
        + r")(?![a-z])"
        + "".join("|" + re.escape(part) for part in parts)
    )


_NAME_HIT = _words_or_parts(_BOILERPLATE_WORDS, _BOILERPLATE_PARTS)
_COMMENT_HIT = _words_or_parts(_COMMENT_WORDS)
_REGION_HIT = _words_or_parts(_REGION_WORDS, _REGION_PARTS)
_OVERLAY_HIT = _words_or_parts(_OVERLAY_WORDS, _OVERLAY_PARTS)
_CAMEL = frozenset(_CAMEL_WORDS)
_CAMEL_REGIONS = frozenset("nav navbar sidebar footer breadcrumb breadcrumbs".split())
_CAMEL_SPLIT = re.compile(r"[^A-Za-z]+|(?<=[a-z])(?=[A-Z])")
_BOILERPLATE_LABEL = re.compile(
    r"breadcrumb|navigation|menu|share|social|cookie|advert|sidebar", re.IGNORECASE
)
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)

_TITLE_WORDS = re.compile(r"\w+")
_TITLE_SEPARATOR = re.compile(r"\s+[|\-–—:·•»/]+\s+|\s*::\s*")
_CDATA = re.compile(r"^\s*(?://\s*)?<!\[CDATA\[|(?://\s*)?\]\]>\s*$")
_ISO_DATE = re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
DATE_KEYS = (
    "article:published_time", "ld:datepublished", "datepublished", "date", "dc.date",
    "dc.date.issued", "dcterms.date", "dcterms.created", "pubdate", "publish-date",
    "publishdate", "sailthru.date", "parsely-pub-date", "og:published_time", "time",
)  # fmt: skip


#: Stands in for <br> in the tree (a private-use character, not whitespace).
BREAK = "\ue000"
_INVISIBLE = re.compile("[\u00ad\u200b\u2060\ufeff]")


def join_lines(parts: list[str]) -> str:
    """Join text pieces; collapse spaces in each line, drop empty lines.

    ``BREAK`` ends a line; soft hyphens and zero-width spaces, which split
    words for nobody but a search, go; the text is in Unicode's NFC form.
    """
    if not parts:
        return ""
    text = "".join(parts)
    if not text.isascii():
        if _INVISIBLE.search(text):
            text = _INVISIBLE.sub("", text)
        # One spelling of each character (NFC), as a reader's search types it.
        if not unicodedata.is_normalized("NFC", text):
            text = unicodedata.normalize("NFC", text)
    if BREAK not in text:  # the common case: one line
        return collapse_spaces(text)
    return "\n".join(filter(None, map(collapse_spaces, text.split(BREAK))))


#: Text longer than this is collapsed a window at a time (``collapse_spaces``).
_COLLAPSE_WINDOW = 1 << 16
_WHITESPACE = re.compile(r"\s")  # what str.split splits at (Py_UNICODE_ISSPACE)
#: Whitespace that collapsing changes: any but a space, or two in a row.
_UNCOLLAPSED = re.compile(r"[^\S ]|  ")


def collapse_spaces(text: str) -> str:
    """``" ".join(text.split())``: each run of whitespace one space, none at the ends.

    A long text is collapsed a window at a time, cut at whitespace: a list
    of all its words would cost some 60 bytes a word (a page of ". " 30
    times its size).
    """
    if len(text) <= _COLLAPSE_WINDOW:
        return " ".join(text.split())
    text = text.strip()
    if _UNCOLLAPSED.search(text) is None:
        return text  # no copy of a long text already collapsed
    pieces = []
    position = 0
    while position < len(text):
        found = _WHITESPACE.search(text, position + _COLLAPSE_WINDOW)
        cut = len(text) if found is None else found.start()
        piece = " ".join(text[position:cut].split())
        if piece:
            pieces.append(piece)
        position = cut
    return " ".join(pieces)


# -- markup limits ----------------------------------------------------------


def limit_markup(
    text: str, *, max_nodes: int, notes: list[str], tags: int | None = None
) -> tuple[str, bool]:
    """Bound the work Lexbor will do on ``text``.

    Lexbor's tree builder walks the stack of open elements for many tags, so
    its time grows with tags x nesting depth (100,000 nested divs: seconds).
    Markup past ``_TAGS_PER_NODE * max_nodes`` tags, which the walk could
    never reach, is cut off (the second value says so); tags nested deeper
    than ``MAX_DEPTH`` are dropped, keeping their text, as browsers do; a
    tag's attributes past the ``MAX_ATTRIBUTES``-th are dropped (Lexbor's
    time grows with their square).
    ``tags``: the count of "<" in ``text``, where the caller has it cheaper
    (in the page's UTF-8 bytes). The text is returned itself when it is kept whole.
    """
    bounded = _bound_attributes(text, notes)
    if bounded is not text:
        text, tags = bounded, None
    tag_count = text.count("<") if tags is None else tags
    limit = _TAGS_PER_NODE * max_nodes
    if tag_count <= MAX_DEPTH or tag_count <= min(limit, _DEPTH_CHECK_TAGS):
        return text, False  # too few tags to nest so deep that parsing is slow
    cut_short = False
    if tag_count > limit:
        # Cut near the limit-th tag, at a "<", from the average tag spacing.
        end = text.find("<", int(len(text) * limit / tag_count))
        text = text[:end] if end > 0 else text
        notes.append(f"more than {limit} tags: read the first part")
        cut_short = True
    # A quick upper bound of the depth (elements that never nest, such as
    # void ones, <p>, <li> and <td>, do not count, nor does "<span" quoted
    # in a script's string or a comment); only past MAX_DEPTH does the
    # exact, slower pass run.
    if _markup_depth(text) <= MAX_DEPTH:
        return text, cut_short
    return _flatten(text, _mask_raw_text(text), notes), cut_short


def _bound_attributes(text: str, notes: list[str]) -> str:
    """``text`` with the attributes past the ``MAX_ATTRIBUTES``-th of each tag
    dropped (the element and the rest of its tag kept); itself when no tag
    holds more. The C scan (``_speedups.markup_attributes``) says whether
    any does, in a pass over the text; the cut is Python's."""
    if len(text) <= 2 * MAX_ATTRIBUTES or (
        _speedups is not None
        and _speedups.markup_attributes(text, _RAW_TEXT, _FOREIGN) <= MAX_ATTRIBUTES
    ):
        return text
    spans = _excess_attributes(text, MAX_ATTRIBUTES)
    if not spans:
        return text
    notes.append(f"dropped attributes past the first {MAX_ATTRIBUTES} on {len(spans)} tags")
    # A space where they were: the last attribute kept never runs on into
    # what follows ("a=1" and "/>" would read as "a" = "1/", and no "/>").
    return _cut(text, spans, filler=" ")


def _excess_attributes(text: str, most: int) -> list[tuple[int, int]]:
    """Where the attributes past the ``most``-th of each tag stand, in order."""
    spans = []
    kept = _first_attributes(most)
    for start, end in _attribute_runs(text, passing=most):
        # n attributes take at least 2n - 1 characters (each but the last
        # ends before whitespace, "/" or its value's closing quote).
        if end - start > 2 * most and (found := kept.match(text, start)) is not None:
            if found.end() < end:
                spans.append((found.end(), end))
    return spans


@lru_cache(maxsize=4)
def _first_attributes(most: int) -> re.Pattern[str]:
    return re.compile(f"(?:{_ATTRIBUTE.pattern}){{{most}}}+")


@lru_cache(maxsize=4)
def _ordinary_markup(most: int) -> re.Pattern[str]:
    """Text, comments, bogus comments, and tags of ``most`` attributes or
    fewer not named as a raw-text or foreign element (in any case), one
    after the other, as ``_attribute_runs`` reads them: what it may pass
    over in one match when it looks for tags of more."""
    special = "|".join((*_RAW_TEXT, *_FOREIGN))
    return re.compile(
        r"(?:[^<]++"
        r"|<!--(?:>|->|(?s:.*?)--!?>|(?s:.*)\Z)"
        r"|<(?:[!?]|/(?![A-Za-z]))[^>]*+(?:>|\Z)"
        rf"|</?(?!(?i:{special})(?![^\t\n\f\r />]))[A-Za-z][^\t\n\f\r />]*+"
        rf"(?:{_ATTRIBUTE.pattern}){{0,{most}}}+[\t\n\f\r /]*+(?:>|\Z)"
        r"|<(?![A-Za-z!?/])"
        r")*+"
    )


def _most_attributes(text: str) -> int:
    """The most attributes one tag in ``text`` holds, read in Python
    (``_speedups.markup_attributes`` answers the same)."""
    return max(
        (
            sum(1 for _ in _ATTRIBUTE.finditer(text, start, end))
            for start, end in _attribute_runs(text)
        ),
        default=0,
    )


def _attribute_runs(text: str, *, passing: int | None = None) -> Iterator[tuple[int, int]]:
    """Where each tag's run of attributes stands in ``text``, in order; with
    ``passing``, runs of that many attributes or fewer may be left out.

    Tags, comments and bogus comments are read as the HTML tokenizer reads
    them; so is the text of the raw-text elements (``_RAW_TEXT``: a
    script's "<div" is no tag), except inside <svg> and <math>, where the
    parser reads their tags as any other. Past a tag the page's end cuts,
    nothing follows. (The parser's tree builder can read a raw-text
    element's text as markup elsewhere too, as after <svg><p>: the time
    bound on each file is what stops a page that plays on that.)
    """
    position = 0
    foreign = dict.fromkeys(_FOREIGN, 0)  # how many of each are open
    ordinary = None if passing is None else _ordinary_markup(passing)
    while True:
        # At once up to a tag that changes what follows, or holds more.
        passed = None if ordinary is None else ordinary.match(text, position)
        position = position if passed is None else passed.end()
        found = _MARKUP.search(text, position)
        if found is None:
            return
        if found.group(1) is not None:
            position = _comment_end(text, found.end())
            continue
        name = found.group(3)
        if name is None:  # a bogus comment, to the next ">"
            position = text.find(">", found.end()) + 1
            if position == 0:
                return
            continue
        start = found.end()
        attributes = _ATTRIBUTES.match(text, start)  # a run of none matches too
        end = start if attributes is None else attributes.end()
        yield start, end
        close = _TAG_CLOSE.match(text, end)
        if close is None:
            return
        position = close.end()
        lowered = name.lower() if name.isascii() else ""
        if found.group(2):  # an end tag
            if foreign.get(lowered):
                foreign[lowered] -= 1
        elif lowered in foreign:
            self_closing = position - 2 >= end and text[position - 2] == "/"
            if not self_closing:
                foreign[lowered] += 1
        elif lowered in _RAW_NAMES and not any(foreign.values()):
            raw_end = _RAW_END[lowered].search(text, position)
            if raw_end is None:
                return
            position = raw_end.start()


def _comment_end(text: str, start: int) -> int:
    """Where scanning goes on after a comment whose "<!--" ends at ``start``."""
    if text.startswith(">", start):
        return start + 1  # "<!-->"
    if text.startswith("->", start):
        return start + 2  # "<!--->"
    found = _COMMENT_CLOSE.search(text, start)
    return len(text) if found is None else found.end()


def _mask_raw_text(text: str) -> str:
    """``text`` with what every raw-text element (``_RAW_TEXT``) and comment
    holds blanked out, each character a space: positions are kept, and what
    the parser reads as text or script is never taken for a tag. A start
    tag's attributes are blanked too (a "<" there opens nothing). An element
    left open runs to the end, as the parser reads it; a start tag without
    its ">" starts nothing."""
    pieces: list[str] = []
    position = kept = 0
    size = len(text)
    while (match := _RAW_STEP.search(text, position)) is not None:
        position = start = match.end()
        name = match.group(1)
        if name is None:  # a comment
            end = text.find("-->", start)
        elif (
            name.startswith("/")
            or start == size
            or not name.isascii()
            or name.lower() not in _RAW_NAMES
            or (tag_end := text.find(">", start)) < 0
        ):
            continue
        else:
            # What it holds starts after its start tag's ">": an end tag
            # written before that is inside the start tag, as the parser reads it.
            close = _RAW_CLOSE[name.lower()].search(text, tag_end + 1)
            end = -1 if close is None else close.start()
        end = size if end < 0 else end
        pieces.append(text[kept:start])
        pieces.append(" " * (end - start))
        position = kept = end
        if end == size:
            break
    if not pieces:
        return text
    pieces.append(text[kept:])
    return "".join(pieces)


def _markup_depth(text: str) -> int:
    """The most tags open at once in ``text`` (those in ``_FLAT_TAGS`` not
    counted, nor any in what ``_mask_raw_text`` blanks)."""
    steps = map(_DEPTH_STEPS.__getitem__, _TAG_NAME.findall(_mask_raw_text(text)))
    return max(accumulate(steps, initial=0))


def _flatten(text: str, masked: str, notes: list[str]) -> str:
    """Drop start tags nested deeper than ``MAX_DEPTH`` and their end tags,
    found in ``masked`` (``_mask_raw_text(text)``) and cut from ``text``."""
    cuts: list[tuple[int, int]] = []
    open_tags: list[tuple[str, bool]] = []  # (name, dropped), the stack of open elements
    dropped_count = 0
    for match in _TAG_SPAN.finditer(masked):
        name = match.group(2).lower()
        if match.group(3) or name in _FLAT_TAGS:  # self-closing (<path/>) or flat
            continue
        if not match.group(1):
            dropped = len(open_tags) >= MAX_DEPTH
            if dropped:
                cuts.append(match.span())
                dropped_count += 1
            open_tags.append((name, dropped))
            continue
        # An end tag closes the nearest open element of its name, if any is
        # close to the top (a stray end tag is left alone).
        for index in range(len(open_tags) - 1, max(len(open_tags) - 64, -1), -1):
            if open_tags[index][0] == name:
                if open_tags[index][1]:
                    cuts.append(match.span())
                del open_tags[index:]
                break
    if cuts:
        notes.append(f"flattened {dropped_count} elements nested deeper than {MAX_DEPTH}")
    return _cut(text, cuts)


def _cut(text: str, spans: list[tuple[int, int]], *, filler: str = "") -> str:
    """``text`` without ``spans`` (in order), each ``filler`` instead."""
    pieces, position = [], 0
    for start, end in spans:
        if start >= len(text):
            break
        pieces.append(text[position:start])
        position = end
    pieces.append(text[position:])
    return filler.join(pieces)


# -- boilerplate ------------------------------------------------------------


def is_hidden(attributes: dict[str, str | None]) -> bool:
    """Tell whether an element is hidden (``hidden``, ``aria-hidden``, ``display: none``)."""
    if "hidden" in attributes or (attributes.get("aria-hidden") or "").lower() == "true":
        return True
    return _HIDDEN_STYLE.search(attributes.get("style") or "") is not None


def is_boilerplate(attributes: dict[str, str | None]) -> bool:
    """Tell from an element's id, class, role and aria-label whether it is page chrome."""
    return boilerplate_evidence(attributes) is not None


def boilerplate_evidence(attributes: dict[str, str | None]) -> str | None:
    """How an element's attributes mark it as chrome, if they do.

    ``"role"``: an ARIA landmark, label or modal the page declares
    (navigation, banner, contentinfo, a dialog, a control), or microdata
    naming the author's box; ``"comments"``: a comment section (by its name
    or its microdata type), prose that is not the article; ``"overlay"``: a
    word for what floats over the page or asks the reader for something
    (cookie consent, a newsletter box, a sign-in dialog); ``"region"``: a
    word for a region of the layout (a sidebar, the footer, navigation);
    ``"name"``: any other word in its id or class. A layout wrapper around
    the article can carry a region's or another word too (``"entry share"``,
    ``"elementor-widget"``), so structure may overrule those.
    """
    role = attributes.get("role")
    if role and role.lower() in _BOILERPLATE_ROLES:
        return "role"
    label = attributes.get("aria-label")
    if label and _BOILERPLATE_LABEL.search(label):
        return "role"
    if (attributes.get("aria-modal") or "").lower() == "true":
        return "role"
    itemprop = attributes.get("itemprop")
    if itemprop and not _BOILERPLATE_ITEMPROPS.isdisjoint(itemprop.split()):
        return "role"
    itemtype = attributes.get("itemtype")
    if itemtype and _COMMENT_TYPE.search(itemtype):
        return "comments"
    return _read_names(f"{attributes.get('class') or ''} {attributes.get('id') or ''}")


# Pages repeat their class names (every item of a menu, every card): each
# distinct one is read once.
@lru_cache(maxsize=8192)
def _read_names(names: str) -> str | None:
    lowered = names.lower()
    # One regular expression in C for every word and part.
    if _NAME_HIT.search(lowered):
        if _COMMENT_HIT.search(lowered):
            return "comments"
        if _OVERLAY_HIT.search(lowered):
            return "overlay"
        return "region" if _REGION_HIT.search(lowered) else "name"
    # camelCase: "adBox", "siteNav" (only for the unambiguous _CAMEL words).
    if lowered != names:
        found = _CAMEL.intersection(word.lower() for word in _CAMEL_SPLIT.split(names))
        if found:
            return "region" if not found.isdisjoint(_CAMEL_REGIONS) else "name"
    return None


# -- title and date ---------------------------------------------------------


def choose_title(title: str, og_title: str, h1: str, site_name: str = "") -> str:
    """``<title>``, without a site-name affix when og:title or the h1 agrees."""
    if not title or title.casefold() == site_name.casefold():
        return og_title or h1 or title
    separators = list(_TITLE_SEPARATOR.finditer(title))
    if not separators:
        return title
    splits = [  # (kept, dropped): a site suffix, then a site prefix
        (title[: separators[-1].start()], title[separators[-1].end() :]),
        (title[separators[0].end() :], title[: separators[0].start()]),
    ]
    for candidate in (og_title, h1):
        words = set(_TITLE_WORDS.findall(candidate.casefold()))
        if not words:
            continue
        for kept, dropped in splits:
            kept_words = _TITLE_WORDS.findall(kept.casefold())
            dropped_words = _TITLE_WORDS.findall(dropped.casefold())
            # The site name is the shorter part: an h1 holding the logo text
            # must not turn "Article | Site" into "Site".
            if not kept_words or not dropped_words or len(kept) < len(dropped):
                continue
            kept_share = sum(word in words for word in kept_words) / len(kept_words)
            dropped_share = sum(word in words for word in dropped_words) / len(dropped_words)
            if kept_share >= 0.8 and dropped_share <= 0.34:
                return kept.strip()
    return title


def json_ld_date(source: str) -> str | None:
    """``datePublished`` from a JSON-LD block (an object, a list or an @graph)."""
    return _json_ld_string(source, "datePublished")


def json_ld_body(source: str) -> str | None:
    """``articleBody`` from a JSON-LD block: the article's text as the page
    declares it for machines (an object, a list or an @graph)."""
    return _json_ld_string(source, "articleBody")


def _json_ld_string(source: str, key: str) -> str | None:
    """The first non-empty string at ``key`` in a JSON-LD block's objects."""
    try:
        data = json.loads(_CDATA.sub("", source))
    except (ValueError, RecursionError):  # malformed, or nested past the limit
        return None
    pending = [data]
    for _ in range(200):  # bounded: a hostile block cannot make this loop long
        if not pending:
            break
        item = pending.pop(0)
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            value = item.get(key)
            if isinstance(value, str) and value:
                return value
            graph = item.get("@graph")
            if isinstance(graph, list):
                pending.extend(graph)
    return None


#: Dates as bylines write them in digits: 2019-03-19, 19.03.2019, 19. 3. 2019.
#: Slashed forms are left out: 03/04/2019 is March or April by country.
_WRITTEN_ISO = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_WRITTEN_DOTTED = re.compile(r"(?<![\d.])(\d{1,2})\.\s?(\d{1,2})\.\s?(\d{4})(?!\d)")


def visible_date(text: str) -> str | None:
    """``YYYY-MM-DD`` from a date written in digits in a byline, else None."""
    for match in _WRITTEN_ISO.finditer(text):
        found = _calendar_date(int(match[1]), int(match[2]), int(match[3]))
        if found:
            return found
    for match in _WRITTEN_DOTTED.finditer(text):
        found = _calendar_date(int(match[3]), int(match[2]), int(match[1]))
        if found:
            return found
    return None


def _calendar_date(year: int, month: int, day: int) -> str | None:
    if not 1900 <= year <= 2200:
        return None
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def iso_date(value: str) -> str | None:
    """``YYYY-MM-DD`` from an ISO-like or RFC 2822 date, else None."""
    match = _ISO_DATE.search(value)
    if match:
        try:
            return date(*(int(part) for part in match.groups())).isoformat()
        except ValueError:
            return None
    try:
        return parsedate_to_datetime(value).date().isoformat()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
