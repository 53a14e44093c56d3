"""The pure core opens no file, reads no environment variable and imports nothing from the shell.

``forecast``, ``placement``, ``sim``, ``calibrate``, ``loop`` and ``report`` take values and
return values; reading, hashing, writing and run recording live in ``planner.workflows``
(with ``planner.storage`` and ``planner.runs``), settings in ``planner.settings``. This test
reads the source of every module of those packages (``ast``, so imports inside functions
count too) and names each offence with its module, line and what to do instead. The
checker is itself tested on small sources, so the guard cannot pass by finding nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import planner

CORE_PACKAGES = ("forecast", "placement", "sim", "calibrate", "loop", "report")
SHELL_MODULES = ("planner.cli", "planner.runs", "planner.workflows", "planner.storage")
FILE_CALLS = frozenset({"open", "fdopen", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "unlink",
                        "read_csv", "read_parquet", "read_json", "writeModel", "writeSolution", "readModel"})
"""Calls that touch files whatever their arguments (``open`` covers builtins.open, os.open, io.open, Path.open)."""
WRITER_CALLS = frozenset({"savefig", "to_csv", "to_parquet", "to_json"})
"""Calls that write a file when given a destination; without one (or into an in-memory buffer) they return values."""
BUFFERS = frozenset({"BytesIO", "StringIO"})
ENVIRONMENT = frozenset({"environ", "getenv", "putenv", "unsetenv", "environb", "getenvb"})

FILE_FIX = "take the data as a value and let the shell read or write the file (planner/workflows/)"
ENV_FIX = "resolve it once in planner.settings (Settings) and pass the value in"
IMPORT_FIX = "pass the values in; only planner.workflows and the CLI may use planner.cli, .runs, .storage"

PLANNER_DIR = Path(planner.__file__).resolve().parent


@dataclass(frozen=True)
class Finding:
    module: str
    line: int
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.what}; instead, {self.fix}"


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _buffer_names(tree: ast.AST) -> set[str]:
    """Names bound to an in-memory buffer (``buffer = io.BytesIO()``) anywhere in the module."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _called_name(node.value) in BUFFERS:
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        if isinstance(node, ast.withitem) and isinstance(node.context_expr, ast.Call) \
                and _called_name(node.context_expr) in BUFFERS and isinstance(node.optional_vars, ast.Name):
            names.add(node.optional_vars.id)
    return names


def _writes_to_a_destination(call: ast.Call, buffers: set[str]) -> bool:
    target = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg in ("path_or_buf", "path", "fname", "buf")), None)
    if target is None:
        return False
    if isinstance(target, ast.Name) and target.id in buffers:
        return False
    return not (isinstance(target, ast.Call) and _called_name(target) in BUFFERS)


def _imported_shell(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The shell modules ``node`` imports (``module``, the importing module or a package's
    ``<package>.__init__``, resolves relative imports)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".")[: -node.level]
            base = ".".join([*package, base] if base else package)
        names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return [name for name in names if any(name == s or name.startswith(s + ".") for s in SHELL_MODULES)]


def _is_environment(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT
            and isinstance(node.value, ast.Name) and node.value.id == "os")


def check_source(source: str, module: str) -> list[Finding]:
    """Every file access, environment read and shell import in one module's source."""
    tree = ast.parse(source)
    buffers = _buffer_names(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call):
            name = _called_name(node)
            if name in FILE_CALLS:
                found.append(Finding(module, line, f"calls {name}(", FILE_FIX))
            elif name in WRITER_CALLS and _writes_to_a_destination(node, buffers):
                found.append(Finding(module, line, f"calls {name}( with a destination", FILE_FIX))
            elif name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
                    and _imported_shell(module, ast.Import(names=[ast.alias(str(node.args[0].value))])):
                found.append(Finding(module, line, f"imports {node.args[0].value} at run time", IMPORT_FIX))
        elif _is_environment(node):
            found.append(Finding(module, line, f"reads os.{node.attr}", ENV_FIX))  # type: ignore[attr-defined]
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and not node.level:
            for alias in node.names:
                if alias.name in ENVIRONMENT:
                    found.append(Finding(module, line, f"imports os.{alias.name}", ENV_FIX))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name in _imported_shell(module, node):
                found.append(Finding(module, line, f"imports {name}", IMPORT_FIX))
    return sorted(set(found), key=lambda f: (f.line, f.what))


