"""A shell command line as the list of simple commands bash would run, with their context.

tree-sitter-bash parses the line; every `command` node anywhere in the tree (pipelines, lists,
subshells, groups, conditions, loops, function bodies, command and process substitutions,
heredoc bodies) becomes one :class:`SimpleCommand`. Each records the pipelines it sits in (so
`curl … | sh` can be recognised), the command whose argument or heredoc holds it (so
`bash -c "$(curl …)"` can be), the text it reads on standard input from a heredoc or here-string,
and its redirections. Strings that bash would parse again (`sh -c`, `eval`) are not opened here:
the policy does that, because only it knows which command takes a string as code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Final

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from .words import Word, node_text, parser_input, reading, word_of, words_of

__all__ = [
    "FunctionDefinition",
    "Redirect",
    "Script",
    "SimpleCommand",
    "new_parser",
    "parse_script",
]

_WRITE_OPERATORS: Final = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_ARITHMETIC_TESTS: Final = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
# Variables whose value looks like a credential: printing or sending them hands it over.
SECRET_VARIABLE: Final = re.compile(
    r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL|AUTH|SESSION|COOKIE|SSH_AUTH_SOCK"
    r"|_PAT$|^PAT_|_KEY$|_KEY_ID$|DSN$",
    re.IGNORECASE,
)
_ERROR_SNIPPET_CHARS: Final = 40


@dataclass(frozen=True, slots=True)
class Redirect:
    """`operator` (`>`, `>>`, `<`, `&>`, …) and the file it names; `writes` says if it writes."""

    operator: str
    target: Word

    @property
    def writes(self) -> bool:
        return self.operator in _WRITE_OPERATORS


@dataclass(slots=True)
class SimpleCommand:
    """One command bash would run: its words (the name first), `NAME=value` prefixes and
    redirections, with the context the policy needs.

    `pipes` holds one `(pipeline id, stage)` pair per pipeline the command sits in;
    `consumer` is the index of the command whose argument, assignment or heredoc holds this one
    in a substitution; `stdin_text` is a heredoc body or here-string the command reads."""

    index: int
    text: str
    words: tuple[Word, ...]
    assignments: tuple[tuple[str, Word], ...] = ()
    redirects: tuple[Redirect, ...] = ()
    pipes: tuple[tuple[int, int], ...] = ()
    consumer: int | None = None
    stdin_text: str | None = None
    depth: int = 0

    @property
    def name(self) -> str | None:
        """The command name without its directory (`/bin/rm` → `rm`); None when dynamic."""
        if not self.words or self.words[0].value is None:
            return None
        return self.words[0].value.rsplit("/", 1)[-1]

    @property
    def args(self) -> tuple[Word, ...]:
        return self.words[1:]


@dataclass(frozen=True, slots=True)
class FunctionDefinition:
    """A shell function and whether its body calls itself in a pipeline or in the background:
    the shape of a fork bomb (`:(){ :|:& };:`)."""

    name: str
    text: str
    forks_itself: bool


@dataclass(slots=True)
class Script:
    """Everything found in one parse: simple commands in order, orphan redirections of compound
    statements (`{ …; } > /etc/x`) with the statement's text, functions, and parse errors."""

    commands: list[SimpleCommand] = field(default_factory=list)
    group_redirects: list[tuple[str, Redirect]] = field(default_factory=list)
    functions: list[FunctionDefinition] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    hazards: list[tuple[str, str]] = field(default_factory=list)
    """`(statement, what)`: expansions that run or reveal what no command shows (`${!x}`,
    `${x@P}`, `$GITHUB_TOKEN`)."""
    loop_variables: list[str] = field(default_factory=list)
    """Names `for NAME in …` and `select NAME in …` set to words only the running shell knows."""
    arithmetic: list[tuple[str, str]] = field(default_factory=list)
    """`(statement, expression)`: text bash evaluates as arithmetic, where an array subscript
    runs the command substitutions in it."""


