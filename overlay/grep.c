/* sp_fs_grep(): content search over the contained filesystem.
 *
 * Each regular file is read whole and the regex runs over the whole buffer
 * (PCRE2, JIT when available): far faster than matching line by line, since
 * the matcher skips through non-matching text with its own start-of-match
 * optimizations. Lines are only located around actual matches. A pattern
 * those optimizations cannot help (`\w+_t\b`; a case-insensitive `s` or
 * `k` first, which have non-ASCII partners) but that needs some literal is
 * searched for the literal first, and the regex runs on its lines alone
 * (grep_literal.h).
 *
 * One thread walks (folders, ignore files, globs) and queues the files to
 * search; worker threads open, read and search them, as rg does: on two
 * cores a search over many files takes about half the time. Files are numbered in
 * walk order and their matches taken in that order, so the answer, where a
 * max_matches limit cuts it and the counts are those of a walk on one
 * thread. */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <fcntl.h>
#include <pcre2.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_internal.h"
#include "grep_literal.h"
#include "ignore.h"

/* Bigger files are skipped: a workspace may hold datasets or disk images
 * that nobody means to grep, and each file is read whole. */
#define GREP_MAX_FILE_BYTES ((size_t)64 << 20)
/* A NUL byte in this prefix marks a file as binary (the heuristic of git
 * and GNU grep). */
#define GREP_BINARY_PROBE  8192
#define GREP_DEFAULT_MAX   1000
#define GREP_JIT_STACK_MAX ((size_t)1 << 20)
/* Workers beside the walking thread: enough for a workstation; each holds
 * a read buffer as big as the largest file it met (see GREP_KEEP_BUF). */
#define GREP_MAX_WORKERS 7
/* Files queued and not yet taken into the answer (each holds its folder's
 * fd until searched, its matches after): the walk runs at most this far
 * ahead, and holds at most this many folder fds for the searchers. */
#define GREP_RING 128
/* Jobs handed over at a time, each way: one lock per file made the two
 * threads of a 2-CPU machine wait on each other (futex calls, switches). */
#define GREP_BATCH 8
/* A read buffer grown past this is given back after its file. */
#define GREP_KEEP_BUF ((size_t)16 << 20)

/* One `-g` glob. */
typedef struct override {
    sp_glob *g;
    bool negated;
    bool by_name; /* no '/': matches names at any depth, as in rg */
} override;

/* What one searching thread owns: PCRE2's match data, match context and
 * JIT stack cannot be shared between threads, and the read buffer is kept
 * from file to file. */
typedef struct searcher {
    pcre2_match_data *md;
    pcre2_match_data *lit_md; /* for lit_re */
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    sp_buf buf;
} searcher;

/* A folder of the walk, for the searchers to open its files from: the
 * walking thread's own fd is closed once the walk leaves the folder, so
 * the first file queued from it takes a dup; the last user closes it. */
typedef struct dir_ref {
    int fd;
    atomic_int refs;
} dir_ref;

static void dir_release(dir_ref *d)
{
    if (d && atomic_fetch_sub(&d->refs, 1) == 1) {
        close(d->fd);
        free(d);
    }
}

/* One file to search, in walk order, and what its search found. */
typedef struct grep_job {
    int fd;       /* the open file, or -1: open `rel`'s last name in dir */
    dir_ref *dir; /* held until the file is open */
    char *rel;    /* path relative to the root */
    /* The walk's own counts when the file was queued: a search cut short
     * by max_matches at this file reports these. */
    size_t walk_ignored, walk_skipped;
    sp_fs_match *v; /* at most max_matches */
    size_t n, cap;
    bool over;        /* the file holds more than max_matches matches */
    bool searched;    /* text, searched */
    bool skipped;     /* binary, too big or unreadable */
    atomic_bool done; /* set last by its searcher: the rest is ready */
} grep_job;

typedef struct grep_ctx grep_ctx;

typedef struct worker {
    grep_ctx *g;
    searcher sr;
    pthread_t th;
} worker;

struct grep_ctx {
    sp_fs *fs;
    const char *base; /* normalized folder searched, "." = the root */
    size_t base_len;  /* bytes of "base/" to strip from walker paths */
    override *ov;
    size_t n_ov;
    bool any_include;   /* some glob without '!': unmatched files are left out */
    bool prune_by_path; /* every glob without '!' has a '/': folders can be pruned */
    bool hidden;        /* search names starting with '.' */
    sp_ignore *ig;      /* NULL: ignore files are not read */
    bool spans_lines;   /* the pattern names a newline: matches may run over lines */
    pcre2_code *re;
    /* A literal that every match holds (grep_literal.h), compiled as
     * bytes, or NULL: only the lines holding it are given to `re`. */
    pcre2_code *lit_re;
    size_t max_matches;
    size_t line_max;
    sp_fs_matches *res;
    size_t cap;
    size_t walk_ignored, walk_skipped; /* counted by the walk, not yet in res */
    searcher own;                      /* the walking thread searches too when the queue is full */
    dir_ref **dirs;                    /* by folder depth: the folders the walk is in */
    size_t n_dirs;

