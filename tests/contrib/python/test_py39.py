"""Every file of contrib/python is written for Python 3.9, the oldest the
package supports: it parses as 3.9 (ast's feature_version), and uses
nothing that parses there but fails when it runs (an annotation X | Y
without postponed annotations, dataclass(slots=), zip(strict=)) unless
guarded by the version. test_install.py runs the package on a real 3.9
when the machine has one."""

import ast
import os

import pytest

SRC = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "contrib",
                                    "python"))


def _sources():
    out = []
    for d, dirs, files in os.walk(SRC):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out += [os.path.join(d, f) for f in files if f.endswith(".py")]
    return sorted(out)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: os.path.relpath(p, SRC))
def test_written_for_python_3_9(path):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path, feature_version=(3, 9))
    # An annotation X | Y is evaluated, and fails, unless annotations stay strings.
    lazy = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
               any(a.name == "annotations" for a in n.names) for n in tree.body)
    for n in ast.walk(tree):
        for a in (getattr(n, "annotation", None), getattr(n, "returns", None)):
            union = a is not None and any(isinstance(x, ast.BinOp) and isinstance(x.op, ast.BitOr)
                                          for x in ast.walk(a))
            assert lazy or not union, f"line {n.lineno}: X | Y without " \
                "'from __future__ import annotations'"
    # What parses on 3.9 but fails when it runs there, unless it is the
    # 3.10 arm of `A if sys.version_info >= (3, 10) else B`.
    guarded = {id(n.body) for n in ast.walk(tree)
               if isinstance(n, ast.IfExp) and "sys.version_info" in ast.unparse(n.test)}
    late = {"dataclass": {"slots", "kw_only", "match_args"}, "zip": {"strict"}}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and id(n) not in guarded:
            name = getattr(n.func, "id", getattr(n.func, "attr", ""))
            used = {k.arg for k in n.keywords} & late.get(name, set())
            assert not used, f"line {n.lineno}: {name}({', '.join(sorted(used))}=) needs 3.10"
