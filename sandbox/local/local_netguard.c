/* A `--network default` sandbox kept off the host: firewall rules in the
 * container's own network namespace refuse this host's addresses, the
 * sandbox's own network (its neighbours: other sandboxes, the bridge's
 * gateway, slirp4netns's host loopback) and link-local addresses (the cloud
 * metadata service), and let the rest of the world through. The workload
 * has no CAP_NET_ADMIN there and cannot change them; the host's own
 * firewall is not touched.
 *
 * How: a child process joins the container's network namespace (rootless:
 * its user namespace first, which the caller owns through Podman's), reads
 * the namespace's own addresses, and feeds iptables-restore and
 * ip6tables-restore a ruleset. The nameservers of the container's
 * resolv.conf stay reachable on port 53 (slirp4netns's 10.0.2.3 is in its
 * network). Applied after every start: a new start is a new namespace. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local_kind.h"
#include "sandbox_internal.h"

/* Where to look for the tools: a library user's PATH may lack sbin. */
static const char *const tool_dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", NULL};

static char *find_tool(const char *name)
{
    for (size_t i = 0; tool_dirs[i]; i++) {
        char *p = sp_xasprintf("%s/%s", tool_dirs[i], name);
        if (access(p, X_OK) == 0)
            return p;
        free(p);
    }
    return NULL;
}

static void add_net(sp_buf *b, int family, const void *addr, int prefix, const char *what)
{
    char a[INET6_ADDRSTRLEN];
    if (!inet_ntop(family, addr, a, sizeof(a)))
        return;
    /* TCP gets a reset, the rest an ICMP refusal: both fail at once. */
    sp_buf_printf(
        b,
        "-A OUTPUT -d %s/%d -p tcp -m comment --comment \"%s\" -j REJECT --reject-with tcp-reset\n",
        a, prefix, what);
    sp_buf_printf(b, "-A OUTPUT -d %s/%d -m comment --comment \"%s\" -j REJECT\n", a, prefix, what);
}

/* The network of addr/mask, in place. */
static int masked(unsigned char *addr, const unsigned char *mask, size_t n)
{
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        addr[i] &= mask[i];
        bits += __builtin_popcount(mask[i]);
    }
    return bits;
}

/* The rules for one family: nameservers first, then what is refused. The
 * host's addresses were read before the namespace was joined. */
static void ruleset(sp_buf *b, int family, struct ifaddrs *host, struct ifaddrs *own,
                    const char *resolv)
{
    sp_buf_adds(b, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n");
    sp_buf_adds(b, "-A OUTPUT -o lo -j ACCEPT\n");
    if (family == AF_INET6)
        sp_buf_adds(b, "-A OUTPUT -p ipv6-icmp -j ACCEPT\n"); /* neighbour discovery */
    /* Port 53 of the container's nameservers stays open. */
    for (const char *l = resolv; l && *l;) {
        char ns[INET6_ADDRSTRLEN];
        unsigned char tmp[16];
        if (sscanf(l, "nameserver %45s", ns) == 1 && inet_pton(family, ns, tmp) == 1) {
            sp_buf_printf(b, "-A OUTPUT -d %s -p udp --dport 53 -j ACCEPT\n", ns);
            sp_buf_printf(b, "-A OUTPUT -d %s -p tcp --dport 53 -j ACCEPT\n", ns);
        }
        const char *nl = strchr(l, '\n');
        l = nl ? nl + 1 : NULL;
    }
    /* slirp4netns's DNS, whatever the host's resolv.conf says. */
    if (family == AF_INET) {
        sp_buf_adds(b, "-A OUTPUT -d 10.0.2.3 -p udp --dport 53 -j ACCEPT\n");
        sp_buf_adds(b, "-A OUTPUT -d 10.0.2.3 -p tcp --dport 53 -j ACCEPT\n");
        unsigned char ll[4] = {169, 254, 0, 0};
        add_net(b, AF_INET, ll, 16, "link-local and cloud metadata");
    } else {
        unsigned char md[16] = {0xfd, 0x00, 0x0e, 0xc2, [15] = 0x54, [14] = 0x02};
        add_net(b, AF_INET6, md, 128, "cloud metadata");
    }
    for (struct ifaddrs *i = host; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != family || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        const void *a = family == AF_INET
                            ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                            : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL((const struct in6_addr *)a))
            continue; /* the router's link-local address must answer */
        add_net(b, family, a, family == AF_INET ? 32 : 128, "this host");
    }
    for (struct ifaddrs *i = own; i; i = i->ifa_next) {
        if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != family ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        unsigned char a[16];
        const unsigned char *m;
        size_t n = family == AF_INET ? 4 : 16;
        if (family == AF_INET) {
            memcpy(a, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
            m = (const unsigned char *)&((struct sockaddr_in *)i->ifa_netmask)->sin_addr;
        } else {
            memcpy(a, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
            m = (const unsigned char *)&((struct sockaddr_in6 *)i->ifa_netmask)->sin6_addr;
            if (IN6_IS_ADDR_LINKLOCAL((const struct in6_addr *)a))
                continue;
        }
        int bits = masked(a, m, n);
        add_net(b, family, a, bits, "the sandbox's own network (its neighbours, the gateway)");
    }
    sp_buf_adds(b, "COMMIT\n");
}

/* In the child: feed `rules` to `tool` on stdin; its exit status. */
static int restore(const char *tool, const sp_buf *rules)
{
    int fd = memfd_create("sandpod-netguard", MFD_CLOEXEC);
    if (fd < 0 || write(fd, rules->data, rules->len) != (ssize_t)rules->len ||
        lseek(fd, 0, SEEK_SET) != 0)
        return 125;
    pid_t p = fork();
    if (p == 0) {
        dup2(fd, 0);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0)
            dup2(null, 1);
        execl(tool, tool, "--noflush", (char *)NULL);
        _exit(127);
    }
    close(fd);
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) < 0)
        return 125;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 126;
}

