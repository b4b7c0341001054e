/* Snapshot records: the JSON in each commit, listing, and resolving a
 * reference (id, prefix or tag). */
#include "store_internal.h"

/* ------------------------------------------------------------- records -- */

void sp_snapshot_free(sp_snapshot *snap)
{
    if (!snap)
        return;
    free(snap->id);
    free(snap->tag);
    free(snap->commit);
    free(snap->root);
    free(snap->store);
    free(snap->created_at);
    free(snap);
}

void sp_snapshots_free(sp_snapshots *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        sp_snapshot_free(l->v[i]);
    free(l->v);
    free(l);
}

int sp_snap_check_tag(const char *tag, sp_error **err)
{
    size_t len = strlen(tag);
    if (len == 0 || len > 200)
        return sp_err_set(err, SP_EINVAL, 0, "a tag is 1 to 200 bytes long");
    if (!sp_utf8_valid(tag, len))
        return sp_err_set(err, SP_EINVAL, 0, "a tag must be valid UTF-8");
    for (const unsigned char *p = (const unsigned char *)tag; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return sp_err_set(err, SP_EINVAL, 0, "a tag must not hold control characters");
    return 0;
}

static char *new_uuid(void)
{
    uint8_t b[16];
    if (getrandom(b, sizeof(b), 0) != sizeof(b)) {
        uint64_t x = (uint64_t)sp_now_ms() ^ ((uint64_t)getpid() << 32);
        for (int i = 0; i < 16; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            b[i] = (uint8_t)(x >> 56);
        }
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    return sp_xasprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                        b[12], b[13], b[14], b[15]);
}

static bool is_uuid(const char *s)
{
    if (strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        char c = s[i];
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

static char *format_time(int64_t ns)
{
    time_t secs = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[64];
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    return sp_xasprintf("%s.%09lldZ", buf, (long long)(ns % 1000000000));
}

static bool parse_time(const char *s, int64_t *ns)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return false;
    int64_t frac = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 9)
                frac = frac * 10 + (*p - '0');
        for (; digits < 9; digits++)
            frac *= 10;
    }
    if (*p != 'Z')
        return false;
    *ns = (int64_t)timegm(&tm) * 1000000000 + frac;
    return true;
}

struct counts {
    uint64_t files, dirs, links, bytes;
};

static void count_tree(const snode *n, struct counts *c)
{
    for (uint32_t i = 0; i < n->nkids; i++) {
        const snode *k = n->kids[i];
        if (k->type == SN_FILE) {
            c->files++;
            c->bytes += k->size;
        } else if (k->type == SN_LINK) {
            c->links++;
        } else if (k->type == SN_DIR) {
            c->dirs++;
            count_tree(k, c);
        }
    }
}

/* Parse a snapshot commit into a record. */
static sp_snapshot *parse_commit(const char *id, const sp_oid *commit, const sp_buf *body)
{
    const char *msg = strstr(body->data, "\n\n");
    const char *json = msg ? strstr(msg + 2, "\n\n") : NULL;
    if (!json)
        return NULL;
    cJSON *j = sp_json_parse(json + 2, strlen(json + 2));
    if (!j)
        return NULL;
    sp_snapshot *r = NULL;
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
    const cJSON *jat = cJSON_GetObjectItemCaseSensitive(j, "created_at");
    int64_t ns = 0;
    if (cJSON_IsString(jid) && (!id || strcmp(jid->valuestring, id) == 0) && cJSON_IsString(jat) &&
        parse_time(jat->valuestring, &ns)) {
        r = sp_xcalloc(1, sizeof(*r));
        r->id = sp_xstrdup(jid->valuestring);
        r->created_at = sp_xstrdup(jat->valuestring);
        r->created_at_ns = ns;
        char hex[41];
        sp_oid_hex(commit, hex);
        r->commit = sp_xstrdup(hex);
        const cJSON *x;
        if (cJSON_IsString(x = cJSON_GetObjectItemCaseSensitive(j, "tag")))
            r->tag = sp_xstrdup(x->valuestring);
        if (cJSON_IsString(x = cJSON_GetObjectItemCaseSensitive(j, "root")))
            r->root = sp_xstrdup(x->valuestring);
        if (cJSON_IsString(x = cJSON_GetObjectItemCaseSensitive(j, "store")))
            r->store = sp_xstrdup(x->valuestring);
        if (cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(j, "files")))
            r->files = (uint64_t)x->valuedouble;
        if (cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(j, "dirs")))
            r->dirs = (uint64_t)x->valuedouble;
        if (cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(j, "symlinks")))
            r->symlinks = (uint64_t)x->valuedouble;
        if (cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(j, "bytes")))
            r->bytes = (uint64_t)x->valuedouble;
        if (!r->root)
            r->root = sp_xstrdup("");
        if (!r->store)
            r->store = sp_xstrdup("");
    }
    cJSON_Delete(j);
    return r;
}

