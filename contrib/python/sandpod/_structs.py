"""ctypes mirrors of the C structs the sandbox layer passes (internal).

Each mirrors its header field for field, in order; tests/contrib/python
compares every size and offset with a C program built from the headers
(tests/contrib/python/layout.c), so a drift is a test failure rather than
memory corruption.
"""

from __future__ import annotations

import ctypes
from ctypes import (POINTER, c_bool, c_char_p, c_int, c_int64, c_size_t, c_uint, c_uint64,
                    c_void_p)

from . import _cfs

StrV = POINTER(c_char_p)

SANDBOX_OPTS_VERSION = 1
RUN_OPTS_VERSION = 1
SESSION_OPTS_VERSION = 1
SESSION_WRITE_OPTS_VERSION = 1
SNAPSHOT_DIFF_OPTS_VERSION = 1
APPLY_OPTS_VERSION = 1
TOOLS_OPTS_VERSION = 2
TOOLS_SPECS_OPTS_VERSION = 1


class Mount(ctypes.Structure):
    """sp_mount (sandpod/hydrate.h)."""

    _fields_ = [
        ("host_path", c_char_p),
        ("mount_path", c_char_p),
        ("include", StrV),
        ("exclude", StrV),
        ("max_bytes", c_uint64),
        ("follow_symlinks", c_bool),
        ("gitignore", c_bool),
    ]


class SandboxOpts(ctypes.Structure):
    """sp_sandbox_opts (sandpod/sandbox.h), version 1."""

    _fields_ = [
        ("version", c_uint),
        ("name", c_char_p),
        ("image", c_char_p),
        ("mounts", POINTER(Mount)),
        ("n_mounts", c_size_t),
        ("allowed_roots", StrV),
        ("env", StrV),
        ("workdir", c_char_p),
        ("user", c_char_p),
        ("network", c_int),
        ("memory_bytes", c_uint64),
        ("nano_cpus", c_uint64),
        ("pids_limit", c_int64),
        ("tmpfs_bytes", c_uint64),
        ("writable_root", c_bool),
        ("cap_add", StrV),
        ("state_root", c_char_p),
        ("podman_url", c_char_p),
        ("progress", c_void_p),
        ("progress_userdata", c_void_p),
        ("exec_path", c_int),
        ("userns", c_int),
        ("seccomp", c_int),
        ("env_pass", StrV),
        ("setup", StrV),
        ("setup_network", c_bool),
        ("setup_timeout_ms", c_int),
        ("setup_done", c_void_p),
        ("setup_userdata", c_void_p),
        ("pull", c_int),
        ("pull_no_tls_verify", c_bool),
        ("pull_progress", c_void_p),
    ]


class RunOpts(ctypes.Structure):
    """sp_run_opts (sandpod/sandbox.h)."""

    _fields_ = [
        ("version", c_uint),
        ("workdir", c_char_p),
        ("env", StrV),
        ("timeout_ms", c_int),
        ("max_bytes", c_size_t),
        ("max_lines", c_size_t),
        ("stdin_data", c_void_p),
        ("stdin_len", c_size_t),
        ("user", c_char_p),
    ]


class RunResult(ctypes.Structure):
    """sp_run_result (sandpod/sandbox.h). Bytes fields as void* (they hold NULs)."""

    _fields_ = [
        ("out", c_void_p),
        ("out_len", c_size_t),
        ("out_truncated", c_bool),
        ("err", c_void_p),
        ("err_len", c_size_t),
        ("err_truncated", c_bool),
        ("out_total", c_uint64),
        ("err_total", c_uint64),
        ("exit_code", c_int),
        ("timed_out", c_bool),
        ("duration_ms", c_int64),
    ]


class Status(ctypes.Structure):
    """sp_sandbox_status (sandpod/sandbox.h)."""

    _fields_ = [
        ("state", c_char_p),
        ("running", c_bool),
        ("oom_killed", c_bool),
        ("exit_code", c_int),
        ("container", c_char_p),
        ("pid", c_int),
        ("rootless", c_bool),
        ("limits_apply", c_bool),
        ("host_uid", c_int64),
        ("host_gid", c_int64),
    ]