int sp_local_netguard(sp_sandbox *sb, int pid, sp_error **err)
{
    cleanup_free char *v4 = find_tool("iptables-restore");
    cleanup_free char *v6 = find_tool("ip6tables-restore");
    if (!v4)
        return sp_err_set(err, SP_ERROR, 0,
                          "sandbox %s: --network default is kept off this host by firewall rules "
                          "in its network namespace, and iptables-restore is missing (apt-get "
                          "install iptables)",
                          sb->name);
    struct ifaddrs *host = NULL;
    if (getifaddrs(&host) < 0)
        return sp_err_errno(err, errno, "read this host's addresses for sandbox", sb->name);
    /* The container's resolv.conf as Podman wrote it (the host's when it
     * cannot be read). */
    sp_buf resolv = SP_BUF_INIT;
    cleanup_free char *rpath = sp_xasprintf("/proc/%d/root/etc/resolv.conf", pid);
    cleanup_close int rfd = open(rpath, O_RDONLY | O_CLOEXEC);
    if (rfd < 0)
        rfd = open("/etc/resolv.conf", O_RDONLY | O_CLOEXEC);
    if (rfd >= 0)
        sp_read_all(rfd, &resolv, 1 << 16);
    cleanup_free char *userns = sp_xasprintf("/proc/%d/ns/user", pid);
    cleanup_free char *netns = sp_xasprintf("/proc/%d/ns/net", pid);
    bool rootless = geteuid() != 0;
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) < 0) {
        freeifaddrs(host);
        sp_buf_dispose(&resolv);
        return sp_err_errno(err, errno, "pipe for sandbox", sb->name);
    }
    pid_t child = fork();
    if (child == 0) {
        close(errpipe[0]);
        int uf = open(userns, O_RDONLY | O_CLOEXEC), nf = open(netns, O_RDONLY | O_CLOEXEC);
        const char *step = "join the network namespace";
        /* Rootless: the caller owns the container's user namespace (through
         * Podman's), so joining it gives the caps its network needs; root
         * in it, so that the tools keep them across exec. */
        if (rootless && (uf < 0 || setns(uf, CLONE_NEWUSER) < 0 || setresgid(0, 0, 0) < 0 ||
                         setresuid(0, 0, 0) < 0))
            step = "join the user namespace";
        else if (nf >= 0 && setns(nf, CLONE_NEWNET) == 0)
            step = NULL;
        if (step) {
            dprintf(errpipe[1], "%s of pid %d: %s", step, pid, strerror(errno));
            _exit(1);
        }
        struct ifaddrs *own = NULL;
        getifaddrs(&own);
        sp_buf b4 = SP_BUF_INIT, b6 = SP_BUF_INIT;
        ruleset(&b4, AF_INET, host, own, resolv.data);
        ruleset(&b6, AF_INET6, host, own, resolv.data);
        int r = restore(v4, &b4);
        if (r != 0) {
            dprintf(errpipe[1], "iptables-restore exited %d", r);
            _exit(1);
        }
        /* No IPv6 in the kernel or the namespace: nothing to guard there. */
        if (v6 && access("/proc/net/if_inet6", F_OK) == 0 && (r = restore(v6, &b6)) != 0) {
            dprintf(errpipe[1], "ip6tables-restore exited %d", r);
            _exit(1);
        }
        _exit(0);
    }
    close(errpipe[1]);
    freeifaddrs(host);
    sp_buf_dispose(&resolv);
    char why[512] = "";
    ssize_t n = child > 0 ? read(errpipe[0], why, sizeof(why) - 1) : -1;
    why[n > 0 ? n : 0] = '\0';
    close(errpipe[0]);
    int st = 0;
    if (child < 0 || waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return sp_err_set(err, SP_ERROR, 0,
                          "sandbox %s: the firewall that keeps --network default off this host "
                          "could not be set: %s",
                          sb->name, why[0] ? why : "the helper process failed");
    return 0;
}
