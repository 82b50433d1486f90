"""The query behind `recent_events`, shared by the SQLite and PostgreSQL stores (they differ only in
the placeholder)."""

from __future__ import annotations

from ..core.records import EventStatus

__all__ = ["recent_events_query"]


def recent_events_query(
    limit: int,
    *,
    session: str | None,
    after_rowid: int | None,
    status: EventStatus | None,
    mark: str,
) -> tuple[str, list[object]]:
    """The query of `recent_events` (the last `limit` events, or the first `limit` after
    `after_rowid`; of `session`, with `status`) and its parameters, with `mark` as the
    placeholder ("?" for SQLite, "%s" for PostgreSQL). Rows come newest first unless
    `after_rowid` is given: reverse them."""
    where: list[str] = []
    params: list[object] = []
    for column, value in (("status", status), ("session", session)):
        if value is not None:
            where.append(f"{column} = {mark}")
            params.append(value)
    if after_rowid is not None:
        where.append(f"seq > {mark}")
        params.append(after_rowid)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    order = "ASC" if after_rowid is not None else "DESC"
    sql = f"SELECT seq, status, data FROM events{clause} ORDER BY seq {order} LIMIT {mark}"
    return sql, [*params, max(0, limit)]
