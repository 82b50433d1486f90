"""`knowledge_base_search`: ranked passages from a configured folder of text documents.

The folder is cut into chunks of lines and ranked with BM25 (bm25s). The index lives in memory,
one per (root, folder), and each query first walks the folder by descriptor, opening and
`fstat`-ing each file beneath the root (no content is read): files whose size or mtime changed
are cut and tokenised again, deleted ones dropped, and the BM25 matrix rebuilt from the kept
tokens. Tokens are lower-cased words, the parts of camelCase and snake_case identifiers, and CJK
characters with their bigrams, so English and Chinese both match.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import anyio
from pydantic import BaseModel, Field

from ...errors import ToolError
from ...safety.beneath import Opened, Root
from ...services import settings_of
from ...tools.spec import ToolAnnotations, ToolContext, ToolResult, tool
from .cursors import make_cursor, query_digest, read_cursor
from .shown_text import looks_binary
from .walk import WalkStats, open_entry, walk
from .workspace import open_workspace

CHUNK_LINES = 30
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
_SNIPPET_LINES = 8
_SNIPPET_LINE_CHARS = 200


class KnowledgeSettings(BaseModel):
    """Where knowledge_base_search looks, and which files it indexes."""

    folder: str = "."
    """The folder to index, relative to the root."""
    extensions: tuple[str, ...] = (".md", ".markdown", ".txt", ".rst", ".org", ".adoc")
    """File name endings to index (lower case, with the dot)."""
    max_file_bytes: int = Field(default=2_000_000, ge=1)
    """Bigger files are left out of the index."""


@tool(
    annotations=ToolAnnotations(read_only=True, idempotent=True),
    examples=(
        {"query": "how do I rotate the API keys"},
        {"query": "部署 流程"},
        {"query": "retry backoff", "limit": 10},
    ),
)
async def knowledge_base_search(
    ctx: ToolContext,
    query: Annotated[
        str,
        Field(
            min_length=1,
            max_length=1000,
            description="Words to look for, in any order; identifiers and Chinese work too, "
            "e.g. 'rotate api keys'.",
        ),
    ],
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_LIMIT, description=f"Most passages per page (1-{MAX_LIMIT}), e.g. 5."),
    ] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        Field(
            max_length=500,
            description="The next_cursor of the previous result, for the next passages of the "
            "same query, e.g. 'eyJxIjoiYTFiMmMzIiwiYXQiOjV9'.",
        ),
    ] = None,
) -> ToolResult:
    """Search the knowledge base folder for passages about a topic, best matches first.

    Use it to find what the project's notes and documentation say about something when you do
    not know which file holds it; then read the file around the lines with read_file. Ranking
    is by shared words (BM25), not meaning: use the words the documents would use. The index
    follows file changes by itself.

    It does not search PDFs or office documents (read those with read_document), files over the
    configured size, or outside the configured folder, and it cannot match synonyms. For an
    exact string or regex, use grep_file.

    Result: a header such as "5 passages for 'api keys' in 'docs' (1–5 of 12)", then per
    passage its path, line range and score, and up to 8 lines of it numbered as in the file;
    then "More: pass cursor='…'" when there are more. structuredContent: {"results": [{"path",
    "start_line", "end_line", "snippet", "score"}], "total": N, "next_cursor": "…" or null}.

    Cost: a few milliseconds per query once indexed; the first query (or one after many files
    changed) reads and indexes the folder, about 1 s per 20 MB of text. Up to 10,000
    characters, about 600 per passage.
    """
    if not query.strip():
        raise ToolError(
            "The query is blank. Pass the words to look for, e.g. query='rotate api keys'."
        )
    settings = settings_of(ctx.services, KnowledgeSettings)
    terms = tokenize(query)

    def search() -> tuple[str, FolderIndex, list[Hit]]:
        with open_workspace(ctx) as root, root.open(settings.folder) as folder:
            if not stat.S_ISDIR(os.fstat(folder.fd).st_mode):
                raise ToolError(
                    f"The knowledge base folder {settings.folder!r} is a file, not a folder. "
                    "Configure KnowledgeSettings.folder as a directory under the root."
                )
            if not terms:
                raise ToolError(
                    f"The query {query!r} has no words or characters to search for (only "
                    "punctuation or spaces). Pass words, e.g. query='rotate api keys'."
                )
            index = _index_for(root.path, folder.relative)
            return folder.shown, index, index.search(terms, settings, root, folder)

    digest = query_digest("knowledge_base_search", query=query, folder=settings.folder)
    start = 0 if cursor is None else read_cursor(cursor, digest, "knowledge_base_search")
    shown_folder, index, hits = await anyio.to_thread.run_sync(search)
    if not hits:
        return ToolResult(
            f"No passage in {shown_folder!r} matches {query!r} ({index.file_count} files "
            "indexed). Try other words the documents would use, or grep_file for an exact "
            "string.",
            structured={"results": [], "total": 0, "next_cursor": None},
        )
    if start >= len(hits):
        raise ToolError(
            f"The cursor points past the last of the {len(hits)} passages (the documents "
            "changed, or the results are finished). Leave cursor out to start from the first."
        )
    page = hits[start : start + limit]
    end = start + len(page)
    next_cursor = make_cursor(digest, end) if end < len(hits) else None
    results = [
        {
            "path": hit.path.as_posix(),
            "start_line": hit.start_line,
            "end_line": hit.end_line,
            "snippet": hit.snippet,
            "score": round(hit.score, 3),
        }
        for hit in page
    ]
    noun = "passage" if len(page) == 1 else "passages"
    lines = [
        f"{len(page)} {noun} for {query!r} in {shown_folder!r} ({start + 1}–{end} of {len(hits)})"
    ]
    for result, hit in zip(results, page, strict=True):
        lines.append("")
        lines.append(
            f"{result['path']}: lines {hit.start_line}–{hit.end_line} (score {result['score']})"
        )
        lines.append(hit.snippet)
    if next_cursor is not None:
        lines.append(f"\nMore: pass cursor={next_cursor!r} for the next passages.")
    return ToolResult(
        "\n".join(lines),
        structured={"results": results, "total": len(hits), "next_cursor": next_cursor},
    )


# --- tokens --------------------------------------------------------------------------------------

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+(?:_+[^\W_{_CJK}]+)*)")
_IDENTIFIER_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_a-zA-Z]+")


def tokenize(text: str) -> list[str]:
    """Search tokens of `text`: lower-cased words and identifier parts, CJK unigrams and bigrams.

    'parseHTTPResponse' gives 'parsehttpresponse', 'parse', 'http', 'response'; 'max_file_bytes'
    gives itself and its three words; '部署流程' gives each character and '部署', '署流', '流程'.
    """
    tokens: list[str] = []
    for match in _TOKEN.finditer(text):
        cjk, word = match.groups()
        if cjk:
            tokens.extend(cjk)
            tokens.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
            continue
        tokens.append(word.lower())
        parts = [p.lower() for piece in word.split("_") for p in _IDENTIFIER_PART.findall(piece)]
        if len(parts) > 1:
            tokens.extend(parts)
    return tokens


# --- the index -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    path: PurePosixPath
    start_line: int
    lines: tuple[str, ...]
    tokens: tuple[str, ...]


@dataclass(frozen=True)
class Hit:
    path: PurePosixPath
    start_line: int
    end_line: int
    snippet: str
    score: float


@dataclass
class _IndexedFile:
    size: int
    mtime_ns: int
    chunks: tuple[Chunk, ...]


@dataclass
class FolderIndex:
    """The chunks of one folder's files and a BM25 index over them, kept up to date by `refresh`."""

    root: Path
    folder: PurePosixPath
    files: dict[PurePosixPath, _IndexedFile] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _chunks: list[Chunk] = field(default_factory=list)
    _retriever: Any = None
    _settings_key: tuple[Any, ...] = ()

    @property
    def file_count(self) -> int:
        return len(self.files)

    def search(
        self, terms: list[str], settings: KnowledgeSettings, root: Root, folder: Opened
    ) -> list[Hit]:
        with self.lock:
            self._refresh(settings, root, folder)
            return self._rank(terms)

    def _refresh(self, settings: KnowledgeSettings, root: Root, folder: Opened) -> None:
        key = (tuple(e.lower() for e in settings.extensions), settings.max_file_bytes)
        changed = key != self._settings_key
        if changed:
            self.files.clear()
            self._settings_key = key
        seen: set[PurePosixPath] = set()
        for entry in walk(folder, WalkStats()):
            path = entry.relative
            if entry.is_dir or not path.name.lower().endswith(key[0]):
                continue
            try:
                fd = open_entry(entry, root)
            except OSError:
                continue
            if fd is None:
                continue  # a symlink out of the root
            with Opened(fd, path) as file:
                info = os.fstat(file.fd)
                if not stat.S_ISREG(info.st_mode) or info.st_size > settings.max_file_bytes:
                    continue
                seen.add(path)
                known = self.files.get(path)
                if known and (known.size, known.mtime_ns) == (info.st_size, info.st_mtime_ns):
                    continue
                chunks = _chunks_of(file)
            if chunks is None:
                seen.discard(path)
                if self.files.pop(path, None) is not None:
                    changed = True
                continue
            self.files[path] = _IndexedFile(info.st_size, info.st_mtime_ns, chunks)
            changed = True
        for gone in set(self.files) - seen:
            del self.files[gone]
            changed = True
        if changed or self._retriever is None:
            self._rebuild()

    def _rebuild(self) -> None:
        import bm25s  # type: ignore[import-untyped]

        self._chunks = [c for path in sorted(self.files) for c in self.files[path].chunks]
        self._retriever = None
        if self._chunks:
            retriever = bm25s.BM25()
            retriever.index([list(c.tokens) for c in self._chunks], show_progress=False)
            self._retriever = retriever

    def _rank(self, terms: list[str]) -> list[Hit]:
        if self._retriever is None:
            return []
        vocabulary = self._retriever.vocab_dict
        known = [t for t in dict.fromkeys(terms) if t in vocabulary]
        if not known:
            return []
        scores = self._retriever.get_scores(known)
        order = sorted(
            (i for i in range(len(self._chunks)) if scores[i] > 0),
            key=lambda i: (-float(scores[i]), self._chunks[i].path, self._chunks[i].start_line),
        )
        return [_hit(self._chunks[i], float(scores[i]), set(known)) for i in order]


