"""The release's files (issue 26: the Kubeflow tutorial named a package nobody could install,
and there was no way to build one): ``make dist``'s steps build an sdist and a wheel that
twine accepts, and the wheel carries the ``py.typed`` marker and the ``dispatch`` command."""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=280, check=False
    )


def test_the_built_wheel_has_py_typed_and_the_console_script(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = _run("-m", "build", "--outdir", str(dist), ".")
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("dispatch_train-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "dispatch/py.typed" in archive.namelist()
        (entry_points,) = (
            n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")
        )
        parser = configparser.ConfigParser()
        parser.read_string(archive.read(entry_points).decode())
    assert parser.get("console_scripts", "dispatch") == "dispatch.cli.main:main"

    checked = _run("-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir())))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    contents = _run("scripts/check_dist.py", str(dist))
    assert contents.returncode == 0, contents.stderr
    version = wheel.name.split("-")[1]
    tagged = _run("scripts/check_dist.py", str(dist), "--version", version + ".post9")
    assert tagged.returncode == 1
    assert f"the version built is {version}, the release asks for {version}.post9" in tagged.stderr


def test_check_dist_names_a_wheel_without_py_typed_or_the_command(tmp_path: Path) -> None:
    """The check itself can fail: a wheel missing both is refused with both problems named."""
    import tarfile

    wheel = tmp_path / "dispatch_train-9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("dispatch/__init__.py", "")
    sdist = tmp_path / "dispatch_train-9.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        readme = tmp_path / "README.md"
        readme.write_text("x")
        archive.add(readme, "dispatch_train-9.9/README.md")
    done = _run("scripts/check_dist.py", str(tmp_path))
    assert done.returncode == 1
    assert "has no dispatch/py.typed" in done.stderr
    assert "does not install the console script dispatch" in done.stderr
    assert "lacks pyproject.toml" in done.stderr
