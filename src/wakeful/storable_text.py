"""Text the store can keep: lone UTF-16 surrogates replaced, visibly, with U+FFFD.

Python strings may hold surrogate code points (`"\\ud83d"`), e.g. from a model or SDK that split
an emoji's UTF-16 pair, or from bytes decoded with `surrogateescape`. UTF-8 cannot encode them, so
the JSON serializer refuses the whole message. A pair that belongs together is joined into its
character; a lone half becomes U+FFFD (the replacement character), so the damage stays visible.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogates(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def replace_lone_surrogates(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if not has_surrogates(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def repair_strings(value: Any) -> tuple[Any, int]:
    """`value` (JSON-like: dicts, lists, strings, scalars) with every string repaired, and how
    many strings needed it. Containers are copied only where something changed."""
    if isinstance(value, str):
        fixed = replace_lone_surrogates(value)
        return fixed, int(fixed is not value)
    if isinstance(value, dict):
        repaired_dict: dict[Any, Any] = {}
        count = 0
        for key, item in value.items():
            new_key, key_count = repair_strings(key) if isinstance(key, str) else (key, 0)
            new_item, item_count = repair_strings(item)
            repaired_dict[new_key] = new_item
            count += key_count + item_count
        return (repaired_dict if count else value), count
    if isinstance(value, list | tuple):
        items = [repair_strings(item) for item in value]
        count = sum(c for _, c in items)
        if not count:
            return value, 0
        return type(value)(item for item, _ in items), count
    return value, 0
