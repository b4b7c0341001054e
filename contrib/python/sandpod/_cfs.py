"""ctypes mirrors of the C structs and prototypes the filesystem uses.

Internal. Every struct is laid out field for field as in
``overlay/include/sandpod/fs.h``, ``snapshot/include/sandpod/snapshot.h``
and ``sandbox/include/sandpod/sandbox_snapshot.h``; versioned options carry
the header's ``*_VERSION``. ``tests/contrib/python/test_layout.py`` checks
every size and offset against the C compiler's (``tests/py_layout.c``).
"""

from __future__ import annotations

import ctypes
from ctypes import (POINTER, c_bool, c_char_p, c_int, c_int64, c_size_t, c_uint,
                    c_uint64, c_void_p)

from ._native import ErrorPtr, c_free, fn

ErrPP = POINTER(ErrorPtr)
StrList = POINTER(c_char_p)

SP_FS_OPTS_VERSION = 1
SP_FS_READ_OPTS_VERSION = 1
SP_FS_WRITE_OPTS_VERSION = 1
SP_FS_LIST_OPTS_VERSION = 2
SP_FS_GLOB_OPTS_VERSION = 1
SP_FS_GREP_OPTS_VERSION = 2
SP_SNAPSTORE_OPTS_VERSION = 3
SP_SANDBOX_SNAPSHOT_OPTS_VERSION = 1

# sp_fs_write_mode
SP_FS_OVERWRITE, SP_FS_CREATE, SP_FS_APPEND = 0, 1, 2
# sp_fs_type
SP_FS_FILE, SP_FS_DIR, SP_FS_SYMLINK, SP_FS_OTHER = 0, 1, 2, 3


class FsOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("read_only", c_bool), ("deny", StrList),
                ("max_write_bytes", c_size_t), ("max_read_bytes", c_size_t),
                ("max_path_depth", c_uint), ("max_segment_len", c_uint),
                ("read_line_limit", c_uint), ("max_line_bytes", c_uint)]


class ReadOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("offset", c_size_t), ("limit", c_size_t)]


class Text(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("content", c_void_p), ("content_len", c_size_t),
                ("total_lines", c_size_t), ("offset", c_size_t), ("limit", c_size_t),
                ("lines", c_size_t), ("lines_cut", c_size_t), ("truncated", c_bool)]


class Bytes(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("data", c_void_p), ("len", c_size_t),
                ("size", c_uint64), ("offset", c_uint64), ("truncated", c_bool)]


class WriteOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("mode", c_int), ("no_create_parents", c_bool)]


class Info(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("type", c_int), ("size", c_uint64), ("mode", c_uint),
                ("mtime_ns", c_int64), ("link_target", c_char_p), ("target_escapes", c_bool),
                ("dev", c_uint64), ("ino", c_uint64), ("atime_ns", c_int64),
                ("ctime_ns", c_int64), ("btime_ns", c_int64), ("readable", c_bool),
                ("writable", c_bool), ("target_in_image", c_bool)]


class Entry(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("path", c_char_p), ("type", c_int), ("size", c_uint64),
                ("mode", c_uint), ("mtime_ns", c_int64), ("link_target", c_char_p),
                ("depth", c_uint), ("contents_skipped", c_bool)]


class Entries(ctypes.Structure):
    _fields_ = [("v", POINTER(Entry)), ("n", c_size_t), ("truncated", c_bool)]


class ListOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("depth", c_uint), ("max_entries", c_size_t),
                ("ignore", StrList)]


class GlobOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("base", c_char_p), ("max_entries", c_size_t),
                ("hidden", c_bool)]


class GrepOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("path", c_char_p), ("glob", c_char_p),
                ("max_matches", c_size_t), ("case_insensitive", c_bool),
                ("fixed_string", c_bool), ("globs", StrList), ("no_ignore", c_bool),
                ("hidden", c_bool)]


class Match(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("line_number", c_size_t), ("line", c_char_p),
                ("match_start", c_size_t), ("match_end", c_size_t),
                ("byte_offset", c_uint64)]


class Matches(ctypes.Structure):
    _fields_ = [("v", POINTER(Match)), ("n", c_size_t), ("truncated", c_bool),
                ("files_searched", c_size_t), ("files_skipped", c_size_t),
                ("ignored", c_size_t)]


PauseFn = ctypes.CFUNCTYPE(c_int, c_void_p, ErrPP)


class Progress(ctypes.Structure):
    _fields_ = [("phase", c_char_p), ("entries", c_uint64), ("files_hashed", c_uint64),
                ("bytes_hashed", c_uint64), ("paths_changed", c_uint64)]


ProgressFn = ctypes.CFUNCTYPE(None, c_void_p, POINTER(Progress))


class SnapstoreOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("pause", PauseFn), ("unpause", PauseFn),
                ("userdata", c_void_p), ("track_changes", c_bool), ("no_create", c_bool),
                ("durable", c_bool), ("progress", ProgressFn),
                ("progress_userdata", c_void_p), ("keep_setid", c_bool),
                ("max_data_bytes", c_uint64), ("trust_ids", c_bool)]


