/* The stale-edit guard: edit_file, insert, write_file (overwrite) and
 * apply_patch refuse to change a file that changed on disk after the model
 * last read it in this session (the container writes too), so that an
 * edit is never built on text the model no longer sees.
 *
 * The context keeps, per file, the (dev, ino, size, mtime, ctime) it had
 * when read_file read it or a write tool left it. A file with no record
 * (never read in this session) may be changed: old_string, patch context
 * lines and insert's line numbers are checked against the file as it is,
 * and a server restarted mid-conversation must not make every file the
 * model holds in its context unwritable. The map is shared by concurrent
 * calls (the MCP server runs them on several threads): a mutex guards it. */
#include <stddef.h>

#include "tools_core.h"

#ifdef SANDPOD_HAVE_PATCH
#include "sandpod/patch.h"
#endif

/* Records kept; past this the oldest go (a file without a record may be
 * changed, so forgetting errs on the permissive side). */
#define STALE_MAX 4096

struct stale_entry {
    char *key; /* absolute, lexically normalized host path */
    stale_state st;
};

/* One name per file whichever handle (contained or unrestricted) names
 * it: "/" + the normalized absolute host path. */
static char *key_of(const sp_tools *t, sp_fs *fs, const char *rel)
{
    char *n = NULL;
    if (fs != t->fs_any && (sp_fs_path_normalize(&n, rel, strlen(rel), NULL) < 0 || !n))
        return NULL;
    char *abs = fs == t->fs_any ? sp_xasprintf("/%s", rel) : sp_xasprintf("%s/%s", t->root, n);
    free(n);
    char *folded = tools_normalize_abs(abs);
    free(abs);
    char *key = sp_xasprintf("/%s", strcmp(folded, ".") == 0 ? "" : folded);
    free(folded);
    return key;
}

void tools_stale_probe(stale_state *s, sp_fs *fs, const char *rel)
{
    memset(s, 0, sizeof(*s));
    sp_fs_info *st = NULL;
    if (sp_fs_stat_target(&st, fs, rel, NULL) == 0 && st->type == SP_FS_FILE) {
        s->ok = true;
        s->dev = st->dev;
        s->ino = st->ino;
        s->size = st->size;
        s->mtime_ns = st->mtime_ns;
        s->ctime_ns = st->ctime_ns;
    }
    sp_fs_info_free(st);
}

/* Index of key in the map, or n_stale. Called with stale_mu held. */
static size_t find(const sp_tools *t, const char *key)
{
    size_t i = 0;
    while (i < t->n_stale && strcmp(t->stale[i].key, key) != 0)
        i++;
    return i;
}

static void drop(sp_tools *t, size_t i)
{
    free(t->stale[i].key);
    memmove(&t->stale[i], &t->stale[i + 1], (t->n_stale - i - 1) * sizeof(*t->stale));
    t->n_stale--;
}

void tools_stale_record(sp_tools *t, sp_fs *fs, const char *rel, const stale_state *s)
{
    if (t->opts.no_stale_check)
        return;
    char *key = key_of(t, fs, rel);
    if (!key)
        return;
    pthread_mutex_lock(&t->stale_mu);
    size_t i = find(t, key);
    if (i < t->n_stale)
        drop(t, i);
    if (s->ok) {
        if (t->n_stale == STALE_MAX)
            drop(t, 0);
        if (t->n_stale == t->cap_stale) {
            t->cap_stale = t->cap_stale ? t->cap_stale * 2 : 64;
            t->stale = sp_xrealloc(t->stale, t->cap_stale * sizeof(*t->stale));
        }
        /* Most recent last: eviction takes the oldest. */
        t->stale[t->n_stale++] = (struct stale_entry){key, *s};
        key = NULL;
    }
    pthread_mutex_unlock(&t->stale_mu);
    free(key);
}

void tools_stale_note(sp_tools *t, sp_fs *fs, const char *rel)
{
    if (t->opts.no_stale_check)
        return;
    stale_state s;
    tools_stale_probe(&s, fs, rel);
    tools_stale_record(t, fs, rel, &s);
}

void tools_stale_forget(sp_tools *t, sp_fs *fs, const char *rel)
{
    stale_state none = {0};
    tools_stale_record(t, fs, rel, &none);
}

int tools_stale_check(sp_tools *t, sp_fs *fs, const char *rel, const char *shown, tool_call *c)
{
    if (t->opts.no_stale_check)
        return 0;
    char *key = key_of(t, fs, rel);
    if (!key)
        return 0;
    stale_state seen = {0};
    pthread_mutex_lock(&t->stale_mu);
    size_t i = find(t, key);
    if (i < t->n_stale)
        seen = t->stale[i].st;
    pthread_mutex_unlock(&t->stale_mu);
    free(key);
    if (!seen.ok)
        return 0; /* never read in this session */
    stale_state now;
    tools_stale_probe(&now, fs, rel);
    if (!now.ok)
        return 0; /* gone: the tool itself says what that means */
    if (now.dev == seen.dev && now.ino == seen.ino && now.size == seen.size &&
        now.mtime_ns == seen.mtime_ns && now.ctime_ns == seen.ctime_ns)
        return 0;
    const char *what = now.size != seen.size ? "its size changed"
                       : now.ino != seen.ino || now.dev != seen.dev
                           ? "it was replaced by another file"
                           : "it was modified";
    return call_fail_reason(c, SP_ERROR, SP_R_STALE,
                            "%s changed on disk since you last read it (%s, by a command or "
                            "another program); nothing was changed: read it again with "
                            "read_file and redo the change on what it holds now",
                            shown, what);
}

#ifdef SANDPOD_HAVE_PATCH
int tools_stale_check_patch(sp_tools *t, const char *patch, size_t len,
                            const struct sp_patch_opts *po, tool_call *c)
{
    if (t->opts.no_stale_check)
        return 0;
    sp_patch_result *plan = NULL;
    /* A patch that does not parse fails in the apply with its own message. */
    if (sp_patch_parse(&plan, patch, len, po, NULL) < 0)
        return 0;
    int r = 0;
    for (size_t i = 0; r == 0 && i < plan->n; i++) {
        const sp_patch_file *f = &plan->files[i];
        /* Every file whose old content the patch relies on or replaces. */
        char *shown = fs_display(t, f->path);
        r = tools_stale_check(t, t->fs, f->path, shown, c);
        free(shown);
        if (r == 0 && f->new_path) {
            shown = fs_display(t, f->new_path);
            r = tools_stale_check(t, t->fs, f->new_path, shown, c);
            free(shown);
        }
    }
    sp_patch_result_free(plan);
    return r;
}

void tools_stale_note_patch(sp_tools *t, const struct sp_patch_result *res)
{
    for (size_t i = 0; i < res->n; i++) {
        const sp_patch_file *f = &res->files[i];
        if (f->action == SP_PATCH_DELETE || f->action == SP_PATCH_MOVE)
            tools_stale_forget(t, t->fs, f->path);
        if (f->action != SP_PATCH_DELETE)
            tools_stale_note(t, t->fs, f->new_path ? f->new_path : f->path);
    }
}
#endif

void tools_stale_dispose(sp_tools *t)
{
    for (size_t i = 0; i < t->n_stale; i++)
        free(t->stale[i].key);
    free(t->stale);
    t->stale = NULL;
    t->n_stale = t->cap_stale = 0;
}
