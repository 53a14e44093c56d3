"""``--set PATH=VALUE``: change one scenario field from the command line, as if the file said so.

A path is the field's TOML keys joined by dots: ``capacity.tiers``,
``classes.interactive.ttft_p99_ms``, ``models.llama-3.1-70b.skus``. Where the file has a
list of tables (``[[classes]]``, ``[[models]]``, ``[[regions.serving]]``), the next part of
the path names an entry by its ``name`` (or ``key``). Names may contain dots themselves
(``llama-3.1-70b``): at each level the longest run of parts that names an existing key or
entry wins, and a part may be quoted (``regions.latency_ms.eu-west."aws:us-east-1"``).
A table or field the file leaves out is created, so a default can be overridden too.

The value is read as a TOML value (``350``, ``0.5``, ``true``, ``["reserved","on_demand"]``,
``"text"``); anything that is not valid TOML is taken as a bare string (``policy.name=cmu``).
The changed data is then validated exactly like the file, so a bad value gets the error
the same value in the file would get.
"""

from __future__ import annotations

import copy
import difflib
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from planner.errors import InputError

OPTION = "--set"
_LABELS = ("name", "key")  # what names an entry of a list of tables


@dataclass(frozen=True)
class Override:
    """One ``--set``: the path's parts, the parsed value and the text as given (for the record); ``option`` is
    the option it came from, which its errors name (``planner sweep --vary`` sets fields the same way)."""

    parts: tuple[str, ...]
    value: Any
    text: str
    option: str = OPTION


def parse_override(text: str, option: str = OPTION) -> Override:
    """``PATH=VALUE`` as an :class:`Override`, or an InputError naming ``option`` and saying what is malformed."""
    path, sep, raw = text.partition("=")
    if not sep or not path.strip():
        raise InputError(f"'{text}' is not PATH=VALUE", where=option,
                         fix=f"write e.g. {option} classes.interactive.ttft_p99_ms=350 "
                             "(scenarios/README.md names every field)")
    return Override(_split_path(path.strip(), text, option), _parse_value(raw.strip()), text, option)


def parse_overrides(texts: Iterable[str]) -> tuple[Override, ...]:
    return tuple(parse_override(t) for t in texts)


def _split_path(path: str, text: str, option: str) -> tuple[str, ...]:
    """The dot-separated parts of ``path``; a double-quoted part may hold dots."""
    parts: list[str] = []
    current, quoted = "", False
    for char in path:
        if char == '"':
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    if quoted or any(not p for p in parts):
        raise InputError(f"'{text}': the path '{path}' has an empty or unclosed part", where=option,
                         fix='join keys with single dots and close every quote, e.g. '
                             'regions.latency_ms.eu-west."aws:us-east-1"=80')
    return tuple(parts)


def _parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[Override]) -> dict[str, Any]:
    """A copy of the scenario's TOML data with every override applied in order."""
    changed = copy.deepcopy(dict(data))
    for override in overrides:
        _apply(changed, override)
    return changed


def _apply(data: dict[str, Any], override: Override) -> None:
    node: Any = data
    parts = override.parts
    walked: list[str] = []
    while parts:
        if isinstance(node, list):
            taken, node = _entry(node, parts, walked, override)
        elif isinstance(node, dict):
            taken = _longest_key(node, parts)
            if taken == len(parts):
                node[".".join(parts)] = override.value
                return
            key = ".".join(parts[:taken])
            if taken == 0:  # neither the file nor a default has it yet: create the table
                taken, key = 1, parts[0]
                node[key] = {}
            node = node[key]
        else:
            raise InputError(f"'{override.text}': {'.'.join(walked) or 'the scenario'} is a value, not a table",
                             where=override.option, fix=f"end the path at {'.'.join(walked)}")
        walked.extend(parts[:taken])
        parts = parts[taken:]
    raise InputError(f"'{override.text}': the path names a list entry, not a field", where=override.option,
                     fix="add the field to change, e.g. classes.interactive.ttft_p99_ms=350")


def _longest_key(node: Mapping[str, Any], parts: tuple[str, ...]) -> int:
    """How many leading parts, joined by dots, make a key of ``node`` (all of them when none does and one is
    left: a new field)."""
    for count in range(len(parts), 0, -1):
        if ".".join(parts[:count]) in node:
            return count
    return len(parts) if len(parts) == 1 else 0


def _entry(items: list[Any], parts: tuple[str, ...], walked: list[str], override: Override) -> tuple[int, Any]:
    """(parts used, entry) for the list entry the leading parts name."""
    names = [label for item in items if isinstance(item, dict)
             for label in [next((item[k] for k in _LABELS if isinstance(item.get(k), str)), None)] if label]
    for count in range(len(parts), 0, -1):
        wanted = ".".join(parts[:count])
        for item in items:
            if isinstance(item, dict) and any(item.get(k) == wanted for k in _LABELS):
                return count, item
    where = ".".join(walked)
    close = difflib.get_close_matches(parts[0], names, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise InputError(f"'{override.text}': {where} has no entry named '{parts[0]}'", where=override.option,
                     fix=f"{hint}entries of {where}: {', '.join(names) or 'none'}")
