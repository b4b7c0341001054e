/* Text edits on the contained filesystem: str_replace and insert. Both read
 * the whole file, build the new content in memory and write it back with
 * sp_fs_write_bytes(), which is atomic, keeps the mode and follows a final
 * symlink only while it stays inside the root. */

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "fs_internal.h"

/* Line numbers named in the "matches N times" message. */
#define EDIT_MAX_LINES_LISTED 10

/* Read a UTF-8 text file that is about to be edited. */
static int read_text(sp_fs *fs, const char *rel, sp_buf *out, sp_error **err)
{
    cleanup_close int fd = sp_fs_openat(fs, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, true, err);
    if (fd < 0)
        return fd;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sp_err_errno(err, errno, "edit", rel);
    if (S_ISDIR(st.st_mode))
        return sp_err_set(err, SP_EINVAL, EISDIR, "cannot edit a folder: %s", rel);
    if (!S_ISREG(st.st_mode))
        return sp_err_set(err, SP_EINVAL, 0, "cannot edit a file that is not a regular file: %s",
                          rel);
    size_t limit = fs->opts.max_read_bytes ? fs->opts.max_read_bytes : SP_FS_DEFAULT_MAX_READ;
    if ((uint64_t)st.st_size > limit)
        return sp_err_set(err, SP_ETOOBIG, 0, "file too big to edit: %s (%llu bytes, limit %zu)",
                          rel, (unsigned long long)st.st_size, limit);
    /* One byte over the limit tells a file that grew since fstat from one
     * that fits: writing back a silently cut read would lose its tail. */
    int r = sp_fs_slurp_fd(fd, rel, limit + 1, out, err);
    if (r < 0)
        return r;
    if (out->len > limit)
        return sp_err_set(err, SP_ETOOBIG, 0, "file too big to edit: %s (over %zu bytes)", rel,
                          limit);
    sp_buf_add(out, "", 0); /* data is non-NULL even for an empty file */
    if (memchr(out->data, '\0', out->len) || !sp_utf8_valid(out->data, out->len))
        return sp_err_reason(err, SP_R_NOT_TEXT,
                             sp_err_set(err, SP_EINVAL, 0,
                                        "cannot edit a binary or non-UTF-8 file as text: %s", rel));
    return 0;
}

static int write_text(sp_fs *fs, const char *rel, const sp_buf *content, sp_error **err)
{
    sp_fs_write_opts wo = SP_FS_WRITE_OPTS_INIT;
    wo.mode = SP_FS_OVERWRITE;
    wo.no_create_parents = true;
    return sp_fs_write_bytes(NULL, fs, rel, content->data, content->len, &wo, err);
}

/* Shared start of both edits: checks, normalizes and reads. */
static int edit_begin(sp_fs *fs, const char *path, char **rel, sp_buf *content, sp_error **err)
{
    int r = sp_fs_prepare(fs, path, rel, err);
    if (r < 0)
        return r;
    r = sp_fs_check_writable(fs, *rel, err);
    if (r < 0)
        return r;
    return read_text(fs, *rel, content, err);
}

