"""The import rules between the subpackages of actors/ and of coordinator/
(docs/architecture.md), checked by parsing imports with `ast`.

Between top-level packages the rules are tests/test_purity.py's. Every
absolute import counts, inside functions and under `if TYPE_CHECKING:` too,
except where a rule below allows an import for types only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# actors/: unit -> the units it may import besides itself. "api" is the package
# itself (actors/__init__.py, the public API); "service" is actors/service.py.
ACTORS_ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "partition": frozenset({"core"}),
    "controller": frozenset({"core", "partition"}),
    "client": frozenset({"core"}),
    "service": frozenset({"core", "client", "controller"}),
    "member": frozenset({"core", "client", "service"}),
    "pool": frozenset({"core", "client", "member", "service"}),
    "api": frozenset({"core", "client", "member", "pool", "service"}),
    "backup": frozenset({"api", "core", "client", "service"}),
    "cli": frozenset({"api", "core", "client", "service", "backup"}),
    "demo": frozenset({"api", "core", "client", "service", "member", "controller", "partition", "cli"}),
}

# coordinator/: the shard's level (dispatch between both group types) may import
# everything; the rest may not import it, except `shard` for types.
COORDINATOR_DISPATCH = frozenset(
    {"api", "shard", "offsets", "admin", "group_types", "handoff", "precopy", "precopy_source",
     "precopy_target", "runtime"}
)
COORDINATOR_FORBIDDEN: dict[str, frozenset[str]] = {
    # The shared modules (errors, messages, records, checks, timers...) know no group type.
    "shared": frozenset({"classic", "consumer"}) | COORDINATOR_DISPATCH,
    "classic": frozenset({"consumer"}) | COORDINATOR_DISPATCH,
    # The consumer group type knows the classic one (online migration converts between them).
    "consumer": COORDINATOR_DISPATCH,
    "assignors": frozenset({"classic", "consumer", "replication"}) | COORDINATOR_DISPATCH,
    "replication": frozenset({"classic", "consumer", "assignors"}) | COORDINATOR_DISPATCH,
}
# What may be imported from coordinator.shard outside the dispatch level, only under TYPE_CHECKING.
TYPE_ONLY = frozenset({"shard"})


def unit_of(package: str, parts: list[str], subpackages: frozenset[str]) -> str:
    """The unit of a module, `parts` its path inside `package`."""
    if not parts or parts == ["__init__"]:
        return "api" if package == "actors" else "dispatch"
    if package == "actors" or parts[0] in subpackages:
        return parts[0]
    return "dispatch" if parts[0] in COORDINATOR_DISPATCH else "shared"


def imported_units(tree: ast.AST, package: str) -> Iterator[tuple[int, str, bool]]:
    """(line, imported unit name, under TYPE_CHECKING) of every import of `package`'s modules."""
    type_only_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for inner in ast.walk(child):
                    type_only_lines.add(getattr(inner, "lineno", -1))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module.split(".")
            if len(module) == 1:  # `from actors import X`: X is a subpackage or a public name
                targets = [[module[0], alias.name] for alias in node.names]
            else:
                targets = [module]
        else:
            continue
        for target in targets:
            if target[0] == package:
                yield node.lineno, target[1] if len(target) > 1 else "api", node.lineno in type_only_lines


def find_violations(root: Path) -> list[str]:
    found: list[str] = []
    actors_units = frozenset(ACTORS_ALLOWED)
    coordinator_units = frozenset({"classic", "consumer", "assignors", "replication"})
    for package, units in (("actors", actors_units), ("coordinator", coordinator_units)):
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            parts = list(rel.with_suffix("").parts[1:])
            unit = unit_of(package, parts, units)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(rel))
            for line, imported, type_only in imported_units(tree, package):
                if not ((root / package / imported).is_dir() or (root / package / f"{imported}.py").exists()):
                    imported = "api"  # a name the package's __init__ exports
                if package == "actors":
                    if imported != unit and imported not in ACTORS_ALLOWED.get(unit, frozenset()):
                        found.append(f"{rel}:{line}: actors.{unit} must not import actors.{imported}")
                else:
                    if unit == "dispatch" or imported == unit:
                        continue
                    forbidden = COORDINATOR_FORBIDDEN[unit]
                    if imported in forbidden and not (imported in TYPE_ONLY and type_only):
                        found.append(
                            f"{rel}:{line}: coordinator.{unit} must not import coordinator.{imported}"
                        )
    return found


