"""The full sentence-transformers model run by ONNX Runtime: a precise need embedding in ~3.5 ms.

Torch spends 11-19 ms embedding one short need on a small CPU, over the discovery latency budget.
The same model exported once to ONNX, its matrix products quantised to int8 per output channel
and run on one thread, embeds a need of median length (25 tokens) in 3.5-4 ms on two shared CPU
cores, and needs neither torch nor transformers at query time: only `onnxruntime` and the
model's fast `tokenizers` tokenizer. Its vectors keep a cosine of .994 to the torch model's, and
the discovery rankings are the same within noise (see :mod:`.fusion`).

Measured and rejected on the same machine: float weights (8.5 ms), int8 per tensor (cosine .96),
two intra-op threads (slower whenever the other core is busy), the ONNX Runtime transformer
optimiser's fused attention (no gain), and keeping 4 or 5 of the 6 layers (2.4 / 3.2 ms, but
metatool recall@5 drops from .77 to .60 / .66).

Every text is embedded alone, a catalog's texts side by side on a pool of threads. The int8
matrix products quantise their input with a scale taken over the whole input tensor at run time,
so a text embedded in a batch would take its neighbours' (and their padding's) range: the same
text reached a cosine of 0.983-0.998 to itself depending on its batch, and a tool's vector
depended on which batch indexed it while a need is always embedded alone. Alone, a text has one
vector, a little closer to the float model's (median cosine .9942 against .9936 batched), and a
catalog of 199 tools is indexed in about the same time (0.69 s against 0.60 s batched).

The export (torch, transformers and onnx, a few seconds) happens once per model and recipe; the
file is cached beside the static token matrix (:mod:`.model_cache`). Mean pooling and L2
normalisation are part of the exported graph, so the model's output is the sentence embedding.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ..errors import UserError
from .embeddings import normalise_rows
from .model_cache import default_cache_dir, from_pretrained, model_digest
from .static_embeddings import load_tokenizer

__all__ = ["OnnxEmbedder", "export_onnx", "onnx_cache_path"]

logger = logging.getLogger(__name__)

# Bumped whenever the exported graph or its quantisation changes, so old caches are not reused.
_FORMAT: Final = "wakeful-onnx-1"
_DEFAULT_MAX_TOKENS: Final = 256
_INPUTS: Final = ("input_ids", "attention_mask")


class OnnxEmbedder:
    """Embeds with a sentence-transformers model exported to ONNX: an `Embedder` without torch.

    `model_file` is an ONNX graph taking `input_ids` and `attention_mask` (int64, batch × tokens)
    and returning one L2-normalised sentence embedding per row; `tokenizer` is the model's
    `tokenizers.Tokenizer`. Each text is run alone (see the module docs) on `threads` threads
    (one is fastest for a short text on a shared machine); several texts, as when a catalog is
    indexed, run `batch_threads` at a time (default: one per CPU).
    """

    def __init__(
        self,
        model_file: str | Path,
        tokenizer: Any,
        *,
        max_tokens: int = _DEFAULT_MAX_TOKENS,
        threads: int = 1,
        batch_threads: int | None = None,
    ) -> None:
        if max_tokens < 2:
            raise UserError(
                f"max_tokens must leave room for [CLS], a token and [SEP]; got {max_tokens}. "
                "Use the model's max_seq_length (256 for all-MiniLM-L6-v2)."
            )
        if threads < 1 or (batch_threads is not None and batch_threads < 1):
            raise UserError(
                f"An ONNX session needs at least one thread; got threads={threads}, "
                f"batch_threads={batch_threads}. Use 1 for single needs."
            )
        self.model_file = Path(model_file)
        self._tokenizer = tokenizer
        self._tokenizer.enable_truncation(max_tokens)
        self._session = _session(self.model_file, threads)
        self._batch_threads = batch_threads or os.cpu_count() or 1
        self.dimension = self._probe_dimension()

    @classmethod
    def from_model(
        cls,
        model_path: str | Path,
        *,
        cache_dir: Path | None = None,
        quantise: bool = True,
        threads: int = 1,
    ) -> OnnxEmbedder:
        """The ONNX embedder of a local sentence-transformers model folder.

        The graph is read from `cache_dir` (default `$XDG_CACHE_HOME/wakeful`, else
        `~/.cache/wakeful`); when absent it is exported from the model, which needs torch,
        transformers and onnx once and takes a few seconds. `quantise=False` keeps float
        weights: the torch model's exact embeddings at about three times the cost.
        """
        folder = Path(model_path)
        tokenizer = load_tokenizer(folder)
        cache = onnx_cache_path(folder, cache_dir, quantise=quantise)
        if not cache.exists():
            logger.warning("Exporting %s to ONNX into %s (once; a few seconds).", folder, cache)
            cache.parent.mkdir(parents=True, exist_ok=True)
            partial = cache.with_suffix(f".{os.getpid()}.partial")
            try:
                export_onnx(folder, partial, quantise=quantise)
                partial.replace(cache)
            finally:
                partial.unlink(missing_ok=True)
        return cls(cache, tokenizer, max_tokens=_max_tokens(folder), threads=threads)

    def count_tokens(self, text: str) -> int:
        """How many tokens the model reads for `text`, [CLS] and [SEP] included (at most
        `max_tokens`: the rest is cut off)."""
        return len(self._tokenizer.encode(text).ids)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return vectors
        encodings = self._tokenizer.encode_batch(list(texts))
        if len(texts) == 1 or self._batch_threads == 1:
            for row, encoding in enumerate(encodings):
                vectors[row] = self._run(encoding)[0]
            return normalise_rows(vectors)
        # onnxruntime releases the GIL while it runs, so one session serves several threads.
        with ThreadPoolExecutor(self._batch_threads, thread_name_prefix="wakeful-embed") as pool:
            for row, output in enumerate(pool.map(self._run, encodings)):
                vectors[row] = output[0]
        return normalise_rows(vectors)

    def _run(self, encoding: Any) -> npt.NDArray[np.float32]:
        ids = np.asarray([encoding.ids], dtype=np.int64)
        (output,) = self._session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
        result: npt.NDArray[np.float32] = np.asarray(output, dtype=np.float32)
        return result

    def _probe_dimension(self) -> int:
        try:
            output = self._run(self._tokenizer.encode("dimension probe"))
        except Exception as exc:  # onnxruntime raises its own untyped errors for a bad graph
            raise UserError(
                f"The ONNX model {self.model_file} does not take input_ids and attention_mask "
                f"for this tokenizer ({exc}). Delete it to export it again, or build it with "
                "OnnxEmbedder.from_model(MODEL_PATH)."
            ) from exc
        if output.ndim != 2 or output.shape[0] != 1:
            raise UserError(
                f"The ONNX model {self.model_file} returns shape {output.shape} for one text; "
                "it must return one sentence embedding per row. Export it with "
                "OnnxEmbedder.from_model(MODEL_PATH)."
            )
        return int(output.shape[1])

    def __repr__(self) -> str:
        return f"OnnxEmbedder({str(self.model_file)!r}, dimension={self.dimension})"


def onnx_cache_path(model_folder: Path, cache_dir: Path | None = None, *, quantise: bool) -> Path:
    """Where the ONNX export of `model_folder` is cached: named after a digest of its files."""
    recipe = f"{_FORMAT}-{'int8' if quantise else 'float'}"
    folder = default_cache_dir() if cache_dir is None else cache_dir
    return folder / f"onnx-{model_digest(model_folder, recipe)}.onnx"


def export_onnx(model_folder: Path, target: Path, *, quantise: bool) -> None:
    """Export a mean-pooling sentence-transformers model to `target`, quantised when asked."""
    _require_mean_pooling(model_folder)
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise UserError(
            "Exporting a model to ONNX needs torch, transformers and onnx once; install them "
            "with `pip install wakeful[embeddings] onnx`, or copy a cached onnx-*.onnx from a "
            "machine that has them."
        ) from exc
    model: Any = from_pretrained(AutoModel, model_folder).eval()

    class MeanPooled(torch.nn.Module):
        """The model's token states, mean-pooled over the mask and L2-normalised."""

        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            states = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    # Any ids the vocabulary holds: the traced graph takes every batch size and length.
    example = torch.ones((1, 3), dtype=torch.int64)
    float_file = target.with_suffix(".float.onnx") if quantise else target
    dynamic = {0: "batch", 1: "tokens"}
    try:
        with warnings.catch_warnings():
            # The tracer warns about shape-dependent branches of the attention code; the graph
            # is exported with dynamic batch and length and checked by the tests.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                MeanPooled(model),
                (example, torch.ones_like(example)),
                str(float_file),
                input_names=list(_INPUTS),
                output_names=["embedding"],
                dynamic_axes={
                    "input_ids": dynamic,
                    "attention_mask": dynamic,
                    "embedding": {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        if quantise:
            _quantise(float_file, target)
    except ImportError as exc:
        raise UserError(
            f"Exporting to ONNX needs the onnx package ({exc.name} is missing); install it "
            "with `pip install onnx`."
        ) from exc
    finally:
        if quantise:
            float_file.unlink(missing_ok=True)


def _quantise(source: Path, target: Path) -> None:
    """int8 weights per output channel for the matrix products; the rest stays float."""
    from onnxruntime.quantization import (  # type: ignore[import-untyped, unused-ignore]
        QuantType,
        quantize_dynamic,
    )

    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
    )


def _session(model_file: Path, threads: int) -> Any:
    try:
        import onnxruntime  # type: ignore[import-untyped, unused-ignore]
    except ImportError as exc:
        raise UserError(
            "ONNX embeddings need the onnxruntime package, which is not installed. Install it "
            "with `pip install onnxruntime`, or use the static embeddings alone."
        ) from exc
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: the optimiser's notes are not the user's
    # Idle pool threads would otherwise spin after each batch, taking a small machine's cores
    # from the single-threaded need that follows.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return onnxruntime.InferenceSession(
            str(model_file), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own untyped errors for a bad file
        raise UserError(
            f"Cannot load the ONNX model {model_file}: {exc}. Delete it to export it again "
            "with OnnxEmbedder.from_model(MODEL_PATH)."
        ) from exc


def _require_mean_pooling(model_folder: Path) -> None:
    config = model_folder / "1_Pooling" / "config.json"
    if not config.exists():
        return
    pooling = json.loads(config.read_text(encoding="utf-8"))
    if not pooling.get("pooling_mode_mean_tokens", False):
        raise UserError(
            f"The model {model_folder} does not mean-pool its tokens ({config}); the ONNX "
            "export supports mean-pooling models such as all-MiniLM-L6-v2 only. Use "
            "SentenceTransformerEmbedder for this model."
        )


def _max_tokens(model_folder: Path) -> int:
    config = model_folder / "sentence_bert_config.json"
    if not config.exists():
        return _DEFAULT_MAX_TOKENS
    value = json.loads(config.read_text(encoding="utf-8")).get("max_seq_length")
    return int(value) if isinstance(value, int) and value >= 2 else _DEFAULT_MAX_TOKENS