class Snapshot(ctypes.Structure):
    _fields_ = [("id", c_char_p), ("tag", c_char_p), ("commit", c_char_p), ("root", c_char_p),
                ("store", c_char_p), ("created_at", c_char_p), ("created_at_ns", c_int64),
                ("files", c_uint64), ("dirs", c_uint64), ("symlinks", c_uint64),
                ("bytes", c_uint64)]


class SandboxSnapshotOpts(ctypes.Structure):
    _fields_ = [("version", c_uint), ("store", POINTER(SnapstoreOpts))]


# Every struct above, by its C name, for the layout test.
STRUCTS: dict[str, type[ctypes.Structure]] = {
    "sp_fs_opts": FsOpts, "sp_fs_read_opts": ReadOpts, "sp_fs_text": Text,
    "sp_fs_bytes": Bytes, "sp_fs_write_opts": WriteOpts, "sp_fs_info": Info,
    "sp_fs_entry": Entry, "sp_fs_entries": Entries, "sp_fs_list_opts": ListOpts,
    "sp_fs_glob_opts": GlobOpts, "sp_fs_grep_opts": GrepOpts, "sp_fs_match": Match,
    "sp_fs_matches": Matches, "sp_snapshot_progress": Progress,
    "sp_snapstore_opts": SnapstoreOpts, "sp_snapshot": Snapshot,
    "sp_sandbox_snapshot_opts": SandboxSnapshotOpts,
}

P = POINTER
vp = c_void_p
fs_open = fn("sp_fs_open", c_int, P(vp), c_char_p, P(FsOpts), ErrPP)
fs_free = fn("sp_fs_free", None, vp)
fs_path_normalize = fn("sp_fs_path_normalize", c_int, P(vp), c_char_p, c_size_t, ErrPP)
fs_root = fn("sp_fs_root", c_char_p, vp)
fs_read = fn("sp_fs_read", c_int, P(P(Text)), vp, c_char_p, P(ReadOpts), ErrPP)
fs_text_free = fn("sp_fs_text_free", None, P(Text))
fs_read_bytes = fn("sp_fs_read_bytes", c_int, P(P(Bytes)), vp, c_char_p, c_uint64, c_size_t,
                   ErrPP)
fs_bytes_free = fn("sp_fs_bytes_free", None, P(Bytes))
fs_write_bytes = fn("sp_fs_write_bytes", c_int, P(c_size_t), vp, c_char_p, c_char_p, c_size_t,
                    P(WriteOpts), ErrPP)
fs_delete = fn("sp_fs_delete", c_int, vp, c_char_p, c_bool, ErrPP)
fs_mkdir = fn("sp_fs_mkdir", c_int, vp, c_char_p, c_bool, c_bool, ErrPP)
fs_stat = fn("sp_fs_stat", c_int, P(P(Info)), vp, c_char_p, ErrPP)
fs_info_free = fn("sp_fs_info_free", None, P(Info))
fs_exists = fn("sp_fs_exists", c_bool, vp, c_char_p)
fs_list = fn("sp_fs_list", c_int, P(P(Entries)), vp, c_char_p, P(ListOpts), ErrPP)
fs_glob_ex = fn("sp_fs_glob_ex", c_int, P(P(Entries)), vp, c_char_p, P(GlobOpts), ErrPP)
fs_entries_free = fn("sp_fs_entries_free", None, P(Entries))
fs_grep = fn("sp_fs_grep", c_int, P(P(Matches)), vp, c_char_p, P(GrepOpts), ErrPP)
fs_matches_free = fn("sp_fs_matches_free", None, P(Matches))

state_root = fn("sp_state_root", c_int, P(vp), ErrPP)
snapstore_open = fn("sp_snapstore_open", c_int, P(vp), c_char_p, c_char_p, P(SnapstoreOpts),
                    ErrPP)
snapstore_free = fn("sp_snapstore_free", None, vp)
snapstore_path = fn("sp_snapstore_path", c_char_p, vp)
snapshot_create = fn("sp_snapshot_create", c_int, P(P(Snapshot)), vp, c_char_p, ErrPP)
snapshot_get = fn("sp_snapshot_get", c_int, P(P(Snapshot)), vp, c_char_p, ErrPP)
snapshot_restore = fn("sp_snapshot_restore", c_int, P(P(Snapshot)), vp, c_char_p, ErrPP)
snapshot_free = fn("sp_snapshot_free", None, P(Snapshot))

sandbox_fs = fn("sp_sandbox_fs", vp, vp, ErrPP)
sandbox_workspace = fn("sp_sandbox_workspace", c_char_p, vp)
sandbox_snapshot_open = fn("sp_sandbox_snapshot_open", c_int, P(vp), vp,
                           P(SandboxSnapshotOpts), ErrPP)
sandbox_snapshot_store = fn("sp_sandbox_snapshot_store", vp, vp)
sandbox_snapshot_close = fn("sp_sandbox_snapshot_close", None, vp)

