"""Reading a scenario file and turning every validation error into a line a person can act on.

Each error becomes ``<file>: <field path>: <problem>. To fix: <hint>``. Field paths
read like TOML keys: ``classes[interactive].share``, ``regions.latency_ms.eu-west."aws:us-east-1"``.
A list item is named by its ``name`` (or ``key``) when that is unique in the file,
otherwise by its position from 0. All errors are reported at once, not the first only.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from planner.errors import InputError
from planner.scenario.fields import POLICY_NAMES, SKU_NAMES, TIERS, ZONES, Issue
from planner.scenario.length_files import read_length_files
from planner.scenario.model import Scenario
from planner.scenario.overrides import Override, apply_overrides
from planner.scenario.reuse_files import read_reuse_files
from planner.storage import check_input_file

README_HINT = "scenarios/README.md documents every field, its unit and its default"
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_AT_END = "(at end of document)"
_QUOTED = re.compile(r"'([^']*)'")


class ScenarioError(InputError):
    """A scenario file failed validation; ``errors`` holds one dict per problem.

    Each dict has the keys ``file``, ``field``, ``problem`` and ``fix``.
    """

    def __init__(self, source: str | Path, errors: list[dict[str, str]]):
        self.errors = errors
        lines = [f"{e['file']}: {e['field']}: {e['problem']}. To fix: {e['fix']}" for e in errors]
        count = f"{len(errors)} problem{'s' if len(errors) != 1 else ''}"
        super().__init__(
            f"{count} in the scenario file:\n" + "\n".join(f"  {line}" for line in lines),
            where=source,
            fix=f"correct each field listed above; {README_HINT}",
        )


def load_scenario(path: str | Path, overrides: Sequence[Override] = ()) -> Scenario:
    """Read, parse and validate a scenario TOML file, or raise InputError/ScenarioError.

    ``overrides`` (``--set``) change fields of the file's data before it is validated, so
    their errors read like the file's.
    """
    data = read_scenario_data(path)
    if overrides:
        data = apply_overrides(data, overrides)
    folder = Path(path).parent
    return parse_scenario(read_reuse_files(read_length_files(data, folder), folder),
                          overridden_source(path, overrides))


def overridden_source(path: str | Path, overrides: Sequence[Override]) -> str:
    """How errors name a scenario file changed by ``--set``."""
    return f"{path} with {' '.join(f'--set {o.text}' for o in overrides)}" if overrides else str(path)


def read_scenario_data(path: str | Path) -> dict[str, Any]:
    """The scenario file's TOML as data, not yet validated, or an InputError naming the file (and the line of a
    syntax error). A UTF-8 byte-order mark (which some Windows editors write) is accepted and skipped."""
    path = Path(path)
    if path.exists():  # a folder, a named pipe or an unreadable file: refused before it is opened
        check_input_file(path)
    try:
        raw_bytes = path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("scenario file not found", where=path, fix="check the path, e.g. scenarios/demo.toml") from exc
    except OSError as exc:
        raise InputError(f"cannot read the scenario file: {exc.strerror}", where=path, fix="check the path") from exc
    try:
        text = raw_bytes.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"the file is not UTF-8 text (byte {exc.start})", where=path, fix="save the file as UTF-8"
        ) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(path, exc, text) from exc
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise InputError("the TOML nests arrays or inline tables too deeply to read", where=path,
                         fix="a scenario needs a few levels of nesting at most: look for a long run of '[' "
                             "or '{'") from None


def parse_scenario(data: Mapping[str, Any], source: str = "<scenario>") -> Scenario:
    """Validate already-parsed TOML data; ``source`` names the file in every error."""
    try:
        return Scenario.model_validate(dict(data))
    except ValidationError as exc:
        raise ScenarioError(source, describe_errors(exc, data, source)) from None


def _toml_error(path: Path, exc: tomllib.TOMLDecodeError, text: str) -> InputError:
    """Name the file, line and column (Python 3.11's TOMLDecodeError has them only in its message)."""
    message = str(exc)
    match = _TOML_POSITION.search(message)
    if match is not None:
        line, column = match.group(1), match.group(2)
        reason = message[: match.start()]
    elif message.endswith(_AT_END):
        line = str(text.count("\n") + 1)
        column = str(len(text) - text.rfind("\n"))  # one past the last character
        reason = message[: -len(_AT_END)].rstrip()
    else:
        return InputError(f"TOML syntax error: {message}", where=path, fix="correct the TOML syntax")
    return InputError(
        f"TOML syntax error at line {line}, column {column}: {reason}",
        where=f"{path}:{line}:{column}",
        fix=f"correct the TOML syntax at line {line} (strings need quotes, keys need '= value', "
        "tables are written [name] and list entries [[name]])",
    )


# --------------------------------------------------------------------------- error paths
def _item_label(items: Any, index: int) -> str:
    """An item's name or key when unique in its list, else its position."""
    if isinstance(items, list) and 0 <= index < len(items) and isinstance(items[index], dict):
        for attribute in ("name", "key"):
            label = items[index].get(attribute)
            if isinstance(label, str) and label:
                same = [i for i in items if isinstance(i, dict) and i.get(attribute) == label]
                if len(same) == 1:
                    return label
    return str(index)


def _render_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else f'"{key}"'


def render_path(loc: tuple[str | int, ...], raw: Any) -> str:
    """Turn a pydantic location into a TOML-like field path, naming list items."""
    text = ""
    node = raw
    for element in loc:
        if isinstance(element, int):
            text += f"[{_item_label(node, element)}]"
            node = node[element] if isinstance(node, list) and 0 <= element < len(node) else None
        elif element == "*":
            text += "[*]"
            node = None
        else:
            text += ("." if text else "") + _render_key(element)
            node = node.get(element) if isinstance(node, dict) else None
    return text or "(top level)"


# --------------------------------------------------------------------------- schema lookup
def _strip(annotation: Any) -> Any:
    """Remove Annotated wrappers and a trailing ``| None``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _schema_at(loc: tuple[str | int, ...]) -> tuple[type[BaseModel] | None, FieldInfo | None]:
    """The model holding the last named element of ``loc`` and that field's info (None if unknown)."""
    current: Any = Scenario
    holder: type[BaseModel] | None = None
    info: FieldInfo | None = None
    for element in loc:
        current = _strip(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            holder = current
            info = current.model_fields.get(element) if isinstance(element, str) else None
            if info is None:
                return holder, None
            current = info.annotation
            continue
        origin = typing.get_origin(current)
        if origin in (tuple, list) and isinstance(element, int):
            current = typing.get_args(current)[0]
        elif origin is dict and isinstance(element, str):
            current = typing.get_args(current)[1]
        else:
            break
    return holder, info


def _table_kind(info: FieldInfo | None) -> str:
    """'table', 'array of tables' or 'value': how a missing field is written in TOML."""
    if info is None:
        return "value"
    annotation = _strip(info.annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if typing.get_origin(annotation) is tuple:
        item = _strip(typing.get_args(annotation)[0])
        if isinstance(item, type) and issubclass(item, BaseModel):
            return "array of tables"
    return "value"


# --------------------------------------------------------------------------- friendly wording
_TOML_TYPE = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    dict: "a table",
    list: "an array",
}
_EXPECTED = {
    "float_type": ("a number", "0.5"),
    "int_type": ("a whole number", "4"),
    "int_from_float": ("a whole number", "4"),
    "bool_type": ("true or false", "true"),
    "string_type": ("a quoted string", '"text"'),
    "dict_type": ("a table", "{ key = value }"),
    "model_type": ("a table", "{ key = value }"),
    "model_attributes_type": ("a table", "{ key = value }"),
    "tuple_type": ("an array", '["a", "b"]'),
    "list_type": ("an array", '["a", "b"]'),
}
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
_VOCABULARIES = {
    frozenset(POLICY_NAMES): "policy",
    frozenset(SKU_NAMES): "GPU SKU",
    frozenset(ZONES): "zone",
    frozenset(TIERS): "tier",
}


def _kind_of(value: Any) -> str:
    for python_type, word in _TOML_TYPE.items():
        if type(value) is python_type:
            return word
    return type(value).__name__


def _show(value: Any) -> str:
    """A value as it would be written in TOML (true, "text", 0.5), shortened if long."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return json.dumps(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _close(word: str, options: list[str]) -> list[str]:
    """The option nearest to ``word``, ignoring case (empty when nothing is close)."""
    lowered = {option.lower(): option for option in options}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1)
    return [lowered[m] for m in match]


def _about(info: FieldInfo | None) -> str:
    return f" ({info.description})" if info is not None and info.description else ""


def _friendly(error: Mapping[str, Any], loc: tuple[str | int, ...], path: str) -> tuple[str, str]:
    """(problem, fix) for one pydantic error."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    holder, info = _schema_at(loc)
    field = next((e for e in reversed(loc) if isinstance(e, str)), "value")
    if "problem" in ctx and "fix" in ctx:
        return str(ctx["problem"]), str(ctx["fix"])
    if kind == "missing":
        table_kind = _table_kind(info)
        toml_path = ".".join(str(e) for e in loc if isinstance(e, str))
        if table_kind == "table":
            return "required table is missing", f"add a [{toml_path}] table{_about(info)}"
        if table_kind == "array of tables":
            return "required list is missing", f"add at least one [[{toml_path}]] entry{_about(info)}"
        return "required field is missing", f"add `{field} = ...`{_about(info)}"
    if kind == "extra_forbidden":
        allowed = sorted(holder.model_fields) if holder is not None else []
        close = _close(field, allowed)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return (
            f"unknown key '{field}'",
            f"{hint}remove it or correct its spelling; keys allowed here: {', '.join(allowed)}",
        )
    if kind in _EXPECTED:
        expected, example = _EXPECTED[kind]
        got = f"expected {expected}, got {_kind_of(value)} {_show(value)}"
        table_kind = _table_kind(info) if loc and loc[-1] == field else "value"
        toml_path = ".".join(str(e) for e in loc if isinstance(e, str))
        if table_kind == "table":
            return got, f"write it as a [{toml_path}] table{_about(info)}"
        if table_kind == "array of tables":
            return got, f"write each entry as a [[{toml_path}]] table{_about(info)}"
        return got, f"write it as {expected}, e.g. `{field} = {example}`{_about(info)}"
    if kind in _BOUNDS:
        bound = _show(next(iter(ctx.values())))
        return (
            f"must be {_BOUNDS[kind]} {bound}, got {_show(value)}",
            f"use a value {_BOUNDS[kind]} {bound}{_about(info)}",
        )
    if kind in ("literal_error", "enum"):
        expected = str(ctx.get("expected", ""))
        # text choices come quoted ('vllm', 'sglang' or 'trtllm'), numbers bare (1, 2, 4 or 8)
        options = _QUOTED.findall(expected) or [o for o in re.split(r", | or ", expected) if o]
        noun = _VOCABULARIES.get(frozenset(options), field)
        close = _close(str(value), options)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"unknown {noun} {_show(value)}", f"{hint}use one of: {', '.join(options)}"
    if kind == "too_short":
        minimum = ctx.get("min_length", 1)
        toml_path = ".".join(str(e) for e in loc if isinstance(e, str))
        what = f"[[{toml_path}]] entr" if _table_kind(info) == "array of tables" else "entr"
        return (
            f"needs at least {minimum} item{'s' if minimum != 1 else ''}",
            f"add at least {minimum} {what}{'ies' if minimum != 1 else 'y'}{_about(info)}",
        )
    return str(error.get("msg", kind)), f"see {path} in scenarios/README.md"


def describe_errors(exc: ValidationError, raw: Mapping[str, Any], source: str) -> list[dict[str, str]]:
    """Every pydantic error as {file, field, problem, fix}, rule bundles expanded, in schema order."""
    described: list[dict[str, str]] = []
    errors = exc.errors(include_url=False)
    for error in errors:
        loc = tuple(error["loc"])
        if _echo_of_item_error(error, errors):
            continue
        if loc and loc[-1] == "[key]":  # a bad dictionary key: report it at the key itself
            loc = loc[:-1]
        ctx = error.get("ctx") or {}
        if error["type"] == "scenario_rule":
            issues: tuple[Issue, ...] = ctx["issues"]
            for issue in issues:
                full = loc + issue.path
                described.append(_entry(source, render_path(full, raw), issue.problem, issue.fix))
            continue
        path = render_path(loc, raw)
        problem, fix = _friendly(error, loc, path)
        described.append(_entry(source, path, problem, fix))
    return described


def _echo_of_item_error(error: Mapping[str, Any], errors: list[Any]) -> bool:
    """True for a "needs at least N items" error that only repeats an error inside one of the list's items.

    Pydantic checks a list's length after dropping the items that failed, so one bad entry
    in a one-entry list (``residency = ["xx"]``) also reads as an empty list. The user wrote
    an entry; the entry's own error is the one to report.
    """
    if error["type"] != "too_short":
        return False
    loc = tuple(error["loc"])
    return any(len(other["loc"]) > len(loc) and tuple(other["loc"][: len(loc)]) == loc for other in errors)


def _entry(source: str, field: str, problem: str, fix: str) -> dict[str, str]:
    return {"file": source, "field": field, "problem": problem.rstrip(". "), "fix": fix.rstrip(". ")}
