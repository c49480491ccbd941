"""The fixed list of Markdown markup that a search snippet must not show (issue 12, point 3).

One place for the list: bench/questions.py --snippets measures with it, and a test of the
snippet renderer can import it (``from bench.markup import markup_in``).

Patterns are searched with re.MULTILINE, so ``^`` and ``$`` hold at every line of a snippet.
A snippet cut by kbase starts or ends with an ellipsis (``…``); the anchored patterns allow it,
so ``…## Install`` still counts as a heading marker at the start.
"""

from __future__ import annotations

import re

_E = "…"  # kbase marks a cut snippet with it, at either end

MARKUP_PATTERNS: dict[str, str] = {
    "heading marker": rf"^{_E}?#{{1,6}} ",
    "bold **": r"\*\*",
    "bold __": r"__",
    "wikilink [[": r"\[\[",
    "wikilink ]]": r"\]\]",
    "embed ![[": r"!\[\[",
    "callout > [!": r"> \[!",
    "code fence ```": r"```",
    "code fence ~~~": r"~~~",
    "comment %%": r"%%",
    "comment <!--": r"<!--",
    "comment -->": r"-->",
    "block id ^id": rf" \^[A-Za-z0-9-]+{_E}?$",
    "html tag": r"</?[a-zA-Z][^>]*>",
    "table pipe": rf"^{_E}?\| | \|{_E}?$",
    "link to a url ](http": r"\]\(http",
    "image ![": r"!\[",
}

_COMPILED = {name: re.compile(p, re.MULTILINE) for name, p in MARKUP_PATTERNS.items()}


def markup_in(text: str) -> list[str]:
    """Names of the markup patterns found in ``text`` (empty when it reads as plain text)."""
    return [name for name, rx in _COMPILED.items() if rx.search(text)]
