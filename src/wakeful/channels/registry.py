"""The kinds of channel a runtime can build, by name, and how one channel is declared.

Each kind lives in its own module, imported only when a channel of that kind is configured or
connected (an email channel's IMAP library is not loaded by a runtime that has none). A kind
module exposes ``KIND``, an object implementing :class:`~wakeful.core.channel.ChannelKind`.
Callers (tests, embedders) may also pass their own kinds to the runtime by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from pydantic import BaseModel, ValidationError

from ..core.channel import ChannelKind
from ..errors import UserError
from .filters import ChannelFilter

__all__ = [
    "BUILT_IN_KINDS",
    "ChannelSpec",
    "UnknownChannelKind",
    "channel_kind",
    "specs_from_tables",
    "validated_filter",
    "validated_settings",
]

BUILT_IN_KINDS: Final[Mapping[str, str]] = {
    "webhook": "wakeful.channels.webhooks",
    "email": "wakeful.channels.email",
    "xmpp": "wakeful.channels.xmpp",
    "telegram": "wakeful.channels.telegram",
    "system": "wakeful.channels.system",
}
"""Each built-in kind's module, which exposes ``KIND``."""


class UnknownChannelKind(UserError):
    """Raised when a channel names a kind this wakeful does not have (or cannot load)."""


@dataclass(frozen=True)
class ChannelSpec:
    """One channel to run: its kind, its name (unique per kind; the channel is known as
    "<kind>:<name>"), the kind's settings (a mapping, validated at start against the kind's
    settings model, or an instance of it) and its filter. `origin` says where it was declared
    ("wakeful.toml, [[channels.email]] table #1 (work)"), for errors."""

    kind: str
    name: str
    settings: Mapping[str, Any] | BaseModel = field(default_factory=dict)
    filter: ChannelFilter | Mapping[str, Any] = field(default_factory=ChannelFilter)
    origin: str = ""

    @property
    def full_name(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def where(self) -> str:
        """Where the channel was declared, for errors."""
        return self.origin or f"channel {self.full_name}"

    def kind_in(self, extra: Mapping[str, ChannelKind] | None = None) -> ChannelKind:
        """Its kind (see :func:`channel_kind`); UnknownChannelKind says where it was declared."""
        try:
            return channel_kind(self.kind, extra)
        except UnknownChannelKind as exc:
            raise UnknownChannelKind(f"{self.where}: {exc}") from exc


class ChannelTableLike(Protocol):
    """A ``[[channels.<kind>]]`` table as the configuration keeps it (`config.ChannelTable`)."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> dict[str, Any]: ...

    @property
    def filter(self) -> dict[str, Any]: ...

    @property
    def origin(self) -> str: ...


def specs_from_tables(tables: Mapping[str, Sequence[ChannelTableLike]]) -> list[ChannelSpec]:
    """The channels of wakeful.toml's `[channels]` (`config.channels`), for `Runtime(channels=
    …)`; validated when the runtime starts."""
    return [
        ChannelSpec(kind, table.name, table.settings, table.filter, table.origin)
        for kind, kind_tables in tables.items()
        for table in kind_tables
    ]


def channel_kind(name: str, extra: Mapping[str, ChannelKind] | None = None) -> ChannelKind:
    """The kind called `name`: one of `extra` (given to the runtime), else a built-in one,
    imported now. UnknownChannelKind names the kinds there are, or why a module cannot load."""
    if extra and name in extra:
        return extra[name]
    module_name = BUILT_IN_KINDS.get(name)
    known = sorted({*BUILT_IN_KINDS, *(extra or {})})
    if module_name is None:
        raise UnknownChannelKind(
            f"There is no channel kind {name!r}. The kinds are: {', '.join(known)}."
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise UnknownChannelKind(
                f"The channel kind {name!r} is not available in this wakeful ({module_name} "
                f"is not installed). The available kinds are among: {', '.join(known)}."
            ) from exc
        raise UnknownChannelKind(
            f"The channel kind {name!r} cannot load: {module_name} needs the module "
            f"{exc.name!r}, which is not installed. Install wakeful with its dependencies "
            "(pip install -e .) and try again."
        ) from exc
    kind = getattr(module, "KIND", None)
    if kind is None:
        raise UnknownChannelKind(
            f"The channel kind {name!r} is not available yet: {module_name} has no KIND."
        )
    return kind  # type: ignore[no-any-return]


def validated_settings(
    kind: ChannelKind, settings: Mapping[str, Any] | BaseModel, where: str
) -> Any:
    """`settings` as an instance of the kind's settings model, or a UserError naming `where`
    and each field at fault."""
    model = kind.settings_model
    if isinstance(settings, model):
        return settings
    data = settings.model_dump() if isinstance(settings, BaseModel) else dict(settings)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(
            f"{where}: invalid settings for a {kind.kind} channel: {_problems(exc)}."
        ) from exc


def validated_filter(value: ChannelFilter | Mapping[str, Any], where: str) -> ChannelFilter:
    """`value` as a ChannelFilter, or a UserError naming `where` and each field at fault."""
    if isinstance(value, ChannelFilter):
        return value
    try:
        return ChannelFilter.model_validate(dict(value))
    except ValidationError as exc:
        raise UserError(f"{where}: invalid filter: {_problems(exc)}.") from exc


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"`{'.'.join(str(p) for p in err['loc']) or '(root)'}`: "
        + err["msg"].removeprefix("Value error, ").rstrip(".")
        for err in exc.errors()
    )
