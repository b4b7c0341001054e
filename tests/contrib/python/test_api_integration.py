"""The API beyond commands, with real containers: templates, create with
progress callables, logs, events, gc, and images (build, list, exists,
remove; pull from a private registry on 127.0.0.1 with and without TLS
verification)."""

import asyncio
import os
import shutil
import subprocess

import pytest

import sandpod
from sandpod import errors
from test_sandbox_integration import _create, _skip, home, src_dir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.integration
SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def test_create_with_progress_then_template_round_trip(home, src_dir):
    seen, pulls = [], []
    sb = _create(name="py-tmpl-src", mounts=[src_dir], progress=seen.append,
                 pull_progress=pulls.append, env={"SECRET": "v"})
    try:
        assert seen and seen[-1].phase in ("copy", "commit")
        assert any(p.path == "hello.txt" for p in seen if p.path)
        sb.shell("echo prepared > prepared.txt")
        t = sb.save_template("py-tmpl")
        assert isinstance(t, sandpod.Template)
        assert t.name == "py-tmpl" and t.origin == "py-tmpl-src" and t.env_names == ("SECRET",)
        assert sandpod.templates.list() == ["py-tmpl"]
        assert sandpod.templates.info("py-tmpl").snapshot == t.snapshot
        with pytest.raises(FileExistsError):
            sb.save_template("py-tmpl")
        assert sb.save_template("py-tmpl", force=True).snapshot != ""
        first = sb.snapshot("first")
        assert sb.save_template("py-tmpl", force=True, snapshot=first).snapshot == first.id
        sb.shell("echo later > later.txt")
        with sandpod.Sandbox.create(name="py-forked", from_=("py-tmpl-src", first.id),
                                    env={"EXTRA": "1"}) as fk:
            assert fk.shell("cat prepared.txt; ls later.txt; echo $EXTRA").stdout == \
                "prepared\n1\n"
        with pytest.raises(FileNotFoundError):
            sandpod.Sandbox.create(from_="no-such-sandbox")
        with pytest.raises(ValueError):
            sandpod.Sandbox.create(from_="py-tmpl-src", template="py-tmpl")
    finally:
        sb.remove()
    with sandpod.Sandbox.create(name="py-from-tmpl", template="py-tmpl") as child:
        assert child.shell("cat prepared.txt hello.txt").stdout == \
            "prepared\nhello from the host\n"
    with pytest.raises(FileNotFoundError):
        sandpod.Sandbox.create(template="no-such-template")
    sandpod.templates.remove("py-tmpl")
    assert sandpod.templates.list() == []


def test_create_removes_the_sandbox_when_a_callback_raises(home, src_dir):
    class Stop(Exception):
        pass

    def boom(_p):
        raise Stop()

    with pytest.raises(Stop):
        sandpod.Sandbox.create(name="py-cb-raises", mounts=[src_dir], progress=boom)
    assert "py-cb-raises" not in sandpod.Sandbox.list()


def test_logs_events_and_gc(home, src_dir):
    sb = _create(name="py-logs", mounts=[src_dir])
    try:
        logs = sb.logs()
        assert isinstance(logs, str)
        got = []
        assert sb.logs(tail=1, callback=lambda s, d: got.append((s, d))) is None
        assert all(s in ("stdout", "stderr") and isinstance(d, bytes) for s, d in got)
        assert "".join(d.decode() for _, d in got).strip() in logs
        n1 = sb.record_event("exec", source="pytest", summary="echo hi", paths=["a.txt"],
                             status=3, duration_ms=7)
        n2 = sb.record_event("sh")
        assert n2 > n1
        evs = [e for e in sb.events() if e.get("event") == "command"]
        assert evs[-2]["command"] == "exec" and evs[-2]["source"] == "pytest"
        assert evs[-2]["call"] == n1 and evs[-1]["call"] == n2
        r = sandpod.Sandbox.gc(state_root=home, dry_run=True)
        assert isinstance(r, sandpod.GcResult)
        assert all(o.container != sb.container_id for o in r.orphans)
        assert not any(o.removed for o in r.orphans)

        async def via_async():
            a = sandpod.AsyncSandbox(sb)
            out = (await a.logs(), await a.record_event("async"), await a.events())
            await a.aclose()
            return out
        alogs, n3, aev = asyncio.run(via_async())
        assert isinstance(alogs, str) and n3 > n2 and aev[-1]["command"] == "async"
    finally:
        sandpod.Sandbox.open(name="py-logs").remove()


def test_images_build_list_exists_remove(home, tmp_path):
    try:
        base = sandpod.images.build_default()
    except errors.PodmanError as e:
        _skip(f"podman cannot be reached: {e}")
    assert base
    assert sandpod.images.exists(sandpod.images.DEFAULT_IMAGE)
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Containerfile").write_text(
        f"FROM {sandpod.images.DEFAULT_IMAGE}\nRUN echo built-by-python > /built\n")
    tag = f"localhost/sandpod-py-test:{os.getpid()}"
    lines = []
    iid = sandpod.images.build(ctx, tag=tag, output=lines.append)
    try:
        assert len(iid) >= 12 and any("RUN" in ln or "STEP" in ln for ln in lines)
        assert sandpod.images.exists(tag)
        assert sandpod.images.image_id(tag).startswith(iid[:12])
        assert any(tag in i.names for i in sandpod.images.list())
        with sandpod.Sandbox.create(image=tag) as sb:
            assert sb.shell("cat /built").stdout == "built-by-python\n"
    finally:
        sandpod.images.remove(tag)
    assert not sandpod.images.exists(tag)
    with pytest.raises(FileNotFoundError):
        sandpod.images.remove(tag)
    (ctx / "Containerfile").write_text("FROM scratch\nRUN false\n")
    with pytest.raises(RuntimeError):
        sandpod.images.build(ctx, tag=tag)


