"""The ctypes structs in sandpod/_cfs.py match the C headers: every size,
every field offset, every options version and enum value, as the C compiler
sees them (tests/contrib/python/py_layout.c, built by CMake)."""

import ctypes
import os
import subprocess

import pytest

from sandpod import _cfs


@pytest.fixture(scope="module")
def c_layout():
    prog = os.environ.get("SANDPOD_PY_LAYOUT")
    if not prog:
        if os.environ.get("CI") == "true":
            pytest.fail("SANDPOD_PY_LAYOUT unset under CI")
        pytest.skip("SANDPOD_PY_LAYOUT unset (run through ctest)")
    out = subprocess.run([prog], check=True, capture_output=True, text=True).stdout
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


def test_every_struct_size_and_offset(c_layout):
    checked = 0
    for name, cls in _cfs.STRUCTS.items():
        assert ctypes.sizeof(cls) == int(c_layout[name]), name
        for field, *_ in cls._fields_:
            assert getattr(cls, field).offset == int(c_layout[f"{name}.{field}"]), (name, field)
            checked += 1
    # every field the C program printed is mirrored
    c_fields = [k for k in c_layout if "." in k]
    assert len(c_fields) == checked


def test_versions_and_enums(c_layout):
    for k, v in c_layout.items():
        if k.startswith("SP_"):
            assert getattr(_cfs, k) == int(v), k
