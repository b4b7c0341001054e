#!/usr/bin/env python3
"""Write the seed corpus of fuzz_archive (tests/fuzz/corpus/archive/).

Small archives for sp_snapshot_import: a plain tar with a file, a folder,
a symlink and a hard link; the same gzipped, as two gzip members, bzip2
and xz; a tar naming `../x`; a truncated gzip; a gzipped GNU tar (pax
sparse) of a 100 GiB file holding 21 bytes, when GNU tar is there. Tars are cut after their
two zero blocks (no 10 KiB record padding) to keep the seeds tiny."""
import bz2
import gzip
import io
import lzma
import os
import subprocess
import sys
import tarfile
import tempfile

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "archive")


def tar(entries, fmt=tarfile.PAX_FORMAT):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for name, kind, arg in entries:
            i = tarfile.TarInfo(name)
            i.mtime = 1700000000
            data = None
            if kind == "file":
                data = arg
                i.size = len(arg)
                i.mode = 0o644
            elif kind == "dir":
                i.type = tarfile.DIRTYPE
                i.mode = 0o755
            elif kind == "sym":
                i.type = tarfile.SYMTYPE
                i.linkname = arg
            elif kind == "hard":
                i.type = tarfile.LNKTYPE
                i.linkname = arg
            t.addfile(i, io.BytesIO(data) if data is not None else None)
    raw = b.getvalue()
    end = len(raw.rstrip(b"\0"))
    return raw[: (end + 511) // 512 * 512 + 1024]


def gz(data):
    return gzip.compress(data, mtime=0)


basic = tar([
    ("dir", "dir", None),
    ("dir/a.txt", "file", b"hello\n"),
    ("link", "sym", "dir/a.txt"),
    ("hard", "hard", "dir/a.txt"),
])
seeds = {
    "basic.tar": basic,
    "basic.tar.gz": gz(basic),
    "two-members.tar.gz": gz(basic[:512]) + gz(basic[512:]),
    "basic.tar.bz2": bz2.compress(basic),
    "basic.tar.xz": lzma.compress(basic),
    "dotdot.tar": tar([("../x", "file", b"escape\n")], tarfile.USTAR_FORMAT),
    "truncated.tar.gz": gz(basic)[:-6],
}


def sparse_tar():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "big"), "wb") as f:
            f.truncate(100 << 30)
            f.seek(50 << 30)
            f.write(b"data-in-the-middle")
            f.seek((100 << 30) - 3)
            f.write(b"end")
        os.utime(os.path.join(d, "big"), (1700000000, 1700000000))
        try:
            return subprocess.run(["tar", "--sparse", "--format=pax", "--owner=0", "--group=0",
                                   "-C", d, "-cf", "-", "big"], check=True,
                                  stdout=subprocess.PIPE).stdout
        except (OSError, subprocess.CalledProcessError):
            return None


sparse = sparse_tar()
if sparse is not None:
    seeds["sparse.tar.gz"] = gz(sparse)
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
