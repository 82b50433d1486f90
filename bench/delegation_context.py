"""The four context strategies compared on fixed delegation tasks (bench/data/delegation_tasks).

Each task has the parent's conversation (user turns, its own replies, tool results), the user's
profile with its private fields, the facts a child needs for the task and the private facts it
must not get. Per strategy, over every task:

- tokens to child: the estimated tokens of the text the child reads (task included);
- needed facts: the share of needed facts present in that text;
- private leaked: private facts found in it (separators ignored, so a number split over lines
  counts); 0 is the requirement wherever redaction runs;
- context-model calls, the writer's tokens (its prompt and reply, estimated) and the extra
  latency those calls add (only the llm strategy, and adaptive when it picks llm);
- prep ms: the time to prepare one context, model calls included.

`manual` shares what the task file says a parent would name; `adaptive` gets no such list, so
it chooses among the other three. The last row runs automatic trimming with redaction switched
off, to show what redaction removes.

Here the context writer is a FunctionModel that extracts per rules (sentences with figures,
names or constraint words; nothing naming a forbidden field), so the llm row measures the
strategy's machinery, not a model's judgement. `--model NAME [--base-url URL]` uses a real
OpenAI-compatible model instead (API key from OPENAI_API_KEY).

    .venv/bin/python bench/delegation_context.py [--model gpt-4o-mini] [--base-url URL]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import Counter
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from report import Table, header, percentile
from wakeful.collab import (
    ChildContext,
    ContextSettings,
    ManualShare,
    ParentView,
    RedactionSettings,
    estimate_tokens,
    prepare_child_context,
)
from wakeful.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from wakeful.models import FunctionModel, Model, ModelRequest, StreamPart, TurnEnd
from wakeful.models.base import ToolDefinition

TASKS = Path(__file__).resolve().parent / "data" / "delegation_tasks.json"
STRATEGIES = ("minimal", "manual", "automatic", "llm", "adaptive")
NO_REDACTION = "automatic, no redaction"
# Words that make a sentence a constraint for the rule-based context writer.
CONSTRAINT_WORDS = re.compile(
    r"(?i)\b(prefer|please|must|only|under|up to|budget|need|focus|keep|ask|include|use)\b"
)
STOPWORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "for",
        "in",
        "on",
        "at",
        "with",
        "from",
        "by",
        "we",
        "our",
        "my",
        "me",
        "you",
        "your",
        "is",
        "are",
        "be",
        "this",
        "that",
        "as",
        "it",
        "its",
        "was",
        "were",
        "will",
        "what",
        "which",
        "who",
        "when",
        "how",
        "about",
        "into",
        "above",
        "before",
        "earlier",
        "discussed",
        "talked",
        "mentioned",
        "user",
    ]
)


@dataclass
class Delegation:
    """One task of the file, as a parent's view plus what a parent would share by hand."""

    name: str
    view: ParentView
    share: ManualShare
    redaction: RedactionSettings
    needed: list[str]
    private: list[str]


def load_tasks(path: Path) -> list[Delegation]:
    tasks = json.loads(path.read_text(encoding="utf-8"))["tasks"]
    return [delegation(task) for task in tasks]


def delegation(task: dict[str, Any]) -> Delegation:
    messages: list[Message] = [SystemMessage(content="You are the user's assistant.")]
    index_of: dict[int, int] = {}
    for entry_index, entry in enumerate(task["conversation"]):
        if entry["role"] == "tool":
            call_id = f"call_{entry_index}"
            call = ToolCall(id=call_id, name=entry["name"], arguments="{}")
            messages.append(AssistantMessage(tool_calls=[call]))
            index_of[entry_index] = len(messages)
            messages.append(
                ToolMessage(tool_call_id=call_id, name=entry["name"], content=entry["content"])
            )
        else:
            index_of[entry_index] = len(messages)
            role = UserMessage if entry["role"] == "user" else AssistantMessage
            messages.append(role(content=entry["content"]))
    share = task["share"]
    return Delegation(
        name=task["id"],
        view=ParentView.from_trajectory(task["task"], messages, profile=task["profile"]),
        share=ManualShare(
            messages=tuple(index_of[i] for i in share.get("turns", [])),
            tool_results=tuple(share.get("tool_results", [])),
            profile_keys=tuple(share.get("profile_keys", [])),
            notes=tuple(share.get("notes", [])),
        ),
        redaction=RedactionSettings(
            fields=tuple(task["private_fields"]), patterns=task.get("patterns", {})
        ),
        needed=task["needed"],
        private=task["private"],
    )