    /* The queue, a ring of jobs in walk order. Only the walking thread
     * fills slots (up to `filled`) and takes results (from `head`, in
     * order); it hands filled jobs over in batches by moving `tail`, and
     * searchers take them from `next` (both under mu). A searcher marks a
     * job done last, without the lock. */
    pthread_mutex_t mu;
    pthread_cond_t work;     /* jobs handed over, or closing */
    pthread_cond_t finished; /* a job is done while the walker waits */
    grep_job ring[GREP_RING];
    size_t head, filled, published; /* the walking thread's own */
    size_t next, tail;              /* under mu */
    atomic_size_t sleepers;         /* searchers waiting for work */
    atomic_bool walker_waits;       /* the walking thread waits for `head` */
    bool closing;                   /* under mu: no more jobs */
    atomic_bool stop;               /* max_matches passed: the rest is not searched */
    worker *w;
    size_t n_workers, n_started;
};

void sp_fs_matches_free(sp_fs_matches *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].path);
        free(m->v[i].line);
    }
    free(m->v);
    free(m);
}

static int match_cmp(const void *a, const void *b)
{
    const sp_fs_match *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    return (x->line_number > y->line_number) - (x->line_number < y->line_number);
}

/* Newlines in p[0..n), eight bytes at a time: a memchr per line costs more
 * than the search itself when matches are dense (a line number is counted
 * for each). */
static size_t count_newlines(const char *p, size_t n)
{
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    size_t count = 0;
    while (n >= 8) {
        /* Up to 255 words per round: each byte of acc counts in one lane. */
        uint64_t acc = 0;
        size_t words = n / 8 < 255 ? n / 8 : 255;
        for (size_t i = 0; i < words; i++, p += 8) {
            uint64_t x;
            memcpy(&x, p, 8);
            x ^= ones * '\n'; /* a newline byte is now zero */
            uint64_t t = ((x & ~high) + ~high) | x;
            acc += (~t & high) >> 7;
        }
        /* Lanes to 16 bits, then their sum in the top 16 bits. */
        acc = (acc & 0x00ff00ff00ff00ffu) + ((acc >> 8) & 0x00ff00ff00ff00ffu);
        count += (size_t)((acc * 0x0001000100010001u) >> 48);
        n -= words * 8;
    }
    while (n--)
        count += *p++ == '\n';
    return count;
}

/* Record one match of the file; false once the file holds more than
 * max_matches, which proves the answer truncated whatever comes before. */
static bool add_match(const grep_ctx *g, grep_job *j, size_t line_number, const char *line,
                      size_t line_len, size_t ms, size_t me, uint64_t byte_offset)
{
    if (j->n >= g->max_matches) {
        j->over = true;
        return false;
    }
    if (j->n == j->cap) {
        j->cap = j->cap ? j->cap * 2 : 16;
        j->v = sp_xrealloc(j->v, j->cap * sizeof(*j->v));
    }
    size_t cut = sp_utf8_cut(line, line_len, g->line_max);
    if (ms > cut)
        ms = cut;
    if (me > cut)
        me = cut;
    if (me < ms)
        me = ms;
    sp_fs_match *m = &j->v[j->n++];
    m->path = sp_xstrdup(j->rel);
    m->line_number = line_number;
    m->line = sp_xstrndup(line, cut);
    m->match_start = ms;
    m->match_end = me;
    m->byte_offset = byte_offset;
    return true;
}

/* Run the regex over a whole file's bytes, into the file's job. */
static void scan_buffer(const grep_ctx *g, searcher *sr, grep_job *j, const char *buf, size_t len,
                        uint64_t off0)
{
    size_t pos = 0;     /* where the next search starts: always a line start */
    size_t counted = 0; /* newlines before this offset are in line_number */
    size_t line_number = 1;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sr->md);

    while (pos < len) {
        int rc = pcre2_match(g->re, (PCRE2_SPTR)buf, len, pos, 0, sr->md, sr->mctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            /* Match or heap limit hit on a pathological pattern: keep what
             * was found and call the file skipped. */
            j->skipped = true;
            break;
        }
        size_t s = ov[0], e = ov[1];
        if (e < s)
            e = s;
        /* Matches are per line, as in grep and rg: a match that runs over
         * a newline (`\s`, `[^x]`) is tried again within its first line
         * alone, and the search goes on from the next line if it fails.
         * A pattern that names a newline itself (`\n`) may span lines. */
        if (!g->spans_lines && e > s && memchr(buf + s, '\n', e - s)) {
            const char *lb = s > pos ? memrchr(buf + pos, '\n', s - pos) : NULL;
            size_t ls = lb ? (size_t)(lb - buf) + 1 : pos;
            const char *nlp = memchr(buf + s, '\n', len - s);
            size_t le = nlp ? (size_t)(nlp - buf) : len;
            rc = pcre2_match(g->re, (PCRE2_SPTR)buf, le, ls, 0, sr->md, sr->mctx);
            if (rc < 0) {
                pos = le + 1;
                continue;
            }
            s = ov[0];
            e = ov[1] < s ? s : ov[1];
        }
        /* An empty match after the final newline is not on any line. */
        if (s >= len && buf[len - 1] == '\n')
            break;

        const char *nl = s > pos ? memrchr(buf + pos, '\n', s - pos) : NULL;
        size_t line_start = nl ? (size_t)(nl - buf) + 1 : pos;
        line_number += count_newlines(buf + counted, line_start - counted);
        counted = line_start;
        nl = memchr(buf + s, '\n', len - s);
        size_t line_end = nl ? (size_t)(nl - buf) : len;

        if (!add_match(g, j, line_number, buf + line_start, line_end - line_start, s - line_start,
                       (e < line_end ? e : line_end) - line_start, off0 + s))
            return;
        /* One match per line: resume at the next line, which also ends
         * the loop for empty matches. */
        pos = line_end + 1;
    }
}