@pytest.fixture
def registry(tmp_path):
    if not os.path.exists("/usr/bin/docker-registry") or not shutil.which("podman"):
        _skip("no docker-registry or podman CLI for a private registry")
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = tmp_path / "registry"
    r = subprocess.run([os.path.join(SRC, "contrib", "registry.sh"), "start",
                        f"127.0.0.1:{port}", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        _skip(f"registry: {r.stderr.strip()}")
    yield f"127.0.0.1:{port}"
    subprocess.run([os.path.join(SRC, "contrib", "registry.sh"), "stop", str(d)],
                   capture_output=True)


def test_pull_from_a_private_registry(home, registry):
    sandpod.images.build_default()
    ref = f"{registry}/sandpod-py/busybox:{os.getpid()}"
    r = subprocess.run(["podman", "push", "-q", "--tls-verify=false",
                        sandpod.images.DEFAULT_IMAGE, f"docker://{ref}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with pytest.raises(RuntimeError) as e:
        sandpod.images.pull(ref)  # plain HTTP while TLS is verified
    assert e.value.code == errors.EPODMAN and "tls" in str(e.value).lower()
    lines = []
    iid = sandpod.images.pull(ref, tls_verify=False, progress=lines.append)
    try:
        assert iid and lines and sandpod.images.exists(ref)
    finally:
        sandpod.images.remove(ref)
    with pytest.raises(FileNotFoundError):
        sandpod.images.pull(f"{registry}/sandpod-py/none:1", tls_verify=False)


def test_egress_rules_from_python(home):
    """Rules at create, read back, changed live, refusals in the log and in
    events(); no upstream is needed: what no rule names is refused without
    a lookup."""
    with pytest.raises(ValueError):
        sandpod.Sandbox.create(name="py-eg-bad", allow=["exa mple.com"])
    with pytest.raises(ValueError):
        sandpod.Sandbox.create(name="py-eg-bad", setup_allow=["x.test"], setup=["true"])
    with _create(name="py-eg", allow=["example.com"], deny=["bad.example.com"]) as sb:
        assert sb.network() == [("deny", "bad.example.com"), ("allow", "example.com")]
        r = sb.shell("wget -q -O - http://nope.test/ || echo refused")
        assert r.stdout.strip() == "refused"
        assert sb.network_change(allow=["*.pypi.org"], remove=["bad.example.com"]) == \
            [("allow", "example.com"), ("allow", "*.pypi.org")]
        with pytest.raises(ValueError):
            sb.network_change(remove=["not.there"])
        log = sb.network_log()
        assert any(x["host"] == "nope.test" and x["verdict"] == "deny" and x["rule"] is None
                   for x in log), log
        assert any(e.get("event") == "connection" for e in sb.events())
        assert not any(e.get("event") == "connection" for e in sb.events(connections=False))
    with _create(name="py-eg-none") as plain:
        assert plain.network() is None
        with pytest.raises(ValueError):
            plain.network_log()
        with pytest.raises(ValueError):
            plain.network_change(allow=["example.com"])


def test_secrets_from_python(home, monkeypatch, tmp_path):
    """Brokered secrets through Python: the variable holds a stand-in, the
    value never; an HTTPS scope makes the TLS variables name the proxy's
    CA; secret_set rotates and takes away; bad input raises."""
    monkeypatch.setenv("PY_SECRET", "py-canary-value")
    with pytest.raises(ValueError):
        sandpod.Sandbox.create(name="py-sec-bad", secrets={"T": "env:PY_SECRET"})
    with pytest.raises(errors.NotFoundError):
        sandpod.Sandbox.create(name="py-sec-bad", allow=["x.test"],
                               secrets={"T": "env:PY_SECRET"}, secret_for={"T": "x.test"},
                               egress_ca=str(tmp_path / "none.pem"))
    assert not os.path.exists(os.path.join(home, "sandboxes", "py-sec-bad"))
    with _create(name="py-sec", allow=["x.test"], secrets={"T": "env:PY_SECRET"},
                 secret_for={"T": ["x.test", "http://x.test:8080"]}) as sb:
        r = sb.shell('echo "$T $SSL_CERT_FILE $NODE_EXTRA_CA_CERTS"')
        t, bundle, ca = r.stdout.split()
        assert t.startswith("sandpod-standin-") and "py-canary-value" not in r.stdout
        assert bundle == "/.sandpod/egress/ca-bundle.pem" and ca == "/.sandpod/egress/ca.pem"
        assert "BEGIN CERTIFICATE" in sb.shell("cat /.sandpod/egress/ca.pem").stdout
        monkeypatch.setenv("PY_SECRET2", "py-rotated")
        sb.secret_set("T", "env:PY_SECRET2")
        secrets = open(os.path.join(sb.state_dir, "secrets")).read()
        assert "py-rotated".encode().hex() in secrets
        with pytest.raises(ValueError):
            sb.secret_set("NOPE", "env:PY_SECRET2")
        sb.secret_set("T", None)
        assert "py-rotated".encode().hex() not in open(os.path.join(sb.state_dir, "secrets")).read()
