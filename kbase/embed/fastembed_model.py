"""Any model of fastembed's catalog as kbase's embedder: ``--model fastembed:NAME``.

fastembed (the design card's package; ``pip install "kbase[fastembed]"``) finds the model in its
own cache (``FASTEMBED_CACHE_PATH``, else a folder in the temporary directory). kbase asks it
for cached files only, so nothing is downloaded unless the user asks (``download=True``, the
CLI's ``--download``). ``fastembed:NAME@FOLDER`` loads the model's files from a local folder
(fastembed's ``specific_model_path``); a NAME fastembed does not know is registered from the
folder's config.json (mean pooling, normalised), as ``TextEmbedding.add_custom_model`` does.

The fingerprint names the model and the sha256 of its ONNX file (hashed once per file, size and
time; kept in kbase's model cache), so vectors of another file are never mixed in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from kbase.errors import InputError, KbaseError

PREFIX = "fastembed:"
INSTALL_HINT = 'pip install "kbase[fastembed]"'
# Model families trained with an instruction before each text: (query, passage).
PREFIXES = {"e5": ("query: ", "passage: ")}
# Names that read about every language (kbase.embed.embedder.reader).
MULTILINGUAL_HINTS = ("multilingual", "bge-m3", "labse", "xlm", "-zh", "jina-embeddings-v3")


def _fastembed():
    try:
        import fastembed
    except ImportError as e:
        raise KbaseError("fastembed is not installed", INSTALL_HINT) from e
    return fastembed


class FastembedEmbedder:
    """A fastembed TextEmbedding model: passages and queries as fastembed embeds them (with
    e5's ``query: `` / ``passage: `` for the e5 family), unit float32 vectors."""

    max_tokens = 512
    min_similarity = 0.3

    def __init__(
        self,
        spec: str,
        *,
        download: bool = False,
        threads: int | None = None,
        batch_size: int = 8,
    ) -> None:
        fastembed = _fastembed()
        from fastembed import TextEmbedding

        body = spec[len(PREFIX) :] if spec.startswith(PREFIX) else spec
        model, _, folder = body.partition("@")
        model = model.strip()
        self.name = PREFIX + body
        self.model_id = self.name
        self.batch_size = batch_size
        known = {m["model"].lower(): m for m in TextEmbedding.list_supported_models()}
        desc = known.get(model.lower())
        kwargs: dict = {}
        if folder:
            path = Path(folder).expanduser()
            if not path.is_dir():
                raise InputError(
                    f"no such model folder: {folder}",
                    "give the folder holding the model's .onnx file and tokenizer.json",
                )
            kwargs["specific_model_path"] = str(path.resolve())
            if desc is None:
                desc = _register(TextEmbedding, model, path)
        elif desc is None:
            raise InputError(
                f"fastembed {fastembed.__version__} does not know the model {model!r}",
                "see python -c 'from fastembed import TextEmbedding as T;"
                ' print([m["model"] for m in T.list_supported_models()])\','
                " or give its files: fastembed:NAME@FOLDER",
            )
        else:
            kwargs["local_files_only"] = not download
        self.dimension = int(desc["dim"])
        family = next((k for k in PREFIXES if k in model.lower()), None)
        self.query_prefix, self.passage_prefix = PREFIXES[family] if family else ("", "")
        self.languages = ("*",) if any(h in model.lower() for h in MULTILINGUAL_HINTS) else ("en",)
        try:
            self._model = TextEmbedding(
                desc["model"], threads=threads or os.cpu_count() or 1, **kwargs
            )
        except Exception as e:  # fastembed raises ValueError, OSError, hub errors...
            where = os.environ.get("FASTEMBED_CACHE_PATH") or "fastembed's cache"
            raise KbaseError(
                f"cannot load the fastembed model {model} ({where}): {str(e).splitlines()[0]}",
                "download it once (needs the network): kbase index --model"
                f" {PREFIX}{model} --download, or give its files: {PREFIX}{model}@FOLDER"
                if not download and not folder
                else "check the folder's files and the network",
            ) from e
        inner = getattr(self._model, "model", None)
        model_dir = Path(getattr(inner, "_model_dir", "") or kwargs.get("specific_model_path", ""))
        model_file = model_dir / desc.get("model_file", "model.onnx")
        self.fingerprint = json.dumps(
            {
                "model": self.name,
                "sha256": _file_sha256(model_file) if model_file.is_file() else None,
                "dim": self.dimension,
                "prefixes": [self.query_prefix, self.passage_prefix],
            },
            sort_keys=True,
        )

    def _vectors(self, texts: list[str]) -> list[bytes]:
        import numpy as np

        out = []
        for v in self._model.embed(texts, batch_size=self.batch_size):
            v = np.asarray(v, dtype=np.float64)
            out.append((v / max(float(np.linalg.norm(v)), 1e-12)).astype("<f4").tobytes())
        return out

    def embed_batch(self, texts: Sequence[str]) -> list[bytes]:
        from kbase.embed.embedder import well_formed

        return self._vectors([self.passage_prefix + well_formed(t) for t in texts])

    def embed_query(self, text: str) -> bytes:
        from kbase.embed.embedder import well_formed

        return self._vectors([self.query_prefix + well_formed(text)])[0]


def _register(text_embedding, model: str, folder: Path) -> dict:
    """Register a model fastembed does not know from its folder: mean pooling, normalised, the
    dimension from config.json, the first .onnx file found."""
    from fastembed.common.model_description import ModelSource, PoolingType

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        dim = int(config["hidden_size"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(
            f"{folder / 'config.json'} does not give the model's hidden_size",
            "a fastembed:NAME@FOLDER model fastembed does not know needs its config.json",
        ) from e
    onnx_files = sorted(folder.rglob("*.onnx"))
    if not onnx_files:
        raise InputError(f"no .onnx file in {folder}", "export the model to ONNX first")
    model_file = str(onnx_files[0].relative_to(folder))
    text_embedding.add_custom_model(
        model=model,
        pooling=PoolingType.MEAN,
        normalization=True,
        sources=ModelSource(hf=model),
        dim=dim,
        model_file=model_file,
    )
    return {"model": model, "dim": dim, "model_file": model_file}


def _file_sha256(path: Path) -> str:
    """The file's sha256, remembered by path, size and time in kbase's model cache."""
    from kbase.embed.embedder import model_cache_dir
    from kbase.embed.onnx_graph import sha256_file

    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    memo = model_cache_dir() / "fastembed-sha256.json"
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if key not in known:
        known[key] = sha256_file(path)
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(known, indent=1), encoding="utf-8")
            os.replace(tmp, memo)
        except OSError:
            pass
    return known[key]
