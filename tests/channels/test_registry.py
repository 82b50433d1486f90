"""Channels in the runtime: declared kinds found by name, configured channels validated and
started, one channel's crash restarted with backoff without disturbing the others, channels
connected at run time kept for the next start."""

from __future__ import annotations

from pathlib import Path

import pytest

from line_channels import KIND, append, until
from wakeful.channels.registry import ChannelSpec, UnknownChannelKind, channel_kind
from wakeful.errors import UserError
from wakeful.messages import UserMessage
from wakeful.models import FunctionModel, say
from wakeful.runtime import Runtime

pytestmark = pytest.mark.anyio

KINDS = {"lines": KIND}


def quiet() -> FunctionModel:
    return FunctionModel(lambda messages, tools: say(""))


def seen(rt: Runtime, session: str = "main") -> list[str]:
    found = rt.sessions.get(session)
    if found is None:
        return []
    return [m.content for m in found.trajectory.messages if isinstance(m, UserMessage)]


def test_unknown_kinds_are_named_with_the_kinds_there_are() -> None:
    with pytest.raises(UnknownChannelKind, match=r"no channel kind 'fax'.*email, lines, system"):
        channel_kind("fax", KINDS)
    assert channel_kind("lines", KINDS) is KIND


async def test_a_configured_channel_delivers_through_its_filter(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    spec = ChannelSpec(
        "lines", "inbox", {"path": str(feed)}, {"senders_allow": ["@example.com"]}, origin="test"
    )
    model = quiet()
    async with Runtime(
        model=model, store_path=tmp_path / "w.db", channels=[spec], channel_kinds=KINDS
    ) as rt:
        assert rt.channels["lines:inbox"].state == "running"
        append(
            feed,
            {"from": "ann@example.com", "subject": "hi", "text": "from a friend"},
            {"from": "eve@evil.example", "subject": "win", "text": "a prize"},
        )
        await until(lambda: rt.channels["lines:inbox"].last_event_at is not None)
        await rt.wait_idle()
        assert ["from a friend" in t for t in seen(rt)] == [True]
        counts = await rt.store.events.count()  # type: ignore[union-attr]
    assert counts == {"consumed": 1, "filtered": 1}


async def test_a_crashing_channel_is_restarted_and_the_others_keep_running(
    tmp_path: Path,
) -> None:
    fragile, steady = tmp_path / "fragile.jsonl", tmp_path / "steady.jsonl"
    specs = [
        ChannelSpec("lines", "fragile", {"path": str(fragile)}),
        ChannelSpec("lines", "steady", {"path": str(steady)}),
    ]
    async with Runtime(
        model=quiet(), store_path=tmp_path / "w.db", channels=specs, channel_kinds=KINDS
    ) as rt:
        append(fragile, {"crash": "the feed broke"})
        await until(lambda: rt.channels["lines:fragile"].state == "degraded")
        detail = rt.channels["lines:fragile"].detail
        assert "RuntimeError: the feed broke" in detail and "restarting in 1 s" in detail
        append(steady, {"from": "a@b.example", "text": "still here"})
        await until(lambda: any("still here" in t for t in seen(rt)))
        # After the backoff it runs again, past the line that broke it.
        await until(lambda: rt.channels["lines:fragile"].state == "running")
        append(fragile, {"from": "a@b.example", "text": "back again"})
        await until(lambda: any("back again" in t for t in seen(rt)))


async def test_a_channel_whose_source_ends_stays_stopped(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    append(feed, {"end": True})
    spec = ChannelSpec("lines", "short", {"path": str(feed)})
    async with Runtime(model=quiet(), channels=[spec], channel_kinds=KINDS) as rt:
        await until(lambda: rt.channels["lines:short"].state == "stopped")
        assert rt.channels["lines:short"].detail == "its source ended"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            ChannelSpec("lines", "a", {}, origin="wakeful.toml, [[channels.lines]] table #1 (a)"),
            r"wakeful.toml, \[\[channels.lines\]\] table #1 \(a\): invalid settings .*`path`",
        ),
        (
            ChannelSpec("lines", "a", {"path": "x", "colour": 1}, origin="T"),
            r"T: invalid settings for a lines channel: `colour`: Extra inputs",
        ),
        (
            ChannelSpec("lines", "a", {"path": "x"}, {"body_regex": "(a+)+"}, origin="T"),
            r"T: invalid filter: `body_regex`: .*quantifier inside a repeated group",
        ),
        (ChannelSpec("fax", "a", {}), r"no channel kind 'fax'"),
    ],
)
async def test_a_bad_channel_fails_the_start_naming_where_and_what(
    tmp_path: Path, spec: ChannelSpec, problem: str
) -> None:
    with pytest.raises(UserError, match=problem):
        async with Runtime(model=quiet(), channels=[spec], channel_kinds=KINDS):
            pass


