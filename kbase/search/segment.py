"""The words of a query typed without spaces: Chinese, Japanese, Thai, Lao, Khmer, Myanmar; and
Korean words without their particles.

A question is typed as one run of characters (``所有权的规则是什么``, ``エラーを処理する方法``);
kbase.search.cjk looks each word up as the phrase of its character pairs, so the run is first
cut into words here. ICU's word breaks do the cutting: the icu4py package bundles ICU and its
dictionaries for Chinese, Japanese, Thai, Lao, Khmer and Burmese (a 16 MB wheel, about 20 ms to
load). Chosen by measurement over rjieba (Chinese), sudachipy (Japanese, 198 MB) and pythainlp
(Thai, 66 MB, 0.9 s to load): as good on the question sets (BENCHMARKS.md, "CJK questions").

What ICU leaves in pieces is put back together: consecutive katakana (a loanword it does not know,
ク|ロー|ジャ) and consecutive single characters (a compound missing from its dictionary, 线|程).
Function words and question words (的, 什么, 如何; を, とは, 方法; อย่างไร) are dropped, and
okurigana are cut from a Japanese word (読み込む -> 読み込, which also finds 読み込み), so that
what remains are the words a note that answers would hold.

Korean has spaces between words but particles and endings attached to them (소유권의,
처리하는): those are cut from the end of each word (소유권, 처리).

Without icu4py (a platform it has no wheel for), a run's words are its character pairs: the
notes are then ranked by how many of the query's pairs they hold, through the same tiers.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

HAN = re.compile(
    r"[\u2e80-\u2fdf\u3005-\u3007\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"
)
KANA = re.compile(r"[\u3040-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HIRAGANA = re.compile(r"[\u3040-\u309f\u30fc]+")
_KATAKANA = re.compile(r"[\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f]+")
_OKURIGANA = re.compile(r"[\u3040-\u309f]+$")
HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff]")

# Chinese function words and question words (a question's frame, not what it asks about).
_ZH = frozenset(
    """的 了 是 在 和 与 及 或 吗 呢 吧 啊 呀 么 什么 怎么 怎样 怎么样 怎么办 如何 为什么
    为何 哪 哪个 哪些 哪里 哪儿 谁 几 多少 是否 能否 可以 能 会 要 应该 应当 需要 一个
    一些 这个 那个 这 那 这些 那些 我 我们 你 你们 他 她 它 它们 把 被 给 对 从 到 中 里
    时 时候 有 没有 也 都 就 还 让 得 地 着 过 该 而 并 将 又 使用 用 怎 啥 其 之 以 于
    为 所 意思 区别 不同 事情 东西 自己 才能 怎样才能 如何才能 请问 一下 我的 你的
    他的 它的 我们的 你们的""".split()
)
# Japanese: words of hiragana alone (particles, endings: を, とは, する) are dropped by rule.
_JA = frozenset("""何 何か 方法 仕方 使い方 時 場合 違い 理由 手順 書き方 作り方 誰 為""".split())
_TH = frozenset(
    """ที่ การ ความ และ ของ ใน ได้ ให้ เป็น มี จะ อย่างไร ยังไง อะไร ทำไม ไหน ที่ไหน คือ ไหม
    หรือ กับ จาก ว่า แล้ว ครับ ค่ะ คะ บ้าง ต้อง ควร ก็ นี้ นั้น โดย ซึ่ง เพื่อ ถ้า เมื่อ
    วิธี ทำ อย่าง แบบ ไร ยัง ไง ได้ที่ ไป มา อยู่ บน ระหว่าง ด้วย สำหรับ เกี่ยวกับ""".split()
)
_KO = frozenset(
    """무엇 뭐 뭔가 어떻게 왜 언제 어디 어떤 무슨 방법 것 수 있 없 하 되 좀 때 할 한 된 될 해
    합니다 해요 하나요 되나요 있나요 있습니까 있어요 없나요 같은 위한 위해 대한 대해 통해
    경우 알려 가르쳐""".split()
)
# Korean particles and endings, cut from a word's end (longest first; see korean_stem).
_KO_ENDINGS = tuple(
    sorted(
        """에서부터 으로부터 로부터 에게서 한테서 에서는 에서도 에서의 으로는 으로도 으로서
        으로써 에게는 이라는 이라고 라는 라고 이란 란 에서 에게 한테 으로 부터 까지 마다
        조차 처럼 보다 이나 이랑 에는 에도 에의 의 은 는 이 가 을 를 에 로 와 과 도 만
        하려면 하면 하는 하기 하여 해야 해서 하고 한다 합니다 하나요 할까요 할 한 했다
        하지 되는 되나요 된 될 되면 하세요 해요 하는지 되는지 인가요 입니까 인가 이다
        입니다 이에요 예요 나요 까요 려면 으려면 는지 을까 주세요 세요""".split(),
        key=len,
        reverse=True,
    )
)


_KO_MARKERS = frozenset("은 는 을 를".split())


@functools.cache
def _icu() -> Callable[[str], list[str]] | None:
    try:
        from icu4py.breakers import WordBreaker
    except ImportError:  # no wheel for this platform: character pairs instead
        return None

    def split(text: str) -> list[str]:
        return [w for w in WordBreaker(text, "en") if w.strip()]

    return split


def pairs(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def words(run: str) -> list[str]:
    """The words of ``run`` (a run of kbase.search.cjk.RUN from a query) to look for, in order;
    [] when it holds only function words."""
    if HANGUL.search(run):
        stem = korean_stem(run)
        return [] if stem in _KO else [stem]
    split = _icu()
    stop = _JA if KANA.search(run) else _ZH if HAN.search(run) else _TH
    if len(run) <= 2:  # a word already, or a pair of characters looked for as such
        return [] if run in stop or _HIRAGANA.fullmatch(run) else [run]
    if split is None:
        return pairs(run)
    out = []
    for word in _joined(split(run), stop):
        if word in stop or _HIRAGANA.fullmatch(word):
            continue
        if HAN.match(word):
            word = _OKURIGANA.sub("", word) or word
        out.append(word)
    return out


def _joined(tokens: list[str], stop: frozenset[str]) -> list[str]:
    """ICU's tokens with consecutive katakana, and consecutive single characters that are not
    function words, put back together."""
    out: list[str] = []
    single_before = False
    for t in tokens:
        if out and _KATAKANA.fullmatch(t) and _KATAKANA.fullmatch(out[-1]):
            out[-1] += t
            continue
        single = len(t) == 1 and t not in stop and not _HIRAGANA.fullmatch(t)
        if single and single_before:
            out[-1] += t
        else:
            out.append(t)
        single_before = single
    return out


def korean_stem(word: str) -> str:
    """A Korean word without the particles and endings at its end (twice at most): 소유권의 ->
    소유권, 처리하는 -> 처리. An ending of one syllable is cut only where two syllables remain
    (추가, 결과, 정의, 권한 and 길이 are words, not 추 + 가), except the markers of subject and
    object 은 는 을 를 (값을 -> 값)."""
    for _ in range(2):
        for ending in _KO_ENDINGS:
            keep = 1 if len(ending) > 1 or ending in _KO_MARKERS else 2
            if word.endswith(ending) and len(word) - len(ending) >= keep:
                word = word[: -len(ending)]
                break
        else:
            break
    return word
