"""`wakeful demo web`: the web console with the scripted demo agent, no model or API key, as a
new user starts it — a subprocess on 127.0.0.1, driven over HTTP as the page drives it."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

pytestmark = pytest.mark.slow


@contextmanager
def demo(tmp_path: Path, *args: str) -> Iterator[tuple[str, str]]:
    """The demo running; its base URL and token (from the line it prints)."""
    command = [sys.executable, "-m", "wakeful", "demo", "web", "--store-dir", str(tmp_path)]
    with subprocess.Popen(
        [*command, "--web-address", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + 60
            for line in proc.stdout:
                found = re.search(r"Web console: (http://127\.0\.0\.1:\d+)/\?token=(\S+)", line)
                if found:
                    yield found.group(1), found.group(2)
                    break
                assert time.monotonic() < deadline, "the demo printed no URL"
            else:
                raise AssertionError(f"the demo ended: {proc.stderr.read() if proc.stderr else ''}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def wait_for(client: httpx2.Client, predicate: str) -> list[dict[str, object]]:
    deadline = time.monotonic() + 20
    while True:
        messages = client.get("/api/messages").json()["messages"]
        if any(
            predicate in str(m.get("text")) or predicate in str(m.get("card")) for m in messages
        ):
            return list(messages)
        assert time.monotonic() < deadline, messages
        time.sleep(0.1)


def test_the_demo_serves_a_console_whose_agent_answers_cards_and_presses(tmp_path: Path) -> None:
    with (
        demo(tmp_path) as (url, token),
        httpx2.Client(base_url=url, headers={"authorization": f"Bearer {token}"}) as client,
    ):
        page = client.get("/")
        assert page.status_code == 200
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert csrf is not None
        change = {"origin": url, "x-csrf-token": csrf.group(1)}

        assert client.post("/api/send", json={"text": "hello"}, headers=change).status_code == 200
        wait_for(client, "You said: hello")

        client.post("/api/send", json={"text": "show me a card"}, headers=change)
        messages = wait_for(client, "Deploy v2.4 to production?")
        card = next(m for m in messages if m.get("card"))
        pressed = client.post(
            "/api/action",
            json={"card_id": card["id"], "action_id": "deploy", "message_id": card["id"]},
            headers=change,
        )
        assert pressed.status_code == 200
        wait_for(client, "You pressed 'deploy'. Deploying v2.4 now.")

        # A change without the page's CSRF token is refused, as always.
        assert client.post("/api/send", json={"text": "x"}).status_code == 403
    assert (tmp_path / "web.db").is_file() and (tmp_path / "workspace").is_dir()


def test_a_bad_address_is_refused_with_the_fix(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "wakeful", "demo", "web", "--web-address", "nowhere"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "--web-address 'nowhere' is not HOST:PORT" in result.stderr