int sp_fs_str_replace(size_t *replaced, sp_fs *fs, const char *path, const char *old_str,
                      const char *new_str, bool replace_all, sp_error **err)
{
    cleanup_free char *rel = NULL;
    sp_buf content = SP_BUF_INIT;
    sp_buf result = SP_BUF_INIT;
    sp_buf lines = SP_BUF_INIT;
    int r;

    if (replaced)
        *replaced = 0;
    if (!fs || !path || !old_str || !new_str)
        return sp_err_set(err, SP_EINVAL, 0, "str_replace: missing argument");
    if (!*old_str)
        return sp_err_set(err, SP_EINVAL, 0, "str_replace: old_str must not be empty");
    size_t old_len = strlen(old_str), new_len = strlen(new_str);
    if (!sp_utf8_valid(new_str, new_len))
        return sp_err_set(err, SP_EINVAL, 0, "str_replace: new_str is not valid UTF-8");

    r = edit_begin(fs, path, &rel, &content, err);
    if (r < 0)
        goto done;

    /* Count non-overlapping occurrences, noting the lines of the first few
     * for the message that asks for a unique old_str. */
    size_t count = 0, line = 1, listed = 0, last_listed = 0;
    const char *p = content.data, *end = content.data + content.len, *counted = p;
    const char *hit;
    while ((hit = memmem(p, (size_t)(end - p), old_str, old_len))) {
        for (const char *nl; (nl = memchr(counted, '\n', (size_t)(hit - counted)));
             counted = nl + 1)
            line++;
        counted = hit;
        if (listed < EDIT_MAX_LINES_LISTED && line != last_listed) {
            sp_buf_printf(&lines, "%s%zu", listed ? ", " : "", line);
            listed++;
            last_listed = line;
        } else if (listed == EDIT_MAX_LINES_LISTED && line != last_listed) {
            sp_buf_adds(&lines, ", ...");
            listed++;
        }
        count++;
        p = hit + old_len;
    }

    if (count == 0) {
        r = sp_err_set(err, SP_ENOTFOUND, 0, "old_str not found in %s", rel);
        goto done;
    }
    if (count > 1 && !replace_all) {
        r = sp_err_reason(
            err, SP_R_NOT_UNIQUE,
            sp_err_set(err, SP_EINVAL, 0,
                       "old_str matches %zu times in %s (line%s %s); add surrounding lines to "
                       "make it unique or set replace_all",
                       count, rel, listed > 1 ? "s" : "", lines.data));
        goto done;
    }

    sp_buf_grow(&result, content.len + (new_len > old_len ? (new_len - old_len) * count : 0));
    p = content.data;
    while ((hit = memmem(p, (size_t)(end - p), old_str, old_len))) {
        sp_buf_add(&result, p, (size_t)(hit - p));
        sp_buf_add(&result, new_str, new_len);
        p = hit + old_len;
    }
    sp_buf_add(&result, p, (size_t)(end - p));

    r = write_text(fs, rel, &result, err);
    if (r < 0)
        goto done;
    if (replaced)
        *replaced = count;

done:
    sp_buf_dispose(&content);
    sp_buf_dispose(&result);
    sp_buf_dispose(&lines);
    return r;
}

int sp_fs_insert(sp_fs *fs, const char *path, long line, const char *text, sp_error **err)
{
    cleanup_free char *rel = NULL;
    sp_buf content = SP_BUF_INIT;
    sp_buf result = SP_BUF_INIT;
    int r;

    if (!fs || !path || !text)
        return sp_err_set(err, SP_EINVAL, 0, "insert: missing argument");
    if (line < -1)
        return sp_err_set(err, SP_EINVAL, 0,
                          "insert: line must be 0 (start), -1 (end) or a line number, not %ld",
                          line);
    size_t text_len = strlen(text);
    if (!sp_utf8_valid(text, text_len))
        return sp_err_set(err, SP_EINVAL, 0, "insert: text is not valid UTF-8");

    r = edit_begin(fs, path, &rel, &content, err);
    if (r < 0)
        goto done;

    const char *data = content.data;
    size_t len = content.len;
    bool final_nl = len == 0 || data[len - 1] == '\n';
    size_t total = 0;
    for (const char *p = data, *nl; (nl = memchr(p, '\n', len - (size_t)(p - data))); p = nl + 1)
        total++;
    if (!final_nl)
        total++;

    size_t at; /* byte offset where the text goes */
    if (line == -1 || (size_t)line == total) {
        at = len;
    } else if ((size_t)line > total) {
        r = sp_err_set(err, SP_EINVAL, 0,
                       "insert: line %ld is past the end of %s, which has %zu line%s", line, rel,
                       total, total == 1 ? "" : "s");
        goto done;
    } else {
        at = 0;
        for (long n = 0; n < line; n++)
            at = (size_t)((const char *)memchr(data + at, '\n', len - at) - data) + 1;
    }

    sp_buf_grow(&result, len + text_len + 2);
    sp_buf_add(&result, data, at);
    if (at == len && !final_nl)
        sp_buf_addc(&result, '\n');
    sp_buf_add(&result, text, text_len);
    if (text_len == 0 || text[text_len - 1] != '\n')
        sp_buf_addc(&result, '\n');
    sp_buf_add(&result, data + at, len - at);

    r = write_text(fs, rel, &result, err);

done:
    sp_buf_dispose(&content);
    sp_buf_dispose(&result);
    return r;
}
