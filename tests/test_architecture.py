"""docs/architecture.md stays true: every path it names exists, every package is named,
and its layer table gives each layer the rank the layer test enforces."""

from __future__ import annotations

import re
from pathlib import Path

from test_layers import RANK

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness_nb"
DOC = ROOT / "docs" / "architecture.md"
OUTSIDE_THE_PACKAGE = ("harness_nb/", "tests/", "benchmarks/", "notebooks/", ".ci/", "docs/", "labextension/")


def named_paths(text: str) -> list[str]:
    """The backticked words of ``text`` that are paths: ``engine/hook.py``, ``core/``."""
    words = re.findall(r"`([^`\s]+)`", text)
    return [w for w in words if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", w) and ("/" in w or w.endswith((".py", ".md")))]


def test_every_path_named_exists() -> None:
    missing = []
    for name in named_paths(DOC.read_text()):
        base = ROOT if name.startswith(OUTSIDE_THE_PACKAGE) else PACKAGE
        if not (base / name).exists():
            missing.append(name)
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_package_is_named() -> None:
    named = set(named_paths(DOC.read_text()))
    packages = sorted(p.parent.relative_to(PACKAGE).as_posix() + "/" for p in PACKAGE.rglob("__init__.py"))
    unnamed = [p for p in packages if p != "./" and p not in named]
    assert not unnamed, f"add these packages to docs/architecture.md: {unnamed}"


def test_the_layer_table_matches_the_layer_test() -> None:
    documented: dict[str, int] = {}
    for rank, cell in re.findall(r"^\| (\d+) \| ([^|]+) \|", DOC.read_text(), re.MULTILINE):
        for name in re.findall(r"`([^`]+)`", cell):
            documented[name.rstrip("/").removesuffix(".py")] = int(rank)
    assert documented == RANK, "docs/architecture.md's layer table and tests/test_layers.py's RANK differ"


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A path that is not there is caught, and a backticked word that is no path is not one."""
    assert named_paths("`engine/nothing.py` and `h.run()` and `core/`") == ["engine/nothing.py", "core/"]
    assert not (PACKAGE / "engine" / "nothing.py").exists()
