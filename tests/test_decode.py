import codecs
import csv
import random
import sys
from pathlib import Path

import pytest

from kbase.ingest.decode import UndecodableError, decode
from tests.conftest import shared

FRENCH = "Où est la bibliothèque ? L'été dernier, nous avons mangé des crêpes à Noël. " * 4
CASES = [
    ("utf_8", "Grüße aus Köln, naïve café ☕ " * 3),
    ("cp1252", FRENCH + " Prix : 20 € — « très » cher."),
    ("latin_1", "Ça coûte très cher, señor. Déjà vu à Zürich. " * 4),
    (
        "shift_jis",
        "日本語のテキストです。これはテストの文章で、文字コードを判定します。東京は日本の首都です。"
        * 3,
    ),
    ("gb2312", "这是一个中文文本的例子。我们用它来测试字符编码的检测功能。北京是中国的首都。" * 3),
    ("big5", "這是一個中文文本的例子。我們用它來測試字符編碼的檢測功能。台北是一個城市。" * 3),
    (
        "cp1251",
        "Привет, мир! Это пример русского текста для проверки кодировки. Москва — столица России. "
        * 3,
    ),
    (
        "euc_kr",
        "한국어 텍스트의 예입니다. 문자 인코딩 감지를 테스트합니다. 서울은 한국의 수도입니다. " * 3,
    ),
]


@pytest.mark.parametrize("encoding,text", CASES, ids=[c[0] for c in CASES])
def test_legacy_and_cjk_encodings_decode_to_the_right_text(encoding, text):
    assert decode(text.encode(encoding)).text == text


@pytest.mark.parametrize(
    "bom,codec,name",
    [
        (codecs.BOM_UTF8, "utf_8", "utf_8"),
        (codecs.BOM_UTF16_LE, "utf_16_le", "utf_16_le"),
        (codecs.BOM_UTF16_BE, "utf_16_be", "utf_16_be"),
        (codecs.BOM_UTF32_LE, "utf_32_le", "utf_32_le"),
        (codecs.BOM_UTF32_BE, "utf_32_be", "utf_32_be"),
    ],
)
def test_bom_decides_and_is_stripped(bom, codec, name):
    text = "# Notes\r\nZürich ☃ 東京\n"
    d = decode(bom + text.encode(codec))
    assert (d.text, d.encoding, d.bom) == (text, name, True)


@pytest.mark.parametrize("codec", ["utf_16_le", "utf_16_be", "utf_32_le", "utf_32_be"])
def test_utf16_and_32_without_bom(codec):
    text = "# Title\n\nPlain notes with some accents: café, naïve, Zürich.\n"
    d = decode(text.encode(codec))
    assert (d.text, d.encoding) == (text, codec)


def test_line_endings_are_kept():
    assert decode(b"a\r\nb\rc\n").text == "a\r\nb\rc\n"


def test_empty_file_is_empty_text():
    assert decode(b"").text == ""


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x01\x02binary\x00stuff",
        bytes(range(1, 32)) * 50,
        random.Random(1).randbytes(4096),
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 64,
    ],
    ids=["nul-bytes", "control-chars", "random-bytes", "png"],
)
def test_binary_is_refused_with_a_reason(data):
    with pytest.raises(UndecodableError, match="binary|undecodable"):
        decode(data)


def test_charset_normalizer_samples_match_expected():
    folder = shared("encodings", "charset-normalizer-samples")
    rows = list(csv.DictReader((folder / "EXPECTED.tsv").open(encoding="utf-8"), delimiter="\t"))
    assert len(rows) >= 17
    for row in rows:
        data = (folder / row["file"]).read_bytes()
        expected = data.decode("utf_8_sig" if row["encoding"] == "utf_8" else row["encoding"])
        assert decode(data).text == expected, row["file"]


# Small files made with Python's codecs from short texts (tests/data/cjk-encodings): the escape
# encodings, and the CJK codecs charset-normalizer turns down (rare syllables, symbols, HKSCS).
FIXTURES = Path(__file__).parent / "data" / "cjk-encodings"


@pytest.mark.parametrize("name", ["iso2022_jp", "iso2022_kr", "hz", "cp949", "johab", "big5hkscs"])
def test_cjk_fixtures_decode_to_their_utf8_twins(name):
    d = decode((FIXTURES / f"{name}.txt").read_bytes())
    assert (d.text, d.encoding) == (
        (FIXTURES / f"{name}-utf8.txt").read_text(encoding="utf-8"),
        name,
    )


def _cjkencodings() -> Path:
    """CPython's test/cjkencodings: in the interpreter's test package, or Debian's
    libpython3.X-testsuite; skip when neither is installed."""
    try:
        import test

        folder = Path(test.__file__).parent / "cjkencodings"
    except ImportError:
        folder = Path(f"/usr/lib/python3.{sys.version_info.minor}/test/cjkencodings")
    if not folder.is_dir():
        pytest.skip(
            "CPython's test/cjkencodings is absent (install libpython3.X-testsuite on Debian)"
        )
    return folder


