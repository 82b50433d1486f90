"""Secrets in settings: never written in wakeful.toml, always named by an environment variable.

Each settings model that needs a password or a token takes `<key>_env`, the variable's name.
:func:`refuse_inline_secret` is its `model_validator(mode="before")` body, refusing the secret
itself with the fix; :func:`secret_from_env` reads the variable when the secret is needed, with
a ConfigError naming it when it is unset; :func:`secret_for_tool` does the same inside a tool
call, with a ToolError the model can pass on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError, ToolError

__all__ = ["refuse_inline_secret", "secret_for_tool", "secret_from_env"]


def refuse_inline_secret(data: Any, key: str, *, what: str, example_env: str = "") -> Any:
    """`data` unchanged, or ValueError when it holds `key` (the secret itself): `what` names the
    secret ("an email channel's password"), `example_env` a variable to show in the fix."""
    if isinstance(data, Mapping) and key in data:
        example = f" (e.g. export {example_env}=… before `wakeful run`)" if example_env else ""
        raise ValueError(
            f"{what} must not be written in wakeful.toml: remove `{key}` and set "
            f'`{key}_env = "NAME"`, the environment variable that holds it{example}'
        )
    return data


def secret_from_env(variable: str, *, reader: str) -> str:
    """The value of `variable`; ConfigError when it is unset or empty. `reader` says who reads
    it and what ("The XMPP channel for a@b reads its password")."""
    value = os.environ.get(variable)
    if not value:
        raise ConfigError(
            f"{reader} from the environment variable {variable}, which is not set. Set it "
            f"before starting (export {variable}=…)."
        )
    return value


def secret_for_tool(variable: str, *, what: str, setting: str, tool: str) -> str:
    """The value of `variable` when a tool call needs it; ToolError naming the variable when it
    is unset. `what` names the secret ("The SMTP password"), `setting` the setting that names
    the variable ("password_env in [tools.mail]"), `tool` the tool to call again once it is."""
    value = os.environ.get(variable)
    if value is None:
        raise ToolError(
            f"{what} is read from the environment variable {variable!r}, which is not set. Set "
            f"it where wakeful runs (or change {setting}), then call {tool} again."
        )
    return value
