/* sandpod peer protections: what the container it runs in is kept from,
 * as one JSON line, for `sandpod engine test` (its probe Pod): a user
 * namespace or the node's ids, the seccomp mode, no_new_privs, the
 * effective capabilities, and whether two things sandpod's own seccomp
 * profile refuses are allowed here (keyctl, and making a user namespace:
 * what a Pod under RuntimeDefault allows). Every test is made, not
 * inferred from configuration. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int peer_protections(void)
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
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    int rc = text && printf("%s\n", text) > 0 ? 0 : cli_error("protections: out of memory");
    cJSON_free(text);
    return rc;
}
