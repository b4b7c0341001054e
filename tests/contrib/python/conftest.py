"""Shared fixtures: a HostFilesystem on a scratch folder, its store outside;
the markers of the tests that need Podman."""

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


def pytest_configure(config):
    config.addinivalue_line("markers", "podman: needs a Podman service (CTest: test_python_integration)")
    config.addinivalue_line(
        "markers", "integration: needs a real Podman service (CTest test_python_integration)")


def pytest_sessionfinish(session, exitstatus):
    """Everything skipped (no Podman, say): exit 77, CTest's skip code."""
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus == 0 and tr is not None and tr.stats.get("skipped") \
            and not tr.stats.get("passed"):
        session.exitstatus = 77
