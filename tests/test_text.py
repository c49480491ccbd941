import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbase.text import excerpt


@given(
    length=st.integers(0, 300),
    a=st.integers(0, 300),
    n=st.integers(0, 40),
    width=st.integers(10, 200),
)
def test_excerpt_keeps_the_span_in_view_and_marks_each_cut(length, a, n, width):
    text = "".join(chr(0x4E00 + i) for i in range(length))  # distinct characters: a cut is findable
    a = min(a, length)
    b = min(a + n, length)
    out = excerpt(text, (a, b), width)
    if length <= width:
        assert out == text
        return
    assert len(out) == width
    inner = out.removeprefix("…").removesuffix("…")
    start = text.index(inner)
    assert out.startswith("…") == (start > 0) and out.endswith("…") == (start + len(inner) < length)
    assert start <= a  # the span's start is in view, and all of it when it fits
    assert b <= start + len(inner) or b - a > width - 2


def test_latin_share_counts_the_marks_thai_writes_above_and_below_as_letters():
    """Thai vowel signs and tone marks are combining marks (str.isalpha says no): counted out,
    a Thai question's Thai was short by a fifth and its Latin share too high (0.43 for 0.37)."""
    from kbase.text import latin_share

    assert latin_share("stateกับpropsต่างกันอย่างไร") == pytest.approx(10 / 27)
    assert latin_share("เขียนonclickหรือonClick") == pytest.approx(14 / 23)
    assert latin_share("Rust有没有三元运算符") == pytest.approx(4 / 12)
    assert latin_share("cafe\u0301 au lait") == latin_share("café au lait") == 1.0  # NFD accents
    assert latin_share("42 + 7") == 1.0  # no letters


@given(st.text(alphabet="ab\r\n\u2028é", max_size=40))
def test_line_starts_follow_every_line_break_lf_cr_or_crlf(text):
    from kbase.text import line_starts

    ends = [
        i + 1
        for i, c in enumerate(text)
        if c == "\n" or (c == "\r" and text[i + 1 : i + 2] != "\n")
    ]
    assert line_starts(text) == [0, *ends]
