"""scripts/mcp-conformance: how it judges the suite's checks, and that it knows every scenario.

The suite itself needs the npm registry; these tests read no network. The last one lists the
scenarios of the installed suite and skips where `scripts/mcp-conformance` has not installed it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "mcp-conformance"
DOC = REPO / "docs" / "mcp-conformance.md"


def load_script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("mcp_conformance", str(SCRIPT))
    spec = importlib.util.spec_from_loader("mcp_conformance", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules while the class is created.
    sys.modules[spec.name] = module
    loader.exec_module(module)
    return module


conformance = load_script()


def check(status: str, message: str = "") -> dict[str, Any]:
    return {"id": "c", "status": status, "errorMessage": message}


def test_a_failed_protocol_scenario_fails_the_run() -> None:
    outcome = conformance.judge("ping", [check("FAILURE", "timeout")], {"tools": {}}, "execution")

    assert (outcome.verdict, outcome.gating) == ("fail", True)
    assert "timeout" in outcome.reason


def test_a_warning_is_a_pass_that_keeps_its_reason() -> None:
    outcome = conformance.judge(
        "server-sse-polling", [check("SUCCESS"), check("WARNING", "no retry field")], {}, "x"
    )

    assert outcome.verdict == "pass"
    assert "no retry field" in outcome.reason


def test_a_feature_gates_only_when_the_server_declares_it() -> None:
    failed = [check("FAILURE", "Method not found")]

    undeclared = conformance.judge("logging-set-level", failed, {"tools": {}}, "x")
    declared = conformance.judge("logging-set-level", failed, {"logging": {}}, "x")

    assert (undeclared.verdict, undeclared.gating) == ("n/a", False)
    assert "`logging`" in undeclared.reason
    assert (declared.verdict, declared.gating) == ("fail", True)


def test_a_scenario_needing_the_suites_own_tools_is_not_applicable() -> None:
    outcome = conformance.judge(
        "tools-call-simple-text", [check("FAILURE", "Unknown tool")], {"tools": {}}, "x"
    )

    assert (outcome.verdict, outcome.gating) == ("n/a", False)
    assert "test_simple_text" in outcome.reason


def test_subscribe_counts_as_declared_only_when_the_flag_is_true() -> None:
    assert not conformance.declares({"resources": {"subscribe": False}}, "resources.subscribe")
    assert conformance.declares({"resources": {"subscribe": True}}, "resources.subscribe")
    assert conformance.declares({"logging": {}}, "logging")


def test_an_unknown_scenario_is_judged_as_protocol() -> None:
    outcome = conformance.judge("brand-new-scenario", [check("FAILURE")], {}, "x")

    assert (outcome.verdict, outcome.gating) == ("fail", True)


def test_the_doc_lists_every_scenario_the_script_knows() -> None:
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", DOC.read_text(), re.MULTILINE))

    assert documented == set(conformance.SCENARIOS)


def test_the_installed_suite_has_no_unclassified_server_scenario() -> None:
    node = conformance.INSTALL_DIR / "node_modules" / conformance.NODE_PACKAGE / "bin" / "node"
    entry = conformance.INSTALL_DIR / "node_modules" / "@modelcontextprotocol" / "conformance"
    if not node.exists() or not (entry / "dist" / "index.js").exists():
        pytest.skip("The conformance suite is not installed; scripts/mcp-conformance installs it.")
    listed = subprocess.run(
        [str(node), str(entry / "dist" / "index.js"), "list", "--server"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    scenarios = set(re.findall(r"^\s+- ([a-z0-9-]+)", listed, re.MULTILINE))

    assert scenarios, listed
    assert scenarios - set(conformance.SCENARIOS) == set()
