"""The tool suite over a bare folder (no Podman needed), and finding its library."""

import json
import os
import subprocess
import sys

import pytest

import sandpod
from sandpod import errors


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\nbeta\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# beta\n")
    return tmp_path


def test_specs_in_every_format(folder):
    with sandpod.tools(str(folder)) as t:
        oa = t.specs("openai")
        assert oa and all(s["type"] == "function" and s["strict"] is False for s in oa)
        names = {s["name"] for s in oa}
        assert {"read_file", "write_file", "grep", "glob"} <= names
        assert not ({"shell", "exec_command"} & names)  # no container: no command tools
        an = t.specs("anthropic")
        assert {s["name"] for s in an} == names
        assert all(s["input_schema"]["type"] == "object" for s in an)
        chat = t.specs("openai-chat")
        assert {s["function"]["name"] for s in chat} == names
        assert {s["name"] for s in t.specs("mcp")["tools"]} == names
        strict = t.specs("openai", strict=True)
        assert all(s["strict"] is True for s in strict)
        assert all(s["parameters"]["additionalProperties"] is False for s in strict)
        assert sorted(t.names()) == sorted(names)
        with pytest.raises(ValueError) as ei:
            t.specs("gemini")
        assert ei.value.code == errors.EINVAL and "anthropic" in str(ei.value)


def test_calls_return_result_dicts(folder):
    with sandpod.tools(str(folder)) as t:
        r = t.call("read_file", {"path": "a.txt"})
        assert r["ok"] is True and "alpha" in r["message"] and "error" not in r
        r = t.call("write_file", {"path": "new.txt", "content": "made\n"})
        assert r["ok"] and r["changes"][0]["path"] == "new.txt"
        assert (folder / "new.txt").read_text() == "made\n"
        r = t.call("grep", json.dumps({"pattern": "beta"}))  # JSON text works too
        assert r["ok"] and "a.txt" in r["message"] and "sub/b.md" in r["message"]
        r = t.call("read_file", {"path": "../outside"})
        assert r["ok"] is False and r["error"]["code"] == "escape"
        r = t.call("read_file", {"path": "nope.txt"})
        assert r["ok"] is False and r["error"]["code"] == "not_found"
        r = t.call("read_file", {})
        assert r["ok"] is False and r["error"]["code"] == "invalid"
        r = t.call("no_such_tool", {})
        assert r["ok"] is False
    with pytest.raises(ValueError):
        t.call("read_file", {"path": "a.txt"})  # closed


def test_read_only_and_disabled(folder):
    with sandpod.tools(str(folder), read_only=True, disabled=["grep"]) as t:
        assert not t.has("write_file") and not t.has("grep") and t.has("read_file")
        r = t.call("write_file", {"path": "x.txt", "content": "x"})
        assert r["ok"] is False
    assert not (folder / "x.txt").exists()


def test_bad_root_and_bad_options(tmp_path):
    with pytest.raises(FileNotFoundError):
        sandpod.tools(str(tmp_path / "missing"))
    with pytest.raises(ValueError):
        sandpod.tools(str(tmp_path), approval="sometimes")


def test_snapshot_tools_with_a_store(folder, tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "snaps.git"
    with sandpod.tools(str(folder), snapshot_store=str(store)) as t:
        assert t.has("snapshot")
        r = t.call("snapshot", {"tag": "t1"})
        assert r["ok"], r


def test_tools_library_not_found_names_it(tmp_path):
    env = dict(os.environ, SANDPOD_TOOLS_LIBRARY=str(tmp_path / "libsandpod_tools.so"))
    r = subprocess.run([sys.executable, "-c", "import sandpod; sandpod.tools('.')"], env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "libsandpod_tools.so not found" in r.stderr and "SANDPOD_TOOLS_LIBRARY" in r.stderr


def test_tools_library_found_next_to_libsandpod(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SANDPOD_TOOLS_LIBRARY"}
    r = subprocess.run([sys.executable, "-c",
                        "import sys, sandpod; "
                        "print(len(sandpod.tools(sys.argv[1]).specs('mcp')['tools']))",
                        str(tmp_path)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) > 0
