"""WebVTT and SubRip captions into timed segments: markup, encodings, bad cues, repeats."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from researchstore.ingest.captions import parse_srt, parse_vtt
from researchstore.ingest.model import Segment

VTT_FULL = """\
WEBVTT - a walk along the canal
Kind: captions
Language: en-GB

STYLE
::cue(.loud) { color: yellow; }

REGION
id:left width:40%

NOTE This comment is not spoken text.

intro
00:00:01.000 --> 00:00:04.500 align:start position:10%
<v Ada Brook>Welcome to the <b>towpath</b> survey.</v>

00:00:05.000 --> 00:00:08.000 line:85%
Kingfishers &amp; herons &lt;both&gt; nest here.
<c.loud>Keep&nbsp;quiet</c> near the reeds.

NOTE
A comment
of two lines.

3
00:09.250 --> 00:12.000
<i>We counted</i><00:00:10.000><c> nine</c><00:00:11.000><c> swans.</c>
"""


def test_vtt_markup_entities_settings_and_comments() -> None:
    doc = parse_vtt(VTT_FULL.encode())
    assert (doc.kind, doc.status, doc.reason, doc.encoding) == ("vtt", "ok", None, "utf-8")
    assert doc.language == "en-GB"
    assert doc.segments == [
        Segment(1000, 4500, "Welcome to the towpath survey."),
        Segment(5000, 8000, "Kingfishers & herons <both> nest here.\nKeep quiet near the reeds."),
        Segment(9250, 12000, "We counted nine swans."),
    ]
    assert doc.skipped == []


@pytest.mark.parametrize(
    ("header", "title"),
    [
        pytest.param("WEBVTT\nTitle: Canal survey, week 3\n", "Canal survey, week 3", id="header"),
        pytest.param(
            "WEBVTT\n\nNOTE title: Canal survey, week 3\n", "Canal survey, week 3", id="note"
        ),
        pytest.param("WEBVTT\n\nNOTE\nTitle = Canal survey\n", "Canal survey", id="note-block"),
        pytest.param("WEBVTT - not a title\n", None, id="none"),
    ],
)
def test_vtt_title(header: str, title: str | None) -> None:
    doc = parse_vtt(f"{header}\n00:00:01.000 --> 00:00:02.000\nHello.\n".encode())
    assert doc.title == title
    assert doc.segments == [Segment(1000, 2000, "Hello.")]


BROKEN_VTT = """\
WEBVTT

1
00:00:01.000 --> 00:00:03.000
The first cue is fine.

2
00:00:0x.000 --> 00:00:05.000
brokenstartcue should never be stored.

3
00:00:06.000 --> 00:00:08.000
The third cue is fine too.

4
00:00:09.000 --> 00:00:1y.500
brokenendcue should never be stored.