static int load_record(sp_snapshot **out, sp_odb *o, const char *id, const sp_oid *commit,
                       sp_error **err)
{
    sp_buf b = SP_BUF_INIT;
    int type = 0;
    int r = sp_odb_read(o, commit, &type, &b, err);
    if (r < 0)
        return r;
    sp_snapshot *snap = type == SP_OBJ_COMMIT ? parse_commit(id, commit, &b) : NULL;
    sp_buf_dispose(&b);
    if (!snap)
        return sp_err_set(err, SP_EINVAL, 0, "snapshot record is damaged: %s", id);
    /* The store path is where it is now, whatever it was called then. */
    *out = snap;
    return 0;
}

int sp_snap_commit_tree(sp_odb *o, const char *commit_hex, sp_oid *tree, sp_error **err)
{
    sp_oid c;
    if (sp_oid_parse(&c, commit_hex, strlen(commit_hex)) < 0)
        return sp_err_set(err, SP_EINVAL, 0, "not a commit id: %s", commit_hex);
    sp_buf b = SP_BUF_INIT;
    int type = 0;
    int r = sp_odb_read(o, &c, &type, &b, err);
    if (r < 0)
        return r;
    if (type != SP_OBJ_COMMIT || b.len < 45 || memcmp(b.data, "tree ", 5) != 0 ||
        sp_oid_parse(tree, b.data + 5, 40) < 0)
        r = sp_err_set(err, SP_EINVAL, 0, "not a snapshot commit: %s", commit_hex);
    sp_buf_dispose(&b);
    return r;
}

int sp_snap_record(sp_snapshot **out, sp_snapstore *s, const sp_oid *tree, const snode *counted,
                   const char *tag, sp_error **err)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    struct counts c = {0};
    if (counted)
        count_tree(counted, &c);
    cleanup_free char *id = new_uuid();
    cleanup_free char *at = format_time(ns);

    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", id);
    cJSON_AddStringToObject(j, "created_at", at);
    if (tag)
        cJSON_AddStringToObject(j, "tag", tag);
    else
        cJSON_AddNullToObject(j, "tag");
    cJSON_AddStringToObject(j, "root", s->root);
    cJSON_AddStringToObject(j, "store", s->store);
    cJSON_AddNumberToObject(j, "files", (double)c.files);
    cJSON_AddNumberToObject(j, "dirs", (double)c.dirs);
    cJSON_AddNumberToObject(j, "symlinks", (double)c.links);
    cJSON_AddNumberToObject(j, "bytes", (double)c.bytes);
    cJSON_AddNumberToObject(j, "format", 1);
    char *json = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!json)
        return sp_err_set(err, SP_ERROR, ENOMEM, "out of memory");

    char thex[41];
    sp_oid_hex(tree, thex);
    sp_buf b = SP_BUF_INIT;
    sp_buf_printf(&b, "tree %s\n", thex);
    sp_buf_printf(&b, "author sandpod <sandpod@localhost> %lld +0000\n", (long long)ts.tv_sec);
    sp_buf_printf(&b, "committer sandpod <sandpod@localhost> %lld +0000\n\n", (long long)ts.tv_sec);
    /* The subject line is for people reading the store with git. */
    sp_buf_adds(&b, "sandpod snapshot ");
    for (const char *p = tag ? tag : id; *p; p++)
        sp_buf_addc(&b, *p == '\n' ? ' ' : *p);
    sp_buf_adds(&b, "\n\n");
    sp_buf_adds(&b, json);
    sp_buf_addc(&b, '\n');
    cJSON_free(json);

    sp_oid commit;
    int r = sp_odb_write(&s->odb, SP_OBJ_COMMIT, b.data, b.len, &commit, err);
    sp_buf_dispose(&b);
    if (r < 0)
        return r;
    /* Everything the ref reaches must be on disk before the ref is. */
    if (s->opts.durable && (r = sp_odb_sync(&s->odb, err)) < 0)
        return r;
    cleanup_free char *ref = sp_xasprintf(SNAP_REF_PREFIX "%s", id);
    if ((r = sp_ref_create(&s->odb, ref, &commit, err)) < 0)
        return r;
    if (s->opts.durable) {
        int rfd = openat(s->odb.dirfd, SNAP_REF_PREFIX, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rfd < 0 || fsync(rfd) < 0)
            r = sp_err_errno(err, errno, "sync", SNAP_REF_PREFIX);
        if (rfd >= 0)
            close(rfd);
        if (r < 0)
            return r;
    }
    if (out) {
        sp_snapshot *snap = sp_xcalloc(1, sizeof(*snap));
        snap->id = steal_pointer(&id);
        snap->tag = tag ? sp_xstrdup(tag) : NULL;
        char chex[41];
        sp_oid_hex(&commit, chex);
        snap->commit = sp_xstrdup(chex);
        snap->root = sp_xstrdup(s->root);
        snap->store = sp_xstrdup(s->store);
        snap->created_at = steal_pointer(&at);
        snap->created_at_ns = ns;
        snap->files = c.files;
        snap->dirs = c.dirs;
        snap->symlinks = c.links;
        snap->bytes = c.bytes;
        *out = snap;
    }
    return 0;
}