class SessionOpts(ctypes.Structure):
    """sp_session_opts (sandpod/session.h)."""

    _fields_ = [
        ("version", c_uint),
        ("no_tty", c_bool),
        ("workdir", c_char_p),
        ("env", StrV),
        ("user", c_char_p),
        ("rows", c_uint),
        ("cols", c_uint),
        ("yield_time_ms", c_int),
        ("max_output_tokens", c_size_t),
        ("close_stdin", c_bool),
    ]


class SessionWriteOpts(ctypes.Structure):
    """sp_session_write_opts (sandpod/session.h)."""

    _fields_ = [
        ("version", c_uint),
        ("yield_time_ms", c_int),
        ("max_output_tokens", c_size_t),
        ("close_stdin", c_bool),
    ]


class SessionOutput(ctypes.Structure):
    """sp_session_output (sandpod/session.h)."""

    _fields_ = [
        ("session_id", c_int),
        ("output", c_void_p),
        ("output_len", c_size_t),
        ("truncated", c_bool),
        ("total_bytes", c_uint64),
        ("exited", c_bool),
        ("exit_code", c_int),
        ("note", c_char_p),
        ("wall_ms", c_int64),
    ]


class SessionInfo(ctypes.Structure):
    """sp_session_info (sandpod/session.h)."""

    _fields_ = [
        ("id", c_int),
        ("command", c_char_p),
        ("tty", c_bool),
        ("running", c_bool),
        ("age_ms", c_int64),
        ("idle_ms", c_int64),
        ("pending_bytes", c_uint64),
        ("host_pid", c_int),
    ]


# sp_snapshot (sandpod/snapshot.h): one definition, the filesystem's.
Snapshot = _cfs.Snapshot


class Snapshots(ctypes.Structure):
    """sp_snapshots (sandpod/snapshot.h)."""

    _fields_ = [("v", POINTER(POINTER(Snapshot))), ("n", c_size_t)]


class SnapshotChange(ctypes.Structure):
    """sp_snapshot_change (sandpod/snapshot.h)."""

    _fields_ = [
        ("path", c_char_p),
        ("kind", c_int),
        ("old_type", c_int),
        ("new_type", c_int),
        ("old_mode", c_uint),
        ("new_mode", c_uint),
        ("content_changed", c_bool),
    ]


class SnapDiff(ctypes.Structure):
    """sp_snapdiff (sandpod/snapshot.h)."""

    _fields_ = [
        ("from_", c_char_p),
        ("to", c_char_p),
        ("v", POINTER(SnapshotChange)),
        ("n", c_size_t),
        ("added", c_size_t),
        ("modified", c_size_t),
        ("deleted", c_size_t),
        ("type_changed", c_size_t),
        ("patch", c_char_p),
    ]


class SnapshotDiffOpts(ctypes.Structure):
    """sp_snapshot_diff_opts (sandpod/snapshot.h)."""

    _fields_ = [("version", c_uint), ("patch", c_bool), ("context_lines", c_uint)]


class ApplyChange(ctypes.Structure):
    """sp_apply_change (sandpod/apply.h)."""

    _fields_ = [
        ("path", c_char_p),
        ("action", c_int),
        ("type", c_int),
        ("mode", c_uint),
        ("already", c_bool),
    ]


class ApplyConflict(ctypes.Structure):
    """sp_apply_conflict (sandpod/apply.h)."""

    _fields_ = [("path", c_char_p), ("reason", c_char_p)]


class ApplyResult(ctypes.Structure):
    """sp_apply_result (sandpod/apply.h)."""

    _fields_ = [
        ("to", c_char_p),
        ("from_", c_char_p),
        ("changes", POINTER(ApplyChange)),
        ("n_changes", c_size_t),
        ("conflicts", POINTER(ApplyConflict)),
        ("n_conflicts", c_size_t),
        ("skipped", c_size_t),
        ("applied", c_bool),
        ("patch", c_char_p),
    ]