def _chunks_of(file: Opened) -> tuple[Chunk, ...] | None:
    """The file cut into chunks of CHUNK_LINES lines; None when it is unreadable or binary."""
    path = file.relative
    try:
        data = file.read_bytes()
    except OSError:
        return None
    if looks_binary(data[:8192]):
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    chunks = []
    for first in range(0, len(lines), CHUNK_LINES):
        part = tuple(lines[first : first + CHUNK_LINES])
        tokens = tuple(tokenize("\n".join(part)))
        if tokens:
            chunks.append(Chunk(path, first + 1, part, tokens))
    return tuple(chunks)


def _hit(chunk: Chunk, score: float, terms: set[str]) -> Hit:
    """A chunk as a hit, its snippet the run of lines that holds the most query terms."""
    weights = [len(terms.intersection(tokenize(line))) for line in chunk.lines]
    best = max(range(len(weights)), key=lambda i: (weights[i], -i))
    first = max(0, min(best - 2, len(chunk.lines) - _SNIPPET_LINES))
    shown = chunk.lines[first : first + _SNIPPET_LINES]
    snippet = "\n".join(
        f"{chunk.start_line + first + n:>6}\t{_cut(line)}" for n, line in enumerate(shown)
    )
    return Hit(
        chunk.path, chunk.start_line, chunk.start_line + len(chunk.lines) - 1, snippet, score
    )


def _cut(line: str) -> str:
    return line if len(line) <= _SNIPPET_LINE_CHARS else line[:_SNIPPET_LINE_CHARS] + "…"


_indexes: dict[tuple[Path, PurePosixPath], FolderIndex] = {}
_indexes_lock = threading.Lock()


def _index_for(root: Path, folder: PurePosixPath) -> FolderIndex:
    with _indexes_lock:
        index = _indexes.get((root, folder))
        if index is None:
            index = _indexes[(root, folder)] = FolderIndex(root, folder)
        return index


KNOWLEDGE_TOOLS = (knowledge_base_search,)
"""knowledge_base_search: ranked passages from the configured folder of documents."""

__all__ = ["KNOWLEDGE_TOOLS", "KnowledgeSettings", "knowledge_base_search", "tokenize"]
