"""deploy/compose.yaml: every service that runs wakeful runs a real `wakeful` command line (the
CLI parses its options, with the mounted files where the container sees them), on a PostgreSQL
store, with the configuration the folder ships; the ingress config and Dockerfile it names exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
import yaml
from typer.testing import CliRunner

from wakeful.cli.app import app
from wakeful.config import load_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def wakeful_services() -> list[tuple[str, dict[str, Any]]]:
    services = compose()["services"]
    return [
        (name, service)
        for name, service in services.items()
        if isinstance(service.get("command"), list) and service["command"][:1] == ["wakeful"]
    ]


def mounted(service: dict[str, Any]) -> dict[str, Path]:
    """Each read-only file the service mounts: where the container sees it → the file here."""
    files = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            files[target] = DEPLOY / source
    return files


def parse(argv: list[str]) -> Any:
    """Parse `wakeful ARGS…` as the CLI would (the options and their values), without running
    it; the command's context. A usage error raises."""
    group: Any = typer.main.get_command(app)
    with group.make_context("wakeful", argv[1:], resilient_parsing=False) as context:
        name, command, _ = group.resolve_command(context, argv[1:2])
        assert command is not None, f"no command {name}"
        return command.make_context(name or "", argv[2:], parent=context)


def test_the_workers_run_real_wakeful_command_lines_on_postgres() -> None:
    services = wakeful_services()
    assert [name for name, _ in services] == ["worker"]
    for name, service in services:
        files = mounted(service)
        argv = [str(files.get(arg, arg)) for arg in service["command"]]
        # `wakeful run … --help` accepts every option used, and the values parse.
        shown = CliRunner().invoke(app, [*argv[1:], "--help"])
        assert shown.exit_code == 0, shown.output
        context = parse(argv)
        assert context.info_name == "run", name
        assert str(context.params["store"]).startswith("postgresql://")
        assert "password" not in str(context.params["store"]).lower()
        config = Path(str(context.params["config"]))
        assert config.exists(), f"{name} runs with {config}, which deploy/ does not ship"
        settings = load_config(config)
        assert settings.store.url is None, "the store is given once, on the command line"
        assert service["deploy"]["replicas"] == 3
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_a_mistyped_option_would_be_caught() -> None:
    shown = CliRunner().invoke(app, ["run", "--stor", "postgresql://x@db/w", "--help"])
    assert shown.exit_code == 2 and "No such option: --stor" in shown.output


def test_the_stack_has_postgres_and_an_ingress_with_their_files() -> None:
    services = compose()["services"]
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["postgres"]["environment"]["POSTGRES_DB"] == "wakeful"
    ingress = services["ingress"]
    for target, source in mounted(ingress).items():
        assert source.exists(), f"the ingress mounts {source} at {target}"
    assert "proxy_pass http://$workers:8788" in (DEPLOY / "ingress.conf").read_text()
    webhook = load_config(DEPLOY / "wakeful.toml").channels["webhook"][0]
    assert (webhook.host, webhook.port) == ("0.0.0.0", 8788)
    assert (DEPLOY / "Dockerfile").exists() and (DEPLOY / "README.md").exists()