5
00:00:11.000 --> 00:00:12.000
The fifth cue closes the file.
"""


def test_vtt_with_broken_timestamps_keeps_the_good_cues() -> None:
    doc = parse_vtt(BROKEN_VTT.encode())
    assert (doc.status, doc.reason) == ("partial", "invalid_cues")
    assert [(s.start_ms, s.end_ms) for s in doc.segments] == [
        (1000, 3000),
        (6000, 8000),
        (11000, 12000),
    ]
    assert not any("brokenstartcue" in s.text or "brokenendcue" in s.text for s in doc.segments)
    assert len(doc.skipped) == 2
    assert doc.skipped[0].startswith("cue 2 (line 8): bad timing line")
    assert "00:00:0x.000" in doc.skipped[0]
    assert doc.skipped[1].startswith("cue 4 (line 16):")


def test_text_outside_any_cue_is_reported() -> None:
    data = b"WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nSpoken.\n\nA stray paragraph.\n"
    doc = parse_vtt(data)
    assert (doc.status, doc.reason) == ("partial", "invalid_cues")
    assert doc.segments == [Segment(1000, 2000, "Spoken.")]
    assert doc.skipped == ["block at line 6: no cue timings, 'A stray paragraph.'"]


@pytest.mark.parametrize(
    ("data", "status", "reason"),
    [
        pytest.param(b"", "empty", "no_text", id="empty"),
        pytest.param(b"  \n\n ", "empty", "no_text", id="blank"),
        pytest.param(codecs.BOM_UTF8, "empty", "no_text", id="bom-only"),
        pytest.param(b"WEBVTT\n\nNOTE nothing said yet\n", "empty", "no_text", id="header-only"),
        pytest.param(
            b"Minutes of the garden meeting.\n\nWe agreed to plant beans.\n",
            "invalid",
            "invalid_captions",
            id="prose",
        ),
        pytest.param(
            b"WEBVTT\n\n00:00:xx --> 00:00:yy\nNothing readable.\n",
            "invalid",
            "invalid_captions",
            id="all-cues-bad",
        ),
        pytest.param(b"\x00\x01\x02PK\x03\x04" * 40, "invalid", "binary", id="binary"),
    ],
)
def test_vtt_outcomes(data: bytes, status: str, reason: str) -> None:
    doc = parse_vtt(data)
    assert (doc.status, doc.reason) == (status, reason)
    assert doc.segments == []


def test_a_stray_nul_reads_as_a_replacement_character() -> None:
    # WebVTT's parsing rules: "replace all U+0000 NULL characters by U+FFFD".
    data = (
        b"WEBVTT\n\n00:01.000 --> 00:02.000\nOtters\x00 at dusk.\n\n00:03.000 --> 00:04.000\nTwo.\n"
    )
    for parse in (parse_vtt, parse_srt):
        doc = parse(data)
        assert (doc.status, doc.reason) == ("ok", None)
        assert doc.segments == [
            Segment(1000, 2000, "Otters\ufffd at dusk."),
            Segment(3000, 4000, "Two."),
        ]
    srt = b"1\n00:00:01,000 --> 00:00:02,000\nBad\x00ger sett.\n"
    assert parse_srt(srt).segments == [Segment(1000, 2000, "Bad\ufffdger sett.")]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8, id="png"),
        pytest.param(b"WEBVTT\n\n" + b"\x00" * 64 + b"00:01.000 --> 00:02.000\nx\n", id="nul-run"),
    ],
)
def test_a_binary_with_many_nuls_is_still_binary(data: bytes) -> None:
    assert (parse_vtt(data).status, parse_vtt(data).reason) == ("invalid", "binary")


def test_vtt_with_bom() -> None:
    data = codecs.BOM_UTF8 + "WEBVTT\n\n00:01.000 --> 00:02.000\nDormice – not mice.\n".encode()
    doc = parse_vtt(data)
    assert doc.status == "ok"
    assert doc.segments == [Segment(1000, 2000, "Dormice – not mice.")]
    assert "\ufeff" not in doc.segments[0].text


@pytest.mark.parametrize(
    ("data", "why"),
    [
        # The WebVTT signature must open the file (players show nothing else).
        pytest.param(b"\n\nWEBVTT\n\n00:01.000 --> 00:02.000\nText\n",
                     "the WEBVTT header is on line 3", id="blank-lines-first"),
        pytest.param(codecs.BOM_UTF8 + b"\tWEBVTT\n\n00:01.000 --> 00:02.000\nText\n",
                     "malformed WEBVTT header", id="tab-before-header"),
        pytest.param(b"WEBVTTX\n\n00:01.000 --> 00:02.000\nText\n",
                     "malformed WEBVTT header", id="glued-header"),
        pytest.param(b"garbage\n\n00:01.000 --> 00:02.000\nText\n",
                     "the file starts with 'garbage'", id="garbage-first"),
    ],
)  # fmt: skip
def test_a_file_that_does_not_open_as_captions_is_rejected(data: bytes, why: str) -> None:
    for parse in (parse_vtt, parse_srt):
        doc = parse(data)
        assert (doc.status, doc.reason, doc.segments) == ("invalid", "invalid_captions", [])
        assert why in doc.skipped[0]


def test_srt_may_start_after_blank_lines() -> None:
    doc = parse_srt(b"\n\n1\n00:00:01,000 --> 00:00:02,000\nText\n")
    assert doc.segments == [Segment(1000, 2000, "Text")]


@pytest.mark.parametrize(
    ("cue_text", "expected"),
    [
        # An unclosed tag runs to the end of the cue, as the spec's tokenizer reads it.
        pytest.param("<c>This is </c awesome!", "This is", id="end-tag-without-gt"),
        pytest.param("<c It's a blue apple tree!", None, id="start-tag-without-gt"),
        pytest.param("<v Jane\nDoe>Hello</v>", "Hello", id="tag-over-a-line-break"),
        # Only references closed by ";" are decoded; the rest stays as written.
        pytest.param("Fish &amp; chips &lt;3 &#233;t&#xE9;", "Fish & chips <3 été", id="refs"),
        pytest.param("&lt &gt &nbsp &am; AT&T", "&lt &gt &nbsp &am; AT&T", id="not-references"),
        pytest.param("a&nbsp;b &lrm;x&rlm;", "a b \u200ex\u200f", id="nbsp-lrm-rlm"),
    ],
)
def test_vtt_cue_text_markup_and_references(cue_text: str, expected: str | None) -> None:
    doc = parse_vtt(f"WEBVTT\n\n00:01.000 --> 00:02.000\n{cue_text}\n".encode())
    assert [segment.text for segment in doc.segments] == ([expected] if expected else [])


def test_srt_keeps_a_lone_less_than_sign() -> None:
    doc = parse_srt(b"1\n00:00:01,000 --> 00:00:02,000\n<i>x < y</i> &amp; z\n")
    assert doc.segments == [Segment(1000, 2000, "x < y & z")]


@pytest.mark.parametrize(
    ("timing", "start_ms", "end_ms"),
    [
        # A first field over 59 counts hours (spec), read as vtt.js reads it.
        pytest.param("120:00.000 --> 120:10.000", 432_000_000, 432_600_000, id="hours"),
        pytest.param("000:00.000 --> 00:02.000", 0, 2000, id="three-digit-minutes"),
        pytest.param("0:0:3.540 --> 0:0:7.23", 3540, 7230, id="unpadded"),
    ],
)
def test_wide_and_short_timestamps(timing: str, start_ms: int, end_ms: int) -> None:
    doc = parse_vtt(f"WEBVTT\n\n{timing}\nText\n".encode())
    assert doc.segments == [Segment(start_ms, end_ms, "Text")]


def test_legacy_encodings() -> None:
    latin1 = "WEBVTT\n\n00:01.000 --> 00:02.000\nSøren found Größe 2 °C.\n".encode("latin-1")
    doc = parse_vtt(latin1)
    assert doc.status == "ok"
    assert doc.encoding in ("cp1252", "latin-1")
    assert doc.segments[0].text == "Søren found Größe 2 °C."

    cp1252 = "1\n00:00:01,000 --> 00:00:02,000\n“Crème brûlée” can’t wait — 5 €\n".encode("cp1252")
    doc = parse_srt(cp1252)
    assert (doc.status, doc.encoding) == ("ok", "cp1252")
    assert doc.segments == [Segment(1000, 2000, "“Crème brûlée” can’t wait — 5 €")]


def test_missing_blank_line_between_cues() -> None:
    data = b"WEBVTT\n\n00:01.000 --> 00:02.000\nFirst.\n00:03.000 --> 00:04.000\nSecond.\n"
    assert parse_vtt(data).segments == [
        Segment(1000, 2000, "First."),
        Segment(3000, 4000, "Second."),
    ]


SRT = """\
1
00:00:01,500 --> 00:00:03,000
<i>Wind noise</i>

