"""`pip install contrib/python` needs nothing but CPython 3.9+ and its pip:
offline (--no-index), with pip's default build isolation (the in-tree
backend, build_backend/sandpod_build.py, requires nothing), into a fresh
venv without system site-packages, and the installed package works from
anywhere with no PYTHONPATH. Tried with this interpreter and with the
oldest and newest other CPython 3.9+ found ($SANDPOD_TEST_PYTHONS, paths
separated by ':'; python3.N on PATH; pyenv's versions under $PYENV_ROOT).
Also: the sdist and the editable install, and the backend's reading of
pyproject.toml without tomllib."""

import functools
import glob
import os
import shutil
import subprocess
import sys

import pytest

import sandpod
from conftest import need

SRC = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "contrib",
                                    "python"))
sys.path.insert(0, os.path.join(SRC, "build_backend"))
import sandpod_build  # noqa: E402

# What the installed package is asked: its version both ways, py.typed, and
# a snapshot round trip through libsandpod.
PROG = (
    "import importlib.metadata, os, sandpod\n"
    "assert importlib.metadata.version('sandpod') == sandpod.__version__\n"
    "assert os.path.exists(os.path.join(os.path.dirname(sandpod.__file__), 'py.typed'))\n"
    "fs = sandpod.HostFilesystem('ws', store='store.git')\n"
    "fs.write('a/b.txt', 'hi')\n"
    "s = fs.snapshot(); fs.write('a/b.txt', 'changed'); fs.restore(s)\n"
    "print(sandpod.__file__, fs.read('a/b.txt').content)\n"
)


def _version(python):
    """(major, minor) of a CPython that can make a venv with pip, else None."""
    try:
        r = subprocess.run([python, "-c", "import sys, venv, ensurepip; "
                            "print(sys.implementation.name, *sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = r.stdout.split()
    if r.returncode != 0 or len(words) != 3 or words[0] != "cpython":
        return None
    return int(words[1]), int(words[2])


@functools.lru_cache(maxsize=None)
def _other_pythons():
    """{"oldest other": path, "newest other": path} of the CPythons 3.9+
    other than this one's version (one key when there is one)."""
    cands = [c for c in os.environ.get("SANDPOD_TEST_PYTHONS", "").split(":") if c]
    cands += [shutil.which(f"python3.{n}") for n in range(9, 20)]
    if os.environ.get("PYENV_ROOT"):
        cands += sorted(glob.glob(os.path.join(os.environ["PYENV_ROOT"], "versions", "*",
                                               "bin", "python3")))
    found = {}
    for c in filter(None, cands):
        v = _version(c)
        if v and v >= (3, 9) and v != sys.version_info[:2]:
            found.setdefault(v, c)
    versions = sorted(found)
    return dict(zip(("oldest other", "newest other"),
                    [found[v] for v in dict.fromkeys(versions[:1] + versions[-1:])]))


def _venv(python, path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([python, "-m", "venv", str(path)], check=True, env=env)
    return env


def _pip(venv, env, *args):
    r = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q",
                        "--no-index", "--disable-pip-version-check", *args],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def _run(venv, env, tmp_path):
    """PROG with the venv's python in a folder of its own; the package's path."""
    work = tmp_path / "elsewhere"
    shutil.rmtree(work, ignore_errors=True)
    (work / "ws").mkdir(parents=True)
    r = subprocess.run([str(venv / "bin/python"), "-c", PROG], cwd=work, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    path, content = r.stdout.split()
    assert content == "hi"
    return path


def _copy(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    return src


@pytest.mark.parametrize("which", ["this", "oldest other", "newest other"])
def test_pip_install_offline(which, tmp_path):
    python = sys.executable if which == "this" else _other_pythons().get(which)
    if which == "this":
        need("python3-venv", _version(python) is not None)
    elif python is None:
        pytest.skip(f"no {which} CPython 3.9+ (set SANDPOD_TEST_PYTHONS)")
    venv = tmp_path / "v"
    env = _venv(python, venv)
    src = _copy(tmp_path)
    _pip(venv, env, str(src))
    assert _run(venv, env, tmp_path).startswith(str(venv))
    # The source tree is left as it was: nothing built lands in it.
    assert sorted(os.listdir(src)) == sorted(os.listdir(SRC))
    if which != "this":
        return
    # The sdist (made by the backend here), then an editable install, over it.
    sdist = sandpod_build.build_sdist(str(tmp_path))
    assert sdist == f"sandpod-{sandpod.__version__}.tar.gz"
    _pip(venv, env, "--force-reinstall", str(tmp_path / sdist))
    assert _run(venv, env, tmp_path).startswith(str(venv))
    _pip(venv, env, "-e", str(src))
    assert _run(venv, env, tmp_path) == str(src / "sandpod" / "__init__.py")


def test_backend_reads_pyproject_as_tomllib_does(monkeypatch):
    tomllib = pytest.importorskip("tomllib")  # 3.11's
    with open(os.path.join(SRC, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    assert sandpod_build.read_project(text) == tomllib.loads(text)["project"]
    with pytest.raises(ValueError, match=r"pyproject.toml:2: cannot read"):
        sandpod_build.read_project("[project]\nname = 'literal'\n")
    with pytest.raises(ValueError, match=r"pyproject.toml:3: .*a sub-table of \[project\]"):
        sandpod_build.read_project("[project]\nname = \"x\"\n[project.urls]\n")
    # A key the backend would not turn into metadata stops the build.
    monkeypatch.setattr(sandpod_build, "_project",
                        lambda: {"name": "sandpod", "version": "1", "urls": {}})
    with pytest.raises(ValueError, match=r"\[project\] urls: not turned into metadata"):
        sandpod_build.build_wheel("/nonexistent")
