/* sandpod peer protections: what the container it runs in is kept from,
 * as one JSON line, for `sandpod engine test` (its probe Pod): a user
 * namespace or the node's ids, the seccomp mode, no_new_privs, the
 * effective capabilities, and whether two things sandpod's own seccomp
 * profile refuses are allowed here (keyctl, and making a user namespace:
 * what a Pod under RuntimeDefault allows). With `network`, whether a TCP
 * connection to the cluster's API service ($KUBERNETES_SERVICE_HOST, which
 * the kubelet gives every container) completes: under a NetworkPolicy that
 * allows only the egress proxy it must not, and if it does, the cluster
 * does not enforce NetworkPolicies. Every test is made, not inferred from
 * configuration. */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "cli.h"
#include "json.h"
#include "peer_protections.h"

/* The value after "key:" in /proc/self/status, or "". */
static void status_field(char *out, size_t cap, const char *key)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    size_t k = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, k) == 0 && line[k] == ':') {
            const char *v = line + k + 1;
            v += strspn(v, " \t");
            snprintf(out, cap, "%.*s", (int)strcspn(v, "\n"), v);
            break;
        }
    if (f)
        fclose(f);
}

/* Whether the test in a child (so nothing it changes stays) exits 0. */
static bool allowed_in_child(int (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn() == 0 ? 0 : 1);
    int st = 0;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int try_keyctl(void)
{
    /* KEYCTL_GET_KEYRING_ID (0) of the session keyring (-3), not made. */
    return syscall(SYS_keyctl, 0, -3, 0) < 0 ? -1 : 0;
}

static int try_userns(void)
{
    return unshare(CLONE_NEWUSER);
}

/* The API service's address as host:port in target (as given: the kubelet
 * writes an address, v6 in brackets when it has colons), or "" when the
 * container has none. */
static void api_target(char *target, size_t cap, const char **host, const char **port)
{
    *host = getenv("KUBERNETES_SERVICE_HOST");
    *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!*port || !**port)
        *port = "443";
    target[0] = '\0';
    if (*host && **host)
        snprintf(target, cap, strchr(*host, ':') ? "[%s]:%s" : "%s:%s", *host, *port);
}

/* "reached", "blocked" (refused, unreachable, or no answer within 1.5 s:
 * a policy that drops is not told from one that refuses) or "untested"
 * (no address to try). The address is parsed, not looked up: the kubelet
 * gives one, and this binary is static (no NSS). */
static const char *direct_network(char *target, size_t cap)
{
    const char *host, *port;
    api_target(target, cap, &host, &port);
    char *end = NULL;
    unsigned long pn = strtoul(port, &end, 10);
    struct sockaddr_storage ss = {0};
    socklen_t sl = 0;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (!target[0] || !end || *end || pn == 0 || pn > 65535)
        return "untested";
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)pn);
        sl = sizeof(*v4);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)pn);
        sl = sizeof(*v6);
    } else {
        return "untested";
    }
    const char *verdict = "blocked";
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && (connect(fd, (struct sockaddr *)&ss, sl) == 0 || errno == EINPROGRESS)) {
        struct pollfd p = {fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof(err);
        if (poll(&p, 1, 1500) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
            err == 0)
            verdict = "reached";
    }
    if (fd >= 0)
        close(fd);
    return verdict;
}

int peer_protections(bool network)
{
    char map[128] = "";
    FILE *f = fopen("/proc/self/uid_map", "re");
    if (!f || !fgets(map, sizeof(map), f)) {
        if (f)
            fclose(f);
        return cli_error("protections: cannot read /proc/self/uid_map: %s", strerror(errno));
    }
    fclose(f);
    map[strcspn(map, "\n")] = '\0';
    unsigned long long in = 0, out = 0, len = 0;
    bool host_ids = sscanf(map, "%llu %llu %llu", &in, &out, &len) == 3 && in == 0 && out == 0 &&
                    len == 4294967295ull;
    char seccomp[16], nnp[16], capeff[32];
    status_field(seccomp, sizeof(seccomp), "Seccomp");
    status_field(nnp, sizeof(nnp), "NoNewPrivs");
    status_field(capeff, sizeof(capeff), "CapEff");
    static const char *const modes[] = {"disabled", "strict", "filter"};
    int m = atoi(seccomp);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "user_namespace", !host_ids);
    char norm[128];
    snprintf(norm, sizeof(norm), "%llu %llu %llu", in, out, len);
    cJSON_AddStringToObject(o, "uid_map", norm);
    cJSON_AddStringToObject(o, "seccomp", seccomp[0] && m >= 0 && m <= 2 ? modes[m] : "unknown");
    cJSON_AddBoolToObject(o, "no_new_privs", strcmp(nnp, "1") == 0);
    cJSON_AddStringToObject(o, "cap_eff", capeff);
    cJSON_AddBoolToObject(o, "keyctl", allowed_in_child(try_keyctl));
    cJSON_AddBoolToObject(o, "new_user_namespace", allowed_in_child(try_userns));
    if (network) {
        char target[300];
        cJSON_AddStringToObject(o, "direct_network", direct_network(target, sizeof(target)));
        cJSON_AddStringToObject(o, "direct_target", target);
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    int rc = text && printf("%s\n", text) > 0 ? 0 : cli_error("protections: out of memory");
    cJSON_free(text);
    return rc;
}