3
00:00:07,000 --> 00:00:09,250
{\\an8}MIRA: The <font color="#ffff00">bait hive</font> went up
on the lamppost &amp; waited.

2
00:00:04,000 --> 00:00:06,000 X1:100 X2:600 Y1:50 Y2:90
JONAH: Out of order in the file.
"""


def test_srt_good_file() -> None:
    doc = parse_srt(SRT.replace("\n", "\r\n").encode())
    assert (doc.kind, doc.status, doc.reason) == ("srt", "ok", None)
    assert doc.segments == [
        Segment(1500, 3000, "Wind noise"),
        Segment(4000, 6000, "JONAH: Out of order in the file."),
        Segment(7000, 9250, "MIRA: The bait hive went up\non the lamppost & waited."),
    ]


BROKEN_SRT = """\
1
00:00:01,000 --> 00:00:02,000
Cue one is fine.

2
00:00:05,000 --> 00:00:03,000
endbeforestart must be skipped.

3
-00:00:01,000 --> 00:00:04,000
negativetime must be skipped.

4
00:00:06,000 --> 00:00:08,000
Cue four is fine,

and this line after a blank line still belongs to it.

5
00:00:09,000 --> 00:00:1"""


def test_srt_broken_file() -> None:
    doc = parse_srt(BROKEN_SRT.encode())
    assert (doc.status, doc.reason) == ("partial", "invalid_cues")
    assert doc.segments == [
        Segment(1000, 2000, "Cue one is fine."),
        Segment(
            6000, 8000, "Cue four is fine,\nand this line after a blank line still belongs to it."
        ),
    ]
    assert doc.skipped == [
        "cue 2 (line 6): ends before it starts",
        "cue 3 (line 10): negative time",
        "cue 5 (line 20): bad timing line '00:00:09,000 --> 00:00:1'",
    ]


@pytest.mark.parametrize(
    ("parse", "data"),
    [
        pytest.param(
            parse_vtt, b"1\n00:00:01,000 --> 00:00:02,500\nSubRip named .vtt\n", id="srt-as-vtt"
        ),
        pytest.param(
            parse_srt, b"WEBVTT\n\n00:01.000 --> 00:02.500\nSubRip named .vtt\n", id="vtt-as-srt"
        ),
        pytest.param(
            parse_srt, b"00:01.000 --> 00:02.500\nSubRip named .vtt\n", id="headerless-vtt-as-srt"
        ),
    ],
)
def test_the_other_format_is_understood(parse, data: bytes) -> None:  # type: ignore[no-untyped-def]
    doc = parse(data)
    assert doc.status == "ok"
    assert doc.segments == [Segment(1000, 2500, "SubRip named .vtt")]


ROLLING = """\
WEBVTT
Kind: captions
Language: en