_NUMBER_WORD = re.compile(r"^-?\d+$")
_NUMBER_RANGE = re.compile(r"^\{-?\d+\.\.-?\d+(?:\.\.-?\d+)?\}$")
_SEQ = re.compile(r"^\$\(\s*seq(?:\s+-?\d+){1,3}\s*\)$")


def _numbers_only(values: list[Node]) -> bool:
    """Whether a `for` loop's words are all plain numbers: literals, `{1..9}` ranges, or
    `$(seq …)` with numeric arguments (its output is numbers), so arithmetic on the loop
    variable evaluates no text. An empty list means "$@", which the line cannot vouch for."""
    if not values:
        return False
    for value in values:
        text = _node_text(value)
        if not (_NUMBER_WORD.match(text) or _NUMBER_RANGE.match(text) or _SEQ.match(text)):
            return False
    return True


@cache
def _language() -> Language:
    return Language(tree_sitter_bash.language())


def new_parser() -> Parser:
    """A tree-sitter parser for bash (one per policy; parsers are not shared across threads)."""
    return Parser(_language())


def parse_script(
    parser: Parser, source: str, *, first_index: int = 0, first_pipeline: int = 0, depth: int = 0
) -> Script:
    """The simple commands of `source`, numbered from `first_index`."""
    tree = parser.parse(parser_input(source))
    walker = _Walker(first_index, first_pipeline, depth)
    with reading(source.encode("utf-8")):
        walker.visit(tree.root_node, _Context())
        if tree.root_node.has_error:
            walker.script.errors.extend(_error_snippets(tree.root_node))
    return walker.script


@dataclass(frozen=True, slots=True)
class _Context:
    pipes: tuple[tuple[int, int], ...] = ()
    consumer: int | None = None
    function: str | None = None


