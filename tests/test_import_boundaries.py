"""Data flows one way: api -> pagemill <- worker, and the command line may use all three.

The shared package imports no process package, and the two processes never import each
other, so each can be deployed, started and reasoned about alone. Every import in every
module counts, including those inside functions and under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.services import ROOT

# Package -> the top-level packages it must never import.
FORBIDDEN = {
    "pagemill": ("api", "worker", "cli"),
    "api": ("worker", "cli"),
    "worker": ("api", "cli"),
}


def imported_modules(path: Path, package_root: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of each import in the file at `path`."""
    module_parts = path.relative_to(package_root.parent).with_suffix("").parts
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                yield node.lineno, node.module or ""
                continue
            # A relative import resolves against the module's own package (for an
            # __init__.py, the package it opens).
            package = module_parts[:-1]
            base = package[: len(package) - (node.level - 1)]
            yield node.lineno, ".".join([*base, *([node.module] if node.module else [])])


def violations(package_root: Path, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted(package_root.rglob("*.py")):
        for line, module in imported_modules(path, package_root):
            if module.split(".")[0] in forbidden:
                found.append(f"{path.relative_to(package_root.parent)}:{line} imports {module}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_none_it_must_not(package: str) -> None:
    assert list((ROOT / package).rglob("*.py")), f"no modules found under {package}/"
    assert violations(ROOT / package, FORBIDDEN[package]) == []


def test_the_walk_finds_every_kind_of_import(tmp_path: Path) -> None:
    root = tmp_path / "pagemill"
    (root / "jobs").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "jobs" / "__init__.py").write_text("")
    (root / "jobs" / "service.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import worker.tasks\n"
        "from api import deps\n"
        "from . import repository\n"
        "if TYPE_CHECKING:\n"
        "    from worker.engines.base import PageInput\n"
        "def later():\n"
        "    import api.app\n"
    )
    (root / "jobs" / "repository.py").write_text("from ..storage import put\n")
    assert violations(root, ("api", "worker")) == [
        "pagemill/jobs/service.py:2 imports worker.tasks",
        "pagemill/jobs/service.py:3 imports api",
        "pagemill/jobs/service.py:6 imports worker.engines.base",
        "pagemill/jobs/service.py:8 imports api.app",
    ]
    assert sorted(module for _, module in imported_modules(root / "jobs/repository.py", root)) == [
        "pagemill.storage"
    ]