async def test_two_channels_of_one_name_are_refused(tmp_path: Path) -> None:
    specs = [ChannelSpec("lines", "a", {"path": "x"}), ChannelSpec("lines", "a", {"path": "y"})]
    with pytest.raises(UserError, match="Two channels are named lines:a"):
        async with Runtime(model=quiet(), channels=specs, channel_kinds=KINDS):
            pass


async def test_a_channel_connected_at_run_time_is_reconnected_after_a_restart(
    tmp_path: Path,
) -> None:
    feed, path = tmp_path / "feed.jsonl", tmp_path / "w.db"
    async with Runtime(model=quiet(), store_path=path, channel_kinds=KINDS) as rt:
        await rt.connect_channel(ChannelSpec("lines", "late", {"path": str(feed)}))
        with pytest.raises(UserError, match="lines:late is already connected"):
            await rt.connect_channel(ChannelSpec("lines", "late", {"path": str(feed)}))
        append(feed, {"from": "a@b.example", "text": "first"})
        await until(lambda: any("first" in t for t in seen(rt)))
    async with Runtime(model=quiet(), store_path=path, channel_kinds=KINDS) as rt:
        assert rt.channels["lines:late"].state == "running"
        append(feed, {"from": "a@b.example", "text": "second"})
        await until(lambda: any("second" in t for t in seen(rt)))
        # The cursor was kept: the first line (in the restored trajectory) came only once.
        assert sum("first" in t for t in seen(rt)) == 1
        assert await rt.disconnect_channel("lines:late") is True
        assert await rt.disconnect_channel("lines:late") is False
        assert "lines:late" not in rt.channels
    async with Runtime(model=quiet(), store_path=path, channel_kinds=KINDS) as rt:
        assert rt.channels == {}


async def test_channels_of_wakeful_toml_are_validated_at_start_naming_file_table_and_field(
    tmp_path: Path,
) -> None:
    from wakeful.channels.registry import specs_from_tables
    from wakeful.config import load_config

    feed = tmp_path / "feed.jsonl"
    config_path = tmp_path / "wakeful.toml"
    config_path.write_text(
        f'[[channels.lines]]\nname = "good"\npath = "{feed}"\n\n'
        '[[channels.lines]]\nname = "bad"\npath = "x"\nfilter = { senders_allow = ["bob@"] }\n',
        encoding="utf-8",
    )
    specs = specs_from_tables(load_config(config_path).channels)
    assert [s.full_name for s in specs] == ["lines:good", "lines:bad"]
    with pytest.raises(UserError) as info:
        async with Runtime(model=quiet(), channels=specs, channel_kinds=KINDS):
            pass
    message = str(info.value)
    assert f"{config_path}, [[channels.lines]] table #2 (bad): invalid filter" in message
    assert "`senders_allow`: 'bob@' is not an email address nor a domain" in message

    async with Runtime(model=quiet(), channels=specs[:1], channel_kinds=KINDS) as rt:
        append(feed, {"from": "a@b.example", "text": "configured"})
        await until(lambda: any("configured" in t for t in seen(rt)))
