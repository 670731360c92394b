"""Imports point downward only (DESIGN.md §1, docs/architecture.md): notebook → harness →
team / tracing → subagents → permissions → engine / mcp → skills → tools → providers /
sandbox → core. Only notebook/ imports IPython, ipywidgets or ipykernel.

The check reads every module's import statements (function-level imports included), so a
lazy import cannot sneak a layer crossing past it; an import under ``if TYPE_CHECKING:``
counts too, unless ``TYPE_ONLY_UPWARD`` names it with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "harness_nb"

RANK = {
    "core": 0,
    "providers": 1,
    "sandbox": 1,
    "tools": 2,
    "skills": 3,
    "engine": 4,
    "mcp": 4,
    "permissions": 5,
    "subagents": 6,
    "team": 7,
    "tracing": 7,
    "harness": 8,
    "map_ray": 8,
    "assembly": 8,
    "settings": 8,
    "setting": 8,
    "cli": 8,
    "textview": 8,
    "__main__": 8,
    "demo": 8,
    "testing": 8,
    "notebook": 9,
}
# same-rank layers that must not import each other
SIBLINGS_FORBIDDEN = {
    ("providers", "sandbox"),
    ("sandbox", "providers"),
    ("engine", "mcp"),
    ("mcp", "engine"),
    ("team", "tracing"),
    ("tracing", "team"),
}
# Upward references allowed for type checking only (under ``if TYPE_CHECKING:``), each with
# its reason. Nothing at run time crosses: the module never imports the layer above.
TYPE_ONLY_UPWARD = {
    ("engine/hook.py", "harness_nb.permissions.rule"): (
        "Approved.remember carries the permissions' Rule from the approval card to "
        "permissions.remember; the engine hands the answer on without reading it"
    ),
}
NOTEBOOK_ONLY = {"IPython", "ipywidgets", "ipykernel", "traitlets", "comm"}
CORE_ALLOWED_THIRD_PARTY = {"pydantic", "pydantic_core", "typing_extensions", "yaml"}  # yaml: core/frontmatter.py


def layer_of(module_path: Path) -> str | None:
    rel = module_path.relative_to(PACKAGE)
    if rel.parts == ("__init__.py",):
        return None  # the package facade loads layers lazily on purpose
    head = rel.parts[0]
    return head.removesuffix(".py")


def type_checking_lines(tree: ast.Module) -> set[int]:
    """Lines of the imports inside ``if TYPE_CHECKING:`` blocks."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom)}
    return lines


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    package_parts = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
                found.append((node.lineno, name))
                if node.module is None:  # from . import x
                    found += [(node.lineno, f"{name}.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module or ""))
    return found


def target_layer(dotted: str) -> str | None:
    parts = dotted.split(".")
    if parts[0] != "harness_nb" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in RANK else None


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if layer_of(p))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_downward(path: Path) -> None:
    layer = layer_of(path)
    assert layer in RANK, f"{path} is in no known layer; add it to DESIGN.md §1 and RANK"
    rel = path.relative_to(PACKAGE).as_posix()
    type_only = type_checking_lines(ast.parse(path.read_text()))
    problems = []
    for line, name in imported_modules(path):
        if line in type_only and (rel, name) in TYPE_ONLY_UPWARD:
            continue
        top = name.split(".")[0]
        if top in NOTEBOOK_ONLY and layer != "notebook" and not (layer == "testing" and top != "ipywidgets"):
            problems.append(f"line {line}: {layer}/ imports {name} (only notebook/ may)")
        if layer == "core" and top not in CORE_ALLOWED_THIRD_PARTY and top != "harness_nb":
            import sys

            if top not in sys.stdlib_module_names:
                problems.append(f"line {line}: core/ imports third-party {name}")
        target = target_layer(name)
        if target is None or target == layer:
            continue
        if RANK[target] > RANK[layer] or (layer, target) in SIBLINGS_FORBIDDEN:
            problems.append(f"line {line}: {layer}/ imports {name} ({target}/ is not below {layer}/)")
    assert not problems, "\n".join(problems)


def test_every_type_only_exception_is_still_needed() -> None:
    """An exception whose import is gone must leave the list, so it cannot cover a new one."""
    for (rel, name), _reason in TYPE_ONLY_UPWARD.items():
        path = PACKAGE / rel
        lines = type_checking_lines(ast.parse(path.read_text()))
        assert any(line in lines and found == name for line, found in imported_modules(path)), (rel, name)


def test_the_checker_catches_a_crossing(tmp_path: Path) -> None:
    """The detector itself must be able to fail: an engine module importing the notebook."""
    fake = PACKAGE / "engine" / "_layer_probe.py"
    fake.write_text("def f():\n    from ..notebook import extension\n    import IPython\n")
    try:
        with pytest.raises(AssertionError) as info:
            test_imports_point_downward(fake)
        assert "engine/ imports harness_nb.notebook" in str(info.value)
        assert "engine/ imports IPython" in str(info.value)
    finally:
        fake.unlink()


def test_engine_runs_without_ipython_installed_in_the_process() -> None:
    """Importing the engine and the harness must not pull IPython into the process."""
    import subprocess
    import sys

    code = (
        "import sys, harness_nb.engine, harness_nb.harness, harness_nb.providers.scripted;"
        "bad=[m for m in ('IPython','ipywidgets','ipykernel') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_importing_the_facade_loads_none_of_its_parts(tmp_path: Path) -> None:
    """``from harness_nb import Harness`` is the package's doorway (issue 19: at most 150 ms):
    it loads the facade alone; the first ``Harness`` built loads the parts it wires."""
    import subprocess
    import sys

    parts = ("harness_nb.assembly", "harness_nb.mcp", "harness_nb.team", "harness_nb.engine", "httpx", "pydantic", "asyncio")
    code = (
        "import sys\nfrom harness_nb import Harness\n"
        f"print(sorted(m for m in {parts!r} if m in sys.modules))\n"
        f"Harness('openai/gpt-4o-mini', workdir={str(tmp_path)!r})\n"
        f"print(sorted(m for m in {parts!r} if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    at_import, once_built = proc.stdout.splitlines()
    assert at_import == "[]", f"loaded by the import: {at_import}"
    wired = sorted(m for m in parts if m != "httpx")  # httpx waits for the first request
    assert once_built == repr(wired), f"a harness built loads its parts: {once_built}"
