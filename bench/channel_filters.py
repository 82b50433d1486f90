"""What a channel's filter costs per event, next to the other per-event work of the Inbox, and
how many model requests the filter saved in the email demo.

Each row times `ChannelFilter.rejects` over events shaped like the channels' (an email with a
subject and a 2,000-character body, a GitHub pull request), against the injection scan every
outside event passes (`suspicious_findings`) and the store write. The demo row runs
`wakeful demo email` once and once more without its filter, and counts the model requests.

    python bench/channel_filters.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from report import Table, header
from wakeful.channels.filters import ChannelFilter
from wakeful.events import Event, Source
from wakeful.runtime.inbox import suspicious_findings

BODY = (
    "Hello, my order #48213 arrived with a cracked top. This is the second time this happened "
    "and I would like a full refund by Friday. "
) * 16


def email(i: int) -> Event:
    return Event(
        kind="email.received",
        source=Source(type="stranger", id=f"customer{i}@example.com"),
        channel="email:inbox",
        content={
            "from": f"customer{i}@example.com",
            "subject": f"Order #{48000 + i} arrived broken",
            "text": BODY,
        },
    )


def long_email(i: int) -> Event:
    """A 20,000-character mail: the Inbox scans its first 16,000 characters (SCAN_CHARS)."""
    event = email(i)
    return event.model_copy(update={"content": {**event.content, "text": (BODY * 10)[:20_000]}})


def pull_request(i: int) -> Event:
    return Event(
        kind="github.pull_request",
        source=Source(type="stranger", id="octocat"),
        channel="webhook:github",
        content={
            "from": "octocat",
            "repository": "acme/widgets",
            "event_type": "pull_request",
            "labels": ["bug", "p1"],
            "text": f"Fix the flaky test #{i}\n\n" + BODY[:600],
        },
    )


FILTERS: dict[str, tuple[ChannelFilter, Callable[[int], Event]]] = {
    "no filter": (ChannelFilter(), email),
    "senders_deny (2 domains)": (
        ChannelFilter(senders_deny=["@socialnet.example", "@megastore.example"]),
        email,
    ),
    "senders + subject_regex + keywords": (
        ChannelFilter(
            senders_allow=["@example.com"],
            subject_regex=r"order #\d+",
            keywords=["refund", "broken", "invoice"],
        ),
        email,
    ),
    "body_regex over 2,000 chars": (ChannelFilter(body_regex=r"refund by \w+day"), email),
    "body_regex over 20,000 chars": (ChannelFilter(body_regex=r"refund by \w+day"), long_email),
    "GitHub: repositories + event_types + labels": (
        ChannelFilter(repositories=["acme/widgets"], event_types=["pull_request"], labels=["p1"]),
        pull_request,
    ),
}


def per_event_us(work: Callable[[Event], object], events: list[Event], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for event in events:
            work(event)
        samples.append((time.perf_counter() - start) / len(events) * 1e6)
    return statistics.median(samples)


async def demo_requests(with_filter: bool) -> tuple[int, int]:
    """(model requests, events the filter kept back) of one run of the email demo."""
    from wakeful.demo.email_scenario import DEMO_FILTER, run_email_demo

    with tempfile.TemporaryDirectory() as tmp:
        result = await run_email_demo(
            store_path=Path(tmp) / "demo.db",
            channel_filter=DEMO_FILTER if with_filter else ChannelFilter(),
        )
    return result.model_calls, result.filtered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events and rounds")
    args = parser.parse_args()
    count, rounds = (200, 3) if args.quick else (2_000, 7)

    header(f"Channel filters: median of {rounds} rounds over {count:,} events per row")
    costs = Table(["filter", "filter µs/event", "injection scan µs/event", "filter / scan"])
    for name, (channel_filter, make) in FILTERS.items():
        events = [make(i) for i in range(count)]
        cost = per_event_us(channel_filter.rejects, events, rounds)
        scan = per_event_us(suspicious_findings, events, max(1, rounds // 2))
        costs.add(name, cost, scan, f"{cost / scan:.1%}")
    costs.print()

    from wakeful.demo.mail_servers import dovecot_missing

    missing = dovecot_missing()
    print()
    if missing:
        print(f"The email demo's row needs Dovecot: {missing}")
        return
    with_calls, kept = anyio.run(demo_requests, True)
    without_calls, _ = anyio.run(demo_requests, False)
    demo = Table(["email demo (4 mails)", "model requests", "events kept from the agent"])
    demo.add("with its filter (senders_deny)", with_calls, kept)
    demo.add("without a filter", without_calls, 0)
    demo.add("saved by the filter", without_calls - with_calls, "")
    demo.print()


if __name__ == "__main__":
    main()