/* The search with a required literal: find the literal, give its line
 * alone to the regex (the subject ends at the line's end and the search
 * starts at the line's start, so \b and ^ still see the byte before), go
 * on after that line. The same answer as scan_buffer for a pattern that
 * needs the literal, without trying the regex at every byte. */
static void scan_lines(const grep_ctx *g, searcher *sr, grep_job *j, const char *buf, size_t len,
                       uint64_t off0)
{
    size_t pos = 0;     /* where the next search starts: always a line start */
    size_t counted = 0; /* newlines before this offset are in line_number */
    size_t line_number = 1;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sr->md);
    PCRE2_SIZE *lov = pcre2_get_ovector_pointer(sr->lit_md);

    while (pos < len) {
        int rc = pcre2_match(g->lit_re, (PCRE2_SPTR)buf, len, pos, 0, sr->lit_md, sr->mctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            j->skipped = true;
            break;
        }
        size_t at = lov[0];
        const char *nl = at > pos ? memrchr(buf + pos, '\n', at - pos) : NULL;
        size_t ls = nl ? (size_t)(nl - buf) + 1 : pos;
        nl = memchr(buf + at, '\n', len - at);
        size_t le = nl ? (size_t)(nl - buf) : len;
        rc = pcre2_match(g->re, (PCRE2_SPTR)buf, le, ls, 0, sr->md, sr->mctx);
        if (rc >= 0) {
            size_t s = ov[0], e = ov[1] < s ? s : ov[1];
            line_number += count_newlines(buf + counted, ls - counted);
            counted = ls;
            if (!add_match(g, j, line_number, buf + ls, le - ls, s - ls, e - ls, off0 + s))
                return;
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            j->skipped = true; /* as in scan_buffer */
            break;
        }
        pos = le + 1;
    }
}

/* Read a whole regular file of `size` bytes (per fstat) into `b`, which
 * is reused from file to file: pages that stay mapped cost nothing to fill
 * again, while a fresh buffer per file pays a page fault per 4 KiB (and
 * more under a hypervisor). One read(2) is enough for a file that does not
 * change meanwhile: a short read at or past the size means the end. At
 * most `limit` bytes are kept. Returns -1 on a read error. */
static int read_file(sp_buf *b, int fd, size_t size, size_t limit)
{
    b->len = 0;
    sp_buf_grow(b, (size < limit ? size : limit) + 1);
    for (;;) {
        size_t want = b->cap - 1 - b->len;
        if (want == 0) {
            if (b->len >= limit)
                break;
            sp_buf_grow(b, b->len < 65536 ? 65536 : b->len);
            want = b->cap - 1 - b->len;
        }
        if (want > limit - b->len)
            want = limit - b->len;
        if (want == 0)
            break;
        ssize_t n = read(fd, b->data + b->len, want);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        b->len += (size_t)n;
        if (n == 0 || ((size_t)n < want && b->len >= size))
            break;
    }
    b->data[b->len] = '\0';
    return 0;
}

