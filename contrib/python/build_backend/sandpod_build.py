"""The build backend of contrib/python (PEP 517, with PEP 660's editable
hook): the standard library only, so pip builds and installs the package
offline, from any CPython 3.9+, with or without build isolation (pip 20.0+
reads backend-path; an editable install needs pip 21.3+). A backend that
must be fetched (setuptools, flit_core, hatchling) needs an index or a
distribution's copy of it: a venv of python.org's or pyenv's CPython 3.12+
has no setuptools at all.

The wheel is pure (py3-none-any): the ``sandpod`` package's ``.py`` files,
``py.typed`` and any ``libsandpod*.so*`` copied beside them (as setuptools'
package-data took them before). The metadata are pyproject.toml's
``[project]`` table, read with tomllib where there is one (3.11+) and
otherwise by :func:`read_project`, which knows only the forms that table
uses (tests/contrib/python/test_install.py holds the two to one answer); a
key this backend does not turn into metadata is an error, not a silent
omission.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "sandpod"
# The zip format's earliest date: the wheel's bytes do not depend on when
# or from which checkout it was built.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
README_TYPES = {".md": "text/markdown", ".rst": "text/x-rst"}


def read_project(text: str) -> dict:
    """The ``[project]`` table of a pyproject.toml whose values are basic
    strings, arrays of them on one line, or inline tables of basic strings
    (what tomllib answers for those; anything else is a ValueError)."""
    out: dict = {}
    table = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([A-Za-z0-9_-]+)\s*=\s*(.+)', line)
        try:
            if line.startswith("["):
                table = line
                if table.startswith("[project."):
                    raise ValueError("a sub-table of [project]")
                continue
            if table != "[project]":
                continue
            if not m:
                raise ValueError("not key = value")
            key, value = m.groups()
            if value.startswith("{"):
                inner = re.fullmatch(r"\{\s*(.*?)\s*\}", value)
                if not inner:
                    raise ValueError("an unclosed inline table")
                pairs = [p for p in re.split(r",\s*", inner.group(1)) if p]
                out[key] = {}
                for p in pairs:
                    k, v = re.fullmatch(r'([A-Za-z0-9_-]+)\s*=\s*(".*")', p).groups()
                    out[key][k] = json.loads(v)
            else:
                out[key] = json.loads(value)
        except (ValueError, AttributeError) as e:
            raise ValueError(f"pyproject.toml:{n}: cannot read {raw!r} without tomllib "
                             f"(Python 3.11+): {e}") from None
    return out


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    try:
        import tomllib
    except ImportError:
        return read_project(text)
    return tomllib.loads(text)["project"]


def _metadata() -> tuple[str, str, str]:
    """(name, version, the METADATA file) from [project]."""
    p = dict(_project())
    name, version = p.pop("name"), p.pop("version")
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if "description" in p:
        lines.append(f"Summary: {p.pop('description')}")
    if "license" in p:
        lines.append(f"License: {p.pop('license')['text']}")
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p.pop('requires-python')}")
    lines += [f"Requires-Dist: {d}" for d in p.pop("dependencies", [])]
    body = ""
    if "readme" in p:
        readme = p.pop("readme")
        ext = os.path.splitext(readme)[1].lower()
        lines.append(f"Description-Content-Type: {README_TYPES.get(ext, 'text/plain')}")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = "\n" + f.read()
    if p:
        raise ValueError(f"pyproject.toml: [project] {', '.join(sorted(p))}: not turned into "
                         f"metadata by build_backend/sandpod_build.py")
    return name, version, "\n".join(lines) + "\n" + body


def _dist(name: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}"


def _package_files() -> list[tuple[str, str]]:
    """(path in the wheel, path here) of the package, sorted."""
    out = []
    top = os.path.join(ROOT, PACKAGE)
    for d, dirs, files in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py") or f == "py.typed" or re.fullmatch(r"lib.*\.so(\.[0-9.]+)?", f):
                full = os.path.join(d, f)
                out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


def _wheel(wheel_directory: str, files: list[tuple[str, bytes, int]]) -> str:
    """Write a wheel of `files` (path, content, mode) and its dist-info."""
    name, version, metadata = _metadata()
    dist = _dist(name, version)
    info = f"{dist}.dist-info"
    files = files + [
        (f"{info}/METADATA", metadata.encode(), 0o644),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: sandpod_build\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n", 0o644),
    ]
    record = io.StringIO()
    for path, data, _ in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.write(f"{path},sha256={digest.decode()},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files.append((f"{info}/RECORD", record.getvalue().encode(), 0o644))
    wheel = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as z:
        for path, data, mode in files:
            zi = zipfile.ZipInfo(path, ZIP_DATE)
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return wheel


def _mode(path: str) -> int:
    return 0o755 if os.stat(path).st_mode & 0o111 else 0o644


def build_wheel(wheel_directory: str, config_settings: dict | None = None,
                metadata_directory: str | None = None) -> str:
    files = []
    for arc, full in _package_files():
        with open(full, "rb") as f:
            files.append((arc, f.read(), _mode(full)))
    return _wheel(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: dict | None = None,
                   metadata_directory: str | None = None) -> str:
    """A wheel whose .pth puts this folder on sys.path: the package runs
    from the source tree."""
    return _wheel(wheel_directory, [(f"{PACKAGE}.pth", (ROOT + "\n").encode(), 0o644)])


def build_sdist(sdist_directory: str, config_settings: dict | None = None) -> str:
    name, version, metadata = _metadata()
    dist = _dist(name, version)
    sdist = f"{dist}.tar.gz"

    def add(t: tarfile.TarFile, arc: str, data: bytes, mode: int) -> None:
        ti = tarfile.TarInfo(f"{dist}/{arc}")
        ti.size, ti.mode, ti.mtime = len(data), mode, 315532800  # ZIP_DATE
        t.addfile(ti, io.BytesIO(data))

    with tarfile.open(os.path.join(sdist_directory, sdist), "w:gz",
                      format=tarfile.PAX_FORMAT) as t:
        add(t, "PKG-INFO", metadata.encode(), 0o644)
        rel = ["pyproject.toml", "README.md", "build_backend/sandpod_build.py"]
        rel += [arc for arc, _ in _package_files() if arc.endswith((".py", "py.typed"))]
        for arc in rel:
            full = os.path.join(ROOT, arc)
            with open(full, "rb") as f:
                add(t, arc, f.read(), _mode(full))
    return sdist