def squeeze(text: str) -> str:
    return re.sub(r"[\s\-.>*_,/]", "", text).lower()


def present(fact: str, text: str) -> bool:
    return " ".join(fact.lower().split()) in " ".join(text.lower().split())


def leaked(secret: str, text: str) -> bool:
    return squeeze(secret) in squeeze(text)


# --- the rule-based context writer -------------------------------------------------------------


def sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [p.strip() for p in parts if p.strip()]


def section(prompt: str, title: str) -> str:
    found = re.search(rf"^# {re.escape(title)}\n(.*?)(?=^# |\Z)", prompt, re.M | re.S)
    return found.group(1).strip() if found else ""


def rule_writer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> str:
    """Extract facts, constraints and a summary by fixed rules, as a stand-in for a model."""
    system, prompt = messages[0].content, messages[1].content
    forbidden_line = re.search(
        r"Never include these kinds of data, not even in part: (.*)\.", system
    )
    forbidden = [f.strip() for f in forbidden_line.group(1).split(",")] if forbidden_line else []
    task_words = {
        w for w in re.findall(r"[a-z]{4,}", section(prompt, "Task for the subagent").lower())
    } - STOPWORDS
    facts: list[str] = []
    constraints: list[str] = []
    last_user = ""
    texts: list[str] = []
    for line in section(prompt, "Conversation").splitlines():
        found = re.match(r"\[\d+\] turn \d+, ([^:]+): (.*)", line)
        if found and found.group(1) != "main_agent":
            texts.append(found.group(2))
            if found.group(1) == "user":
                last_user = found.group(2)
        elif not found and texts:
            texts[-1] += " " + line
    texts += [line for line in section(prompt, "Tool results").splitlines() if line.strip()]
    profile = [
        line[2:] for line in section(prompt, "User profile").splitlines() if line.startswith("- ")
    ]
    for sentence in [*profile, *(s for text in texts for s in sentences(text))]:
        lower = sentence.lower()
        if "[redacted" in lower or any(f.split(".")[-1].lower() in lower for f in forbidden):
            continue
        if CONSTRAINT_WORDS.search(sentence):
            constraints.append(sentence)
        elif re.search(r"\d|[A-Z][a-z]+ [A-Z]", sentence) or task_words & set(
            re.findall(r"[a-z]{4,}", lower)
        ):
            facts.append(sentence)
    summary = f"The user last said: {sentences(last_user)[0]}" if last_user else ""
    return json.dumps(
        {"facts": facts, "constraints": constraints, "history_summary": summary},
        ensure_ascii=False,
    )


