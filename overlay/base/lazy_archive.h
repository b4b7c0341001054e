/* libarchive through sp_lazy (see lazy.h): include this instead of
 * <archive.h> and <archive_entry.h>; call sp_archive_load() before the
 * first archive call. */
#ifndef SANDPOD_LAZY_ARCHIVE_H
#define SANDPOD_LAZY_ARCHIVE_H

#include <archive.h>
#include <archive_entry.h>

#include "lazy.h"

#define SP_ARCHIVE_FUNCS(X)                                                                        \
    X(archive_error_string)                                                                        \
    X(archive_errno)                                                                               \
    X(archive_write_new)                                                                           \
    X(archive_write_free)                                                                          \
    X(archive_write_close)                                                                         \
    X(archive_write_header)                                                                        \
    X(archive_write_data)                                                                          \
    X(archive_write_open_fd)                                                                       \
    X(archive_write_set_format_pax_restricted)                                                     \
    X(archive_write_set_bytes_in_last_block)                                                       \
    X(archive_write_add_filter_gzip)                                                               \
    X(archive_read_new)                                                                            \
    X(archive_read_free)                                                                           \
    X(archive_read_support_format_tar)                                                             \
    X(archive_read_support_filter_none)                                                            \
    X(archive_read_support_filter_gzip)                                                            \
    X(archive_read_support_filter_bzip2)                                                           \
    X(archive_read_support_filter_xz)                                                              \
    X(archive_read_support_filter_zstd)                                                            \
    X(archive_read_open_filename)                                                                  \
    X(archive_read_open_fd)                                                                        \
    X(archive_read_open)                                                                           \
    X(archive_set_error)                                                                           \
    X(archive_read_next_header)                                                                    \
    X(archive_read_data)                                                                           \
    X(archive_read_data_block)                                                                     \
    X(archive_entry_new)                                                                           \
    X(archive_entry_free)                                                                          \
    X(archive_entry_clear)                                                                         \
    X(archive_entry_set_uid)                                                                       \
    X(archive_entry_set_gid)                                                                       \
    X(archive_entry_set_uname)                                                                     \
    X(archive_entry_set_gname)                                                                     \
    X(archive_entry_set_size)                                                                      \
    X(archive_entry_set_perm)                                                                      \
    X(archive_entry_set_pathname)                                                                  \
    X(archive_entry_set_mtime)                                                                     \
    X(archive_entry_set_filetype)                                                                  \
    X(archive_entry_set_symlink)                                                                   \
    X(archive_entry_symlink)                                                                       \
    X(archive_entry_size_is_set)                                                                   \
    X(archive_entry_size)                                                                          \
    X(archive_entry_perm)                                                                          \
    X(archive_entry_pathname)                                                                      \
    X(archive_entry_hardlink)                                                                      \
    X(archive_entry_filetype)                                                                      \
    X(archive_entry_sparse_add_entry)                                                              \
    X(archive_entry_sparse_count)                                                                  \
    X(archive_entry_sparse_reset)                                                                  \
    X(archive_entry_sparse_next)

typedef struct sp_archive_api {
#define SP_X(f) __typeof__(f) *f;
    SP_ARCHIVE_FUNCS(SP_X)
#undef SP_X
} sp_archive_api;

extern sp_archive_api sp_archive;

#ifndef SP_LAZY_IMPL
#define archive_error_string                    (sp_archive.archive_error_string)
#define archive_errno                           (sp_archive.archive_errno)
#define archive_write_new                       (sp_archive.archive_write_new)
#define archive_write_free                      (sp_archive.archive_write_free)
#define archive_write_close                     (sp_archive.archive_write_close)
#define archive_write_header                    (sp_archive.archive_write_header)
#define archive_write_data                      (sp_archive.archive_write_data)
#define archive_write_open_fd                   (sp_archive.archive_write_open_fd)
#define archive_write_set_format_pax_restricted (sp_archive.archive_write_set_format_pax_restricted)
#define archive_write_set_bytes_in_last_block   (sp_archive.archive_write_set_bytes_in_last_block)
#define archive_write_add_filter_gzip           (sp_archive.archive_write_add_filter_gzip)
#define archive_read_new                        (sp_archive.archive_read_new)
#define archive_read_free                       (sp_archive.archive_read_free)
#define archive_read_support_format_tar         (sp_archive.archive_read_support_format_tar)
#define archive_read_support_filter_none        (sp_archive.archive_read_support_filter_none)
#define archive_read_support_filter_gzip        (sp_archive.archive_read_support_filter_gzip)
#define archive_read_support_filter_bzip2       (sp_archive.archive_read_support_filter_bzip2)
#define archive_read_support_filter_xz          (sp_archive.archive_read_support_filter_xz)
#define archive_read_support_filter_zstd        (sp_archive.archive_read_support_filter_zstd)
#define archive_read_open_filename              (sp_archive.archive_read_open_filename)
#define archive_read_open_fd                    (sp_archive.archive_read_open_fd)
#define archive_read_open                       (sp_archive.archive_read_open)
#define archive_set_error                       (sp_archive.archive_set_error)
#define archive_read_next_header                (sp_archive.archive_read_next_header)
#define archive_read_data                       (sp_archive.archive_read_data)
#define archive_read_data_block                 (sp_archive.archive_read_data_block)
#define archive_entry_new                       (sp_archive.archive_entry_new)
#define archive_entry_free                      (sp_archive.archive_entry_free)
#define archive_entry_clear                     (sp_archive.archive_entry_clear)
#define archive_entry_set_uid                   (sp_archive.archive_entry_set_uid)
#define archive_entry_set_gid                   (sp_archive.archive_entry_set_gid)
#define archive_entry_set_uname                 (sp_archive.archive_entry_set_uname)
#define archive_entry_set_gname                 (sp_archive.archive_entry_set_gname)
#define archive_entry_set_size                  (sp_archive.archive_entry_set_size)
#define archive_entry_set_perm                  (sp_archive.archive_entry_set_perm)
#define archive_entry_set_pathname              (sp_archive.archive_entry_set_pathname)
#define archive_entry_set_mtime                 (sp_archive.archive_entry_set_mtime)
#define archive_entry_set_filetype              (sp_archive.archive_entry_set_filetype)
#define archive_entry_set_symlink               (sp_archive.archive_entry_set_symlink)
#define archive_entry_symlink                   (sp_archive.archive_entry_symlink)
#define archive_entry_size_is_set               (sp_archive.archive_entry_size_is_set)
#define archive_entry_size                      (sp_archive.archive_entry_size)
#define archive_entry_perm                      (sp_archive.archive_entry_perm)
#define archive_entry_pathname                  (sp_archive.archive_entry_pathname)
#define archive_entry_hardlink                  (sp_archive.archive_entry_hardlink)
#define archive_entry_filetype                  (sp_archive.archive_entry_filetype)
#define archive_entry_sparse_add_entry          (sp_archive.archive_entry_sparse_add_entry)
#define archive_entry_sparse_count              (sp_archive.archive_entry_sparse_count)
#define archive_entry_sparse_reset              (sp_archive.archive_entry_sparse_reset)
#define archive_entry_sparse_next               (sp_archive.archive_entry_sparse_next)
#endif

#endif