class ApplyOpts(ctypes.Structure):
    """sp_sandbox_apply_opts (sandpod/apply.h)."""

    _fields_ = [
        ("version", c_uint),
        ("from_", c_char_p),
        ("to", c_char_p),
        ("subdir", c_char_p),
        ("dry_run", c_bool),
        ("force", c_bool),
        ("patch", c_bool),
        ("max_file_bytes", c_size_t),
    ]


class ToolsOpts(ctypes.Structure):
    """sp_tools_opts (contrib/tools/tools.h), version 2."""

    _fields_ = [
        ("version", c_uint),
        ("approval", c_int),
        ("approve", c_void_p),
        ("approve_userdata", c_void_p),
        ("on_event", c_void_p),
        ("event_userdata", c_void_p),
        ("events_path", c_char_p),
        ("fs_mode", c_int),
        ("disabled", StrV),
        ("read_only", c_bool),
        ("deny", StrV),
        ("snapshot_store", c_char_p),
        ("max_output_bytes", c_size_t),
        ("max_output_lines", c_size_t),
        ("max_text_bytes", c_size_t),
        ("max_line_bytes", c_uint),
        ("max_read_bytes", c_size_t),
        ("max_write_bytes", c_size_t),
        ("timeout_ms", c_uint),
        ("no_stale_check", c_bool),
    ]


class ToolsSpecsOpts(ctypes.Structure):
    """sp_tools_specs_opts (contrib/tools/tools.h)."""

    _fields_ = [("version", c_uint), ("strict", c_bool)]


# C type name -> (ctypes struct, C type name); a field named "x_" is C's "x".
LAYOUTS: dict[str, tuple[type[ctypes.Structure], str]] = {
    "sp_mount": (Mount, "sp_mount"),
    "sp_sandbox_opts": (SandboxOpts, "sp_sandbox_opts"),
    "sp_run_opts": (RunOpts, "sp_run_opts"),
    "sp_run_result": (RunResult, "sp_run_result"),
    "sp_sandbox_status": (Status, "sp_sandbox_status"),
    "sp_session_opts": (SessionOpts, "sp_session_opts"),
    "sp_session_write_opts": (SessionWriteOpts, "sp_session_write_opts"),
    "sp_session_output": (SessionOutput, "sp_session_output"),
    "sp_session_info": (SessionInfo, "sp_session_info"),
    "sp_snapshot": (Snapshot, "sp_snapshot"),
    "sp_snapshots": (Snapshots, "sp_snapshots"),
    "sp_snapshot_change": (SnapshotChange, "sp_snapshot_change"),
    "sp_snapdiff": (SnapDiff, "sp_snapdiff"),
    "sp_snapshot_diff_opts": (SnapshotDiffOpts, "sp_snapshot_diff_opts"),
    "sp_apply_change": (ApplyChange, "sp_apply_change"),
    "sp_apply_conflict": (ApplyConflict, "sp_apply_conflict"),
    "sp_apply_result": (ApplyResult, "sp_apply_result"),
    "sp_sandbox_apply_opts": (ApplyOpts, "sp_sandbox_apply_opts"),
    "sp_tools_opts": (ToolsOpts, "sp_tools_opts"),
    "sp_tools_specs_opts": (ToolsSpecsOpts, "sp_tools_specs_opts"),
}


def strv(items: list[str] | tuple[str, ...] | None) -> ctypes.Array[c_char_p] | None:
    """A NULL-terminated char* array (None stays NULL)."""
    if items is None:
        return None
    arr = (c_char_p * (len(items) + 1))()
    for i, s in enumerate(items):
        arr[i] = s.encode() if isinstance(s, str) else bytes(s)
    arr[len(items)] = None
    return arr


def strv_ptr(items: list[str] | tuple[str, ...] | None, keep: list[object]) -> object:
    """strv() as the char** a struct field takes; ``keep`` holds the array alive."""
    arr = strv(items)
    if arr is None:
        return None
    keep.append(arr)
    return ctypes.cast(arr, StrV)
