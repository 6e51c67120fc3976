"""The HTML vocabulary the extractor reads pages by (no selectolax here).

Which elements are removed before reading, which are never judged by their
class names, which read inline, as blocks, lists, cells and headings, and
where a page declares its title. ``html.py`` walks the tree by these sets.
"""

from __future__ import annotations

__all__ = [
    "CELLS",
    "DROP_TAGS",
    "HEADINGS",
    "INLINE",
    "LEAF_BLOCKS",
    "LISTS",
    "MATHML",
    "NEVER_BOILERPLATE",
    "PARAGRAPH_LIKE",
    "TITLE_KEYS",
    "VOID_SKIP",
]

#: Removed before anything is read: never the article's text.
DROP_TAGS = (
    "script", "style", "noscript", "template", "svg", "iframe", "frame", "nav", "footer",
    "aside", "button", "input", "select", "textarea", "dialog", "object", "embed",
    "canvas", "video", "audio", "map", "link", "meta",
    # A ruby annotation spells out how to read its base text: the text is
    # the base, once.
    "rt", "rp",
    # A formula's TeX or content markup: the formula again.
    "annotation", "annotation-xml",
)  # fmt: skip
#: Elements whose class names are about code or typography, not page layout
#: (a syntax highlighter's <span class="comment"> must survive), and elements
#: without text (an <img> with class "ad" holds nothing to remove).
NEVER_BOILERPLATE = (
    "html body main article span code a em strong b i var kbd samp abbr time small sup sub "
    "mark label font cite q pre img picture source path symbol use g"
).split()
#: MathML is phrasing content: a formula reads inline, one piece per token
#: element (<mi>, <mo>...), never a block per symbol.
MATHML = frozenset(
    "math mi mo mn ms mtext mspace mrow mfrac msqrt mroot msub msup msubsup munder mover "
    "munderover mmultiscripts mprescripts none mtable mtr mtd mstyle mpadded mphantom menclose "
    "semantics merror maction".split()
)
INLINE = MATHML | frozenset(
    "a abbr acronym b bdi bdo big cite code data del dfn em font i ins kbd label mark nobr "
    "q rb rp rt rtc ruby s samp small span strike strong sub sup time tt u var slot".split()
)
#: Skipped with what they hold; a formula's TeX annotation is the formula again.
VOID_SKIP = frozenset(
    "img picture source track area wbr col colgroup param annotation annotation-xml".split()
)
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
LISTS = frozenset(("ul", "ol", "menu"))
CELLS = frozenset(("td", "th"))
#: Blocks holding phrasing content only, read in one call.
LEAF_BLOCKS = frozenset(("p", "figcaption", "summary", "address", "legend"))
#: Elements whose own text counts as a paragraph when scoring containers.
PARAGRAPH_LIKE = frozenset(("p", "pre", "td", "div", "section", "article", "main", "blockquote"))
#: Where a page declares its article's title, most trusted first.
TITLE_KEYS = (
    "dc:title", "dcterm:title", "og:title", "weibo:article:title",
    "weibo:webpage:title", "title", "twitter:title", "parsely-title",
)  # fmt: skip
