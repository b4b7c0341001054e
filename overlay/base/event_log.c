/* events.jsonl with a counter that survives processes (event_log.h). */
#include "event_log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json.h"

/* How far back the last record is looked for. */
#define TAIL_MAX ((size_t)1 << 20)

void sp_events_now(char *buf, size_t size)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

static uint64_t last_call_fd(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size <= 0)
        return 0;
    size_t size = (size_t)st.st_size;
    size_t len = size < TAIL_MAX ? size : TAIL_MAX;
    char *buf = sp_xmalloc(len + 1);
    ssize_t got = pread(fd, buf, len, (off_t)(size - len));
    uint64_t found = 0;
    if (got > 0) {
        /* Complete lines only, newest first: a torn last line is skipped. */
        size_t end = (size_t)got;
        while (end > 0 && buf[end - 1] != '\n')
            end--;
        while (end > 0 && !found) {
            size_t start = end - 1;
            while (start > 0 && buf[start - 1] != '\n')
                start--;
            cJSON *j = sp_json_parse(buf + start, end - 1 - start);
            int64_t n = sp_json_int(j, "call", 0);
            cJSON_Delete(j);
            if (n > 0)
                found = (uint64_t)n;
            end = start;
        }
    }
    free(buf);
    return found;
}

uint64_t sp_events_last_call(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    uint64_t n = last_call_fd(fd);
    close(fd);
    return n;
}

/* The sequence file's number, or 0 when it has none. */
static uint64_t read_seq(int sfd)
{
    char buf[32];
    ssize_t got = pread(sfd, buf, sizeof(buf) - 1, 0);
    if (got <= 0)
        return 0;
    buf[got] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno || end == buf || *end != '\n')
        return 0;
    return (uint64_t)v;
}

static void write_seq(int sfd, uint64_t n)
{
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", n);
    if (pwrite(sfd, buf, (size_t)len, 0) == len)
        (void)ftruncate(sfd, len);
}

/* Take the next number (under the lock): the sequence file's, else the
 * last complete record's, plus one. */
static uint64_t next_call(int fd, const char *path)
{
    cleanup_free char *seqpath = sp_xasprintf("%s.seq", path);
    cleanup_close int sfd = open(seqpath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    uint64_t last = sfd >= 0 ? read_seq(sfd) : 0;
    if (last == 0)
        last = last_call_fd(fd);
    if (sfd >= 0)
        write_seq(sfd, last + 1);
    return last + 1;
}

/* Write line as one record, closing a line a killed writer left
 * unfinished; one write, so readers never see half a line. */
static int write_line(int fd, const char *line)
{
    struct stat st;
    char lastc = '\n';
    if (fstat(fd, &st) == 0 && st.st_size > 0 && pread(fd, &lastc, 1, st.st_size - 1) != 1)
        lastc = '\n';
    sp_buf b = SP_BUF_INIT;
    if (lastc != '\n')
        sp_buf_addc(&b, '\n');
    sp_buf_adds(&b, line);
    sp_buf_addc(&b, '\n');
    int r = sp_write_all(fd, b.data, b.len);
    int e = errno;
    sp_buf_dispose(&b);
    errno = e;
    return r;
}

int sp_events_append(const char *path, uint64_t *call, sp_event_line_fn fn, void *ud,
                     sp_error **err)
{
    cleanup_close int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return sp_err_errno(err, errno, "open events", path);
    while (flock(fd, LOCK_EX) < 0) {
        if (errno != EINTR)
            return sp_err_errno(err, errno, "lock events", path);
    }
    if (*call == 0)
        *call = next_call(fd, path);
    cleanup_free char *line = fn(ud, *call);
    if (line && write_line(fd, line) < 0)
        return sp_err_errno(err, errno, "write events", path);
    return 0; /* closing fd drops the lock */
}
