"""Shared pytest setup: the `integration` marker (tests that need Podman)."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "integration: needs a real Podman service (CTest test_python_integration)")