class _Walker:
    def __init__(self, first_index: int, first_pipeline: int, depth: int) -> None:
        self.script = Script()
        self.next_index = first_index
        self.next_pipeline = first_pipeline
        self.depth = depth
        self.self_calls: dict[str, int] = {}
        # tree-sitter-bash hangs `a && b > f` and `a | b > f` redirections on the whole list or
        # pipeline; bash applies them to the last command, so they wait for it here.
        self.pending_redirects: dict[int, list[Node]] = {}

    def visit(self, node: Node, ctx: _Context) -> None:
        kind = node.type
        if kind in ("expansion", "simple_expansion"):
            self.note_expansion(node)
        elif kind in ("arithmetic_expansion", "c_style_for_statement") or _is_double_paren(node):
            self.script.arithmetic.append((_node_text(node), _node_text(node)))
        elif kind == "test_command":
            self.note_test(node)
        elif kind == "for_statement":
            variable = node.child_by_field_name("variable")
            if variable is not None and not _numbers_only(node.children_by_field_name("value")):
                self.script.loop_variables.append(_node_text(variable))
        if kind == "command":
            self.visit_command(node, ctx, ())
        elif kind in ("declaration_command", "unset_command"):
            self.visit_declaration(node, ctx, ())
        elif kind == "redirected_statement":
            self.visit_redirected(node, ctx)
        elif kind == "pipeline":
            self.visit_pipeline(_pipeline_stages(node), ctx)
        elif kind == "function_definition":
            self.visit_function(node, ctx)
        elif kind == "variable_assignment" or kind == "variable_assignments":
            self.visit_bare_assignments(node, ctx, ())
        else:
            for child in node.children:
                self.visit(child, ctx)

    def note_expansion(self, node: Node) -> None:
        tokens = [c.type for c in node.children]
        text = _node_text(node)
        if len(tokens) > 1 and tokens[0] == "${" and tokens[1] == "!":
            self.script.hazards.append(
                (
                    text,
                    "expands a variable named by another value (indirection), which can run "
                    "code and cannot be checked statically",
                )
            )
        if "@" in tokens and any(_node_text(c) == "P" for c in node.children):
            self.script.hazards.append(
                (
                    text,
                    "expands a value as a prompt (@P), which runs the command substitutions in it",
                )
            )
        for child in node.named_children:
            if child.type == "variable_name" and SECRET_VARIABLE.search(_node_text(child)):
                self.script.hazards.append(
                    (text, f"expands {_node_text(child)}, a variable that looks like a credential")
                )

    def note_test(self, node: Node) -> None:
        """`[[ a -eq b ]]` evaluates both sides as arithmetic; `[[ -v a[i] ]]` evaluates i."""
        stack = list(node.named_children)
        while stack:
            part = stack.pop()
            operators = [_node_text(c) for c in part.children if c.type == "test_operator"]
            arithmetic = part.type == "binary_expression" and bool(
                _ARITHMETIC_TESTS.intersection(operators)
            )
            if arithmetic or (part.type == "unary_expression" and "-v" in operators):
                for operand in part.named_children:
                    if operand.type != "test_operator":
                        self.script.arithmetic.append((_node_text(node), _node_text(operand)))
            stack.extend(c for c in part.named_children if c.type.endswith("expression"))

    def visit_declaration(
        self, node: Node, ctx: _Context, redirect_nodes: tuple[Node, ...] | list[Node]
    ) -> None:
        """`export`, `declare`, `local`, `readonly`, `typeset`, `unset`: a simple command whose
        `NAME=value` arguments are also assignments."""
        words: list[Word] = []
        assignments: list[tuple[str, Word]] = []
        nested: list[Node] = []
        for child in node.children:
            if not child.is_named:
                keyword = _node_text(child)
                words.append(Word(keyword, keyword))
            elif child.type == "variable_assignment":
                name_node = child.child_by_field_name("name")
                value_node = child.child_by_field_name("value")
                name = _node_text(name_node) if name_node is not None else ""
                value = word_of(value_node) if value_node is not None else Word("", "")
                assignments.append((name, value))
                text = _node_text(child)
                words.append(Word(text, None if value.value is None else f"{name}={value.value}"))
                nested.extend(child.children)
            else:
                words.extend(words_of(child))
                nested.append(child)
        index = self.next_index
        self.next_index += 1
        redirects = [r for r in (_redirect_of(n) for n in redirect_nodes) if r is not None]
        self.script.commands.append(
            SimpleCommand(
                index=index,
                text=_node_text(node),
                words=tuple(words),
                assignments=tuple(assignments),
                redirects=tuple(redirects),
                pipes=ctx.pipes,
                consumer=ctx.consumer,
                depth=self.depth,
            )
        )
        inner = _Context(ctx.pipes, index, ctx.function)
        for child in nested:
            self.visit(child, inner)

    def visit_bare_assignments(
        self, node: Node, ctx: _Context, redirect_nodes: tuple[Node, ...] | list[Node]
    ) -> None:
        """`NAME=value` with no command sets a shell variable (and, exported, the environment
        of later commands): a command of no words, so the assignment rules see it."""
        nodes = [node] if node.type == "variable_assignment" else list(node.named_children)
        assignments: list[tuple[str, Word]] = []
        for assignment in nodes:
            if assignment.type != "variable_assignment":
                continue
            name_node = assignment.child_by_field_name("name")
            value_node = assignment.child_by_field_name("value")
            name = _node_text(name_node) if name_node is not None else ""
            value = word_of(value_node) if value_node is not None else Word("", "")
            assignments.append((name, value))
        index = self.next_index
        self.next_index += 1
        redirects = [r for r in (_redirect_of(n) for n in redirect_nodes) if r is not None]
        command = SimpleCommand(
            index=index,
            text=_node_text(node),
            words=(),
            assignments=tuple(assignments),
            redirects=tuple(redirects),
            pipes=ctx.pipes,
            consumer=ctx.consumer,
            depth=self.depth,
        )
        self.script.commands.append(command)
        inner = _Context(ctx.pipes, index, ctx.function)
        for assignment in nodes:
            for child in assignment.children:
                self.visit(child, inner)

    def visit_pipeline(self, stages: list[Node], ctx: _Context) -> None:
        pipeline = self.next_pipeline
        self.next_pipeline += 1
        for stage, child in enumerate(stages):
            self.visit(child, _Context((*ctx.pipes, (pipeline, stage)), ctx.consumer, ctx.function))

    def visit_redirected(self, node: Node, ctx: _Context) -> None:
        body: Node | None = None
        redirect_nodes: list[Node] = []
        for i, child in enumerate(node.children):
            if node.field_name_for_child(i) == "body":
                body = child
            else:
                redirect_nodes.append(child)
        heredoc_rest = [
            c
            for r in redirect_nodes
            if r.type == "heredoc_redirect"
            for c in r.children
            if c.type == "pipeline"
        ]
        if heredoc_rest and body is not None:
            # tree-sitter-bash hangs `cat <<EOF | sh` under the heredoc: rebuild the pipeline.
            stages = [body] + [s for rest in heredoc_rest for s in _pipeline_stages(rest)]
            pipeline = self.next_pipeline
            self.next_pipeline += 1
            body_ctx = _Context((*ctx.pipes, (pipeline, 0)), ctx.consumer, ctx.function)
            self._visit_redirected_body(body, redirect_nodes, node, body_ctx)
            for stage, child in enumerate(stages[1:], start=1):
                self.visit(
                    child, _Context((*ctx.pipes, (pipeline, stage)), ctx.consumer, ctx.function)
                )
            return
        if body is None:
            # `> ~/.bashrc` with no command still opens (and truncates) the file.
            for redirect_node in redirect_nodes:
                redirect = _redirect_of(redirect_node)
                if redirect is not None:
                    self.script.group_redirects.append((_node_text(node), redirect))
                self._visit_redirect_children(redirect_node, ctx)
            return
        self._visit_redirected_body(body, redirect_nodes, node, ctx)

    def _visit_redirected_body(
        self, body: Node, redirect_nodes: list[Node], statement: Node, ctx: _Context
    ) -> None:
        if body.type == "command":
            self.visit_command(body, ctx, redirect_nodes)
            return
        if body.type in ("variable_assignment", "variable_assignments"):
            self.visit_bare_assignments(body, ctx, redirect_nodes)
            return
        if body.type in ("declaration_command", "unset_command"):
            self.visit_declaration(body, ctx, redirect_nodes)
            return
        tail = _tail_command(body)
        if tail is not None:
            self.pending_redirects[tail.id] = redirect_nodes
            self.visit(body, ctx)
            return
        self.visit(body, ctx)
        for redirect_node in redirect_nodes:
            redirect = _redirect_of(redirect_node)
            if redirect is not None:
                self.script.group_redirects.append((_node_text(statement), redirect))
            self._visit_redirect_children(redirect_node, ctx)

    def visit_command(
        self, node: Node, ctx: _Context, redirect_nodes: tuple[Node, ...] | list[Node]
    ) -> None:
        index = self.next_index
        self.next_index += 1
        redirect_nodes = [*redirect_nodes, *self.pending_redirects.pop(node.id, ())]
        words: list[Word] = []
        assignments: list[tuple[str, Word]] = []
        redirects: list[Redirect] = []
        stdin_text: str | None = None
        nested: list[Node] = []
        for i, child in enumerate(node.children):
            fieldname = node.field_name_for_child(i)
            if child.type == "command_name":
                words.extend(w for c in child.children for w in words_of(c))
                nested.append(child)
            elif fieldname == "argument":
                words.extend(words_of(child))
                nested.append(child)
            elif child.type == "variable_assignment":
                name_node = child.child_by_field_name("name")
                value_node = child.child_by_field_name("value")
                name = _node_text(name_node) if name_node is not None else ""
                value = word_of(value_node) if value_node is not None else Word("", "")
                assignments.append((name, value))
                nested.extend(child.children)
            elif child.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                redirect_nodes = [*redirect_nodes, child]
            else:
                nested.append(child)
        for redirect_node in redirect_nodes:
            redirect = _redirect_of(redirect_node)
            if redirect is not None:
                redirects.append(redirect)
            body = _stdin_text(redirect_node)
            if body is not None:
                stdin_text = body
        text = _node_text(node)
        if redirects:
            text = " ".join([text, *(f"{r.operator} {r.target.text}" for r in redirects)])
        command = SimpleCommand(
            index=index,
            text=text,
            words=tuple(words),
            assignments=tuple(assignments),
            redirects=tuple(redirects),
            pipes=ctx.pipes,
            consumer=ctx.consumer,
            stdin_text=stdin_text,
            depth=self.depth,
        )
        self.script.commands.append(command)
        if ctx.function is not None and command.name == ctx.function:
            self.self_calls[ctx.function] = self.self_calls.get(ctx.function, 0) + 1
        inner = _Context(ctx.pipes, index, ctx.function)
        for child in nested:
            self.visit(child, inner)
        for redirect_node in redirect_nodes:
            self._visit_redirect_children(redirect_node, inner)

    def _visit_redirect_children(self, redirect_node: Node, ctx: _Context) -> None:
        for child in redirect_node.children:
            if child.type == "pipeline" and redirect_node.type == "heredoc_redirect":
                continue  # visited as pipeline stages by visit_redirected
            self.visit(child, ctx)

    def visit_function(self, node: Node, ctx: _Context) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        name = _node_text(name_node) if name_node is not None else ""
        if body is None:
            return
        self.visit(body, _Context(ctx.pipes, ctx.consumer, name))
        forks = self.self_calls.get(name, 0) > 0 and _has_fork_token(body)
        self.script.functions.append(FunctionDefinition(name, _node_text(node), forks))


