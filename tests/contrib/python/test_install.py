"""`pip install contrib/python` works offline on Debian 12 (python3-venv,
python3-setuptools; PEP 668, so into a venv), and the installed package
works from anywhere with no PYTHONPATH."""

import importlib.util
import os
import shutil
import subprocess
import sys

from conftest import need

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "contrib", "python")


def test_pip_install_offline(tmp_path):
    ok = all(importlib.util.find_spec(m) for m in ("ensurepip", "setuptools", "pip"))
    need("python3-venv and python3-setuptools", ok)
    # Install from a copy: pip leaves build/ and *.egg-info in the source.
    src = tmp_path / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                            "*.egg-info"))
    venv = tmp_path / "v"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, env=env)
    pip = subprocess.run([str(venv / "bin/pip"), "install", "--no-build-isolation",
                          "--no-index", str(src)], capture_output=True, text=True, env=env)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "ws").mkdir()
    prog = (
        "import os, sandpod\n"
        "assert os.path.exists(os.path.join(os.path.dirname(sandpod.__file__), 'py.typed'))\n"
        "fs = sandpod.HostFilesystem('ws', store='store.git')\n"
        "fs.write('a/b.txt', 'hi')\n"
        "s = fs.snapshot(); fs.write('a/b.txt', 'changed'); fs.restore(s)\n"
        "print(sandpod.__file__, fs.read('a/b.txt').content)\n"
    )
    r = subprocess.run([str(venv / "bin/python"), "-c", prog], cwd=work, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    path, content = r.stdout.split()
    assert path.startswith(str(venv)) and content == "hi"
