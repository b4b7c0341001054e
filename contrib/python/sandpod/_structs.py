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

SANDBOX_OPTS_VERSION = 4
EGRESS_CHANGE_OPTS_VERSION = 1
RUN_OPTS_VERSION = 1
SESSION_OPTS_VERSION = 1
SESSION_WRITE_OPTS_VERSION = 1
SNAPSHOT_DIFF_OPTS_VERSION = 2
APPLY_OPTS_VERSION = 2
TOOLS_OPTS_VERSION = 2
TOOLS_SPECS_OPTS_VERSION = 1
TEMPLATE_OPTS_VERSION = 1
LOGS_OPTS_VERSION = 2
PODMAN_OPTS_VERSION = 1
PODMAN_PULL_OPTS_VERSION = 1
PODMAN_BUILD_OPTS_VERSION = 1
HYDRATE_OPTS_VERSION = 2
SANDBOX_EVENT_VERSION = 1


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
        ("keep_secrets", c_bool),
    ]


class SandboxOpts(ctypes.Structure):
    """sp_sandbox_opts (sandpod/sandbox.h), version 4."""

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
        ("engine", c_char_p),
        ("should_stop", c_void_p),
        ("made_by", c_char_p),
        ("allow", StrV),
        ("deny", StrV),
        ("egress_hosts", c_char_p),
        ("setup_allow", StrV),
        ("secrets", StrV),
        ("secret_for", StrV),
        ("secret_in", StrV),
        ("egress_ca", c_char_p),
    ]


