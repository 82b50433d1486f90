"""GitHub deliveries as typed events the agent can act on without a follow-up query.

`X-GitHub-Event` names what happened; the five the agent most often cares about get their own
kinds (`github.pull_request`, `github.issue`, `github.issue_comment`, `github.review`,
`github.push`), anything else becomes `github.<X-GitHub-Event>` with what could be found.
Each event's content carries the repository, number, title, URL, labels, the action and what
changed, and the text (an issue body, a comment, a review) with its author, under the keys the
channel filters read: `repository`, `event_type`, `from`, `text`, `labels`.

Who the event is from: GitHub's signature proves only that GitHub relayed it. Anyone can open
an issue or comment on a public repository, so the sender is a contact only when their login is
in the endpoint's `contacts`; otherwise a stranger. The text is data either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ...events import (
    GITHUB_EVENT_PREFIX,
    GITHUB_ISSUE,
    GITHUB_ISSUE_COMMENT,
    GITHUB_PULL_REQUEST,
    GITHUB_PUSH,
    GITHUB_REVIEW,
)

__all__ = ["github_content", "github_kind"]

_KINDS: Final = {
    "pull_request": GITHUB_PULL_REQUEST,
    "issues": GITHUB_ISSUE,
    "issue_comment": GITHUB_ISSUE_COMMENT,
    "pull_request_review": GITHUB_REVIEW,
    "push": GITHUB_PUSH,
}
# A push names its first commits; the rest are counted.
_PUSH_COMMITS_SHOWN: Final = 20


def github_kind(event_name: str) -> str:
    """The event kind for an `X-GitHub-Event` header value."""
    return _KINDS.get(event_name, GITHUB_EVENT_PREFIX + event_name)


def github_content(event_name: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """What the agent needs from one delivery's JSON payload."""
    action = _text(payload.get("action"))
    content: dict[str, Any] = {
        "repository": _text(_get(payload, "repository", "full_name")),
        "event_type": event_name,
        "action": action,
        "from": _text(_get(payload, "sender", "login")),
    }
    if event_name == "pull_request":
        content |= _item(_mapping(payload.get("pull_request")))
        pr = _mapping(payload.get("pull_request"))
        content |= {
            "merged": bool(pr.get("merged")),
            "draft": bool(pr.get("draft")),
            "head": _text(_get(pr, "head", "ref")),
            "base": _text(_get(pr, "base", "ref")),
        }
    elif event_name == "issues":
        content |= _item(_mapping(payload.get("issue")))
    elif event_name == "issue_comment":
        issue = _mapping(payload.get("issue"))
        comment = _mapping(payload.get("comment"))
        content |= _item(issue)
        content |= {
            "on_pull_request": "pull_request" in issue,
            "text": _text(comment.get("body")),
            "comment_author": _text(_get(comment, "user", "login")),
            "url": _text(comment.get("html_url")) or content["url"],
        }
    elif event_name == "pull_request_review":
        review = _mapping(payload.get("review"))
        content |= _item(_mapping(payload.get("pull_request")))
        content |= {
            "review_state": _text(review.get("state")).lower(),
            "text": _text(review.get("body")),
            "reviewer": _text(_get(review, "user", "login")),
            "url": _text(review.get("html_url")) or content["url"],
        }
    elif event_name == "push":
        content |= _push(payload)
    else:
        found = payload.get("pull_request") or payload.get("issue")
        if isinstance(found, Mapping):
            content |= _item(found)
        found = payload.get("comment")
        if isinstance(found, Mapping):
            content["text"] = _text(found.get("body"))
    content.setdefault("text", "")
    content.setdefault("labels", [])
    content["change"] = _change(payload, content)
    changes = payload.get("changes")
    if isinstance(changes, Mapping):  # "edited": what the fields held before
        content["previous"] = {
            field: value.get("from")
            for field, value in changes.items()
            if isinstance(value, Mapping) and "from" in value
        }
    return content


def _item(item: Mapping[str, Any]) -> dict[str, Any]:
    """The fields an issue and a pull request share."""
    labels = item.get("labels")
    return {
        "number": item.get("number"),
        "title": _text(item.get("title")),
        "state": _text(item.get("state")),
        "url": _text(item.get("html_url")),
        "author": _text(_get(item, "user", "login")),
        "labels": [
            _text(label.get("name"))
            for label in (labels if isinstance(labels, list) else [])
            if isinstance(label, Mapping)
        ],
        "text": _text(item.get("body")),
    }


def _push(payload: Mapping[str, Any]) -> dict[str, Any]:
    commits = [c for c in payload.get("commits") or [] if isinstance(c, Mapping)]
    shown = [
        {
            "id": _text(c.get("id"))[:12],
            "message": _text(c.get("message")),
            "author": _text(_get(c, "author", "username")) or _text(_get(c, "author", "name")),
        }
        for c in commits[:_PUSH_COMMITS_SHOWN]
    ]
    return {
        "ref": _text(payload.get("ref")),
        "before": _text(payload.get("before")),
        "after": _text(payload.get("after")),
        "created": bool(payload.get("created")),
        "deleted": bool(payload.get("deleted")),
        "forced": bool(payload.get("forced")),
        "url": _text(payload.get("compare")),
        "commit_count": len(commits),
        "commits": shown,
        "text": "\n".join(c["message"] for c in shown),
        "from": _text(_get(payload, "sender", "login")) or _text(_get(payload, "pusher", "name")),
    }


def _change(payload: Mapping[str, Any], content: Mapping[str, Any]) -> str:
    """What changed, in a few words: "closed (merged)", "labeled: bug", "edited: title"."""
    action = _text(content.get("action"))
    if content.get("event_type") == "push":
        branch = content.get("ref", "").removeprefix("refs/heads/")
        if content.get("deleted"):
            return f"deleted {branch}"
        forced = " (forced)" if content.get("forced") else ""
        return f"{content.get('commit_count', 0)} commit(s) pushed to {branch}{forced}"
    if content.get("event_type") == "pull_request_review":
        return f"review {action}: {content.get('review_state', '')}".strip()
    if action == "closed" and content.get("event_type") == "pull_request":
        return "closed (merged)" if content.get("merged") else "closed (not merged)"
    if action in ("labeled", "unlabeled"):
        return f"{action}: {_text(_get(payload, 'label', 'name'))}"
    if action in ("assigned", "unassigned"):
        return f"{action}: {_text(_get(payload, 'assignee', 'login'))}"
    if action in ("review_requested", "review_request_removed"):
        who = _text(_get(payload, "requested_reviewer", "login")) or _text(
            _get(payload, "requested_team", "name")
        )
        return f"{action}: {who}"
    if action == "edited":
        changes = payload.get("changes")
        fields = sorted(changes) if isinstance(changes, Mapping) else []
        return "edited: " + ", ".join(fields) if fields else "edited"
    return action


def _get(data: Mapping[str, Any], *keys: str) -> Any:
    value: Any = data
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
