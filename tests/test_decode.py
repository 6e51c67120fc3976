"""Bytes to text: BOMs, strict UTF-8 first, declared and legacy encodings, binary sniffing."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from researchstore.ingest.decode import (
    declared_encoding,
    decode_exact,
    decode_text,
    looks_binary,
    normalize_language,
    normalize_newlines,
)

SAMPLE = "Søren counted 14 newts – “a good night” – by the pond.\n"


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        pytest.param(codecs.BOM_UTF8 + SAMPLE.encode("utf-8"), "utf-8", id="utf8-bom"),
        pytest.param(
            codecs.BOM_UTF16_LE + SAMPLE.encode("utf-16-le"), "utf-16-le", id="utf16le-bom"
        ),
        pytest.param(
            codecs.BOM_UTF16_BE + SAMPLE.encode("utf-16-be"), "utf-16-be", id="utf16be-bom"
        ),
        pytest.param(SAMPLE.encode("utf-16-le"), "utf-16-le", id="utf16le-no-bom"),
        pytest.param(SAMPLE.encode("utf-8"), "utf-8", id="utf8"),
    ],
)
def test_unicode_encodings_round_trip(data: bytes, encoding: str) -> None:
    text, used = decode_text(data)
    assert text == SAMPLE
    assert used == encoding
    assert "\ufeff" not in text


def test_cp1252_when_not_utf8() -> None:
    data = "“Heather honey” can’t wait — 14 € …".encode("cp1252")
    assert decode_text(data) == ("“Heather honey” can’t wait — 14 € …", "cp1252")


def test_latin1_is_the_last_resort() -> None:
    # 0x81 and 0x8d are undefined in cp1252, so only latin-1 can read them.
    data = b"caf\xe9 \x81\x8d"
    assert decode_text(data) == ("café \x81\x8d", "latin-1")


def test_declared_encoding_is_used_when_utf8_fails() -> None:
    data = "北京的天气".encode("gbk")
    assert decode_text(data, declared="gb2312") == ("北京的天气", "gbk")


def test_utf8_wins_over_a_wrong_declaration() -> None:
    data = "<meta charset=gb2312><p>北京的天气</p>".encode()
    assert decode_text(data, declared="gb2312") == (
        "<meta charset=gb2312><p>北京的天气</p>",
        "utf-8",
    )


def test_unknown_declaration_is_ignored() -> None:
    assert decode_text(b"plain", declared="no-such-codec") == ("plain", "utf-8")


def test_newlines_are_normalised() -> None:
    assert decode_text(b"one\r\ntwo\rthree\n")[0] == "one\ntwo\nthree\n"
    assert normalize_newlines("a\r\n\r\nb") == "a\n\nb"


def test_a_cut_multibyte_character_is_dropped_when_not_final() -> None:
    data = "ørret å".encode()[:-1]  # the last character, "å", cut in half
    assert decode_text(data, final=False) == ("ørret ", "utf-8")
    # final=True cannot read it as UTF-8 and falls back to a legacy encoding
    assert decode_text(data)[1] == "cp1252"


@pytest.mark.parametrize(
    ("data", "binary"),
    [
        pytest.param(b"", False, id="empty"),
        pytest.param(b"Plain text, with a tab\tand lines\n" * 20, False, id="text"),
        pytest.param(SAMPLE.encode("utf-16-le") * 10, False, id="utf16-no-bom"),
        pytest.param(codecs.BOM_UTF16_LE + SAMPLE.encode("utf-16-le"), False, id="utf16-bom"),
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), True, id="png"),
        pytest.param(b"PK\x03\x04" + b"\x00\x01\x02" * 50, True, id="zip"),
        pytest.param(bytes(range(1, 32)) * 20, True, id="control-chars"),
    ],
)
def test_looks_binary(data: bytes, binary: bool) -> None:
    assert looks_binary(data) is binary


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        pytest.param(b'<meta charset="windows-1252">', "cp1252", id="meta-charset"),
        pytest.param(
            b'<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">',
            "shift_jis",
            id="http-equiv",
        ),
        pytest.param(b'<?xml version="1.0" encoding="ISO-8859-1"?>', "cp1252", id="xml-latin1"),
        pytest.param(b"<meta charset=gb2312>", "gbk", id="gb2312-superset"),
        pytest.param(b'<meta charset="utf-16">', "utf-8", id="utf16-declared"),
        pytest.param(b"<meta charset=bogus>", None, id="unknown"),
        pytest.param(b"<p>nothing declared</p>", None, id="none"),
    ],
)
def test_declared_encoding(head: bytes, expected: str | None) -> None:
    assert declared_encoding(b"<html><head>" + head + b"</head></html>") == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("en", "en"),
        ("nb-NO", "nb-NO"),
        ("en_US", "en-US"),
        (" zh-Hant-TW ", "zh-Hant-TW"),
        ("x", None),
        ("english (uk)", None),
        ("", None),
        (None, None),
    ],
)
def test_normalize_language(value: str | None, expected: str | None) -> None:
    assert normalize_language(value) == expected


@given(st.binary(max_size=2000))
def test_any_bytes_decode_without_error(data: bytes) -> None:
    text, encoding = decode_text(data)
    assert isinstance(text, str)
    assert "\r" not in text
    assert not text.startswith("\ufeff")
    assert encoding
    looks_binary(data)


# Text without NUL characters: "a\x00b\x00" is, byte for byte, UTF-16.
@pytest.mark.slow
@given(
    st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=300)
)
def test_any_text_survives_utf8(text: str) -> None:
    data = text.encode("utf-8")
    decoded, _ = decode_text(data)
    expected = normalize_newlines(text)
    assert decoded == (expected[1:] if expected.startswith("\ufeff") else expected)


@given(st.one_of(st.binary(max_size=600), st.text(max_size=300).map(str.encode)), st.booleans())
def test_an_exact_decode_is_the_bytes_read_as_utf8(data: bytes, final: bool) -> None:
    """Where ``decode_exact`` says so, the bytes are the text's own UTF-8 (a
    parser may read them instead of the text), and the text is decode_text's."""
    text, encoding, exact = decode_exact(data, final=final)
    assert (text, encoding) == decode_text(data, final=final)
    if exact:
        assert data.decode("utf-8") == text


@pytest.mark.parametrize(
    ("data", "final", "exact"),
    [
        (SAMPLE.encode(), True, True),
        (b"plain ASCII <p>page</p>", True, True),
        (SAMPLE.encode(), False, False),  # cut at a limit: a character may be dropped
        (b"\xef\xbb\xbf" + SAMPLE.encode(), True, False),  # a BOM, removed
        (SAMPLE.replace("\n", "\r\n").encode(), True, False),  # newlines normalised
        (SAMPLE.encode("cp1252"), True, False),
        (SAMPLE.encode("utf-16"), True, False),
        (SAMPLE.encode() * 20 + b"\xff", True, False),  # UTF-8 with a stray byte replaced
    ],
)
def test_which_decodes_are_exact(data: bytes, final: bool, exact: bool) -> None:
    assert decode_exact(data, final=final)[2] is exact