class EgressChangeOpts(ctypes.Structure):
    """sp_egress_change_opts (sandpod/egress.h)."""

    _fields_ = [
        ("version", c_uint),
        ("allow", StrV),
        ("deny", StrV),
        ("remove", StrV),
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

    _fields_ = [("version", c_uint), ("patch", c_bool), ("context_lines", c_uint),
                ("patch_select", c_void_p), ("patch_select_userdata", c_void_p)]


class ApplyChange(ctypes.Structure):
    """sp_apply_change (sandpod/apply.h)."""

    _fields_ = [
        ("path", c_char_p),
        ("action", c_int),
        ("type", c_int),
        ("mode", c_uint),
        ("already", c_bool),
        ("old_mode", c_uint),
        ("target", c_char_p),
    ]


class ApplyConflict(ctypes.Structure):
    """sp_apply_conflict (sandpod/apply.h)."""

    _fields_ = [("path", c_char_p), ("reason", c_char_p)]


class ApplyHeld(ctypes.Structure):
    """sp_apply_held (sandpod/apply.h)."""

    _fields_ = [("path", c_char_p), ("why", c_int), ("count", c_size_t), ("detail", c_char_p)]


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
        ("held", POINTER(ApplyHeld)),
        ("n_held", c_size_t),
        ("filtered", c_size_t),
        ("snapshot", c_char_p),
        ("commit", c_char_p),
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
        ("snapshot", c_char_p),
        ("allow_paths", POINTER(c_char_p)),
        ("allow_links_out", c_bool),
        ("all", c_bool),
        ("max_files", c_uint64),
        ("max_bytes", c_uint64),
        ("branch", c_char_p),
        ("message", c_char_p),
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


class HydrateProgress(ctypes.Structure):
    """sp_hydrate_progress (sandpod/hydrate.h)."""

    _fields_ = [
        ("phase", c_int),
        ("files", c_uint64),
        ("bytes", c_uint64),
        ("total_files", c_uint64),
        ("total_bytes", c_uint64),
        ("path", c_char_p),
    ]


# Callbacks (the Python side keeps each CFUNCTYPE object alive for the call).
HydrateProgressFn = ctypes.CFUNCTYPE(None, c_void_p, POINTER(HydrateProgress))
PodmanProgressFn = ctypes.CFUNCTYPE(None, c_char_p, c_void_p)
LogsFn = ctypes.CFUNCTYPE(c_int, c_int, c_void_p, c_size_t, c_void_p)


class HydrateOpts(ctypes.Structure):
    """sp_hydrate_opts (sandpod/hydrate.h)."""

    _fields_ = [
        ("version", c_uint),
        ("allowed_roots", StrV),
        ("progress", HydrateProgressFn),
        ("progress_userdata", c_void_p),
        ("should_stop", c_void_p),
    ]


class HydrateEntry(ctypes.Structure):
    """sp_hydrate_entry (sandpod/hydrate.h)."""

    _fields_ = [("path", c_char_p), ("type", c_int), ("size", c_uint64), ("mount", c_size_t)]


class HydrateSkip(ctypes.Structure):
    """sp_hydrate_skip (sandpod/hydrate.h)."""

    _fields_ = [("path", c_char_p), ("mount", c_size_t), ("reason", c_int),
                ("detail", c_char_p)]


class HydrateRewrite(ctypes.Structure):
    """sp_hydrate_rewrite (sandpod/hydrate.h)."""

    _fields_ = [("path", c_char_p), ("mount", c_size_t), ("detail", c_char_p)]


class HydrateOverride(ctypes.Structure):
    """sp_hydrate_override (sandpod/hydrate.h)."""

    _fields_ = [("path", c_char_p), ("mount", c_size_t), ("previous", ctypes.c_long)]


class HydrateMountStats(ctypes.Structure):
    """sp_hydrate_mount_stats (sandpod/hydrate.h)."""

    _fields_ = [("host_path", c_char_p), ("mount_path", c_char_p), ("files", c_uint64),
                ("dirs", c_uint64), ("symlinks", c_uint64), ("bytes", c_uint64)]


class HydrateResult(ctypes.Structure):
    """sp_hydrate_result (sandpod/hydrate.h)."""

    _fields_ = [
        ("files", c_uint64),
        ("dirs", c_uint64),
        ("symlinks", c_uint64),
        ("bytes", c_uint64),
        ("excluded", c_uint64),
        ("hardlinks", c_uint64),
        ("reflinked", c_uint64),
        ("sparse", c_uint64),
        ("elapsed_ms", c_int64),
        ("entries", POINTER(HydrateEntry)),
        ("n_entries", c_size_t),
        ("skipped", POINTER(HydrateSkip)),
        ("n_skipped", c_size_t),
        ("overridden", POINTER(HydrateOverride)),
        ("n_overridden", c_size_t),
        ("mounts", POINTER(HydrateMountStats)),
        ("n_mounts", c_size_t),
        ("rewritten", POINTER(HydrateRewrite)),
        ("n_rewritten", c_size_t),
    ]


class TemplateOpts(ctypes.Structure):
    """sp_template_opts (sandpod/template.h)."""

    _fields_ = [
        ("version", c_uint),
        ("state_root", c_char_p),
        ("podman_url", c_char_p),
        ("snapshot", c_char_p),
        ("force", c_bool),
    ]


class TemplateInfo(ctypes.Structure):
    """sp_template_info (sandpod/template.h)."""

    _fields_ = [
        ("name", c_char_p),
        ("path", c_char_p),
        ("origin", c_char_p),
        ("snapshot", c_char_p),
        ("created_at", c_char_p),
        ("image", c_char_p),
        ("image_id", c_char_p),
        ("setup", StrV),
        ("env_names", StrV),
        ("env_pass", StrV),
        ("workdir", c_char_p),
        ("user", c_char_p),
        ("network", c_int),
        ("memory_bytes", c_uint64),
        ("nano_cpus", c_uint64),
        ("pids_limit", c_int64),
        ("n_mounts", c_size_t),
        ("egress", StrV),
    ]


class LogsOpts(ctypes.Structure):
    """sp_logs_opts (sandpod/podman.h)."""

    _fields_ = [
        ("version", c_uint),
        ("follow", c_bool),
        ("tail", c_int64),
        ("since", c_char_p),
        ("timestamps", c_bool),
        ("streams_apart", c_bool),
    ]


class SandboxOrphan(ctypes.Structure):
    """sp_sandbox_orphan (sandpod/sandbox.h)."""

    _fields_ = [
        ("kind", c_int),
        ("container", c_char_p),
        ("state_dir", c_char_p),
        ("reason", c_char_p),
        ("pid", c_int),
        ("removed", c_bool),
        ("error", c_char_p),
    ]


class SandboxOrphans(ctypes.Structure):
    """sp_sandbox_orphans (sandpod/sandbox.h)."""

    _fields_ = [("items", POINTER(SandboxOrphan)), ("n", c_size_t), ("unlabelled", c_size_t),
                ("incomplete_busy", c_size_t)]


class PodmanOpts(ctypes.Structure):
    """sp_podman_opts (sandpod/podman.h)."""

    _fields_ = [
        ("version", c_uint),
        ("url", c_char_p),
        ("state_root", c_char_p),
        ("no_autostart", c_bool),
        ("podman_path", c_char_p),
        ("runtime", c_char_p),
        ("connect_timeout_ms", c_uint),
        ("timeout_ms", c_uint),
        ("transfer_timeout_ms", c_uint),
        ("start_timeout_ms", c_uint),
        ("private_service", c_bool),
    ]


class PodmanPullOpts(ctypes.Structure):
    """sp_podman_pull_opts (sandpod/podman.h)."""

    _fields_ = [
        ("version", c_uint),
        ("no_tls_verify", c_bool),
        ("progress", PodmanProgressFn),
        ("userdata", c_void_p),
    ]


class PodmanBuildOpts(ctypes.Structure):
    """sp_podman_build_opts (sandpod/podman.h)."""

    _fields_ = [
        ("version", c_uint),
        ("containerfile", c_char_p),
        ("tag", c_char_p),
        ("output", PodmanProgressFn),
        ("userdata", c_void_p),
    ]


class PodmanImageInfo(ctypes.Structure):
    """sp_podman_image_info (sandpod/podman.h)."""

    _fields_ = [("id", c_char_p), ("names", StrV), ("created", c_int64), ("size", c_int64)]


class SandboxEvent(ctypes.Structure):
    """sp_sandbox_event (sandpod/sandbox_events.h)."""

    _fields_ = [
        ("version", c_uint),
        ("command", c_char_p),
        ("source", c_char_p),
        ("summary", c_char_p),
        ("paths", StrV),
        ("ok", c_bool),
        ("code", c_int),
        ("status", c_int),
        ("duration_ms", c_int64),
    ]


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
    "sp_apply_held": (ApplyHeld, "sp_apply_held"),
    "sp_apply_result": (ApplyResult, "sp_apply_result"),
    "sp_sandbox_apply_opts": (ApplyOpts, "sp_sandbox_apply_opts"),
    "sp_tools_opts": (ToolsOpts, "sp_tools_opts"),
    "sp_tools_specs_opts": (ToolsSpecsOpts, "sp_tools_specs_opts"),
    "sp_hydrate_progress": (HydrateProgress, "sp_hydrate_progress"),
    "sp_hydrate_opts": (HydrateOpts, "sp_hydrate_opts"),
    "sp_hydrate_entry": (HydrateEntry, "sp_hydrate_entry"),
    "sp_hydrate_skip": (HydrateSkip, "sp_hydrate_skip"),
    "sp_hydrate_override": (HydrateOverride, "sp_hydrate_override"),
    "sp_hydrate_mount_stats": (HydrateMountStats, "sp_hydrate_mount_stats"),
    "sp_hydrate_result": (HydrateResult, "sp_hydrate_result"),
    "sp_template_opts": (TemplateOpts, "sp_template_opts"),
    "sp_template_info": (TemplateInfo, "sp_template_info"),
    "sp_logs_opts": (LogsOpts, "sp_logs_opts"),
    "sp_sandbox_orphan": (SandboxOrphan, "sp_sandbox_orphan"),
    "sp_sandbox_orphans": (SandboxOrphans, "sp_sandbox_orphans"),
    "sp_podman_opts": (PodmanOpts, "sp_podman_opts"),
    "sp_podman_pull_opts": (PodmanPullOpts, "sp_podman_pull_opts"),
    "sp_podman_build_opts": (PodmanBuildOpts, "sp_podman_build_opts"),
    "sp_podman_image_info": (PodmanImageInfo, "sp_podman_image_info"),
    "sp_sandbox_event": (SandboxEvent, "sp_sandbox_event"),
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