def _is_double_paren(node: Node) -> bool:
    """`(( … ))`: tree-sitter-bash calls it a compound statement opened by `((`."""
    return (
        node.type == "compound_statement" and bool(node.children) and node.children[0].type == "(("
    )


def _tail_command(node: Node) -> Node | None:
    """The command a redirection of a list or pipeline applies to: the last one."""
    while node.type in ("list", "pipeline"):
        named = node.named_children
        if not named:
            return None
        node = named[-1]
    return node if node.type == "command" else None


def _pipeline_stages(node: Node) -> list[Node]:
    stages: list[Node] = []
    for child in node.children:
        if not child.is_named:
            continue  # `|`, `|&`
        if child.type == "pipeline":
            stages.extend(_pipeline_stages(child))
        else:
            stages.append(child)
    return stages


def _redirect_of(node: Node) -> Redirect | None:
    if node.type == "file_redirect":
        operator = next((c.type for c in node.children if not c.is_named), "")
        destinations = node.children_by_field_name("destination")
        if not destinations:
            return None
        target = word_of(destinations[0])
        duplicates = operator in (">&", "<&") and (
            target.text == "-" or target.text.rstrip("-").isdigit()
        )
        if duplicates:
            return None  # `2>&1`, `>&2`, `<&-`: duplicating a descriptor names no file
        return Redirect(operator, target)
    return None


def _stdin_text(node: Node) -> str | None:
    if node.type == "heredoc_redirect":
        for child in node.children:
            if child.type == "heredoc_body":
                return _node_text(child)
        return ""
    if node.type == "herestring_redirect":
        operand = [c for c in node.children if c.is_named]
        if operand:
            # A dynamic here-string keeps its raw text: parsed as code, `$x` is a dynamic name.
            word = word_of(operand[-1])
            return word.value if word.value is not None else word.text
    return None


def _has_fork_token(node: Node) -> bool:
    if node.type in ("|", "&", "|&") and not node.is_named:
        return True
    return any(_has_fork_token(child) for child in node.children)


def _node_text(node: Node) -> str:
    return node_text(node)


def _error_snippets(root: Node) -> list[str]:
    found: list[str] = []

    def walk(node: Node) -> None:
        if node.is_error or node.is_missing:
            text = _node_text(node)
            if node.is_missing:
                found.append(f"a missing {node.type!r}")
            else:
                found.append(repr(text[:_ERROR_SNIPPET_CHARS]))
            return
        if node.has_error:
            for child in node.children:
                walk(child)

    walk(root)
    return found or ["an unknown place"]