/* Search the job's file with this thread's searcher; closes its fd. */
static void search_job(const grep_ctx *g, searcher *sr, grep_job *j)
{
    cleanup_close int fd = j->fd;
    j->fd = -1;
    if (j->dir) {
        /* O_NOFOLLOW + the fstat below: the entry may have been swapped
         * for a symlink or a fifo since it was listed. Gone or now a
         * symlink: as if the listing had not shown it. */
        const char *slash = strrchr(j->rel, '/');
        fd = openat(j->dir->fd, slash ? slash + 1 : j->rel,
                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        int e = errno;
        dir_release(j->dir);
        j->dir = NULL;
        if (fd < 0) {
            j->skipped = e != ENOENT && e != ELOOP;
            return;
        }
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    if ((uint64_t)st.st_size > GREP_MAX_FILE_BYTES) {
        j->skipped = true;
        return;
    }

    sp_buf *buf = &sr->buf;
    int r = read_file(buf, fd, (size_t)st.st_size, GREP_MAX_FILE_BYTES);
    size_t probe = buf->len < GREP_BINARY_PROBE ? buf->len : GREP_BINARY_PROBE;
    if (r < 0 || (probe && memchr(buf->data, '\0', probe))) {
        j->skipped = true;
    } else {
        j->searched = true;
        /* rg drops a UTF-8 byte order mark when it decodes: `^` then
         * matches line 1, and the line shown has no mark. Offsets stay
         * file offsets. */
        size_t bom = buf->len >= 3 && memcmp(buf->data, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
        if (buf->len > bom && g->lit_re)
            scan_lines(g, sr, j, buf->data + bom, buf->len - bom, bom);
        else if (buf->len > bom)
            scan_buffer(g, sr, j, buf->data + bom, buf->len - bom, bom);
    }
    if (buf->cap > GREP_KEEP_BUF)
        sp_buf_dispose(buf);
}

static void job_dispose(grep_job *j)
{
    if (j->fd >= 0)
        close(j->fd);
    dir_release(j->dir);
    for (size_t i = 0; i < j->n; i++) {
        free(j->v[i].path);
        free(j->v[i].line);
    }
    free(j->v);
    free(j->rel);
    *j = (grep_job){.fd = -1};
}

/* Take the results of job `j`, the oldest not yet taken, into the answer;
 * sets g->stop once it passes max_matches. The walking thread's. */
static void commit_job(grep_ctx *g, grep_job *j)
{
    sp_fs_matches *res = g->res;
    res->files_searched += j->searched;
    res->files_skipped += j->skipped;
    size_t take = g->max_matches - res->n;
    if (take > j->n)
        take = j->n;
    if (res->n + take > g->cap) {
        while (g->cap < res->n + take)
            g->cap = g->cap ? g->cap * 2 : 64;
        res->v = sp_xrealloc(res->v, g->cap * sizeof(*res->v));
    }
    if (take) { /* memcpy with NULLs is undefined even for 0 bytes */
        memcpy(res->v + res->n, j->v, take * sizeof(*j->v));
        res->n += take;
        memmove(j->v, j->v + take, (j->n - take) * sizeof(*j->v));
        j->n -= take;
    }
    if (j->n || j->over) {
        /* As a walk on one thread would have stopped here. */
        res->truncated = true;
        atomic_store(&g->stop, true);
        res->ignored = j->walk_ignored;
        res->files_skipped += j->walk_skipped;
    }
    job_dispose(j);
}

/* Take the results of the finished jobs at the head of the queue. */
static void commit_done(grep_ctx *g)
{
    while (g->head < g->filled && !atomic_load_explicit(&g->stop, memory_order_relaxed)) {
        grep_job *j = &g->ring[g->head % GREP_RING];
        if (!atomic_load_explicit(&j->done, memory_order_acquire))
            break;
        commit_job(g, j);
        g->head++;
    }
}

/* Search job `j` (unless the search has stopped) and mark it done; the
 * job is not touched after. Wakes the walking thread if it waits. */
static void run_job(grep_ctx *g, searcher *sr, grep_job *j)
{
    if (!atomic_load_explicit(&g->stop, memory_order_relaxed))
        search_job(g, sr, j);
    /* seq_cst with wait_head(): either the walker sees the job done or
     * this thread sees it waiting. */
    atomic_store(&j->done, true);
    if (atomic_load(&g->walker_waits)) {
        pthread_mutex_lock(&g->mu);
        pthread_cond_signal(&g->finished);
        pthread_mutex_unlock(&g->mu);
    }
}

/* Hand the filled jobs over to the searchers. */
static void publish(grep_ctx *g)
{
    if (g->published == g->filled)
        return;
    pthread_mutex_lock(&g->mu);
    g->tail = g->filled;
    if (atomic_load(&g->sleepers))
        pthread_cond_broadcast(&g->work);
    pthread_mutex_unlock(&g->mu);
    g->published = g->filled;
}

/* The walking thread searches one waiting job; false when none waits. */
static bool help_one(grep_ctx *g)
{
    pthread_mutex_lock(&g->mu);
    grep_job *j = g->next < g->tail ? &g->ring[g->next++ % GREP_RING] : NULL;
    pthread_mutex_unlock(&g->mu);
    if (j)
        run_job(g, &g->own, j);
    return j != NULL;
}

/* The walking thread waits until the job at head is done. */
static void wait_head(grep_ctx *g)
{
    grep_job *j = &g->ring[g->head % GREP_RING];
    pthread_mutex_lock(&g->mu);
    atomic_store(&g->walker_waits, true);
    while (!atomic_load(&j->done))
        pthread_cond_wait(&g->finished, &g->mu);
    atomic_store(&g->walker_waits, false);
    pthread_mutex_unlock(&g->mu);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    grep_ctx *g = w->g;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (g->next == g->tail && !g->closing) {
            atomic_fetch_add(&g->sleepers, 1);
            pthread_cond_wait(&g->work, &g->mu);
            atomic_fetch_sub(&g->sleepers, 1);
        }
        if (g->next == g->tail)
            break;
        /* A share of what waits, so that other searchers get some. */
        size_t waiting = g->tail - g->next;
        size_t take = (waiting + g->n_started) / (g->n_started + 1);
        if (take > GREP_BATCH)
            take = GREP_BATCH;
        size_t first = g->next;
        g->next += take;
        pthread_mutex_unlock(&g->mu);
        for (size_t i = first; i < first + take; i++)
            run_job(g, &w->sr, &g->ring[i % GREP_RING]);
        pthread_mutex_lock(&g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static bool searcher_init(searcher *sr, const pcre2_code *re)
{
    sr->md = pcre2_match_data_create_from_pattern(re, NULL);
    sr->lit_md = pcre2_match_data_create(1, NULL);
    sr->mctx = pcre2_match_context_create(NULL);
    if (!sr->md || !sr->lit_md || !sr->mctx)
        return false;
    /* The default 32 KiB JIT stack is too small for some patterns that the
     * interpreter handles; grow on demand up to 1 MiB. */
    sr->jit_stack = pcre2_jit_stack_create(32 * 1024, GREP_JIT_STACK_MAX, NULL);
    if (sr->jit_stack)
        pcre2_jit_stack_assign(sr->mctx, NULL, sr->jit_stack);
    return true;
}

static void searcher_dispose(searcher *sr)
{
    pcre2_match_context_free(sr->mctx);
    pcre2_jit_stack_free(sr->jit_stack);
    pcre2_match_data_free(sr->md);
    pcre2_match_data_free(sr->lit_md);
    sp_buf_dispose(&sr->buf);
    *sr = (searcher){0};
}

/* The CPUs this process may run on. */
static size_t cpus_usable(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        return (size_t)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (size_t)n : 1;
}

/* Start the workers, the first time there is a file to search. A worker
 * that cannot start leaves its share to the others and the walker. */
static void start_workers(grep_ctx *g)
{
    if (g->w || !g->n_workers)
        return;
    g->w = sp_xcalloc(g->n_workers, sizeof(*g->w));
    /* The threads take no signals: they belong to the program. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (size_t i = 0; i < g->n_workers; i++) {
        worker *w = &g->w[g->n_started];
        w->g = g;
        if (!searcher_init(&w->sr, g->re)) {
            searcher_dispose(&w->sr);
            break;
        }
        /* n_started before the thread reads it (worker_main's share). */
        pthread_mutex_lock(&g->mu);
        g->n_started++;
        bool ok = pthread_create(&w->th, NULL, worker_main, w) == 0;
        if (!ok)
            g->n_started--;
        pthread_mutex_unlock(&g->mu);
        if (!ok) {
            searcher_dispose(&w->sr);
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The shared fd of the folder at `depth` (open as dirfd), or NULL. */
static dir_ref *dir_at(grep_ctx *g, int dirfd, unsigned depth)
{
    if (depth >= g->n_dirs) {
        size_t n = depth + 16;
        g->dirs = sp_xrealloc(g->dirs, n * sizeof(*g->dirs));
        memset(g->dirs + g->n_dirs, 0, (n - g->n_dirs) * sizeof(*g->dirs));
        g->n_dirs = n;
    }
    if (!g->dirs[depth]) {
        int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
            return NULL;
        dir_ref *d = sp_xmalloc(sizeof(*d));
        d->fd = fd;
        atomic_init(&d->refs, 1); /* the walk's own hold */
        g->dirs[depth] = d;
    }
    return g->dirs[depth];
}

/* The walk has left the folders at `depth` and deeper. */
static void dirs_leave(grep_ctx *g, unsigned depth)
{
    for (size_t i = depth; i < g->n_dirs; i++) {
        dir_release(g->dirs[i]);
        g->dirs[i] = NULL;
    }
}

/* Queue the file `name` of folder dirfd (at `depth`, the file's) for a
 * search; or, with `fd` >= 0, that open file (taken over). */
static int queue_file(grep_ctx *g, int fd, int dirfd, const char *name, const char *rel,
                      unsigned depth)
{
    start_workers(g);
    if (!g->n_started && fd < 0) {
        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
            /* As in search_job. */
            if (errno != ENOENT && errno != ELOOP)
                g->walk_skipped++;
            return SP_WALK_CONTINUE;
        }
    }
    if (!g->n_started) {
        /* No worker: search it here and now. */
        grep_job j = {.fd = fd, .rel = sp_xstrdup(rel)};
        j.walk_ignored = g->walk_ignored;
        j.walk_skipped = g->walk_skipped;
        search_job(g, &g->own, &j);
        commit_job(g, &j);
        return atomic_load(&g->stop) ? SP_WALK_STOP : SP_WALK_CONTINUE;
    }
    dir_ref *dir = NULL;
    if (fd < 0 && !(dir = dir_at(g, dirfd, depth - 1))) {
        g->walk_skipped++; /* out of fds */
        return SP_WALK_CONTINUE;
    }
    for (;;) {
        commit_done(g);
        if (atomic_load(&g->stop) || g->filled - g->head < GREP_RING)
            break;
        /* Full: search a waiting file here, or wait for the oldest. */
        publish(g);
        if (!help_one(g))
            wait_head(g);
    }
    if (atomic_load(&g->stop)) {
        if (fd >= 0)
            close(fd);
        return SP_WALK_STOP;
    }
    grep_job *j = &g->ring[g->filled % GREP_RING];
    j->fd = fd;
    if (dir)
        atomic_fetch_add(&dir->refs, 1);
    j->dir = dir;
    j->rel = sp_xstrdup(rel);
    j->walk_ignored = g->walk_ignored;
    j->walk_skipped = g->walk_skipped;
    atomic_init(&j->done, false);
    g->filled++;
    if (g->filled - g->published >= GREP_BATCH || atomic_load(&g->sleepers))
        publish(g);
    return SP_WALK_CONTINUE;
}

/* The walk is over (or stopped): search what waits, take every result,
 * and let the workers go. */
static void finish_queue(grep_ctx *g)
{
    if (g->w) {
        publish(g);
        pthread_mutex_lock(&g->mu);
        g->closing = true;
        pthread_cond_broadcast(&g->work);
        pthread_mutex_unlock(&g->mu);
        for (;;) {
            commit_done(g);
            if (g->head == g->filled || atomic_load(&g->stop))
                break;
            if (!help_one(g))
                wait_head(g);
        }
        /* Stopped: what waits is not searched; the workers finish the
         * file they are on. */
        pthread_mutex_lock(&g->mu);
        g->next = g->tail;
        pthread_mutex_unlock(&g->mu);
        for (size_t i = 0; i < g->n_started; i++) {
            pthread_join(g->w[i].th, NULL);
            searcher_dispose(&g->w[i].sr);
        }
        free(g->w);
        g->w = NULL;
        g->n_started = 0;
    }
    for (; g->head < g->filled; g->head++)
        job_dispose(&g->ring[g->head % GREP_RING]);
    dirs_leave(g, 0);
    free(g->dirs);
    g->dirs = NULL;
    g->n_dirs = 0;
    if (g->res && !g->res->truncated) {
        g->res->ignored += g->walk_ignored;
        g->res->files_skipped += g->walk_skipped;
    }
    g->walk_ignored = g->walk_skipped = 0;
}

/* The part of a walker path below the searched folder. */
static const char *below_base(const grep_ctx *g, const char *rel)
{
    if (g->base_len && strncmp(rel, g->base, g->base_len - 1) == 0 && rel[g->base_len - 1] == '/')
        return rel + g->base_len;
    return rel;
}

enum { OV_NONE, OV_EXCLUDE, OV_INCLUDE };

/* rg's override rule: the last glob that matches decides; a file that no
 * glob matches is out when there are include globs. */
static int override_match(const grep_ctx *g, const char *name, const char *sub, bool is_dir)
{
    for (size_t i = g->n_ov; i-- > 0;) {
        const override *o = &g->ov[i];
        if (sp_glob_match_entry(o->g, o->by_name ? name : sub, is_dir))
            return o->negated ? OV_EXCLUDE : OV_INCLUDE;
    }
    return g->any_include && !is_dir ? OV_EXCLUDE : OV_NONE;
}

/* No include glob could match anything below folder `sub`. */
static bool prune_dir(const grep_ctx *g, const char *sub)
{
    if (!g->prune_by_path)
        return false;
    for (size_t i = 0; i < g->n_ov; i++)
        if (!g->ov[i].negated && sp_glob_could_match_below(g->ov[i].g, sub))
            return false;
    return true;
}

/* The walk reads a folder: its ignore files apply below it. */
static void grep_enter(void *ctx, int dfd, const char *rel, unsigned depth,
                       const struct sp_dirnames *names)
{
    grep_ctx *g = ctx;
    dirs_leave(g, depth);
    if (g->ig)
        sp_ignore_push(g->ig, g->fs, dfd, rel, depth, names);
}

static int grep_visit(void *ctx, int dirfd, const char *name, const char *rel,
                      const struct stat *st, unsigned depth, sp_error **err)
{
    (void)err;
    grep_ctx *g = ctx;
    if (g->stop) /* only this thread sets it */
        return SP_WALK_STOP;
    bool is_dir = S_ISDIR(st->st_mode);
    int skip = is_dir ? SP_WALK_SKIP : SP_WALK_CONTINUE;
    const char *sub = below_base(g, rel);
    if (g->ig)
        sp_ignore_pop_to(g->ig, depth);
    int ov = override_match(g, name, sub, is_dir);
    if (ov == OV_EXCLUDE)
        return skip;
    /* As in rg, a glob that names an entry beats the hidden and ignore
     * rules. */
    if (ov == OV_NONE &&
        ((!g->hidden && name[0] == '.') || (g->ig && sp_ignore_match(g->ig, rel, is_dir)))) {
        g->walk_ignored++;
        return skip;
    }
    if (is_dir)
        return prune_dir(g, sub) ? SP_WALK_SKIP : SP_WALK_CONTINUE;
    /* Symlinks, fifos, sockets and devices are never opened. `st` has
     * only the type (type_only): the size is checked after the open. */
    if (!S_ISREG(st->st_mode))
        return SP_WALK_CONTINUE;
    /* Opened by its searcher, O_NOFOLLOW from this folder's fd. */
    return queue_file(g, -1, dirfd, name, rel, depth);
}

static int compile_regex(pcre2_code **out, const char *pattern, const sp_fs_grep_opts *o,
                         sp_error **err)
{
    /* MATCH_INVALID_UTF lets UTF mode search files holding invalid UTF-8
     * (they simply never match across the bad bytes) instead of failing. */
    /* UCP: \w, \d, \b and the POSIX classes follow Unicode properties,
     * as in rg's default engine (`\d` matches U+0663 ARABIC-INDIC THREE). */
    uint32_t flags = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
    if (o->fixed_string) /* LITERAL refuses MULTILINE and UCP; it needs neither */
        flags |= PCRE2_LITERAL;
    else
        flags |= PCRE2_MULTILINE | PCRE2_UCP;
    if (o->case_insensitive)
        flags |= PCRE2_CASELESS;

    pcre2_compile_context *cctx = pcre2_compile_context_create(NULL);
    if (!cctx)
        abort();
    pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
    int errcode = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, flags, &errcode, &erroff, cctx);
    pcre2_compile_context_free(cctx);
    if (!re) {
        PCRE2_UCHAR msg[256];
        if (pcre2_get_error_message(errcode, msg, sizeof(msg)) < 0)
            snprintf((char *)msg, sizeof(msg), "error %d", errcode);
        return sp_err_set(err, SP_EINVAL, 0, "invalid regex at offset %zu: %s", (size_t)erroff,
                          (const char *)msg);
    }
    /* No JIT on this platform or build: the interpreter gives the same
     * answers, only slower. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *out = re;
    return 0;
}

/* The prefilter for `pattern`, or NULL when it has no required literal
 * worth searching for (a single byte saves little over PCRE2's own
 * start-of-match search). */
static pcre2_code *compile_literal(const char *pattern, const sp_fs_grep_opts *o)
{
    sp_buf lit = SP_BUF_INIT;
    pcre2_code *re = NULL;
    if (sp_grep_required_literal(&lit, pattern, o->fixed_string, o->case_insensitive) &&
        lit.len >= 2) {
        /* Bytes, not UTF: ignoring case is then ASCII's rule, which the
         * literal was chosen for. */
        int errcode = 0;
        PCRE2_SIZE erroff = 0;
        re = pcre2_compile((PCRE2_SPTR)lit.data, lit.len,
                           PCRE2_LITERAL | (o->case_insensitive ? PCRE2_CASELESS : 0), &errcode,
                           &erroff, NULL);
        if (re)
            (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    }
    sp_buf_dispose(&lit);
    return re;
}

static int add_override(grep_ctx *g, const char *glob, sp_error **err)
{
    if (!glob || !*glob)
        return 0;
    bool negated = glob[0] == '!';
    const char *p = glob + negated;
    sp_glob *compiled = NULL;
    int r = sp_glob_compile(&compiled, p, err);
    if (r < 0)
        return sp_err_wrap(err, r, "grep glob");
    g->ov = sp_xrealloc(g->ov, (g->n_ov + 1) * sizeof(override));
    g->ov[g->n_ov++] = (override){compiled, negated, strchr(p, '/') == NULL};
    if (!negated) {
        g->prune_by_path = (g->any_include ? g->prune_by_path : true) && strchr(p, '/');
        g->any_include = true;
    }
    return 0;
}

static int compile_overrides(grep_ctx *g, const sp_fs_grep_opts *o, sp_error **err)
{
    int r = add_override(g, o->glob, err);
    for (size_t i = 0; r == 0 && o->globs && o->globs[i]; i++)
        r = add_override(g, o->globs[i], err);
    return r;
}

/* The ignore files of the root and of every folder down to the parent of
 * `rel` (the walk reads those of `rel` itself). */
static sp_ignore *load_parents(sp_fs *fs, const char *rel)
{
    sp_ignore *ig = sp_ignore_new();
    cleanup_free char *dir = sp_xstrdup(".");
    const char *p = strcmp(rel, ".") == 0 ? "" : rel;
    while (*p) {
        cleanup_close int dfd = sp_fs_openat(fs, dir, O_RDONLY | O_DIRECTORY, 0, true, NULL);
        if (dfd >= 0)
            sp_ignore_push(ig, fs, dfd, dir, 0, NULL);
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        cleanup_free char *name = sp_xstrndup(p, len);
        char *next = sp_path_join(dir, name);
        free(dir);
        dir = next;
        p = slash ? slash + 1 : p + len;
    }
    return ig;
}

int sp_fs_grep(sp_fs_matches **out, sp_fs *fs, const char *pattern, const sp_fs_grep_opts *opts,
               sp_error **err)
{
    if (SP_OPTS_CHECK(opts, 1, SP_FS_GREP_OPTS_VERSION, "sp_fs_grep_opts", err) < 0)
        return SP_EINVAL;
    sp_fs_grep_opts o_ = SP_FS_GREP_OPTS_INIT;
    if (opts && opts->version >= 2)
        o_ = *opts;
    else if (opts) /* version 1 ends before `globs` */
        memcpy(&o_, opts, offsetof(sp_fs_grep_opts, globs));
    const sp_fs_grep_opts *o = &o_;
    grep_ctx g = {0};
    bool queue = false;
    cleanup_free char *rel = NULL;
    int fd = -1;
    int r;

    if (out)
        *out = NULL;
    if (!out || !fs || !pattern)
        return sp_err_set(err, SP_EINVAL, 0, "grep: missing argument");

    g.res = sp_xcalloc(1, sizeof(*g.res));
    g.max_matches = o->max_matches ? o->max_matches : GREP_DEFAULT_MAX;
    g.line_max = fs->opts.max_line_bytes ? fs->opts.max_line_bytes : SP_FS_DEFAULT_LINE_BYTES;

    r = sp_fs_prepare(fs, o->path ? o->path : ".", &rel, err);
    if (r < 0)
        goto done;
    r = compile_overrides(&g, o, err);
    if (r < 0)
        goto done;
    g.spans_lines = strstr(pattern, "\\n") || strchr(pattern, '\n');
    r = compile_regex(&g.re, pattern, o, err);
    if (r < 0)
        goto done;
    if (!g.spans_lines)
        g.lit_re = compile_literal(pattern, o);
    if (!searcher_init(&g.own, g.re))
        abort();
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.work, NULL);
    pthread_cond_init(&g.finished, NULL);
    queue = true;

    /* The named path itself may be a symlink; sp_fs_openat follows it only
     * while it stays beneath the root. */
    fd = sp_fs_openat(fs, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, true, err);
    if (fd < 0) {
        r = fd;
        goto done;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        r = sp_err_errno(err, errno, "grep", rel);
        goto done;
    }
    if (S_ISREG(st.st_mode)) {
        /* A single file named outright: only the globs apply, to its name
         * (rg searches a named file whatever the ignore files say). */
        const char *slash = strrchr(rel, '/');
        const char *name = slash ? slash + 1 : rel;
        if (override_match(&g, name, name, false) != OV_EXCLUDE)
            (void)queue_file(&g, steal_fd(&fd), -1, NULL, rel, 0);
    } else if (S_ISDIR(st.st_mode)) {
        close(steal_fd(&fd));
        g.base = rel;
        g.base_len = strcmp(rel, ".") == 0 ? 0 : strlen(rel) + 1;
        g.fs = fs;
        g.hidden = o->hidden;
        if (!o->no_ignore)
            g.ig = load_parents(fs, rel);
        size_t cpus = cpus_usable();
        g.n_workers = cpus > GREP_MAX_WORKERS ? GREP_MAX_WORKERS : cpus - 1;
        sp_walk_opts wo = {
            .max_depth = 0, .skip_git = true, .enter = grep_enter, .type_only = true};
        r = sp_fs_walk(fs, rel, &wo, grep_visit, &g, err);
        finish_queue(&g);
        if (r < 0)
            goto done;
    } else {
        r = sp_err_set(err, SP_EINVAL, 0, "grep: not a file or folder: %s", rel);
        goto done;
    }

    finish_queue(&g);
    /* Walk order is already path order (walk.c), so this is a check. */
    for (size_t i = 1; i < g.res->n; i++) {
        if (match_cmp(&g.res->v[i - 1], &g.res->v[i]) > 0) {
            qsort(g.res->v, g.res->n, sizeof(*g.res->v), match_cmp);
            break;
        }
    }
    *out = steal_pointer(&g.res);
    r = 0;

done:
    if (fd >= 0)
        close(fd);
    if (queue) {
        finish_queue(&g);
        pthread_mutex_destroy(&g.mu);
        pthread_cond_destroy(&g.work);
        pthread_cond_destroy(&g.finished);
    }
    searcher_dispose(&g.own);
    pcre2_code_free(g.re);
    pcre2_code_free(g.lit_re);
    for (size_t i = 0; i < g.n_ov; i++)
        sp_glob_free(g.ov[i].g);
    free(g.ov);
    sp_ignore_free(g.ig);
    sp_fs_matches_free(g.res);
    return r;
}
