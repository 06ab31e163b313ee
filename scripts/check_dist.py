"""Check the built distributions in a folder before they are published.

Usage: python scripts/check_dist.py DIST_DIR [--version VERSION]

Run after ``python -m build`` and ``twine check`` (``make dist``, and the release workflow in
.github/workflows/release.yml). Exit 0 when the folder holds exactly one sdist and one wheel
of dispatch-train, of the same version (and of VERSION when given: the release tag less its
``v``), and the wheel has the ``py.typed`` marker and the ``dispatch`` console script; else
exit 1 naming each problem. Standard library only.
"""

from __future__ import annotations

import argparse
import configparser
import sys
import tarfile
import zipfile
from pathlib import Path

PROJECT = "dispatch_train"
SCRIPT = ("dispatch", "dispatch.cli.main:main")


def problems(folder: Path, version: str | None = None) -> list[str]:
    """Every problem found with the distributions in ``folder``; empty when they are fine."""
    wheels = sorted(folder.glob(f"{PROJECT}-*.whl"))
    sdists = sorted(folder.glob(f"{PROJECT}-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        return [
            f"{folder} should hold one wheel and one sdist of {PROJECT}, "
            f"not {len(wheels)} and {len(sdists)}: build into an empty folder"
        ]
    wheel, sdist = wheels[0], sdists[0]
    found: list[str] = []
    built = wheel.name.split("-")[1]
    if sdist.name != f"{PROJECT}-{built}.tar.gz":
        found.append(f"the sdist {sdist.name} is not of the wheel's version {built}")
    if version is not None and built != version:
        found.append(f"the version built is {built}, the release asks for {version}")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        if "dispatch/py.typed" not in names:
            found.append(f"{wheel.name} has no dispatch/py.typed: type checkers would ignore it")
        entry_points = f"{PROJECT}-{built}.dist-info/entry_points.txt"
        scripts: dict[str, str] = {}
        if entry_points in names:
            parser = configparser.ConfigParser()
            parser.read_string(archive.read(entry_points).decode())
            if parser.has_section("console_scripts"):
                scripts = dict(parser.items("console_scripts"))
        if scripts.get(SCRIPT[0]) != SCRIPT[1]:
            found.append(f"{wheel.name} does not install the console script {SCRIPT[0]}")
    with tarfile.open(sdist) as archive:
        root = f"{PROJECT}-{built}"
        members = set(archive.getnames())
        for needed in ("pyproject.toml", "README.md", "src/dispatch/py.typed"):
            if f"{root}/{needed}" not in members:
                found.append(f"{sdist.name} lacks {needed}")
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--version", help="the version the release must have (tag without v)")
    args = parser.parse_args(argv)
    found = problems(args.folder, args.version)
    for problem in found:
        print(f"check_dist: {problem}", file=sys.stderr)
    if not found:
        print(f"check_dist: {args.folder}: one sdist and one wheel, py.typed and console script")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
