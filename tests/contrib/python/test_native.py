"""The package finds libsandpod and maps its errors to the protocol's exceptions."""

import ctypes
import os
import subprocess
import sys

import pytest

import sandpod
from sandpod import _native, errors


def _fs_open(root: bytes) -> None:
    f = _native.fn("sp_fs_open", ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                   ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(_native.ErrorPtr))
    h = ctypes.c_void_p()
    _native.call(f, ctypes.byref(h), root, None)


def test_missing_root_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as ei:
        _fs_open(os.fsencode(tmp_path / "nope"))
    e = ei.value
    assert isinstance(e, sandpod.Error)
    assert e.code == errors.ENOTFOUND
    assert "nope" in str(e)


def test_library_not_found_names_what_to_install(tmp_path):
    env = dict(os.environ, SANDPOD_LIBRARY=str(tmp_path / "libsandpod.so"))
    r = subprocess.run([sys.executable, "-c", "import sandpod"], env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "libsandpod.so not found" in r.stderr
    assert "SANDPOD_LIBRARY" in r.stderr


def test_remote_reason_names_are_the_librarys():
    """RemoteFilesystem reads a peer's error reasons by name: its names
    are sp_reason_name()'s for every reason, so a new one cannot drift."""
    from sandpod import remote_fs
    name = _native.fn("sp_reason_name", ctypes.c_char_p, ctypes.c_int)
    assert {name(v).decode(): v for v in remote_fs._REASONS.values()} == remote_fs._REASONS
    assert name(max(remote_fs._REASONS.values()) + 1) == b"unknown"