class CountingModel(Model):
    """Wraps the context writer to add up the tokens of its prompts and replies."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.prompt_tokens = 0
        self.reply_tokens = 0

    async def _count(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        self.prompt_tokens += sum(estimate_tokens(m.content) for m in request.messages)
        async for part in self.inner.stream(request):
            if isinstance(part, TurnEnd):
                self.reply_tokens += estimate_tokens(part.message.content)
            yield part

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamPart, None]:
        return self._count(request)


# --- measuring ---------------------------------------------------------------------------------


@dataclass
class Row:
    tokens: list[int] = field(default_factory=list)
    needed: list[float] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    calls: int = 0
    writer_tokens: int = 0
    model_seconds: list[float] = field(default_factory=list)
    prep_seconds: list[float] = field(default_factory=list)
    chosen: Counter[str] = field(default_factory=Counter)


def settings_for(strategy: str, task: Delegation) -> ContextSettings:
    if strategy == "manual" and task.share.empty:
        # A parent that names nothing to share passes the task alone.
        strategy = "minimal"
    if strategy == NO_REDACTION:
        return ContextSettings(strategy="automatic", redaction=RedactionSettings(builtin=()))
    return ContextSettings.model_validate({"strategy": strategy}).model_copy(
        update={"redaction": task.redaction}
    )


async def measure(strategy: str, tasks: list[Delegation], writer: Model) -> Row:
    row = Row()
    for task in tasks:
        counting = CountingModel(writer)
        started = time.perf_counter()
        context: ChildContext = await prepare_child_context(
            task.view,
            settings_for(strategy, task),
            share=task.share if strategy == "manual" and not task.share.empty else None,
            model=counting,
        )
        row.prep_seconds.append(time.perf_counter() - started)
        row.tokens.append(context.tokens)
        row.needed.append(sum(present(f, context.text) for f in task.needed) / len(task.needed))
        row.leaks += [f"{task.name}: {s}" for s in task.private if leaked(s, context.text)]
        row.calls += context.record.model_calls
        row.writer_tokens += counting.prompt_tokens + counting.reply_tokens
        if context.record.model_calls:
            row.model_seconds.append(context.record.model_seconds)
        row.chosen[context.record.strategy] += 1
    return row


def ms(samples: list[float], p: float) -> str:
    return f"{percentile(samples, p) * 1000:.1f}" if samples else "-"


async def main(model_name: str | None, base_url: str | None) -> None:
    tasks = load_tasks(TASKS)
    writer: Model
    if model_name:
        from wakeful.models import OpenAIChatModel

        writer = OpenAIChatModel(model_name, base_url=base_url)
        who = f"{model_name} (OpenAI-compatible)"
    else:
        writer = FunctionModel(rule_writer, name="rule-based writer")
        who = "a rule-based FunctionModel"
    header(
        f"Context strategies: {len(tasks)} delegation tasks, "
        f"{sum(len(t.needed) for t in tasks)} needed and {sum(len(t.private) for t in tasks)} "
        f"private facts; context writer: {who}"
    )
    table = Table(
        [
            "strategy",
            "tokens to child (mean)",
            "needed facts",
            "private leaked",
            "model calls",
            "writer tokens (mean)",
            "extra latency p50/p95 ms",
            "prep ms p50",
        ]
    )
    rows: dict[str, Row] = {}
    for strategy in (*STRATEGIES, NO_REDACTION):
        row = rows[strategy] = await measure(strategy, tasks, writer)
        table.add(
            strategy,
            f"{statistics.mean(row.tokens):.0f}",
            f"{statistics.mean(row.needed):.0%}",
            len(row.leaks),
            row.calls,
            f"{row.writer_tokens / len(tasks):.0f}",
            f"{ms(row.model_seconds, 50)}/{ms(row.model_seconds, 95)}",
            ms(row.prep_seconds, 50),
        )
    table.print()
    chosen = ", ".join(f"{name} {n}" for name, n in sorted(rows["adaptive"].chosen.items()))
    print(f"\nadaptive chose: {chosen}.")
    fallbacks = rows["llm"].chosen.get("automatic", 0)
    print(f"llm fell back to automatic in {fallbacks} of {len(tasks)} tasks.")
    for strategy, row in rows.items():
        if row.leaks and strategy != NO_REDACTION:
            print(f"LEAKS under {strategy}: {'; '.join(row.leaks)}")
    print(
        f"Without redaction, automatic trimming leaks {len(rows[NO_REDACTION].leaks)} private "
        "facts; with it, every strategy must leak 0."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="an OpenAI-compatible model to write the llm context")
    parser.add_argument("--base-url", help="the model's API base URL (default: OpenAI's)")
    parser.add_argument("--quick", action="store_true", help="the same run (it is quick)")
    args = parser.parse_args()
    anyio.run(main, args.model, args.base_url)