def test_cpython_cjkencodings_all_decode_byte_exact():
    folder = _cjkencodings()
    pairs = [
        (f, f.with_name(f.stem + "-utf8.txt"))
        for f in sorted(folder.glob("*.txt"))
        if not f.stem.endswith("-utf8")
    ]
    assert len(pairs) == 15
    wrong = [
        f.name
        for f, twin in pairs
        if decode(f.read_bytes()).text.encode("utf-8") != twin.read_bytes()
    ]
    assert wrong == []


@pytest.mark.parametrize(
    "text",
    [
        "path ~/notes and ~{braces} in ASCII\n",  # '~' before '/': not HZ
        "ANSI colours \x1b[31mred\x1b[0m in a log\n",  # ESC, but no ISO-2022 designation
    ],
)
def test_ascii_that_only_looks_escaped_stays_utf8(text):
    assert decode(text.encode()).encoding == "utf_8"


@pytest.mark.parametrize("codec", ["utf_8", "cp1252", "shift_jis"])
def test_trailing_nul_padding_is_dropped_with_a_warning(codec):
    text = {
        "utf_8": "# Sync\n\nThe text before the padding, déjà vu. 日本語の文章です。\n",
        "cp1252": "# Sync\n\nThe text before the padding, déjà vu à Noël.\n",
        "shift_jis": "# 同期\n\nパディングの前の文章です。東京は日本の首都です。\n",
    }[codec]
    d = decode(text.encode(codec) + b"\x00" * 3836)
    assert d.text == text
    assert d.warnings == ("3,836 NUL bytes after the text (an interrupted sync or copy?) left out",)


@pytest.mark.parametrize("data", [b"\x00" * 64, b"text\x00inside\x00\x00"])
def test_nul_bytes_that_are_not_padding_after_text_stay_binary(data):
    with pytest.raises(UndecodableError, match="binary"):
        decode(data)


@pytest.mark.parametrize(
    "text",
    [
        "It’s fine\n",  # Word's apostrophe: was big5hkscs 'It𠏋 fine', the 's' eaten
        "one…two\nthree\n",  # was shift_jis_2004 'oneßwo'
        "café\n",  # was cp1251 'cafй'
        "Price: 5€ only\n",  # was cp1251 '5Ђ'
        "He said “hello” and left…\n",
        "Meeting notes – “draft”, don’t share\n",
    ],
)
def test_short_western_text_with_a_few_cp1252_bytes_is_cp1252(text):
    """A short note in Windows-1252 whose only non-ASCII bytes stand alone between ASCII ones
    (an apostrophe, an accent, a euro sign) is not read as CJK (a multi-byte code eats the next
    ASCII letter) or as Cyrillic or Greek letters glued to Latin ones: no text in those scripts
    has only one-letter runs."""
    d = decode(text.encode("cp1252"))
    assert d.text == text, d.encoding


@pytest.mark.parametrize(
    ("codec", "text"),
    [
        ("cp1252", "Mémo: réécrire l'introduction."),  # was johab 'M覆o: r憊crire'
        ("cp1252", "Naïve idée, déçu"),  # was johab
        ("cp1252", "Straße, Größe, Äpfel, Öl"),  # was big5hkscs 'Stra絽, Gr廲e'
        ("cp1252", "Ação, coração, não, informação"),  # was johab 'A巫o'
        ("cp1252", "de mon règne? demandait Louis XIV à Boileau."),  # was cp1257 'rčgne'
        ("cp1252", "Lunedì andrò all'università, così va la vita."),  # was cp1258
        ("cp1250", "Holnap megyünk a városba. Az időjárás ma szép."),  # was cp1252 'idõjárás'
        ("cp1250", "Musimy poprawić błąd w pliku, zanim go wyślemy."),  # was cp1252 'b³¹d'
        ("cp1250", "Schůzka začíná v devět hodin ráno."),  # was cp1252 'Schùzka'
        ("iso8859_2", "Dziękuję za wiadomość, odpowiem jak najszybciej."),
        ("cp1254", "Toplantı sabah dokuzda başlıyor."),  # was cp1252 'Toplantý'
        ("cp1257", "Šiandien oras gražus, šviečia saulė."),  # was cp1252 'Ðiandien'
    ],
)
def test_short_latin_text_reads_in_the_code_page_its_letters_fit(codec, text):
    """A sentence or two in a Latin script decodes to the reading whose letters one language
    has (kbase.ingest.latin), not to the first code page that decodes the bytes cleanly."""
    d = decode(text.encode(codec))
    assert d.text == text, d.encoding


@pytest.mark.parametrize(
    ("codec", "text"),
    [
        ("cp1251", "Завтра мы пойдём в город."),
        ("cp1253", "Αύριο θα πάμε στην πόλη για ψώνια. Η συνάντηση ξεκινά στις εννέα το πρωί."),
        ("cp949", "회의는 아침 아홉 시에 시작합니다."),
        ("gbk", "明天 我们 去 城里 购物。 这本书 非常 有趣 而且 容易 阅读。"),
        ("big5", "這本書 非常 有趣 而且 容易 閱讀。"),
        ("shift_jis", "会議は 朝 九時に 始まります。"),
    ],
)
def test_short_text_in_other_scripts_is_not_taken_for_latin(codec, text):
    d = decode(text.encode(codec))
    assert d.text == text, d.encoding