def core_modules() -> dict[str, Path]:
    """Module name -> source file of every module of the core packages."""
    modules = {}
    for package in CORE_PACKAGES:
        for path in sorted((PLANNER_DIR / package).rglob("*.py")):
            parts = path.relative_to(PLANNER_DIR).with_suffix("").parts
            name = ".".join(("planner", *parts))  # a package's own module is <package>.__init__
            modules[name] = path
    return modules


def test_every_core_package_is_read():
    modules = core_modules()
    for package in CORE_PACKAGES:
        assert sum(name.startswith(f"planner.{package}.") for name in modules) >= 3, package
    assert check_source("from .. import storage\n", "planner.loop.__init__")[0].what == "imports planner.storage"


def test_the_core_opens_no_file_reads_no_environment_and_imports_no_shell():
    findings = [finding for name, path in core_modules().items()
                for finding in check_source(path.read_text(encoding="utf-8"), name)]
    assert not findings, "the pure core does I/O:\n" + "\n".join(map(str, findings))


def test_the_checker_catches_open_added_to_placement():
    source = "def load(path):\n    with open(path) as handle:\n        return handle.read()\n"
    (finding,) = check_source(source, "planner.placement.solve")
    assert (finding.module, finding.line) == ("planner.placement.solve", 2)
    assert str(finding).startswith("planner.placement.solve:2: calls open(") and "planner/workflows/" in str(finding)


@pytest.mark.parametrize(("source", "what"), [
    ("import os\nfd = os.open(os.devnull, os.O_WRONLY)\n", "calls open("),
    ("import io\nio.open('x')\n", "calls open("),
    ("def f(path):\n    return path.open('rb')\n", "calls open("),
    ("def f(path):\n    return path.read_text()\n", "calls read_text("),
    ("def f(path):\n    path.write_bytes(b'')\n", "calls write_bytes("),
    ("def f(path):\n    path.parent.mkdir(parents=True)\n", "calls mkdir("),
    ("def f(path):\n    path.unlink()\n", "calls unlink("),
    ("def f(fig, path):\n    fig.savefig(path, format='png')\n", "calls savefig( with a destination"),
    ("def f(frame, path):\n    frame.to_csv(path, index=False)\n", "calls to_csv( with a destination"),
    ("def f(frame):\n    frame.to_parquet(path='x.parquet')\n", "calls to_parquet( with a destination"),
    ("import pandas as pd\npd.read_csv('x.csv')\n", "calls read_csv("),
    ("import pandas as pd\npd.read_parquet('x.parquet')\n", "calls read_parquet("),
    ("import os\nroot = os.environ.get('PLANNER_CACHE_DIR')\n", "reads os.environ"),
    ("import os\nroot = os.getenv('HOME')\n", "reads os.getenv"),
    ("from os import environ\n", "imports os.environ"),
    ("from planner.storage import read_table\n", "imports planner.storage"),
    ("def f():\n    from planner.runs import RunHistory\n", "imports planner.runs"),
    ("import planner.cli.app\n", "imports planner.cli.app"),
    ("from planner import workflows\n", "imports planner.workflows"),
    ("from ...storage import read_table\n", "imports planner.storage"),
    ("import importlib\nimportlib.import_module('planner.storage')\n", "imports planner.storage at run time"),
])
def test_the_checker_catches_each_kind_of_io(source, what):
    findings = check_source(source, "planner.sim.replica.engine")
    assert any(f.what == what for f in findings), findings


@pytest.mark.parametrize("source", [
    "import io\ndef f(fig):\n    buffer = io.BytesIO()\n    fig.savefig(buffer, format='png')\n",
    "def f(frame):\n    return frame.to_csv(index=False, lineterminator='\\n')\n",
    "def f(result):\n    return result.to_json()\n",
    "from planner.run_state import without_run_state\nfrom planner.outputs import table_json_path\n",
    "def read_table(frame):\n    return frame\n",
])
def test_the_checker_lets_values_through(source):
    assert check_source(source, "planner.report.charts") == []
