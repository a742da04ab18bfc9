"""The layering rules of DESIGN section 2, checked by parsing imports with `ast`.

- coordinator/ is pure and deterministic: no Ray, asyncio, msgpack, Spark,
  file, socket, process or thread code, no clock, no other project package,
  no builtin `open`; randomness only through seeded `random.Random`, no
  `uuid1`/`uuid4`.
- log/ never imports actors/, spark_bridge/, gateway/, Ray or Spark.
- spark_bridge/ never imports actors/ or gateway/.
- actors/ never imports gateway/ or spark_bridge/: they plug into it (CLI
  entry points, actors attached to the service).

The rules between the subpackages of actors/ and coordinator/ are in
tests/test_layers.py.

Relative imports cannot leave their own top-level package, so only absolute
imports are checked. Every import counts, including ones under
`if TYPE_CHECKING:`: a type-only dependency is still a dependency.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN_IMPORTS: dict[str, frozenset[str]] = {
    "coordinator": frozenset(
        {
            # I/O, processes, threads and the event loop belong to actors/.
            "asyncio", "io", "os", "pathlib", "shutil", "tempfile", "socket", "select",
            "selectors", "subprocess", "threading", "multiprocessing", "concurrent", "signal",
            # The core never reads the clock: time is an argument (now_ms).
            "time", "datetime",
            # Non-reproducible randomness and dynamic imports that would dodge this test.
            "secrets", "importlib",
            # Other layers and their libraries.
            "ray", "msgpack", "pyspark", "raydp", "log", "actors", "spark_bridge", "gateway",
        }
    ),
    "log": frozenset({"actors", "spark_bridge", "gateway", "ray", "raydp", "pyspark"}),
    "spark_bridge": frozenset({"actors", "gateway"}),
    "actors": frozenset({"gateway", "spark_bridge"}),
}

# Builtins that do I/O or import dynamically, forbidden in the core.
FORBIDDEN_CORE_BUILTINS = frozenset({"open", "__import__", "input"})
# Module attributes the core may use from modules that are otherwise non-deterministic.
ALLOWED_CORE_ATTRIBUTES: dict[str, frozenset[str] | None] = {
    "random": frozenset({"Random"}),
    # None: everything but the listed non-deterministic names.
    "uuid": None,
}
FORBIDDEN_UUID_NAMES = frozenset({"uuid1", "uuid4"})


@dataclass(frozen=True, slots=True)
class Violation:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def _attribute_allowed(module: str, name: str) -> bool:
    allowed = ALLOWED_CORE_ATTRIBUTES[module]
    if allowed is None:
        return name not in FORBIDDEN_UUID_NAMES
    return name in allowed


def _check_imports(tree: ast.AST, package: str, rel: str) -> list[Violation]:
    forbidden = FORBIDDEN_IMPORTS[package]
    found: list[Violation] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in forbidden:
                found.append(Violation(rel, node.lineno, f"{package}/ must not import '{name}'"))
    return found


def _check_core_calls(tree: ast.AST, rel: str) -> list[Violation]:
    """Builtin I/O and non-deterministic randomness in coordinator/."""
    found: list[Violation] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ALLOWED_CORE_ATTRIBUTES:
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in ALLOWED_CORE_ATTRIBUTES:
            for alias in node.names:
                if not _attribute_allowed(node.module, alias.name):
                    found.append(
                        Violation(rel, node.lineno, f"coordinator/ must not use '{node.module}.{alias.name}'")
                    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in FORBIDDEN_CORE_BUILTINS:
                found.append(Violation(rel, node.lineno, f"coordinator/ must not call '{node.func.id}()'"))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and not _attribute_allowed(aliases[node.value.id], node.attr)
        ):
            module = aliases[node.value.id]
            found.append(Violation(rel, node.lineno, f"coordinator/ must not use '{module}.{node.attr}'"))
    return found


def find_violations(root: Path) -> list[Violation]:
    """Every layering violation under `root`, which holds the top-level packages."""
    found: list[Violation] = []
    for package in FORBIDDEN_IMPORTS:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
            except SyntaxError as exc:
                found.append(Violation(rel, exc.lineno or 0, f"cannot parse: {exc.msg}"))
                continue
            found.extend(_check_imports(tree, package, rel))
            if package == "coordinator":
                found.extend(_check_core_calls(tree, rel))
    return sorted(found, key=lambda v: (v.path, v.line, v.message))


def test_repository_respects_layering() -> None:
    violations = find_violations(REPO_ROOT)
    assert not violations, "layering violations (DESIGN section 2):\n" + "\n".join(map(str, violations))


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_checker_reports_each_violation_with_file_and_line(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "coordinator/assignors/bad.py",
        "import time\n"
        "from ray import remote\n"
        "import os.path\n"
        "import random as rnd\n"
        "from uuid import uuid4\n"
        "from log.segment import Segment\n"
        "def f():\n"
        "    open('x')\n"
        "    return rnd.random()\n",
    )
    _write(tmp_path, "log/bad.py", "import actors.cli.main\nfrom spark_bridge import reader\nimport ray\n")
    _write(tmp_path, "spark_bridge/bad.py", "\n\nfrom actors import connect\n")
    _write(tmp_path, "actors/cli/bad.py", "from gateway import cli\n")
    _write(tmp_path, "coordinator/broken.py", "def (:\n")

    got = [str(v) for v in find_violations(tmp_path)]

    assert got == [
        "actors/cli/bad.py:1: actors/ must not import 'gateway'",
        "coordinator/assignors/bad.py:1: coordinator/ must not import 'time'",
        "coordinator/assignors/bad.py:2: coordinator/ must not import 'ray'",
        "coordinator/assignors/bad.py:3: coordinator/ must not import 'os.path'",
        "coordinator/assignors/bad.py:5: coordinator/ must not use 'uuid.uuid4'",
        "coordinator/assignors/bad.py:6: coordinator/ must not import 'log.segment'",
        "coordinator/assignors/bad.py:8: coordinator/ must not call 'open()'",
        "coordinator/assignors/bad.py:9: coordinator/ must not use 'random.random'",
        "coordinator/broken.py:1: cannot parse: invalid syntax",
        "log/bad.py:1: log/ must not import 'actors.cli.main'",
        "log/bad.py:2: log/ must not import 'spark_bridge'",
        "log/bad.py:3: log/ must not import 'ray'",
        "spark_bridge/bad.py:3: spark_bridge/ must not import 'actors'",
    ]


def test_checker_accepts_allowed_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "coordinator/ok.py",
        "from __future__ import annotations\n"
        "import random\n"
        "from random import Random\n"
        "from uuid import UUID\n"
        "from typing import TYPE_CHECKING\n"
        "from . import errors\n"
        "from .records import Record\n"
        "rng = random.Random(7)\n",
    )
    _write(tmp_path, "log/ok.py", "import os\nimport msgpack\nfrom coordinator.records import Record\n")
    _write(tmp_path, "spark_bridge/ok.py", "import pyspark\nimport raydp\nfrom log import reader\n")
    _write(tmp_path, "actors/anything.py", "import ray\nimport time\nfrom log import reader\n")

    assert find_violations(tmp_path) == []
