"""Every ctypes struct the package passes has its C struct's size and offsets.

A C program generated from the ctypes definitions prints sizeof() and
offsetof() of each struct and field, compiled against the headers: a field
missing, added, reordered or of another size shows up here, not as memory
corruption.
"""

import ctypes
import os
import shutil
import subprocess

import pytest

from sandpod import _structs

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
INCLUDES = ["sandbox/include", "overlay/base/include", "overlay/include", "snapshot/include",
            "contrib/tools"]
HEADERS = ["sandpod/sandbox.h", "sandpod/session.h", "sandpod/snapshot.h", "sandpod/apply.h",
           "sandpod/fork.h", "sandpod/sandbox_snapshot.h", "sandpod/template.h",
           "sandpod/podman.h", "sandpod/container.h", "sandpod/hydrate.h", "sandpod/sandbox_events.h", "tools.h"]


def c_field(name):
    return name[:-1] if name.endswith("_") else name


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        if os.environ.get("CI") == "true":
            pytest.fail("no C compiler to check struct layouts")
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("layout")
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += [f'#include "{h}"' for h in HEADERS]
    lines.append("int main(void) {")
    for cname, (cls, _) in _structs.LAYOUTS.items():
        lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        for f in cls._fields_:
            lines.append(f'printf("{cname}.{f[0]} %zu\\n", offsetof({cname}, {c_field(f[0])}));')
    lines.append("return 0; }")
    (d / "layout.c").write_text("\n".join(lines) + "\n")
    exe = d / "layout"
    subprocess.run([cc, "-std=c11", *[f"-I{os.path.join(SRC, i)}" for i in INCLUDES],
                    "-o", str(exe), str(d / "layout.c")], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


@pytest.mark.parametrize("cname", sorted(_structs.LAYOUTS))
def test_struct_matches_header(c_layout, cname):
    cls = _structs.LAYOUTS[cname][0]
    assert int(c_layout[cname]) == ctypes.sizeof(cls), f"sizeof({cname})"
    for f in cls._fields_:
        assert int(c_layout[f"{cname}.{f[0]}"]) == getattr(cls, f[0]).offset, f"{cname}.{f[0]}"


def test_opts_versions_match_headers():
    text = {h: open(os.path.join(SRC, i, h)).read()
            for i in INCLUDES for h in HEADERS if os.path.exists(os.path.join(SRC, i, h))}
    allh = "\n".join(text.values())
    for macro, value in [("SP_SANDBOX_OPTS_VERSION", _structs.SANDBOX_OPTS_VERSION),
                         ("SP_RUN_OPTS_VERSION", _structs.RUN_OPTS_VERSION),
                         ("SP_SESSION_OPTS_VERSION", _structs.SESSION_OPTS_VERSION),
                         ("SP_SESSION_WRITE_OPTS_VERSION", _structs.SESSION_WRITE_OPTS_VERSION),
                         ("SP_SNAPSHOT_DIFF_OPTS_VERSION", _structs.SNAPSHOT_DIFF_OPTS_VERSION),
                         ("SP_SANDBOX_APPLY_OPTS_VERSION", _structs.APPLY_OPTS_VERSION),
                         ("SP_TOOLS_OPTS_VERSION", _structs.TOOLS_OPTS_VERSION),
                         ("SP_TOOLS_SPECS_OPTS_VERSION", _structs.TOOLS_SPECS_OPTS_VERSION),
                         ("SP_TEMPLATE_OPTS_VERSION", _structs.TEMPLATE_OPTS_VERSION),
                         ("SP_LOGS_OPTS_VERSION", _structs.LOGS_OPTS_VERSION),
                         ("SP_PODMAN_OPTS_VERSION", _structs.PODMAN_OPTS_VERSION),
                         ("SP_PODMAN_PULL_OPTS_VERSION", _structs.PODMAN_PULL_OPTS_VERSION),
                         ("SP_PODMAN_BUILD_OPTS_VERSION", _structs.PODMAN_BUILD_OPTS_VERSION),
                         ("SP_HYDRATE_OPTS_VERSION", _structs.HYDRATE_OPTS_VERSION),
                         ("SP_SANDBOX_EVENT_VERSION", _structs.SANDBOX_EVENT_VERSION)]:
        assert f"#define {macro} {value}\n" in allh, macro


def header_fields(cname):
    """The member names of `typedef struct cname {...} cname;` in the headers, in order."""
    import re

    for i in INCLUDES:
        for h in HEADERS:
            p = os.path.join(SRC, i, h)
            if not os.path.exists(p):
                continue
            text = open(p).read()
            m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (cname, cname), text, re.S)
            if not m:
                continue
            body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
            names = []
            for decl in body.split(";"):
                decl = decl.strip()
                if not decl:
                    continue
                fp = re.search(r"\(\*\s*(\w+)\)", decl)
                if fp:
                    names.append(fp.group(1))
                    continue
                for part in decl.split(","):
                    names.append(re.findall(r"\w+", part)[-1])
            return names
    raise AssertionError(f"{cname} not found in the headers")


@pytest.mark.parametrize("cname", sorted(_structs.LAYOUTS))
def test_struct_has_every_header_field(cname):
    cls = _structs.LAYOUTS[cname][0]
    assert [c_field(f[0]) for f in cls._fields_] == header_fields(cname)
