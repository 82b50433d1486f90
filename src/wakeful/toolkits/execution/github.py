"""`github_create_pull_request`: open a pull request, or find the one that is already open.

"Query then mutate": before creating, the tool asks GitHub for open pull requests from the same
head into the same base, and returns the one it finds instead of opening a duplicate. That makes
a repeated call safe whether or not it carries an `idempotency_key` (with one, the runtime's ledger
also answers a repeat from the first result without asking GitHub again).

GitHub's error statuses are mapped to what to fix: 401 the token, 403 its scopes or the rate
limit, 404 the repository name or the token's access, 422 the branches (no commits between them,
a head that does not exist). The token is read from an environment variable, never from a call.
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any
from urllib.parse import quote

import httpx2
from pydantic import Field

from ...errors import ToolError
from ...safety.idempotency import IdempotencyLedger
from ...services import Services, settings_of
from ...tools.http import HttpErrors, http_client
from ...tools.spec import Tool, ToolAnnotations, ToolContext, ToolResult, tool
from .settings import GitHubSettings

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
# A git branch name as GitHub accepts it, optionally prefixed with "owner:" for a fork.
_BRANCH = re.compile(r"^(?:[A-Za-z0-9-]{1,39}:)?[^\s~^:?*\[\\]{1,255}$")
_MAX_BODY_CHARS = 65_536


@tool(
    annotations=ToolAnnotations(
        read_only=False, destructive=False, idempotent=True, open_world=True
    ),
    examples=(
        {
            "owner": "acme",
            "repo": "shop",
            "head": "fix/cart-rounding",
            "base": "main",
            "title": "Fix rounding of cart totals",
            "body": "Totals were rounded per line; now once per cart. Fixes #412.",
        },
        {
            "owner": "acme",
            "repo": "shop",
            "head": "ana:docs-typo",
            "base": "main",
            "title": "Fix a typo in the README",
            "draft": True,
            "idempotency_key": "pr-docs-typo",
        },
    ),
)
async def github_create_pull_request(
    ctx: ToolContext,
    owner: Annotated[
        str,
        Field(min_length=1, max_length=100, description="The repository's owner, e.g. 'acme'."),
    ],
    repo: Annotated[
        str,
        Field(min_length=1, max_length=100, description="The repository's name, e.g. 'shop'."),
    ],
    head: Annotated[
        str,
        Field(
            min_length=1,
            max_length=300,
            description="The branch with the changes, pushed already; 'user:branch' for a fork, "
            "e.g. 'fix/cart-rounding'.",
        ),
    ],
    base: Annotated[
        str,
        Field(
            min_length=1,
            max_length=255,
            description="The branch to merge into, e.g. 'main'.",
        ),
    ],
    title: Annotated[
        str,
        Field(
            min_length=1,
            max_length=256,
            description="The pull request's title, e.g. 'Fix rounding of cart totals'.",
        ),
    ],
    body: Annotated[
        str,
        Field(
            max_length=_MAX_BODY_CHARS,
            description="The description in Markdown, e.g. 'Fixes #412.'.",
        ),
    ] = "",
    draft: Annotated[bool, Field(description="Open it as a draft, e.g. true.")] = False,
    idempotency_key: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=200,
            description="A key for this one action; a repeat with it returns the first result "
            "without calling GitHub, e.g. 'pr-cart-rounding'.",
        ),
    ] = None,
) -> ToolResult:
    """Open a GitHub pull request from a pushed branch, unless one is already open for it.

    Use it after pushing a branch, to propose merging it. It first lists the open pull requests
    from head into base; if there is one, it returns that one and creates nothing, so calling it
    twice never opens two. The token comes from the environment variable the server is
    configured with (GITHUB_TOKEN by default) and needs write access to pull requests.

    It cannot push commits, create branches, merge, or edit an existing pull request's title
    or body (an open one is returned as it is), and does not retry a failed request.

    Result: "Opened pull request #12 …" or "Pull request #12 … is already open …", with its
    URL; structuredContent holds number, url, state, draft, title, head, base and created (false
    when an open one was found). GitHub's errors come back as errors naming what to fix.

    Cost: two HTTPS requests to GitHub, about 0.5-2 s; a few hundred characters of result.
    """
    _check_name(owner, "owner")
    _check_name(repo, "repo")
    for value, field in ((head, "head"), (base, "base")):
        if not _BRANCH.match(value) or ".." in value or value.endswith((".", "/", ".lock")):
            raise ToolError(
                f"{field}={value!r} is not a branch name: a branch has no spaces, '..', '~', "
                "'^', ':', '?', '*' or '[' (only head may start with 'user:' for a fork). Pass "
                "the branch as git shows it, e.g. 'fix/cart-rounding'."
            )
    if head == base:
        raise ToolError(
            f"head and base are both {head!r}; a pull request merges one branch into another. "
            "Pass the branch with your changes as head."
        )
    settings = settings_of(ctx.services, GitHubSettings)
    token = os.environ.get(settings.token_env)
    if not token:
        raise ToolError(
            f"No GitHub token: the environment variable {settings.token_env!r} is not set. "
            "Create a token with pull-request write access to this repository and set it where "
            "the server runs (or change token_env in the GitHub settings)."
        )
    payload: dict[str, Any] = {
        "title": title,
        "head": head,
        "base": base,
        "body": body,
        "draft": draft,
    }

    async def open_or_find() -> ToolResult:
        return await _open_or_find(ctx.services, settings, token, owner, repo, payload)

    if idempotency_key is None:
        return await open_or_find()
    ledger = IdempotencyLedger.of(ctx.services)
    arguments = {"owner": owner, "repo": repo, **payload}
    return await ledger.run_once(ctx.tool_name, idempotency_key, arguments, open_or_find)


def _check_name(value: str, field: str) -> None:
    if not _NAME.match(value) or value in (".", ".."):
        raise ToolError(
            f"{field}={value!r} is not a GitHub {field} name: use letters, digits, '-', '_' and "
            "'.' only, as in the repository's URL (github.com/OWNER/REPO)."
        )


async def _open_or_find(
    services: Services,
    settings: GitHubSettings,
    token: str,
    owner: str,
    repo: str,
    payload: dict[str, Any],
) -> ToolResult:
    head, base = payload["head"], payload["base"]
    qualified_head = head if ":" in head else f"{owner}:{head}"
    pulls = f"/repos/{quote(owner)}/{quote(repo)}/pulls"
    headers = {
        "Accept": "application/vnd.github+json",
        "Authorization": f"Bearer {token}",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "wakeful",
    }
    async with http_client(
        services,
        base_url=settings.base_url,
        headers=headers,
        timeout_seconds=settings.timeout_seconds,
    ) as client:
        params = {"head": qualified_head, "base": base, "state": "open"}
        found = await _request(client, settings, "GET", pulls, owner, repo, params=params)
        if isinstance(found, list) and found:
            return _result(found[0], created=False)
        made = await _request(client, settings, "POST", pulls, owner, repo, json=payload)
        if not isinstance(made, dict):
            raise ToolError(
                f"GitHub answered the creation of a pull request in {owner}/{repo} with something "
                "that is not a pull request. Check base_url in the GitHub settings."
            )
        return _result(made, created=True)


async def _request(
    client: httpx2.AsyncClient,
    settings: GitHubSettings,
    method: str,
    path: str,
    owner: str,
    repo: str,
    **kwargs: Any,
) -> Any:
    where = f"{settings.base_url}{path}"
    try:
        response = await client.request(method, path, **kwargs)
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        raise _errors(settings, method, owner, repo).for_exception(exc) from exc
    if response.status_code >= 400:
        errors = _errors(settings, method, owner, repo, response.headers)
        raise errors.for_status(response, said=_github_message(response))
    try:
        return response.json()
    except ValueError as exc:
        raise ToolError(
            f"GitHub answered {method} {where} with a body that is not JSON. Check base_url in "
            "the GitHub settings."
        ) from exc


def _maybe_created(method: str) -> str:
    if method == "GET":
        return "Nothing was created; try again later."
    return (
        "The pull request may or may not have been opened; call again (it finds an open one "
        "before creating) rather than opening it another way."
    )


def _errors(
    settings: GitHubSettings,
    method: str,
    owner: str,
    repo: str,
    answer_headers: httpx2.Headers | None = None,
) -> HttpErrors:
    """How a failed request to GitHub is explained: what to fix, and whether anything was made.

    `answer_headers` tell a 403 for a used-up rate limit from one for missing permissions.
    """
    if answer_headers is not None and answer_headers.get("x-ratelimit-remaining") == "0":
        forbidden = (
            "The token's rate limit is used up; wait until it resets "
            f"(x-ratelimit-reset={answer_headers.get('x-ratelimit-reset', '?')}) and call again."
        )
    else:
        forbidden = (
            "The token may not do this: give it write access to pull requests (the 'repo' scope "
            "for a classic token, 'Pull requests: write' for a fine-grained one) on this "
            "repository."
        )
    return HttpErrors(
        target=f"GitHub at {settings.base_url} ({method} for {owner}/{repo})",
        timeout_seconds=settings.timeout_seconds,
        # The connection never opened (or the URL is unusable), so nothing can have been made.
        check="Nothing was created; check the network and base_url in the GitHub settings.",
        retry=_maybe_created(method) + " Wait a minute first.",
        status_advice={
            401: "The token was refused (wrong, expired or revoked). Create a new token and set "
            "it in the environment variable named by token_env.",
            403: forbidden,
            404: f"The repository {owner}/{repo} was not found, or the token cannot see it (a "
            "private repository needs a token with access). Check owner and repo.",
            422: "GitHub refused the pull request as given: usually there are no commits "
            "between base and head, the head branch does not exist (push it first), or the "
            "base branch does not exist. Fix the branches and call again.",
        },
        refused="Check the arguments and the GitHub settings.",
    )


def _github_message(response: httpx2.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    if not isinstance(data, dict):
        return ""
    parts = [str(data.get("message", ""))]
    for error in data.get("errors", []) or []:
        if isinstance(error, dict):
            parts.append(str(error.get("message") or error.get("code") or ""))
        else:
            parts.append(str(error))
    return "; ".join(p for p in parts if p)[:500]


def _result(pull: dict[str, Any], *, created: bool) -> ToolResult:
    number = pull.get("number")
    url = pull.get("html_url", "")
    head = (pull.get("head") or {}).get("label") or (pull.get("head") or {}).get("ref", "")
    base = (pull.get("base") or {}).get("ref", "")
    structured = {
        "number": number,
        "url": url,
        "state": pull.get("state"),
        "draft": bool(pull.get("draft")),
        "title": pull.get("title"),
        "head": head,
        "base": base,
        "created": created,
    }
    if created:
        text = f"Opened pull request #{number} {pull.get('title')!r} ({head} → {base}): {url}"
    else:
        text = (
            f"Pull request #{number} {pull.get('title')!r} ({head} → {base}) is already open: "
            f"{url}. Nothing was created: open pull requests from this head into this base are "
            "looked up before creating, and this one was found. Its title and body were left "
            "as they are."
        )
    return ToolResult(text, structured=structured)


GITHUB_TOOLS: tuple[Tool, ...] = (github_create_pull_request,)