static int cmp_snap(const void *a, const void *b)
{
    const sp_snapshot *x = *(sp_snapshot *const *)a, *y = *(sp_snapshot *const *)b;
    if (x->created_at_ns != y->created_at_ns)
        return x->created_at_ns < y->created_at_ns ? -1 : 1;
    return strcmp(x->id, y->id);
}

static int list_all(sp_snapshots **out, sp_snapstore *s, sp_error **err)
{
    *out = NULL;
    sp_refent *refs = NULL;
    size_t n = 0;
    int r = sp_ref_list(&s->odb, SNAP_REF_PREFIX, &refs, &n, err);
    if (r < 0)
        return r;
    sp_snapshots *l = sp_xcalloc(1, sizeof(*l));
    l->v = sp_xcalloc(n ? n : 1, sizeof(sp_snapshot *));
    for (size_t i = 0; i < n; i++) {
        const char *id = refs[i].name + strlen(SNAP_REF_PREFIX);
        sp_snapshot *snap = NULL;
        /* A damaged record is left out of the list rather than failing it. */
        if (load_record(&snap, &s->odb, id, &refs[i].id, NULL) == 0)
            l->v[l->n++] = snap;
    }
    sp_refents_free(refs, n);
    if (l->n > 1)
        qsort(l->v, l->n, sizeof(sp_snapshot *), cmp_snap);
    *out = l;
    return 0;
}

int sp_snapshot_list(sp_snapshots **out, sp_snapstore *s, sp_error **err)
{
    return list_all(out, s, err);
}

static bool is_prefix_ci(const char *pre, const char *s)
{
    for (; *pre; pre++, s++) {
        char a = *pre, b = *s;
        if (a >= 'A' && a <= 'F')
            a = (char)(a - 'A' + 'a');
        if (a != b)
            return false;
    }
    return true;
}

static int ambiguous(sp_error **err, const char *ref, const char *what, sp_snapshot **c, size_t n)
{
    sp_buf b = SP_BUF_INIT;
    for (size_t i = 0; i < n && i < 10; i++) {
        sp_buf_printf(&b, "%s%s %.12s", i ? ", " : "", c[i]->id, c[i]->commit);
        if (c[i]->tag)
            sp_buf_printf(&b, " (%s)", c[i]->tag);
    }
    if (n > 10)
        sp_buf_printf(&b, ", and %zu more", n - 10);
    int r = sp_err_set(err, SP_EINVAL, 0, "'%s' %s %zu snapshots: %s", ref, what, n,
                       b.data ? b.data : "");
    sp_buf_dispose(&b);
    return r;
}

int sp_snap_resolve(sp_snapshot **out, sp_snapstore *s, const char *ref, sp_error **err)
{
    *out = NULL;
    if (!ref || !*ref)
        return sp_err_set(err, SP_EINVAL, 0, "snapshot name is missing");
    if (is_uuid(ref)) {
        /* The common case for programs: one ref, no need to read every
         * record (a packed ref is found by the listing below). */
        cleanup_free char *name = sp_xasprintf(SNAP_REF_PREFIX "%s", ref);
        sp_oid commit;
        if (sp_ref_read_loose(&s->odb, name, &commit, NULL) == 0)
            return load_record(out, &s->odb, ref, &commit, err);
    }
    sp_snapshots *l = NULL;
    int r = list_all(&l, s, err);
    if (r < 0)
        return r;
    sp_snapshot **c = sp_xcalloc(l->n + 1, sizeof(*c));
    size_t nc = 0;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i]->id, ref) == 0)
            c[nc++] = l->v[i];
    if (nc == 0)
        for (size_t i = 0; i < l->n; i++)
            if (l->v[i]->tag && strcmp(l->v[i]->tag, ref) == 0)
                c[nc++] = l->v[i];
    if (nc > 1) {
        r = ambiguous(err, ref, "tags", c, nc);
        goto done;
    }
    if (nc == 0 && strlen(ref) >= 4) {
        for (size_t i = 0; i < l->n; i++)
            if (is_prefix_ci(ref, l->v[i]->id) || is_prefix_ci(ref, l->v[i]->commit))
                c[nc++] = l->v[i];
        if (nc > 1) {
            r = ambiguous(err, ref, "is a prefix of", c, nc);
            goto done;
        }
    }
    if (nc == 0) {
        r = sp_err_set(err, SP_ENOTFOUND, 0, "no snapshot '%s' in %s", ref, s->store);
        goto done;
    }
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i] == c[0]) {
            *out = l->v[i];
            l->v[i] = NULL;
        }
    }
done:
    free(c);
    for (size_t i = 0; i < l->n; i++)
        sp_snapshot_free(l->v[i]);
    l->n = 0;
    sp_snapshots_free(l);
    return r;
}

int sp_snapshot_get(sp_snapshot **out, sp_snapstore *s, const char *ref, sp_error **err)
{
    return sp_snap_resolve(out, s, ref, err);
}