def cycle(graph: Mapping[str, frozenset[str]]) -> list[str] | None:
    """A cycle in `graph`, or None."""
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, frozenset())):
            if state.get(nxt) == 1:
                return [*path, node, nxt]
            if nxt not in state and (found := visit(nxt, [*path, node])):
                return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node, [])):
            return found
    return None


def test_repository_respects_subpackage_rules() -> None:
    violations = find_violations(REPO_ROOT)
    assert not violations, "import rules between subpackages broken:\n" + "\n".join(violations)


def test_allowed_imports_between_actors_subpackages_have_no_cycle() -> None:
    assert cycle(ACTORS_ALLOWED) is None


def test_every_actors_module_is_in_a_subpackage_with_rules() -> None:
    """A new top-level module or subpackage of actors/ must be given its rules here."""
    units = {path.stem if path.is_file() else path.name for path in (REPO_ROOT / "actors").iterdir()
             if (path.suffix == ".py" or (path / "__init__.py").exists()) and path.name != "__init__.py"}
    assert units == set(ACTORS_ALLOWED) - {"api"}


def test_every_subpackage_says_what_it_owns() -> None:
    for package in ("actors", "coordinator"):
        for init in sorted((REPO_ROOT / package).glob("*/__init__.py")):
            docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert docstring and len(docstring) > 200, f"{init}: say what it owns, its rules, its imports"


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_checker_reports_imports_against_the_rules(tmp_path: Path) -> None:
    for module in ("actors/partition/__init__.py", "actors/service.py", "actors/client/client.py"):
        _write(tmp_path, module, "")
    _write(tmp_path, "actors/core/bad.py", "from actors.client.client import Client\n")
    _write(tmp_path, "actors/client/bad.py", "import actors\nfrom actors.partition import actor\n")
    _write(tmp_path, "actors/member/ok.py", "from actors.service import connect\nfrom actors import client\n")
    _write(tmp_path, "coordinator/classic/bad.py", "from coordinator.consumer.group import ConsumerGroup\n")
    _write(
        tmp_path, "coordinator/classic/ok.py",
        "from typing import TYPE_CHECKING\nfrom coordinator.errors import Errors\n"
        "if TYPE_CHECKING:\n    from coordinator.shard import Shard\n",
    )
    _write(tmp_path, "coordinator/consumer/bad.py", "from coordinator.shard import Shard\n")
    _write(tmp_path, "coordinator/errors.py", "from coordinator.classic import join\n")
    _write(tmp_path, "coordinator/shard.py", "import coordinator.classic\nimport coordinator.consumer\n")

    assert find_violations(tmp_path) == [
        "actors/client/bad.py:1: actors.client must not import actors.api",
        "actors/client/bad.py:2: actors.client must not import actors.partition",
        "actors/core/bad.py:1: actors.core must not import actors.client",
        "coordinator/classic/bad.py:1: coordinator.classic must not import coordinator.consumer",
        "coordinator/consumer/bad.py:1: coordinator.consumer must not import coordinator.shard",
        "coordinator/errors.py:1: coordinator.shared must not import coordinator.classic",
    ]


def test_cycle_finder_finds_a_cycle() -> None:
    loop = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"})}
    assert cycle(loop) == ["a", "b", "c", "a"]
    assert cycle({"a": frozenset({"b"}), "b": frozenset()}) is None
