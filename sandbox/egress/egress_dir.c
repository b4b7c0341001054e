/* The proxy's folders (egress_dir.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "egress_dir.h"
#include "egress_proxy.h"

char *sp_egress_policy_text(char *const *rules)
{
    sp_buf b = SP_BUF_INIT;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    sp_buf_printf(&b, SP_EGRESS_VERSION_LINE "%lld.%09ld-%d\n", (long long)now.tv_sec, now.tv_nsec,
                  (int)getpid());
    sp_buf_adds(&b, "# sandpod egress policy: written by sandpod, read by the proxy\n");
    for (char *const *r = rules; r && *r; r++)
        sp_buf_printf(&b, "%s\n", *r);
    return sp_buf_steal(&b);
}

int sp_egress_dir_write(const char *dir, const char *policy, size_t policy_len, const char *hosts,
                        size_t hosts_len, sp_error **err)
{
    cleanup_free char *pp = sp_xasprintf("%s/%s", dir, SP_EGRESS_POLICY);
    int r = sp_write_file_atomic(pp, policy, policy_len, 0644, err);
    if (r < 0 || !hosts)
        return r;
    cleanup_free char *hp = sp_xasprintf("%s/%s", dir, SP_EGRESS_HOSTS);
    return sp_write_file_atomic(hp, hosts, hosts_len, 0644, err);
}

/* The first line of path (without its newline) into buf; "" when
 * unreadable. Never a link followed; a fifo reads 0 at once. */
static void first_line(char *buf, size_t cap, const char *path)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

int sp_egress_wait_loaded(const char *dir, const char *run, int timeout_ms, sp_error **err)
{
    cleanup_free char *pp = sp_xasprintf("%s/%s", dir, SP_EGRESS_POLICY);
    cleanup_free char *lp = sp_xasprintf("%s/%s", run, SP_EGRESS_LOADED);
    char want[128];
    first_line(want, sizeof(want), pp);
    size_t k = strlen(SP_EGRESS_VERSION_LINE);
    if (strncmp(want, SP_EGRESS_VERSION_LINE, k) != 0)
        return sp_err_set(err, SP_EINVAL, 0, "%s has no version line", pp);
    for (int64_t end = sp_now_ms() + timeout_ms;;) {
        char got[128];
        first_line(got, sizeof(got), lp);
        if (strcmp(got, want + k) == 0)
            return 0;
        if (sp_now_ms() >= end)
            return sp_err_set(err, SP_ETIMEOUT, 0,
                              "the egress proxy did not take the new policy within %d ms",
                              timeout_ms);
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int sp_egress_log_open(int *fd, const char *run, sp_error **err)
{
    *fd = -1;
    cleanup_close int dfd = open(run, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return sp_err_errno(err, errno, "open", run);
    int f = openat(dfd, SP_EGRESS_LOG, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (f < 0 && errno == ENOENT)
        return sp_err_set(err, SP_ENOTFOUND, ENOENT, "no connection log yet");
    if (f < 0 || fstat(f, &st) < 0 || !S_ISREG(st.st_mode)) {
        int e = f < 0 ? errno : EINVAL;
        if (f >= 0)
            close(f);
        return sp_err_errno(err, e, "open the connection log in", run);
    }
    fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK);
    *fd = f;
    return 0;
}
