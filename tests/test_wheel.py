"""The wheel, built as a user's pip builds it from a clean clone, carries the frontend
extension, and JupyterLab finds it with no step after ``pip install``.

The clone is of this repository's HEAD (what is committed, nothing else), so the build sees
no earlier build, and only the npm packages ``.ci/setup`` installed (linked in from this
checkout, as they are ~450 MB to unpack): the build's hook runs ``npm install`` (checked
against the clone's committed lockfile; anything missing comes from the npm cache first)
and the production build. The wheel then goes into a fresh venv with pip, nothing else; the fresh
venv borrows this one's installed dependencies through a ``.pth`` file instead of
downloading them, and sees none of its Jupyter folders (this venv's own link to the
development build stays out of sight), so ``jupyter labextension list`` there lists
harness-nb only if the wheel put it under the venv's ``share/jupyter/labextensions``.

Builds with ``--no-build-isolation`` (the build requirements come with the test extra) so
the test needs no package index: what an isolated build would fetch is named in
pyproject.toml's build-system table, which ``test_build_requirements_are_in_the_test_extra``
keeps in step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LABEXTENSION = "share/jupyter/labextensions/harness-nb"


def _run(*argv: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{argv} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def _version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


@pytest.mark.packaging
def test_the_wheel_from_a_clean_clone_carries_the_extension_and_jupyterlab_lists_it(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    _run("git", "clone", "--quiet", "--no-hardlinks", ROOT, clone)
    assert (
        not (clone / "labextension" / "node_modules").exists() and not (clone / "harness_nb" / "labextension").exists()
    )
    # what .ci/setup installed (npm ci from the same lockfile), linked in: unpacking the
    # ~400 packages again would be most of this test's time; the build's own npm install
    # still checks them against the clone's lockfile
    installed = ROOT / "labextension" / "node_modules"
    if installed.is_dir():
        shutil.copytree(installed, clone / "labextension" / "node_modules", symlinks=True, copy_function=os.link)

    # the build: npm install and the production build run inside pip's call to the backend
    # PATH as in an activated venv (an isolated build puts its own bin first): npm's build
    # script calls jupyter-builder
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "npm_config_prefer_offline": "true", "npm_config_audit": "false"}
    dist = tmp_path / "dist"
    _run(
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", dist, clone, env=env
    )
    (wheel,) = dist.glob("harness_nb-*.whl")

    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    data = f"harness_nb-{_version()}.data/data/{LABEXTENSION}/"
    shipped = [name.removeprefix(data) for name in names if name.startswith(data)]
    assert "package.json" in shipped and "install.json" in shipped and "static/style.js" in shipped, shipped
    assert any(re.fullmatch(r"static/remoteEntry\.[0-9a-f]+\.js", name) for name in shipped), shipped
    assert not any(name.endswith(".map") for name in shipped), "the production build has no source maps"
    assert not [n for n in names if "node_modules" in n or n.startswith("harness_nb/labextension/")], (
        "the build only as shared data"
    )
    assert "harness_nb/demo/project/data/sales.csv" in names and "harness_nb/py.typed" in names

    # a fresh venv: pip install of the wheel is the only step
    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=False)
    fresh_python = fresh / "bin" / "python"
    fresh_site = Path(_run(fresh_python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip())
    (fresh_site / "borrowed-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run(sys.executable, "-m", "pip", "--python", fresh_python, "install", "--quiet", "--no-deps", "--no-index", wheel)

    private = {name: str(tmp_path / name) for name in ("jupyter-config", "jupyter-data", "jupyter-runtime")}
    jupyter_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")},
        "JUPYTER_CONFIG_DIR": private["jupyter-config"],
        "JUPYTER_DATA_DIR": private["jupyter-data"],
        "JUPYTER_RUNTIME_DIR": private["jupyter-runtime"],
    }
    listing = _run(
        fresh_python,
        "-c",
        "import sys; from jupyterlab.labextensions import main; sys.exit(main())",
        "list",
        env=jupyter_env,
    )
    assert str(fresh / LABEXTENSION.rsplit("/", 1)[0]) in listing, listing
    listing = re.sub(r"\x1b\[[0-9;]*m", "", listing)  # its colours
    line = next((text for text in listing.splitlines() if "harness-nb" in text), "")
    assert re.search(rf"harness-nb v{re.escape(_version())} enabled\s+OK\b.*\(python, harness_nb\)", line), listing
    installed = json.loads((fresh / LABEXTENSION / "install.json").read_text())
    assert installed["packageName"] == "harness_nb"


def test_build_requirements_are_in_the_test_extra() -> None:
    """What pyproject.toml's build-system needs is installed by the test extra, so the
    build above (without isolation) uses what an isolated build would."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    name = re.compile(r"^[A-Za-z0-9_.-]+")
    extras = project["project"]["optional-dependencies"]
    installed = {name.match(req).group(0).lower().replace("_", "-") for req in extras["test"]}  # type: ignore[union-attr]
    needed = {name.match(req).group(0).lower().replace("_", "-") for req in project["build-system"]["requires"]}  # type: ignore[union-attr]
    assert needed <= installed, f"add {sorted(needed - installed)} to the test extra"
