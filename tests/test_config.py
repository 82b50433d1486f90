"""wakeful.toml: defaults, validation errors that name the problem, and model building."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.config import DEFAULT_CONFIG_TOML, WakefulConfig, build_gate, build_model, load_config
from wakeful.errors import ConfigError


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "wakeful.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_a_missing_file_gives_the_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path / "absent.toml") == WakefulConfig()


def test_the_default_file_loads_and_means_the_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, DEFAULT_CONFIG_TOML))
    assert config.model is None
    assert config.agent == WakefulConfig().agent
    assert config.store.path == tmp_path / ".wakeful/wakeful.db"


def test_the_session_caps_come_from_the_agent_table(tmp_path: Path) -> None:
    text = (
        "[agent]\nmax_event_bytes = 65536\nmax_events_per_batch = 10\n"
        "model_stream_idle_seconds = 30.0\nmodel_fault_retries = 0\n"
    )
    session = load_config(write(tmp_path, text)).session_config()
    assert session.max_event_bytes == 65536
    assert session.max_events_per_batch == 10
    assert session.model_stream_idle_seconds == 30.0
    assert session.model_fault_retries == 0


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("[agent\nx = 1", ["is not valid TOML", "wakeful init"]),
        ("[agent]\ncolour = 'blue'", ["`agent.colour`: Extra inputs are not permitted"]),
        ("[agent]\nmax_model_requests_per_activation = 0", ["max_model_requests_per_activation"]),
        ("[model]\nprovider = 'gemini'\nname = 'x'", ["`model.provider`", "'openai'"]),
        ("[model]\nprovider = 'openai'", ["`model.name`: Field required"]),
        (b"[agent]\nsystem_prompt = '\xff\xfe'", ["is not UTF-8"]),
    ],
)
def test_bad_files_name_the_file_and_the_problem(
    tmp_path: Path, text: str | bytes, fragments: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def test_a_missing_api_key_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAKEFUL_TEST_KEY", raising=False)
    config = load_config(write(tmp_path, "[model]\nname = 'gpt'\napi_key_env = 'WAKEFUL_TEST_KEY'"))
    assert config.model is not None
    with pytest.raises(ConfigError, match=r"\$WAKEFUL_TEST_KEY, which is not set"):
        build_model(config.model)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_rejected_key_is_blamed_on_the_configured_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test")
    config = load_config(
        write(tmp_path, f"[model]\nprovider = '{provider}'\nname = 'm'\napi_key_env = 'MY_KEY'")
    )
    assert config.model is not None
    # The model's 401 advice names this variable (tests/models check the advice itself).
    assert build_model(config.model).api_key_env == "MY_KEY"  # type: ignore[attr-defined]


def test_local_servers_need_no_key(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, "[model]\nname = 'qwen3:4b'\nbase_url = 'http://127.0.0.1:11434/v1'")
    )
    assert config.model is not None
    model = build_model(config.model)
    assert type(model).__name__ == "OpenAIChatModel"


SIDECAR_MODEL = "[safety.sidecar_model]\nname = 'judge'\nbase_url = 'http://127.0.0.1:9/v1'\n"


def test_the_sidecar_model_waits_as_long_as_its_own_section_says(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, SIDECAR_MODEL + "timeout_seconds = 2.5\n"))
    gate = build_gate(config.safety)
    assert gate is not None and gate.model_sidecar is not None
    assert gate.model_sidecar.timeout_seconds == 2.5


def test_the_sidecar_model_timeout_is_refused_where_it_was_never_read(tmp_path: Path) -> None:
    # `[safety.sidecar] model_timeout_seconds` used to be accepted and silently ignored.
    path = write(tmp_path, "[safety.sidecar]\nmodel_timeout_seconds = 3\n" + SIDECAR_MODEL)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "model_timeout_seconds is not an option of [safety.sidecar]" in message
    assert "`timeout_seconds` in [safety.sidecar_model]" in message


def test_anthropic_models_are_built_from_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAKEFUL_TEST_KEY", "sk-test")
    config = load_config(
        write(
            tmp_path,
            "[model]\nprovider = 'anthropic'\nname = 'claude'\napi_key_env = 'WAKEFUL_TEST_KEY'",
        )
    )
    assert config.model is not None
    assert type(build_model(config.model)).__name__ == "AnthropicModel"


def test_files_the_host_reads_are_read_only_in_the_sandbox_where_they_lie_in_it(
    tmp_path: Path,
) -> None:
    from wakeful.config import protect_in_sandbox
    from wakeful.safety.sandbox import SandboxSettings

    outside = tmp_path / "elsewhere.toml"
    workspace = tmp_path / "ws"
    settings = protect_in_sandbox(
        [SandboxSettings(read_only_paths=[Path("/opt/data")]), "other"],
        workspace,
        [workspace / "conf" / "wakeful.toml", workspace / "state" / "w.db", outside,
         workspace / "agent.db"],
    )  # fmt: skip

    sandbox, other = settings
    assert other == "other"
    assert isinstance(sandbox, SandboxSettings)
    assert sandbox.read_only_paths == [
        Path("/opt/data"),
        (workspace / "conf" / "wakeful.toml").resolve(),
        (workspace / "state").resolve(),  # a store with its folder: SQLite writes beside it
        (workspace / "agent.db").resolve(),  # but never the whole workspace
    ]
