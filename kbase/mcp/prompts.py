"""Prompts (prompts/list, prompts/get): ways of working with a knowledge base that an agent can
be handed, each a short plan in terms of the tools."""

from __future__ import annotations

from dataclasses import dataclass

CITE = (
    "Cite every statement you take from a note right after it, as [path:line] with the line "
    "that the search hit or your read shows (for a PDF: [path, page N])."
)


@dataclass(frozen=True)
class PromptSpec:
    name: str
    title: str
    description: str
    argument: str  # the one argument each takes
    argument_description: str

    def text(self, value: str) -> str:
        return TEXTS[self.name].format(value=value, cite=CITE)


PROMPTS = (
    PromptSpec(
        "answer-from-notes",
        "Answer from my notes, with citations",
        "Answer a question from the indexed notes only: search, read the passages, answer with "
        "a citation (path and line, or page) for every statement; say so when the notes do not "
        "answer it.",
        "question",
        "The question to answer from the notes.",
    ),
    PromptSpec(
        "summarize-note",
        "Summarize a note",
        "Read one note in full (following its continuation when it is long) and summarize it, "
        "with line citations, its open questions and the notes it connects to.",
        "note",
        "The note: a path as search returns it, a title or an alias.",
    ),
    PromptSpec(
        "connect-note",
        "Find connections for a note",
        "Find notes that a note should link to, or that say the same or the opposite, from its "
        "links, backlinks and the notes related in meaning; propose links with reasons.",
        "note",
        "The note: a path as search returns it, a title or an alias.",
    ),
)
BY_NAME = {p.name: p for p in PROMPTS}
NOTE_ARGUMENTS = {p.name for p in PROMPTS if p.argument == "note"}


def request_problem(name: str, arguments: dict | None) -> str | None:
    """What is wrong with prompts/get of ``name`` with ``arguments`` (one line naming the prompt
    or argument, and the fix), or None: an unknown prompt, an argument it does not take, its
    argument missing or empty."""
    spec = BY_NAME.get(name)
    if spec is None:
        return f"no prompt named {name!r} (hint: prompts/list lists them: {', '.join(BY_NAME)})"
    given = arguments or {}
    about = f"its one argument is {spec.argument!r}: {spec.argument_description.rstrip('.')}"
    other = [k for k in given if k != spec.argument]
    if other:
        shown = ", ".join(repr(k)[:40] for k in other[:5])
        return f"prompt {name} takes no argument {shown} (hint: {about})"
    value = given.get(spec.argument)
    if not isinstance(value, str) or not value.strip():
        what = "empty" if isinstance(value, str) else "missing"
        return f"prompt {name}: its argument {spec.argument!r} is {what} (hint: {about})"
    return None


TEXTS = {
    "answer-from-notes": """\
Answer this question from my notes, and only from them:

{value}

1. Call `search` with the question as it is (mode hybrid when the index has embeddings, see
   `status`), then again with two or three other wordings or the key names and terms
   (mode keyword for exact names).
2. For the most promising hits, call `read` around each hit's line (start_line a few lines
   before it, end_line some 30 lines after) to see the passage in full; follow a cut result's
   continuation when the passage goes on.
3. Answer in a few paragraphs. {cite}
4. If the notes do not answer the question, or answer only part of it, say so plainly, and say
   what they do contain. Do not fill gaps from general knowledge without marking it as such.""",
    "summarize-note": """\
Summarize the note {value!r} from my notes.

1. Call `read` with note={value!r}; when the result says more lines follow, read on from the
   start_line it gives until you have the whole note.
2. Write a summary of its main points in order, then its open questions or to-dos, if any.
   {cite}
3. Call `links` for the note and list the notes it links to and the notes linking to it that
   matter for the summary, by path.""",
    "connect-note": """\
Find connections for the note {value!r} in my notes.

1. Call `read` for the note to know what it says, and `links` for what it already links to and
   what links to it.
2. Call `related` for the note (notes close in meaning that it does not link yet), and
   `search` for its key terms.
3. Read the best candidates around their lines. Propose links the note should gain, each with
   one sentence on why, and point out notes that say the same thing or contradict it.
   {cite}""",
}
