"""The shape of the code a newcomer lives in: short functions and no import cycles.

Both checks read the source with ``ast``, so they cost nothing at run time and name the
function or the cycle to fix.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "planner"
MAX_FUNCTION_LINES = 80
LONGER_ALLOWED: dict[str, str] = {}
"""Functions allowed over the limit, each with the measured reason (``module:function``)."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def long_functions(source: str, module: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``module:function (N lines)`` for every function or method in ``source`` longer than ``limit``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append(f"{module}:{node.name} ({length} lines)")
    return found


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imported_modules(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The planner modules ``source`` imports, at module level or inside functions (not for type checking)."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    stack: list[ast.AST] = [ast.parse(source)]
    while stack:
        node = stack.pop()
        if _is_type_checking_block(node):
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in known else base)
    return {name for name in found if name in known and name != module}


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as the modules along it, or [] when there is none."""
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as error:
        return list(error.args[1])
    return []


def test_no_function_is_longer_than_the_limit():
    found = [entry for name, path in _modules().items() for entry in long_functions(path.read_text(), name)
             if entry.split(" (")[0] not in LONGER_ALLOWED]
    assert not found, f"split these into functions of at most {MAX_FUNCTION_LINES} lines: {found}"


def test_the_length_check_catches_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def grown():\n{body}\n", "planner.example") == [
        f"planner.example:grown ({MAX_FUNCTION_LINES + 1} lines)"]
    assert long_functions("def short():\n    return 1\n", "planner.example") == []


def test_the_package_has_no_import_cycle():
    modules = _modules()
    known = set(modules)
    graph = {name: imported_modules(path.read_text(), name, path.name == "__init__.py", known)
             for name, path in modules.items()}
    assert "planner.placement.strengthen" in graph["planner.placement.problem"]  # the graph sees real imports
    assert import_cycle(graph) == [], f"import cycle: {' -> '.join(import_cycle(graph))}"


def test_the_cycle_check_catches_a_function_level_cycle():
    known = {"planner.a", "planner.b", "planner.c"}
    graph = {
        "planner.a": imported_modules("from planner.b import thing\n", "planner.a", False, known),
        "planner.b": imported_modules("def late():\n    from planner import a\n", "planner.b", False, known),
        "planner.c": imported_modules("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import planner.a\n",
                                      "planner.c", False, known),
    }
    assert graph["planner.c"] == set()  # an import for type checking only is no dependency
    assert set(import_cycle(graph)) == {"planner.a", "planner.b"}


def test_every_allowed_long_function_is_still_over_the_limit():
    modules = _modules()
    stale = []
    for name in LONGER_ALLOWED:
        module, _, function = name.partition(":")
        long = long_functions(modules[module].read_text(), module) if module in modules else []
        if not any(entry.startswith(f"{module}:{function} ") for entry in long):
            stale.append(name)
    assert not stale, f"no longer over the limit (remove from LONGER_ALLOWED): {stale}"