00:00:00.500 --> 00:00:02.000 align:start position:0%
 
so<00:00:00.900><c> the</c><00:00:01.300><c> heron</c>

00:00:02.000 --> 00:00:02.010 align:start position:0%
so the heron
 

00:00:02.010 --> 00:00:04.000 align:start position:0%
so the heron
waits<00:00:02.500><c> in</c><00:00:03.000><c> the</c><00:00:03.500><c> shallows</c>

00:00:04.000 --> 00:00:04.010 align:start position:0%
waits in the shallows
 

00:00:04.010 --> 00:00:06.000 align:start position:0%
waits in the shallows
then<00:00:04.500><c> strikes</c>

00:00:06.000 --> 00:00:08.000 align:start position:0%
then strikes
"""


def test_rolling_auto_captions_keep_each_line_once() -> None:
    doc = parse_vtt(ROLLING.encode())
    assert (doc.status, doc.language) == ("ok", "en")
    assert doc.segments == [
        Segment(500, 2000, "so the heron"),
        Segment(2010, 4000, "waits in the shallows"),
        Segment(4010, 6000, "then strikes"),
    ]


def test_exact_repeats_follow_on_but_words_said_again_later_stay() -> None:
    data = b"""WEBVTT

00:01.000 --> 00:02.000
Hello there.

00:02.000 --> 00:03.000
Hello there.

00:09.000 --> 00:10.000
Hello there.
"""
    assert parse_vtt(data).segments == [
        Segment(1000, 2000, "Hello there."),
        Segment(9000, 10000, "Hello there."),
    ]


def test_zero_length_cue_with_new_text_is_kept() -> None:
    # Valid WebVTT (the spec and vtt.js keep it); its words are content.
    data = b"WEBVTT\n\n00:01.000 --> 00:02.000\nKept.\n\n00:05.000 --> 00:05.000\nFlash.\n"
    doc = parse_vtt(data)
    assert (doc.status, doc.reason, doc.skipped) == ("ok", None, [])
    assert doc.segments == [Segment(1000, 2000, "Kept."), Segment(5000, 5000, "Flash.")]


# -- properties -------------------------------------------------------------------

LINE = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ,.!?']{0,30}", fullmatch=True).map(
    lambda line: " ".join(line.split())
)
CUE = st.tuples(
    st.integers(min_value=0, max_value=10_000_000),  # start
    st.integers(min_value=1, max_value=60_000),  # duration
    st.lists(LINE, min_size=1, max_size=3),
)


def _timestamp(ms: int) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"


@pytest.mark.slow
@given(st.lists(CUE, min_size=1, max_size=25))
def test_random_cues_round_trip(cues: list[tuple[int, int, list[str]]]) -> None:
    ordered = sorted(cues, key=lambda cue: cue[0])
    # No cue may repeat the line that ends the one before it (that is a
    # rolling repeat, removed on purpose).
    for before, after in zip(ordered, ordered[1:], strict=False):
        assume(after[2][0] not in before[2])
    body = "\n\n".join(
        f"{_timestamp(start)} --> {_timestamp(start + length)}\n" + "\n".join(lines)
        for start, length, lines in cues
    )
    doc = parse_vtt(f"WEBVTT\n\n{body}\n".encode())
    assert doc.status == "ok"
    assert all(segment.start_ms <= segment.end_ms for segment in doc.segments)
    starts = [segment.start_ms for segment in doc.segments]
    assert starts == sorted(starts)
    assert [segment.text for segment in doc.segments] == ["\n".join(c[2]) for c in ordered]
    assert [(s.start_ms, s.end_ms) for s in doc.segments] == [(c[0], c[0] + c[1]) for c in ordered]


@given(st.binary(max_size=600))
def test_any_bytes_give_an_outcome(data: bytes) -> None:
    for parse in (parse_vtt, parse_srt):
        doc = parse(data)
        assert doc.status in ("ok", "partial", "empty", "invalid")
        assert all(0 <= s.start_ms < s.end_ms and s.text for s in doc.segments)
