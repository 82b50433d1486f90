"""What a runtime is made of, as one value: the model, the tools, the store, the safety layers
and every other option `Runtime(...)` takes as a keyword argument.

`Runtime(model=m, store_path="agent.db")` and
`Runtime.from_settings(RuntimeSettings(model=m, store_path=Path("agent.db")))` build the same
runtime (`store_url="postgresql://wakeful@db/wakeful"` instead runs it on PostgreSQL): the
keyword arguments (`RuntimeOptions`, as a caller may give them) are the fields of
`RuntimeSettings`, one for one. The value is never changed by the runtime that uses it: what a
runtime derives from it (the system prompt with the skills' index, the gate completed with an
audit log) is its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack
from urllib.parse import parse_qs, urlsplit, urlunsplit

from ..errors import UserError
from ..store.urls import POSTGRES_SCHEMES

if TYPE_CHECKING:
    from ..agent.router import Router
    from ..agent.session import SessionConfig, SessionObserver
    from ..channels.registry import ChannelSpec
    from ..clock import Clock
    from ..core.channel import ChannelKind
    from ..delivery.settings import DeliverySettings
    from ..discovery.session_tools import DiscoverySettings
    from ..discovery.skill_tools import SkillsSettings
    from ..mcp.config import MCPServerConfig
    from ..mcp.pins import ToolPins
    from ..models.base import Model
    from ..safety.commands import PolicySettings
    from ..safety.gate import CallGate
    from ..safety.sandbox import SandboxSettings
    from ..services import Outbox
    from ..subagents.definitions import AgentDefinition
    from ..subagents.limits import SubagentLimits
    from ..tools.cache import ResultCache
    from ..tools.spec import Tool

__all__ = ["RuntimeOptions", "RuntimeSettings", "check_store_url", "is_store_url"]


class RuntimeOptions(TypedDict, total=False):
    """`Runtime`'s keyword arguments besides `model`, in the types a caller may give them; see
    `RuntimeSettings` for what each does and its default."""

    tools: Iterable[Tool]
    with_core_tools: bool
    store_path: str | Path | None
    store_url: str | None
    store_synchronous: Literal["full", "normal"]
    session_config: SessionConfig | None
    router: Router | None
    parallel_model: Model | None
    observer: SessionObserver | None
    outbox: Outbox | None
    clock: Clock | None
    with_timers: bool
    workdir: str | Path | None
    progress_interval: float | None
    result_cache: ResultCache | Literal["default"] | None
    mcp_servers: Iterable[MCPServerConfig]
    gate: CallGate | Literal["default"] | None
    settings: Sequence[object]
    discovery: DiscoverySettings | None
    mcp_in_process: Mapping[str, Any] | None
    skills: SkillsSettings | None
    mcp_pins: ToolPins | None
    evict_idle_after_seconds: float | None
    channels: Iterable[ChannelSpec]
    channel_kinds: Mapping[str, ChannelKind] | None
    delivery: DeliverySettings | None
    agents: Iterable[AgentDefinition]
    subagent_limits: SubagentLimits | None


@dataclass(frozen=True, kw_only=True)
class RuntimeSettings:
    """Every option of a runtime; the fields are `Runtime`'s keyword arguments, one for one."""

    model: Model
    # The caller's tools, offered after the core tools (unless `with_core_tools` is False).
    tools: tuple[Tool, ...] = ()
    with_core_tools: bool = True
    # The SQLite file of events, trajectories, tasks and timers; None keeps everything in memory.
    store_path: Path | None = None
    # The PostgreSQL database of the store instead (postgresql://USER@HOST:PORT/DATABASE; see
    # `check_store_url`): the same runtime, its state on a server. Not both.
    store_url: str | None = None
    # SQLite only: "normal": a commit survives the runtime crashing (kill -9), not the machine
    # losing power; "full" fsyncs every commit and survives both, at a cost in throughput.
    store_synchronous: Literal["full", "normal"] = "normal"
    # None: the defaults (a fresh one for each runtime, where an object is created).
    session_config: SessionConfig | None = None
    router: Router | None = None
    parallel_model: Model | None = None
    observer: SessionObserver | None = None
    outbox: Outbox | None = None
    clock: Clock | None = None
    with_timers: bool = True
    # Where shell commands run unless a call names another directory.
    workdir: Path | None = None
    progress_interval: float | None = 2.0
    # Results of read-only calls, reused within a TTL; writes clear it. None turns it off.
    result_cache: ResultCache | Literal["default"] | None = "default"
    mcp_servers: tuple[MCPServerConfig, ...] = ()
    # The safety layers around every call (see wakeful.safety.gate); "default" is the
    # rule-based sidecar with the command policy, the breaker, approvals through the outbox
    # and, with a store, the audit log. None runs every call unchecked.
    gate: CallGate | Literal["default"] | None = "default"
    # Settings objects of tool families and safety layers, found by class (settings_of).
    settings: tuple[object, ...] = ()
    # With discovery on, only the core tools (and those named in `discovery.core`) are in the
    # prompt; every other tool is found with discover_tools and called with call_tool.
    discovery: DiscoverySettings | None = None
    # MCP servers of this process (low-level `Server` or `MCPServer` objects), by name, reached
    # over the SDK's in-memory transport: for tests and Python tools served by MCP.
    mcp_in_process: Mapping[str, Any] = field(default_factory=dict)
    # Skills: their names and descriptions go into the system prompt, their bodies are read
    # with load_skill (a core tool, so it stays in the prompt with discovery on too).
    skills: SkillsSettings | None = None
    # The lock file of pinned MCP tool definitions (see wakeful.mcp.pins); None: off.
    mcp_pins: ToolPins | None = None
    # With a store, a session idle this long (measured on `clock`) is unloaded and reloaded
    # from the store on its next event. Without a store nothing is unloaded (its state would
    # be lost); None keeps every session loaded for the runtime's life.
    evict_idle_after_seconds: float | None = 300.0
    # Event channels to run (from `[[channels.<kind>]]` in wakeful.toml), validated and started
    # on entry; the agent may connect more while it runs (connect_channel).
    channels: tuple[ChannelSpec, ...] = ()
    # Channel kinds beyond the built-in ones (webhook, email, system), by name.
    channel_kinds: Mapping[str, ChannelKind] = field(default_factory=dict)
    # How messages reach the user (`[delivery]`): channels by urgency and presence, quiet
    # hours, digests, escalation. None: the defaults (see DeliverySettings).
    delivery: DeliverySettings | None = None
    # The agents a session may delegate to (`[[agents]]`, agents/<name>/AGENT.md); with any,
    # sessions get spawn_subagent and the other collaboration tools.
    agents: tuple[AgentDefinition, ...] = ()
    # Depth, concurrency, tokens and wall time of subagents (`[subagents]`); None: defaults.
    subagent_limits: SubagentLimits | None = None

    def __post_init__(self) -> None:
        if self.store_path is not None and self.store_url is not None:
            raise UserError(
                f"Runtime got both store_path ({self.store_path}) and store_url "
                f"({redacted_url(self.store_url)}); give one: a SQLite file or a PostgreSQL "
                "database."
            )
        if self.store_url is not None:
            check_store_url(self.store_url, given_as="store_url")

    @property
    def has_store(self) -> bool:
        """Whether the runtime keeps its state in a store (a SQLite file or PostgreSQL)."""
        return self.store_path is not None or self.store_url is not None

    @classmethod
    def of(cls, model: Model, **options: Unpack[RuntimeOptions]) -> RuntimeSettings:
        """The settings from `Runtime`'s keyword arguments: paths made `Path`s, and iterables
        and mappings copied (a caller's generator is read once, a later change to its list is
        not seen)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(
                f"Runtime() got unknown keyword argument(s) {', '.join(unknown)}; "
                f"the known ones are: {', '.join(sorted(known - {'model'}))}"
            )
        given: dict[str, Any] = {**options}
        if (store_path := options.get("store_path")) is not None:
            given["store_path"] = Path(store_path)
        if (workdir := options.get("workdir")) is not None:
            given["workdir"] = Path(workdir)
        if "tools" in options:
            given["tools"] = tuple(options["tools"])
        if "mcp_servers" in options:
            given["mcp_servers"] = tuple(options["mcp_servers"])
        if "settings" in options:
            given["settings"] = tuple(options["settings"])
        given["mcp_in_process"] = dict(options.get("mcp_in_process") or {})
        if "channels" in options:
            given["channels"] = tuple(options["channels"])
        if "agents" in options:
            given["agents"] = tuple(options["agents"])
        given["channel_kinds"] = dict(options.get("channel_kinds") or {})
        return cls(model=model, **given)

    @property
    def enabled_discovery(self) -> DiscoverySettings | None:
        """The discovery settings when discovery is on, else None."""
        discovery = self.discovery
        return discovery if discovery is not None and discovery.enabled else None

    @property
    def uses_mcp(self) -> bool:
        """Whether any MCP server, over a transport or in this process, is configured."""
        return bool(self.mcp_servers or self.mcp_in_process)

    def policy_settings(self) -> PolicySettings:
        """The command policy's settings, with the runtime's workdir as its workspace unless
        the settings name one (a shell tool's writes there need no approval)."""
        from ..safety.commands import PolicySettings

        given = next((s for s in self.settings if isinstance(s, PolicySettings)), None)
        settings = given or PolicySettings()
        if settings.workspace is None and self.workdir is not None:
            settings = settings.model_copy(update={"workspace": self.workdir.resolve()})
        return settings

    def sandbox_settings(self) -> SandboxSettings:
        """The sandbox's settings among `settings`, or its defaults."""
        from ..safety.sandbox import SandboxSettings

        return next((s for s in self.settings if isinstance(s, SandboxSettings)), SandboxSettings())

    def settings_by_class(self) -> dict[type[Any], Any]:
        """The settings objects tools find by class (`Services.settings`): those given, the
        skills' and the command policy's, the later winning where two share a class."""
        skills = [self.skills] if self.skills is not None else []
        return {type(s): s for s in [*self.settings, *skills, self.policy_settings()]}


def is_store_url(location: str) -> bool:
    """Whether `location` (a `--store` or `[store]` value) is meant as a URL rather than a file
    path: it has a scheme (`postgresql://…`, or a misspelt one, refused by `check_store_url`)."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.replace("+", "").isalpha()


def check_store_url(url: str, *, given_as: str) -> str:
    """`url` when it names a PostgreSQL database without a password; else a UserError that
    names where it was given (`given_as`), what is wrong and the fix.

    A password is never taken in the URL: it would show in the settings, in logs and in the
    shell's history. libpq reads it from `PGPASSWORD` or from `~/.pgpass` (or the file
    `PGPASSFILE` names) instead, which is where it belongs.
    """
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError as exc:
        raise UserError(
            f"{given_as} {redacted_url(url)!r} is not a URL ({exc}). Write it as "
            "postgresql://USER@HOST:PORT/DATABASE."
        ) from exc
    if parts.scheme.lower() not in POSTGRES_SCHEMES:
        raise UserError(
            f"{given_as} {redacted_url(url)!r} is not a PostgreSQL URL: its scheme is "
            f"{parts.scheme!r}, not 'postgresql'. Write postgresql://USER@HOST:PORT/DATABASE, "
            "or give a file path for a SQLite store."
        )
    if password is not None or "password" in parse_qs(parts.query):
        raise UserError(
            f"{given_as} {redacted_url(url)!r} names a password; wakeful takes none in the URL "
            "(it would show in settings, logs and shell history). Remove it and set PGPASSWORD "
            "where wakeful runs, or put it in ~/.pgpass (libpq reads both)."
        )
    return url


def redacted_url(url: str) -> str:
    """`url` as messages may show it: any password replaced by `***`."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<an unreadable URL>"
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}"
    query = parts.query
    if "password" in parse_qs(query):
        query = "&".join(
            "password=***" if pair.partition("=")[0] == "password" else pair
            for pair in query.split("&")
        )
    return urlunsplit(parts._replace(netloc=netloc, query=query))
