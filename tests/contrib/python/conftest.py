"""Shared fixtures: a HostFilesystem on a scratch folder, its store outside."""

import os

import pytest

import sandpod


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def fs(ws, tmp_path):
    f = sandpod.HostFilesystem(ws, store=tmp_path / "store.git")
    yield f
    f.close()


def need(what: str, ok: bool) -> None:
    """Skip when a tool is missing; under CI=true a missing tool fails."""
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} missing under CI")
    pytest.skip(f"{what} missing")
