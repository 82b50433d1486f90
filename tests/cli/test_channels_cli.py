"""`wakeful channels` and `wakeful events tail --filtered`: channels and filtered events read
from wakeful.toml and the store, with no runtime running; bad tables and paths named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from wakeful.cli.app import app
from wakeful.core.channel import source_event_id
from wakeful.events import Event, Source
from wakeful.store.sqlite import Store

pytestmark = pytest.mark.anyio


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"}, catch_exceptions=False)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def mail(n: int, channel: str = "webhook:github") -> Event:
    return Event(
        id=source_event_id(channel, f"d{n}"),
        kind="github.pull_request",
        source=Source(type="stranger", id="octocat"),
        channel=channel,
        content={"repository": "acme/other", "text": f"pull request {n}"},
    )


async def filled_store(path: Path) -> None:
    async with await Store.open(path) as store:
        reason = "repository acme/other is not in repositories"
        filtered = mail(1).model_copy(update={"context": {"filtered": reason}})
        await store.events.add_new_many([(filtered, "filtered"), (mail(2), "pending")])
        await store.channel_cursors.put("webhook:github", "last_delivery", "d2")
        await store.connected_channels.save("ci", "webhook", {"path": "/ci"}, {"labels": ["ci"]})


def write_config(folder: Path, channels: str) -> Path:
    config = folder / "wakeful.toml"
    config.write_text(f'[store]\npath = "state.db"\n\n{channels}', encoding="utf-8")
    return config


async def test_events_tail_filtered_shows_only_filtered_events_with_the_reason(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    await filled_store(db)
    result = cli("events", "tail", "--store", str(db), "--filtered")
    assert result.exit_code == 0, result.output
    assert "repository acme/other is not in repositories" in result.output
    assert "pull request 1" in result.output and "pull request 2" not in result.output
    as_json = json_lines(cli("events", "tail", "--store", str(db), "--filtered", "--json").output)
    assert [(e["status"], e["event"]["content"]["text"]) for e in as_json] == [
        ("filtered", "pull request 1")
    ]
    # Without --filtered every event is listed, the filtered one with its status.
    everything = json_lines(cli("events", "tail", "--store", str(db), "--json").output)
    assert [e["status"] for e in everything] == ["filtered", "pending"]


async def test_events_tail_filtered_on_a_store_without_any(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    async with await Store.open(db):
        pass
    result = cli("events", "tail", "--store", str(db), "--filtered")
    assert result.exit_code == 0
    assert "No filtered events" in result.output


async def test_channels_lists_configured_and_connected_channels_with_counts(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path,
        '[[channels.webhook]]\nname = "github"\nfilter = { repositories = ["acme/widgets"] }\n'
        'path = "/github"\nsecret_env = "GITHUB_WEBHOOK_SECRET"\n',
    )
    await filled_store(tmp_path / "state.db")
    result = cli("channels", "--config", str(config), "--json")
    rows = {row["name"]: row for row in json_lines(result.output)}
    assert set(rows) == {"webhook:github", "webhook:ci"}
    github = rows["webhook:github"]
    assert (github["origin"], github["stored"], github["filtered"]) == ("configured", 1, 1)
    assert github["cursors"] == {"last_delivery": "d2"}
    assert rows["webhook:ci"]["origin"] == "connected"
    assert rows["webhook:ci"]["filter"] == {"labels": ["ci"]}
    table = cli("channels", "--config", str(config))
    assert "webhook:github" in table.output and "webhook:ci" in table.output


async def test_a_bad_channel_table_is_named_with_its_field(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        '[[channels.webhook]]\nname = "gh"\nfilter = { body_regex = "(a+)+" }\n\n'
        '[[channels.fax]]\nname = "office"\n',
    )
    result = cli("channels", "--config", str(config))
    assert result.exit_code == 1
    output = " ".join(result.output.split())
    assert "[[channels.webhook]] table #1 (gh): invalid filter: `body_regex`" in output
    assert "quantifier inside a repeated group" in output
    assert "There is no channel kind 'fax'" in output
    assert "No store at" in output


def test_a_channel_table_without_a_name_is_refused_by_the_configuration(tmp_path: Path) -> None:
    config = write_config(tmp_path, '[[channels.webhook]]\npath = "/x"\n')
    result = cli("channels", "--config", str(config))
    assert result.exit_code == 1
    assert "channels.webhook.0.name" in result.output and "Field required" in result.output


def test_channels_with_no_configuration_and_no_store(tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    result = cli("channels", "--config", str(config))
    assert result.exit_code == 0
    assert "No channels" in result.output
    missing = cli("channels", "--config", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 1 and "There is no configuration file" in missing.output
