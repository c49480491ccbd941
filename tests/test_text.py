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
