/* The workload's side of egress: sandpod-agent listens on the container's
 * loopback and hands every connection, as a descriptor, to the sandbox's
 * proxy (egress_proxy.h). Nothing here decides anything: the workload
 * controls this process as much as its own, and the proxy trusts none of it. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "egress_proxy.h"

int sp_egress_listen_tcp(int family, uint16_t port, bool any)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int r;
    if (family == AF_INET) {
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(any ? INADDR_ANY : INADDR_LOOPBACK)};
        r = bind(fd, (struct sockaddr *)&a, sizeof(a));
    } else {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                                 .sin6_port = htons(port),
                                 .sin6_addr = any ? in6addr_any : in6addr_loopback};
        r = bind(fd, (struct sockaddr *)&a, sizeof(a));
    }
    if (r < 0 || listen(fd, 256) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int connect_proxy(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path) >= sizeof(sa.sun_path))
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

static int hand_over(int u, int fd)
{
    char byte = 'C';
    struct iovec iov = {&byte, 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.buf,
                       .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    return sendmsg(u, &m, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

int sp_egress_relay_run(uint16_t port, const char *socket_path)
{
    int l[2] = {sp_egress_listen_tcp(AF_INET, port, false),
                sp_egress_listen_tcp(AF_INET6, port, false)};
    if (l[0] < 0 && l[1] < 0) {
        dprintf(2, "sandpod-agent: egress: cannot listen on port %u: %s\n", port, strerror(errno));
        return 1;
    }
    int u = -1;
    for (;;) {
        struct pollfd p[2] = {{l[0], POLLIN, 0}, {l[1], POLLIN, 0}};
        if (poll(p, 2, -1) < 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (l[i] < 0 || !(p[i].revents & POLLIN))
                continue;
            int c = accept4(l[i], NULL, NULL, SOCK_CLOEXEC);
            if (c < 0) {
                if (errno == EMFILE || errno == ENFILE) {
                    struct timespec ts = {0, 20 * 1000000L};
                    nanosleep(&ts, NULL);
                }
                continue;
            }
            /* One reconnect when the proxy restarted; without a proxy the
             * client sees its connection end at once. */
            for (int tries = 0; tries < 2; tries++) {
                if (u < 0)
                    u = connect_proxy(socket_path);
                if (u >= 0 && hand_over(u, c) == 0)
                    break;
                if (u >= 0)
                    close(u);
                u = -1;
            }
            close(c);
        }
    }
}
