/* Sizes and field offsets of the C structs the Python package mirrors with
 * ctypes (contrib/python/sandpod/_cfs.py), one "name size" or
 * "name.field offset" per line; tests/contrib/python/test_layout.py compares
 * them with ctypes', and the versions and enum values with _cfs's. A field renamed or dropped in a
 * header breaks this build. */
#include <stddef.h>
#include <stdio.h>

#include "sandpod/fs.h"
#include "sandpod/sandbox_snapshot.h"
#include "sandpod/snapshot.h"

#define S(t)    printf("%s %zu\n", #t, sizeof(t))
#define V(m)    printf("%s %d\n", #m, (int)(m))
#define F(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))

int main(void)
{
    V(SP_FS_OPTS_VERSION);
    V(SP_FS_READ_OPTS_VERSION);
    V(SP_FS_WRITE_OPTS_VERSION);
    V(SP_FS_LIST_OPTS_VERSION);
    V(SP_FS_GLOB_OPTS_VERSION);
    V(SP_FS_GREP_OPTS_VERSION);
    V(SP_SNAPSTORE_OPTS_VERSION);
    V(SP_SANDBOX_SNAPSHOT_OPTS_VERSION);
    V(SP_FS_OVERWRITE);
    V(SP_FS_CREATE);
    V(SP_FS_APPEND);
    V(SP_FS_FILE);
    V(SP_FS_DIR);
    V(SP_FS_SYMLINK);
    V(SP_FS_OTHER);
    S(sp_fs_opts);
    F(sp_fs_opts, version);
    F(sp_fs_opts, read_only);
    F(sp_fs_opts, deny);
    F(sp_fs_opts, max_write_bytes);
    F(sp_fs_opts, max_read_bytes);
    F(sp_fs_opts, max_path_depth);
    F(sp_fs_opts, max_segment_len);
    F(sp_fs_opts, read_line_limit);
    F(sp_fs_opts, max_line_bytes);
    S(sp_fs_read_opts);
    F(sp_fs_read_opts, version);
    F(sp_fs_read_opts, offset);
    F(sp_fs_read_opts, limit);
    S(sp_fs_text);
    F(sp_fs_text, path);
    F(sp_fs_text, content);
    F(sp_fs_text, content_len);
    F(sp_fs_text, total_lines);
    F(sp_fs_text, offset);
    F(sp_fs_text, limit);
    F(sp_fs_text, lines);
    F(sp_fs_text, lines_cut);
    F(sp_fs_text, truncated);
    S(sp_fs_bytes);
    F(sp_fs_bytes, path);
    F(sp_fs_bytes, data);
    F(sp_fs_bytes, len);
    F(sp_fs_bytes, size);
    F(sp_fs_bytes, offset);
    F(sp_fs_bytes, truncated);
    S(sp_fs_write_opts);
    F(sp_fs_write_opts, version);
    F(sp_fs_write_opts, mode);
    F(sp_fs_write_opts, no_create_parents);
    S(sp_fs_info);
    F(sp_fs_info, path);
    F(sp_fs_info, type);
    F(sp_fs_info, size);
    F(sp_fs_info, mode);
    F(sp_fs_info, mtime_ns);
    F(sp_fs_info, link_target);
    F(sp_fs_info, target_escapes);
    F(sp_fs_info, dev);
    F(sp_fs_info, ino);
    F(sp_fs_info, atime_ns);
    F(sp_fs_info, ctime_ns);
    F(sp_fs_info, btime_ns);
    F(sp_fs_info, readable);
    F(sp_fs_info, writable);
    F(sp_fs_info, target_in_image);
    S(sp_fs_entry);
    F(sp_fs_entry, name);
    F(sp_fs_entry, path);
    F(sp_fs_entry, type);
    F(sp_fs_entry, size);
    F(sp_fs_entry, mode);
    F(sp_fs_entry, mtime_ns);
    F(sp_fs_entry, link_target);
    F(sp_fs_entry, depth);
    F(sp_fs_entry, contents_skipped);
    S(sp_fs_entries);
    F(sp_fs_entries, v);
    F(sp_fs_entries, n);
    F(sp_fs_entries, truncated);
    S(sp_fs_list_opts);
    F(sp_fs_list_opts, version);
    F(sp_fs_list_opts, depth);
    F(sp_fs_list_opts, max_entries);
    F(sp_fs_list_opts, ignore);
    S(sp_fs_glob_opts);
    F(sp_fs_glob_opts, version);
    F(sp_fs_glob_opts, base);
    F(sp_fs_glob_opts, max_entries);
    F(sp_fs_glob_opts, hidden);
    S(sp_fs_grep_opts);
    F(sp_fs_grep_opts, version);
    F(sp_fs_grep_opts, path);
    F(sp_fs_grep_opts, glob);
    F(sp_fs_grep_opts, max_matches);
    F(sp_fs_grep_opts, case_insensitive);
    F(sp_fs_grep_opts, fixed_string);
    F(sp_fs_grep_opts, globs);
    F(sp_fs_grep_opts, no_ignore);
    F(sp_fs_grep_opts, hidden);
    S(sp_fs_match);
    F(sp_fs_match, path);
    F(sp_fs_match, line_number);
    F(sp_fs_match, line);
    F(sp_fs_match, match_start);
    F(sp_fs_match, match_end);
    F(sp_fs_match, byte_offset);
    S(sp_fs_matches);
    F(sp_fs_matches, v);
    F(sp_fs_matches, n);
    F(sp_fs_matches, truncated);
    F(sp_fs_matches, files_searched);
    F(sp_fs_matches, files_skipped);
    F(sp_fs_matches, ignored);
    S(sp_snapshot_progress);
    F(sp_snapshot_progress, phase);
    F(sp_snapshot_progress, entries);
    F(sp_snapshot_progress, files_hashed);
    F(sp_snapshot_progress, bytes_hashed);
    F(sp_snapshot_progress, paths_changed);
    S(sp_snapstore_opts);
    F(sp_snapstore_opts, version);
    F(sp_snapstore_opts, pause);
    F(sp_snapstore_opts, unpause);
    F(sp_snapstore_opts, userdata);
    F(sp_snapstore_opts, track_changes);
    F(sp_snapstore_opts, no_create);
    F(sp_snapstore_opts, durable);
    F(sp_snapstore_opts, progress);
    F(sp_snapstore_opts, progress_userdata);
    F(sp_snapstore_opts, keep_setid);
    F(sp_snapstore_opts, max_data_bytes);
    F(sp_snapstore_opts, trust_ids);
    S(sp_snapshot);
    F(sp_snapshot, id);
    F(sp_snapshot, tag);
    F(sp_snapshot, commit);
    F(sp_snapshot, root);
    F(sp_snapshot, store);
    F(sp_snapshot, created_at);
    F(sp_snapshot, created_at_ns);
    F(sp_snapshot, files);
    F(sp_snapshot, dirs);
    F(sp_snapshot, symlinks);
    F(sp_snapshot, bytes);
    S(sp_sandbox_snapshot_opts);
    F(sp_sandbox_snapshot_opts, version);
    F(sp_sandbox_snapshot_opts, store);
    return 0;
}
