"""`wakeful run --web`: the console served next to the runtime, its URL printed with the token."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from typer.testing import CliRunner

from wakeful.cli.app import app
from wakeful.errors import UserError

CONFIG = '[model]\nprovider = "openai"\nname = "test"\nbase_url = "http://127.0.0.1:9/v1"\n'


def test_a_bad_web_address_is_refused_with_an_example(tmp_path: Path) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text(CONFIG, encoding="utf-8")
    for address in ("8787", "127.0.0.1:http", "127.0.0.1:70000"):
        result = CliRunner().invoke(
            app,
            ["run", "--config", str(config), "--web", "--web-address", address],
            input="",
            env={"COLUMNS": "200"},
            catch_exceptions=False,
        )
        assert result.exit_code == 1
        assert f"--web-address {address!r} is not HOST:PORT" in result.stderr
        assert "127.0.0.1:8787" in result.stderr


@pytest.mark.anyio
async def test_run_web_prints_a_login_url_that_opens_the_console(tmp_path: Path) -> None:
    (tmp_path / "wakeful.toml").write_text(CONFIG, encoding="utf-8")
    command = ["env", "--default-signal=INT", sys.executable, "-m", "wakeful", "run", "--web"]
    command += ["--web-address", "127.0.0.1:0"]
    env = os.environ | {"COLUMNS": "300"}
    env.pop("WAKEFUL_WEB_TOKEN", None)
    # stdin is not a terminal: only the web console runs, until Ctrl-C.
    async with await anyio.open_process(command, env=env, cwd=tmp_path) as process:
        assert process.stdout is not None and process.stderr is not None
        try:
            stdout = BufferedByteReceiveStream(process.stdout)
            with anyio.fail_after(20):
                line = (await stdout.receive_until(b"\n", 4096)).decode()
            found = re.fullmatch(r"Web console: (http://127\.0\.0\.1:\d+)/\?token=(\S+)", line)
            assert found is not None, line
            base, token = found.groups()
            async with httpx2.AsyncClient(base_url=base, follow_redirects=True) as client:
                assert (await client.get("/api/state")).status_code == 401
                page = await client.get(f"/?token={token}")
                assert page.status_code == 200 and "wakeful console" in page.text
                assert str(page.url) == base + "/"  # the token left the address bar
                state = await client.get("/api/state")
                assert state.status_code == 200 and state.json()["tasks"] == []
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(10):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
    assert code == 0


WEBHOOK = """
[[channels.webhook]]
name = "github"
scheme = "github"
secret_env = "GITHUB_WEBHOOK_SECRET"
"""


@pytest.mark.parametrize("command", [["console"], ["run", "--web"]])
def test_a_webhook_channel_on_the_consoles_port_is_refused_at_start(
    tmp_path: Path, command: list[str]
) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text(CONFIG + WEBHOOK, encoding="utf-8")
    result = CliRunner().invoke(
        app,
        [*command, "--config", str(config)],
        input="",
        env={"COLUMNS": "400"},
        catch_exceptions=False,
    )
    assert result.exit_code == 1
    error = " ".join(result.stderr.split())
    assert "The web console and the webhook channel webhook:github" in error
    assert "would both listen on 127.0.0.1:8787" in error
    assert "--web-address 127.0.0.1:8788" in error and "another `port`" in error
    # Another port or another interface is fine; the wildcard address or the same one is not.
    config.write_text(CONFIG + WEBHOOK + 'port = 8790\nhost = "127.0.0.2"\n', encoding="utf-8")
    from wakeful.cli.run import refuse_webhook_clash
    from wakeful.config import load_config

    tables = load_config(config).channels
    refuse_webhook_clash("127.0.0.1", 8790, tables)  # another interface
    refuse_webhook_clash("127.0.0.1", 8787, tables)  # another port
    for clashing in ("0.0.0.0", "127.0.0.2"):
        with pytest.raises(UserError, match="would both listen"):
            refuse_webhook_clash(clashing, 8790, tables)


def test_console_refuses_a_bad_address_from_either_place(tmp_path: Path) -> None:
    config = tmp_path / "wakeful.toml"
    config.write_text(CONFIG + '[web]\naddress = "localhost"\n', encoding="utf-8")
    from_config = CliRunner().invoke(
        app, ["console", "--config", str(config)], env={"COLUMNS": "300"}
    )
    assert from_config.exit_code == 1
    assert "[web] address in wakeful.toml: 'localhost' is not HOST:PORT" in from_config.stderr
    from_option = CliRunner().invoke(
        app,
        ["console", "--config", str(config), "--web-address", "127.0.0.1:99999"],
        env={"COLUMNS": "300"},
    )
    assert from_option.exit_code == 1
    assert "--web-address '127.0.0.1:99999' is not HOST:PORT" in from_option.stderr
    assert "127.0.0.1:8787" in from_option.stderr


@pytest.mark.anyio
@pytest.mark.slow
async def test_console_serves_the_web_console_only_with_the_web_settings(
    tmp_path: Path,
) -> None:
    web = '[web]\naddress = "127.0.0.1:0"\ntoken_env = "MY_CONSOLE_TOKEN"\nsession = "ops"\n'
    (tmp_path / "wakeful.toml").write_text(CONFIG + web, encoding="utf-8")
    command = ["env", "--default-signal=INT", sys.executable, "-m", "wakeful", "console"]
    env = os.environ | {"COLUMNS": "300", "MY_CONSOLE_TOKEN": "fixed-token-from-env"}
    async with await anyio.open_process(command, env=env, cwd=tmp_path) as process:
        assert process.stdout is not None
        try:
            stdout = BufferedByteReceiveStream(process.stdout)
            with anyio.fail_after(20):
                line = (await stdout.receive_until(b"\n", 4096)).decode()
            found = re.fullmatch(r"Web console: (http://127\.0\.0\.1:\d+)/\?token=(\S+)", line)
            assert found is not None, line
            base, token = found.groups()
            assert token == "fixed-token-from-env"
            async with httpx2.AsyncClient(base_url=base, follow_redirects=True) as client:
                page = await client.get(f"/?token={token}")
                assert '<meta name="session" content="ops">' in page.text
                messages = await client.get("/api/messages")
                assert messages.json() == {"messages": [], "earlier": None}
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(10):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
    assert code == 0
