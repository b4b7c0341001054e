/* The Kubernetes REST client against the fake API server (fake_apiserver.py,
 * held to kubectl's view by test_fake_kubectl.sh): every call, credentials
 * from a kubeconfig through the installed kubectl and from an in-cluster
 * folder, TLS refused without the CA, client-certificate auth, and each
 * fault the fake injects (410 on watch, an ERROR event 410, a dropped
 * watch, 429 and 503 with Retry-After, a Pod that cannot pull its image or
 * be scheduled). Skips without python3 or openssl (not under CI=true). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base.h"
#include "kube.h"
#include "kube_exec.h"
#include "kube_testutil.h"
#include "sha1.h"
#include "testutil.h"

typedef struct fake {
    pid_t pid;
    int port;
} fake;

static char *scratch;
static fake tok_fake = {-1, 0}, cert_fake = {-1, 0};
static bool have_kubectl;

static bool ci(void)
{
    return kt_ci();
}

static int start_fake(fake *f, bool client_cert)
{
    char line[64];
    int st;
    if (kt_start_server(&f->pid, &st, line, sizeof(line), FAKE_SERVER, scratch,
                        client_cert ? "--client-cert" : NULL) < 0 ||
        sscanf(line, "PORT %d", &f->port) != 1)
        return -1;
    return 0;
}

static void stop_fake(fake *f)
{
    kt_stop_server(&f->pid);
}

static void skip_or_fail(const char *what)
{
    if (!ci()) {
        fprintf(stderr, "skip: %s\n", what);
        exit(77);
    }
    fprintf(stderr, "%s\n", what);
    exit(1);
}

static char *b64_file(const char *name)
{
    size_t n = 0;
    char *data = tu_read(scratch, name, &n);
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    sp_base64_write(out, data, n);
    free(data);
    return out;
}

/* A kubeconfig (JSON is YAML) for f: a token user or a client-cert one. */
static void write_kubeconfig(const char *file, const fake *f, bool cert, const char *ns)
{
    cleanup_free char *ca = b64_file("ca.pem");
    cleanup_free char *user = NULL;
    if (cert) {
        cleanup_free char *c = b64_file("client.pem");
        cleanup_free char *k = b64_file("client.key");
        user =
            sp_xasprintf("{\"client-certificate-data\":\"%s\",\"client-key-data\":\"%s\"}", c, k);
    } else {
        user = sp_xstrdup("{\"token\":\"token-one\"}");
    }
    cleanup_free char *cfg = sp_xasprintf(
        "{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"clusters\":[{\"name\":\"fake\",\"cluster\":"
        "{\"server\":\"https://127.0.0.1:%d/\",\"certificate-authority-data\":\"%s\"}}],"
        "\"users\":[{\"name\":\"u\",\"user\":%s},{\"name\":\"other\",\"user\":{\"token\":\"x\"}}],"
        "\"contexts\":[{\"name\":\"fake\",\"context\":{\"cluster\":\"fake\",\"user\":\"u\","
        "\"namespace\":\"%s\"}},{\"name\":\"elsewhere\",\"context\":{\"cluster\":\"fake\","
        "\"user\":\"other\"}}],\"current-context\":\"fake\"}",
        f->port, ca, user, ns);
    tu_write(scratch, file, cfg, 0600);
}

static int setup(void **state)
{
    (void)state;
    if (access("/usr/bin/python3", X_OK) < 0)
        skip_or_fail("python3 is missing");
    scratch = tu_mkdtemp();
    char *argv[] = {"/bin/sh", MAKE_CERTS, scratch, NULL};
    if (kt_run_quiet(argv) != 0)
        skip_or_fail("openssl could not make the test certificates");
    if (start_fake(&tok_fake, false) < 0 || start_fake(&cert_fake, true) < 0) {
        fprintf(stderr, "the fake API server did not start\n");
        return -1;
    }
    have_kubectl = access("/usr/bin/kubectl", X_OK) == 0;
    if (!have_kubectl && ci())
        return -1;
    write_kubeconfig("kc-token", &tok_fake, false, "default");
    write_kubeconfig("kc-cert", &cert_fake, true, "default");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    stop_fake(&tok_fake);
    stop_fake(&cert_fake);
    tu_rmtree(scratch);
    free(scratch);
    return 0;
}

/* Explicit credentials for the token fake: a token file, the CA. */
static sp_kube *open_explicit(const fake *f, const char *ca, const sp_kube_opts *o)
{
    cleanup_free char *server = sp_xasprintf("https://127.0.0.1:%d", f->port);
    cleanup_free char *tf = tu_join(scratch, "tokens");
    cleanup_free char *caf = ca ? tu_join(scratch, ca) : NULL;
    sp_kube_creds c;
    sp_error *err = NULL;
    if (sp_kube_creds_explicit(&c, server, tf, caf, NULL, &err) < 0)
        fail_msg("explicit creds: %s", err->message);
    sp_kube *k = NULL;
    if (sp_kube_open(&k, &c, o, &err) < 0)
        fail_msg("open: %s", err->message);
    return k;
}

static sp_kube *open_token(const sp_kube_opts *o)
{
    return open_explicit(&tok_fake, "ca.pem", o);
}

static void create(sp_kube *k, const char *name, const char *image)
{
    cleanup_free char *pod =
        sp_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
                     "\"labels\":{\"sandpod\":\"1\",\"t\":\"%s\"}},\"spec\":{\"containers\":"
                     "[{\"name\":\"work\",\"image\":\"%s\"}]}}",
                     name, name, image);
    cJSON *out = NULL;
    sp_error *err = NULL;
    if (sp_kube_pod_create(k, pod, &out, &err) < 0)
        fail_msg("create %s: %s", name, err->message);
    assert_string_equal(sp_json_str(sp_json_get(out, "metadata"), "name"), name);
    assert_non_null(sp_json_str(sp_json_get(out, "metadata"), "uid"));
    cJSON_Delete(out);
}

/* POST a fault to the fake's control path. */
static void fault(sp_kube *k, const char *json)
{
    sp_error *err = NULL;
    if (sp_kube_call(k, "POST", "/fake/faults", json, NULL, "fault", &err) < 0)
        fail_msg("fault: %s", err->message);
}

/* How many requests the fake saw whose path contains needle (from index
 * from on), and the total. */
static int seen(sp_kube *k, const char *needle, int from, int *total)
{
    cJSON *list = NULL;
    sp_error *err = NULL;
    if (sp_kube_call(k, "GET", "/fake/requests", NULL, &list, "requests", &err) < 0)
        fail_msg("requests: %s", err->message);
    int n = 0, i = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, list)
    {
        if (i++ >= from && strstr(sp_json_str_or(r, "path", ""), needle))
            n++;
    }
    if (total)
        *total = cJSON_GetArraySize(list);
    cJSON_Delete(list);
    return n;
}

static void test_pod_calls(void **state)
{
    (void)state;
    sp_kube *k = open_token(NULL);
    sp_error *err = NULL;
    assert_string_equal(sp_kube_namespace(k), "default");
    create(k, "calls", "fake/ready");
    /* The same name again: AlreadyExists. */
    cleanup_free char *dup = sp_xstrdup("{\"metadata\":{\"name\":\"calls\"},\"spec\":"
                                        "{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}");
    assert_int_equal(sp_kube_pod_create(k, dup, NULL, &err), SP_EEXISTS);
    assert_non_null(strstr(err->message, "pods \"calls\" already exists (AlreadyExists, 409)"));
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_kube_pod_create(k, "{\"metadata\":{}}", NULL, &err), SP_EINVAL);
    assert_non_null(strstr(err->message, "Invalid"));
    sp_error_free(err);
    err = NULL;

    cJSON *pod = NULL;
    assert_int_equal(sp_kube_pod_get(k, "calls", &pod, &err), 0);
    sp_kube_pod_state st;
    assert_int_equal(sp_kube_pod_state_of(&st, pod, &err), 0);
    assert_true(st.resource_version[0]);
    cJSON_Delete(pod);

    assert_int_equal(sp_kube_pod_wait_ready(k, "calls", 10000, &err), 0);
    assert_int_equal(sp_kube_pod_get(k, "calls", &pod, &err), 0);
    assert_int_equal(sp_kube_pod_state_of(&st, pod, &err), 0);
    assert_int_equal(st.phase, SP_KUBE_POD_RUNNING);
    assert_true(st.ready);
    cJSON_Delete(pod);

    create(k, "other", "fake/pending");
    cJSON *list = NULL;
    assert_int_equal(sp_kube_pod_list(k, "t=calls", &list, &err), 0);
    const cJSON *items = sp_json_get(list, "items");
    assert_int_equal(cJSON_GetArraySize(items), 1);
    assert_string_equal(sp_json_str(sp_json_get(cJSON_GetArrayItem(items, 0), "metadata"), "name"),
                        "calls");
    cJSON_Delete(list);
    assert_int_equal(sp_kube_pod_list(k, "sandpod=1", &list, &err), 0);
    assert_true(cJSON_GetArraySize(sp_json_get(list, "items")) >= 2);
    cJSON_Delete(list);

    int from = 0;
    seen(k, "", 0, &from);
    assert_int_equal(sp_kube_pod_delete(k, "calls", 0, &err), 0);
    assert_int_equal(seen(k, "/pods/calls?gracePeriodSeconds=0", from, NULL), 1);
    assert_int_equal(sp_kube_pod_get(k, "calls", &pod, &err), SP_ENOTFOUND);
    assert_non_null(strstr(err->message, "pods \"calls\" not found (NotFound, 404)"));
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_kube_pod_delete(k, "calls", -1, &err), SP_ENOTFOUND);
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_kube_pod_delete(k, "other", 5, &err), 0);
    /* Names are checked before they reach a path. */
    assert_int_equal(sp_kube_pod_get(k, "../secrets", &pod, &err), SP_EINVAL);
    sp_error_free(err);
    sp_kube_free(k);
}

static void test_wait_failures(void **state)
{
    (void)state;
    sp_kube *k = open_token(NULL);
    sp_error *err = NULL;
    create(k, "nopull", "registry.example/nosuchimage:1");
    assert_int_equal(sp_kube_pod_wait_ready(k, "nopull", 10000, &err), SP_ERROR);
    assert_string_equal(err->message, "kubernetes: pod nopull cannot start: Failed: Failed to pull "
                                      "image \"registry.example/nosuchimage:1\": manifest unknown");
    sp_error_free(err);
    err = NULL;
    char *line = NULL;
    assert_int_equal(sp_kube_pod_events_line(k, "nopull", &line, &err), 0);
    assert_non_null(strstr(line, "Failed to pull image"));
    free(line);

    create(k, "nofit", "fake/unschedulable");
    assert_int_equal(sp_kube_pod_wait_ready(k, "nofit", 10000, &err), SP_ERROR);
    assert_string_equal(err->message, "kubernetes: pod nofit cannot start: FailedScheduling: 0/3 "
                                      "nodes are available: 3 Insufficient memory.");
    sp_error_free(err);
    err = NULL;

    /* Pending with no reason: the deadline, and whatever the events say. */
    create(k, "slow", "fake/pending");
    int64_t t0 = sp_now_ms();
    assert_int_equal(sp_kube_pod_wait_ready(k, "slow", 1500, &err), SP_ETIMEOUT);
    int64_t ms = sp_now_ms() - t0;
    assert_true(ms >= 1400 && ms < 6000);
    assert_non_null(strstr(err->message, "pod slow is not ready after 1500 ms: no events"));
    sp_error_free(err);
    err = NULL;

    /* A Pod that does not exist, and one deleted while waited for. */
    assert_int_equal(sp_kube_pod_wait_ready(k, "ghost", 3000, &err), SP_ENOTFOUND);
    sp_error_free(err);
    err = NULL;
    for (const char *const *n = (const char *const[]){"nopull", "nofit", "slow", NULL}; *n; n++)
        assert_int_equal(sp_kube_pod_delete(k, *n, 0, &err), 0);
    sp_kube_free(k);
}

static void test_watch_faults(void **state)
{
    (void)state;
    sp_kube *k = open_token(NULL);
    sp_error *err = NULL;
    static const char *const faults[] = {
        "{\"watch_gone\":1}", "{\"watch_error_gone\":1}", "{\"drop_watch\":1}",
        "{\"watch_gone\":1,\"drop_watch\":1,\"watch_error_gone\":1}"};
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "watched-%zu", i);
        int from = 0;
        seen(k, "", 0, &from);
        fault(k, faults[i]);
        create(k, name, "fake/ready-slow");
        if (sp_kube_pod_wait_ready(k, name, 10000, &err) < 0)
            fail_msg("%s: %s", faults[i], err->message);
        /* Each 410 costs a relist (a list by name), each drop a rewatch. */
        int lists = seen(k, "pods?fieldSelector=", from, NULL);
        int watches = seen(k, "watch=1", from, NULL);
        int gones = (strstr(faults[i], "watch_gone") != NULL) +
                    (strstr(faults[i], "watch_error_gone") != NULL);
        int drops = strstr(faults[i], "drop_watch") != NULL;
        if (lists != 1 + gones || watches < 1 + gones + drops)
            fail_msg("%s: %d lists, %d watches", faults[i], lists, watches);
        fault(k, "{\"watch_gone\":0,\"watch_error_gone\":0,\"drop_watch\":0}");
        assert_int_equal(sp_kube_pod_delete(k, name, 0, &err), 0);
    }
    sp_kube_free(k);
}

typedef struct counted {
    int events, deleted;
    char last_rv[64];
} counted;

static int count_events(sp_kube_event_type t, const cJSON *pod, void *ud, sp_error **err)
{
    (void)err;
    counted *c = ud;
    c->events++;
    if (t == SP_KUBE_DELETED) {
        c->deleted++;
        return 1;
    }
    const char *rv = sp_json_str(sp_json_get(pod, "metadata"), "resourceVersion");
    snprintf(c->last_rv, sizeof(c->last_rv), "%s", rv ? rv : "");
    return 0;
}

static int refuse(sp_kube_event_type t, const cJSON *pod, void *ud, sp_error **err)
{
    (void)t, (void)pod, (void)ud;
    return sp_err_set(err, SP_EINVAL, 0, "refused");
}

static int until_ready(sp_kube_event_type t, const cJSON *pod, void *ud, sp_error **err)
{
    (void)ud;
    sp_kube_pod_state st;
    if (t == SP_KUBE_DELETED || sp_kube_pod_state_of(&st, pod, err) < 0)
        return SP_ERROR;
    return st.ready ? 1 : 0;
}

/* A caller that wants no error object still gets the 410 relist. */
static void test_watch_without_err(void **state)
{
    (void)state;
    sp_kube *k = open_token(NULL);
    fault(k, "{\"watch_gone\":1}");
    create(k, "no-err", "fake/ready-slow");
    assert_int_equal(sp_kube_pod_watch(k, "no-err", 10000, until_ready, NULL, NULL), 0);
    assert_int_equal(sp_kube_pod_delete(k, "no-err", 0, NULL), 0);
    sp_kube_free(k);
}

static void test_watch_until_deleted(void **state)
{
    (void)state;
    sp_kube *k = open_token(NULL);
    sp_error *err = NULL;
    create(k, "watch-del", "fake/ready");
    assert_int_equal(sp_kube_pod_wait_ready(k, "watch-del", 10000, &err), 0);
    /* Delete it from another client while this one watches. */
    pid_t pid = fork();
    if (pid == 0) {
        usleep(300000);
        sp_kube *k2 = open_token(NULL);
        _exit(sp_kube_pod_delete(k2, "watch-del", 0, NULL) == 0 ? 0 : 1);
    }
    counted c = {0};
    assert_int_equal(sp_kube_pod_watch(k, "watch-del", 10000, count_events, &c, &err), 0);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(c.deleted, 1);
    assert_int_equal(c.events, 2); /* the relist's ADDED, then DELETED */
    assert_true(c.last_rv[0]);
    /* A callback's error ends the watch with it. */
    create(k, "watch-err", "fake/pending");
    assert_int_equal(sp_kube_pod_watch(k, "watch-err", 10000, refuse, NULL, &err), SP_EINVAL);
    assert_string_equal(err->message, "refused");
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_kube_pod_delete(k, "watch-err", 0, &err), 0);
    sp_kube_free(k);
}

static void test_throttling(void **state)
{
    (void)state;
    sp_kube *k = open_token(NULL);
    sp_error *err = NULL;
    int from = 0;
    seen(k, "", 0, &from);
    fault(k, "{\"throttle\":1,\"unavailable\":1}");
    int64_t t0 = sp_now_ms();
    cJSON *list = NULL;
    assert_int_equal(sp_kube_pod_list(k, NULL, &list, &err), 0);
    cJSON_Delete(list);
    int64_t ms = sp_now_ms() - t0;
    /* Two answers said Retry-After: 1, and both were honoured. */
    assert_true(ms >= 1900);
    assert_int_equal(seen(k, "/api/v1/namespaces/default/pods", from, NULL), 3);

    /* No retries allowed: the 429's Status is the error. */
    sp_kube_opts o = SP_KUBE_OPTS_INIT;
    o.max_retries = -1;
    sp_kube *k2 = open_token(&o);
    fault(k2, "{\"throttle\":1}");
    assert_int_equal(sp_kube_pod_list(k2, NULL, &list, &err), SP_ETIMEOUT);
    assert_string_equal(
        err->message,
        "kubernetes: list pods: the server is busy, try again (TooManyRequests, 429)");
    sp_error_free(err);
    err = NULL;
    sp_kube_free(k2);

    /* Throttled past the call's deadline: it gives up in time. */
    o = (sp_kube_opts)SP_KUBE_OPTS_INIT;
    o.timeout_ms = 1500;
    k2 = open_token(&o);
    fault(k2, "{\"unavailable\":5}");
    t0 = sp_now_ms();
    assert_int_equal(sp_kube_pod_list(k2, NULL, &list, &err), SP_ERROR);
    ms = sp_now_ms() - t0;
    assert_true(ms < 3000);
    assert_non_null(strstr(err->message, "ServiceUnavailable, 503"));
    sp_error_free(err);
    fault(k2, "{\"unavailable\":0}");
    sp_kube_free(k2);
    sp_kube_free(k);
}

static void log_line(const char *line, void *ud)
{
    sp_buf *b = ud;
    sp_buf_adds(b, line);
    sp_buf_addc(b, '\n');
}

static void test_debug_log(void **state)
{
    (void)state;
    sp_buf log = SP_BUF_INIT;
    sp_kube_opts o = SP_KUBE_OPTS_INIT;
    o.log = log_line;
    o.log_userdata = &log;
    sp_kube *k = open_token(&o);
    cJSON *list = NULL;
    assert_int_equal(sp_kube_pod_list(k, "secret-label=1", &list, NULL), 0);
    cJSON_Delete(list);
    assert_non_null(strstr(log.data, "kubernetes: GET /api/v1/namespaces/default/pods"
                                     "?labelSelector=... -> 200, 0 bytes sent, "));
    assert_non_null(strstr(log.data, " ms\n"));
    assert_null(strstr(log.data, "token-one"));
    assert_null(strstr(log.data, "secret-label"));
    sp_buf_dispose(&log);
    sp_kube_free(k);
}

static void test_kubeconfig_token(void **state)
{
    (void)state;
    if (!have_kubectl)
        skip();
    cleanup_free char *kc = tu_join(scratch, "kc-token");
    sp_kube_creds c;
    sp_error *err = NULL;
    if (sp_kube_creds_kubeconfig(&c, "/usr/bin/kubectl", kc, NULL, &err) < 0)
        fail_msg("kubeconfig: %s", err->message);
    cleanup_free char *want = sp_xasprintf("https://127.0.0.1:%d", tok_fake.port);
    assert_string_equal(c.server, want); /* the trailing slash is gone */
    assert_string_equal(c.token, "token-one");
    assert_true(c.ca_pem.len > 100);
    assert_false(c.insecure);
    sp_kube *k = NULL;
    assert_int_equal(sp_kube_open(&k, &c, NULL, &err), 0);
    assert_null(c.server); /* taken over */
    create(k, "from-kubeconfig", "fake/ready");
    assert_int_equal(sp_kube_pod_wait_ready(k, "from-kubeconfig", 10000, &err), 0);
    assert_int_equal(sp_kube_pod_delete(k, "from-kubeconfig", 0, &err), 0);
    sp_kube_free(k);

    /* Another context: its user's token, its namespace default. */
    assert_int_equal(sp_kube_creds_kubeconfig(&c, "/usr/bin/kubectl", kc, "elsewhere", &err), 0);
    assert_string_equal(c.token, "x");
    assert_string_equal(c.ns, "default");
    assert_int_equal(sp_kube_open(&k, &c, NULL, &err), 0);
    assert_int_equal(sp_kube_pod_get(k, "any", &(cJSON *){NULL}, &err), SP_EDENIED);
    assert_non_null(strstr(err->message, "Unauthorized"));
    assert_null(strstr(err->message, "x\""));
    sp_error_free(err);
    err = NULL;
    sp_kube_free(k);

    /* A context that does not exist: kubectl's own words, one line. */
    assert_int_equal(sp_kube_creds_kubeconfig(&c, "/usr/bin/kubectl", kc, "nope", &err), SP_EINVAL);
    assert_non_null(strstr(err->message, "kubectl config view failed: "));
    assert_null(strchr(err->message, '\n'));
    sp_error_free(err);
    err = NULL;
    /* No kubectl at all. */
    assert_int_equal(sp_kube_creds_kubeconfig(&c, "/nonexistent/kubectl", kc, NULL, &err),
                     SP_ENOTFOUND);
    assert_non_null(strstr(err->message, "install kubectl"));
    sp_error_free(err);
}

static void test_client_cert(void **state)
{
    (void)state;
    if (!have_kubectl)
        skip();
    cleanup_free char *kc = tu_join(scratch, "kc-cert");
    sp_kube_creds c;
    sp_error *err = NULL;
    if (sp_kube_creds_kubeconfig(&c, "/usr/bin/kubectl", kc, NULL, &err) < 0)
        fail_msg("kubeconfig: %s", err->message);
    assert_null(c.token);
    assert_true(c.cert_pem.len > 100 && c.key_pem.len > 100);
    sp_kube *k = NULL;
    assert_int_equal(sp_kube_open(&k, &c, NULL, &err), 0);
    create(k, "by-cert", "fake/ready");
    assert_int_equal(sp_kube_pod_wait_ready(k, "by-cert", 10000, &err), 0);
    assert_int_equal(sp_kube_pod_delete(k, "by-cert", 0, &err), 0);
    sp_kube_free(k);

    /* The same server without a client certificate: refused. */
    k = open_explicit(&cert_fake, "ca.pem", NULL);
    cJSON *list = NULL;
    int rc = sp_kube_pod_list(k, NULL, &list, &err);
    assert_true(rc == SP_EDENIED || rc == SP_ERROR);
    sp_error_free(err);
    sp_kube_free(k);
}

static void test_tls_verified(void **state)
{
    (void)state;
    sp_error *err = NULL;
    cJSON *list = NULL;
    /* No CA: the system's bundle does not know the fake's. */
    sp_kube *k = open_explicit(&tok_fake, NULL, NULL);
    assert_int_equal(sp_kube_pod_list(k, NULL, &list, &err), SP_EDENIED);
    assert_non_null(strstr(err->message, "TLS with https://127.0.0.1:"));
    sp_error_free(err);
    err = NULL;
    sp_kube_free(k);
    /* Another CA: refused as well. */
    k = open_explicit(&tok_fake, "other-ca.pem", NULL);
    assert_int_equal(sp_kube_pod_list(k, NULL, &list, &err), SP_EDENIED);
    sp_error_free(err);
    err = NULL;
    sp_kube_free(k);
    /* insecure-skip-tls-verify, said by a kubeconfig, is honoured. */
    cleanup_free char *json = sp_xasprintf(
        "{\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://127.0.0.1:%d\","
        "\"insecure-skip-tls-verify\":true}}],\"users\":[{\"name\":\"u\",\"user\":{\"token\":"
        "\"token-one\"}}],\"contexts\":[{\"name\":\"x\",\"context\":{\"cluster\":\"c\","
        "\"user\":\"u\"}}],\"current-context\":\"x\"}",
        tok_fake.port);
    sp_kube_creds c;
    assert_int_equal(sp_kube_creds_parse_kubeconfig(&c, json, strlen(json), &err), 0);
    assert_true(c.insecure);
    assert_int_equal(sp_kube_open(&k, &c, NULL, &err), 0);
    assert_int_equal(sp_kube_pod_list(k, NULL, &list, &err), 0);
    cJSON_Delete(list);
    sp_kube_free(k);
}

static void test_in_cluster(void **state)
{
    (void)state;
    sp_error *err = NULL;
    cleanup_free char *sa = tu_join(scratch, "sa");
    tu_mkdir(scratch, "sa");
    size_t n = 0;
    cleanup_free char *ca = tu_read(scratch, "ca.pem", &n);
    tu_write(sa, "ca.crt", ca, 0644);
    tu_write(sa, "namespace", "default\n", 0644);
    sp_kube_creds c;
    /* Not in a Pod: no service address. */
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(sp_kube_creds_incluster(&c, sa, &err), SP_ENOTFOUND);
    sp_error_free(err);
    err = NULL;
    char port[16];
    snprintf(port, sizeof(port), "%d", tok_fake.port);
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", port, 1);
    /* No token file yet. */
    assert_int_equal(sp_kube_creds_incluster(&c, sa, &err), SP_ENOTFOUND);
    sp_error_free(err);
    err = NULL;
    tu_write(sa, "token", "token-one\n", 0600);
    assert_int_equal(sp_kube_creds_incluster(&c, sa, &err), 0);
    cleanup_free char *want = sp_xasprintf("https://127.0.0.1:%d", tok_fake.port);
    assert_string_equal(c.server, want);
    assert_string_equal(c.ns, "default");
    sp_kube *k = NULL;
    assert_int_equal(sp_kube_open(&k, &c, NULL, &err), 0);
    cJSON *list = NULL;
    assert_int_equal(sp_kube_pod_list(k, NULL, &list, &err), 0);
    cJSON_Delete(list);

    /* The token rotates: the server takes only the new one, the kubelet
     * writes it to the file, and the same client goes on. */
    tu_write(scratch, "tokens", "token-two\n", 0600);
    tu_write(sa, "token", "token-two\n", 0600);
    int from = 0;
    seen(k, "", 0, &from);
    assert_int_equal(sp_kube_pod_list(k, NULL, &list, &err), 0);
    cJSON_Delete(list);
    /* A stale token: 401, re-read once, still refused: EDENIED. */
    tu_write(sa, "token", "stale\n", 0600);
    assert_int_equal(sp_kube_pod_list(k, NULL, &list, &err), SP_EDENIED);
    assert_null(strstr(err->message, "stale"));
    sp_error_free(err);
    err = NULL;
    cJSON *reqs = NULL;
    assert_int_equal(sp_kube_call(k, "GET", "/fake/requests", NULL, &reqs, "r", &err), 0);
    int sz = cJSON_GetArraySize(reqs);
    assert_string_equal(sp_json_str(cJSON_GetArrayItem(reqs, sz - 1), "auth"), "stale");
    assert_string_equal(sp_json_str(cJSON_GetArrayItem(reqs, sz - 2), "auth"), "stale");
    assert_string_equal(sp_json_str(cJSON_GetArrayItem(reqs, sz - 3), "auth"), "token-two");
    cJSON_Delete(reqs);
    sp_kube_free(k);
    tu_write(scratch, "tokens", "token-one\n", 0600);
    unsetenv("KUBERNETES_SERVICE_HOST");
}

/* ----------------------------------------------- parsers, no server -- */

static void test_status_errors(void **state)
{
    (void)state;
    sp_error *err = NULL;
    const char *s = "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods is "
                    "forbidden:\\nUser \\\"x\\\" cannot list\",\"reason\":\"Forbidden\","
                    "\"code\":403}";
    assert_int_equal(sp_kube_status_error(&err, 403, s, strlen(s), "list"), SP_EDENIED);
    assert_string_equal(err->message,
                        "list: pods is forbidden: User \"x\" cannot list (Forbidden, 403)");
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_kube_status_error(&err, 502, "<html>bad gateway</html>", 24, "get"),
                     SP_ERROR);
    assert_string_equal(err->message,
                        "get: the API server answered HTTP 502: <html>bad gateway</html>");
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_kube_status_error(&err, 409, NULL, 0, "create"), SP_EEXISTS);
    assert_string_equal(err->message, "create: the API server answered HTTP 409");
    sp_error_free(err);
}

static void test_kubeconfig_parse(void **state)
{
    (void)state;
    sp_kube_creds c;
    sp_error *err = NULL;
    struct {
        const char *json;
        int rc;
        const char *msg;
    } cases[] = {
        {"[]", SP_EINVAL, "not a JSON object"},
        {"{\"contexts\":[]}", SP_ENOTFOUND, "no current context"},
        {"{\"contexts\":[{\"name\":\"a\",\"context\":{\"cluster\":\"c\"}}],"
         "\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"ftp://x\"}}]}",
         SP_EINVAL, "no http(s) server"},
        /* fuzz_kube_json found "https://" passing as a server. */
        {"{\"contexts\":[{\"name\":\"a\",\"context\":{\"cluster\":\"c\"}}],"
         "\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://\"}}]}",
         SP_EINVAL, "no http(s) server"},
        {"{\"contexts\":[{\"name\":\"a\",\"context\":{\"cluster\":\"c\"}}],"
         "\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://u:p@h/\"}}]}",
         SP_EINVAL, "no http(s) server"},
#define EXEC_USER(e)                                                                               \
    "{\"contexts\":[{\"name\":\"a\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}],"             \
    "\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://h\"}}],"                      \
    "\"users\":[{\"name\":\"u\",\"user\":{\"exec\":" e "}}]}"
        {EXEC_USER("{\"apiVersion\":\"client.authentication.k8s.io/v1\"}"), SP_EINVAL,
         "user u's exec plugin has no command"},
        {EXEC_USER("{\"apiVersion\":\"client.authentication.k8s.io/v1alpha1\",\"command\":\"a\"}"),
         SP_EINVAL, "speaks apiVersion client.authentication.k8s.io/v1alpha1"},
        {EXEC_USER("{\"command\":\"a\"}"), SP_EINVAL, "speaks apiVersion (none)"},
        {EXEC_USER("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"command\":\"a\","
                   "\"interactiveMode\":\"Always\"}"),
         SP_EINVAL, "needs a terminal (interactiveMode Always)"},
        {EXEC_USER("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"command\":\"a\","
                   "\"args\":[1]}"),
         SP_EINVAL, "args or env of the wrong shape"},
        {EXEC_USER("{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"command\":\"a\","
                   "\"env\":[{\"name\":\"A=B\",\"value\":\"x\"}]}"),
         SP_EINVAL, "args or env of the wrong shape"},
        {"{\"contexts\":[{\"name\":\"a\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}],"
         "\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://h\"}}],"
         "\"users\":[{\"name\":\"u\",\"user\":{\"auth-provider\":{\"name\":\"gcp\"}}}]}",
         SP_EINVAL, "user u uses an auth provider, not supported yet"},
        {"{\"contexts\":[{\"name\":\"a\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}],"
         "\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://h\","
         "\"certificate-authority-data\":\"not base64!\"}}]}",
         SP_EINVAL, "certificate-authority-data is not base64"},
        {"{\"contexts\":[{\"name\":\"a\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}],"
         "\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"https://h\"}}],"
         "\"users\":[{\"name\":\"u\",\"user\":{\"client-certificate-data\":\"QUJD\"}}]}",
         SP_EINVAL, "without its key"},
        /* One context and no current-context (what --minify gives for an
         * explicit --context): that one. */
        {"{\"contexts\":[{\"name\":\"a\",\"context\":{\"cluster\":\"c\",\"user\":\"u\","
         "\"namespace\":\"work\"}}],\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":"
         "\"https://h:6443//\",\"certificate-authority-data\":\"QUJD\"}}],\"users\":[{\"name\":"
         "\"u\",\"user\":{\"tokenFile\":\"/t\"}}]}",
         0, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = sp_kube_creds_parse_kubeconfig(&c, cases[i].json, strlen(cases[i].json), &err);
        assert_int_equal(rc, cases[i].rc);
        if (rc < 0) {
            if (!strstr(err->message, cases[i].msg))
                fail_msg("case %zu: %s", i, err->message);
            sp_error_free(err);
            err = NULL;
            assert_null(c.server);
        }
    }
    assert_string_equal(c.server, "https://h:6443");
    assert_string_equal(c.ns, "work");
    assert_string_equal(c.token_file, "/t");
    assert_int_equal(c.ca_pem.len, 3);
    assert_memory_equal(c.ca_pem.data, "ABC", 3);
    assert_null(c.plugin);
    sp_kube_creds_dispose(&c);
    /* An exec plugin: its command, args, env and hint, v1beta1 without an
     * interactiveMode. */
    const char *ex = EXEC_USER(
        "{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"command\":\"gke-auth\","
        "\"args\":[\"--a\",\"b c\"],\"env\":[{\"name\":\"K\",\"value\":\"v=1\"}],"
        "\"installHint\":\"apt install\\ngke-auth\",\"provideClusterInfo\":true}");
    if (sp_kube_creds_parse_kubeconfig(&c, ex, strlen(ex), &err) < 0)
        fail_msg("exec user: %s", err->message);
    assert_non_null(c.plugin);
    assert_string_equal(c.plugin->api_version, "client.authentication.k8s.io/v1beta1");
    assert_string_equal(c.plugin->argv[0], "gke-auth");
    assert_string_equal(c.plugin->argv[1], "--a");
    assert_string_equal(c.plugin->argv[2], "b c");
    assert_null(c.plugin->argv[3]);
    assert_string_equal(c.plugin->env[0], "K=v=1");
    assert_null(c.plugin->env[1]);
    assert_string_equal(c.plugin->install_hint, "apt install gke-auth");
    assert_true(c.plugin->cluster_info);
    sp_kube_creds_dispose(&c);
    /* Explicit credentials are checked too. */
    assert_int_equal(sp_kube_creds_explicit(&c, "127.0.0.1:6443", NULL, NULL, NULL, &err),
                     SP_EINVAL);
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_kube_creds_explicit(&c, "https://h", "/nonexistent", NULL, NULL, &err),
                     SP_ENOTFOUND);
    sp_error_free(err);
}

static void test_pod_state(void **state)
{
    (void)state;
    struct {
        const char *json;
        sp_kube_pod_phase phase;
        bool ready;
        const char *reason;
    } cases[] = {
        {"{\"metadata\":{\"resourceVersion\":\"7\"},\"status\":{\"phase\":\"Running\","
         "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
         SP_KUBE_POD_RUNNING, true, ""},
        {"{\"metadata\":{},\"status\":{\"phase\":\"Pending\",\"initContainerStatuses\":[{"
         "\"state\":{\"waiting\":{\"reason\":\"ErrImagePull\",\"message\":\"x\\ny\"}}}]}}",
         SP_KUBE_POD_PENDING, false, "ErrImagePull"},
        {"{\"metadata\":{},\"status\":{\"phase\":\"Pending\",\"containerStatuses\":[{"
         "\"state\":{\"waiting\":{\"reason\":\"ContainerCreating\"}}}]}}",
         SP_KUBE_POD_PENDING, false, ""},
        {"{\"metadata\":{},\"status\":{\"phase\":\"Failed\",\"reason\":\"DeadlineExceeded\"}}",
         SP_KUBE_POD_FAILED, false, "DeadlineExceeded"},
        {"{\"metadata\":{},\"status\":{\"phase\":\"Weird\"}}", SP_KUBE_POD_UNKNOWN, false, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *j = sp_json_parse(cases[i].json, strlen(cases[i].json));
        sp_kube_pod_state st;
        assert_int_equal(sp_kube_pod_state_of(&st, j, NULL), 0);
        assert_int_equal(st.phase, cases[i].phase);
        assert_int_equal(st.ready, cases[i].ready);
        assert_string_equal(st.reason, cases[i].reason);
        assert_null(strchr(st.message, '\n'));
        cJSON_Delete(j);
    }
    assert_int_equal(sp_kube_pod_state_of(&(sp_kube_pod_state){0}, NULL, NULL), SP_ERROR);
    /* The Warning wins over a later Normal event; the latest Warning wins. */
    const char *ev = "{\"items\":[{\"type\":\"Warning\",\"reason\":\"A\",\"message\":\"old\","
                     "\"lastTimestamp\":\"2026-01-01T00:00:00Z\"},{\"type\":\"Warning\",\"reason\":"
                     "\"B\",\"message\":\"new\",\"lastTimestamp\":\"2026-01-02T00:00:00Z\"},"
                     "{\"type\":\"Normal\",\"reason\":\"C\",\"message\":\"later\","
                     "\"lastTimestamp\":\"2026-01-03T00:00:00Z\"}]}";
    cJSON *j = sp_json_parse(ev, strlen(ev));
    char *line = sp_kube_events_pick(j);
    assert_string_equal(line, "B: new");
    free(line);
    cJSON_Delete(j);
    j = sp_json_parse("{\"items\":[]}", 12);
    assert_null(sp_kube_events_pick(j));
    cJSON_Delete(j);
}

/* ---------------------------------------------- exec credential plugins -- */

#define V1 "client.authentication.k8s.io/v1"

static void test_plugin_parse(void **state)
{
    (void)state;
    struct {
        const char *json;
        int rc;
        const char *msg;
        int64_t expires_ms;
    } cases[] = {
        {"not json tok-secret", SP_EINVAL, "printed no ExecCredential with a status", 0},
        {"{\"kind\":\"Other\",\"apiVersion\":\"" V1 "\",\"status\":{\"token\":\"t\"}}", SP_EINVAL,
         "no ExecCredential", 0},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\"}", SP_EINVAL, "no ExecCredential",
         0},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
         "\"status\":{\"token\":\"t\"}}",
         SP_EINVAL, "answered apiVersion client.authentication.k8s.io/v1beta1; its kubeconfig", 0},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\",\"status\":{}}", SP_EINVAL,
         "neither a token nor a client certificate", 0},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\",\"status\":{\"token\":\"\"}}",
         SP_EINVAL, "neither a token", 0},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1
         "\",\"status\":{\"clientCertificateData\":\"C\"}}",
         SP_EINVAL, "without its key", 0},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1
         "\",\"status\":{\"token\":\"a\\r\\nX-Evil: 1\"}}",
         SP_EINVAL, "control characters", 0},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1
         "\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"tomorrow\"}}",
         SP_EINVAL, "not an RFC 3339 time", 0},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1
         "\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"2026-13-01T00:00:00Z\"}}",
         SP_EINVAL, "not an RFC 3339 time", 0},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1
         "\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"2026-11-26T18:00:00Z\"}}",
         0, NULL, 1795716000000},
        /* Fractions and offsets, as Go's RFC3339Nano writes them. */
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1
         "\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"2026-11-26T19:30:00.25+01:30\"}"
         "}",
         0, NULL, 1795716000250},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1
         "\",\"status\":{\"clientCertificateData\":\"C\",\"clientKeyData\":\"K\"}}",
         0, NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sp_kube_plugin_cred pc;
        sp_error *err = NULL;
        int rc = sp_kube_plugin_parse(&pc, V1, cases[i].json, strlen(cases[i].json), &err);
        if (rc != cases[i].rc)
            fail_msg("case %zu: %d %s", i, rc, err ? err->message : "");
        if (rc < 0) {
            if (!strstr(err->message, cases[i].msg) || strstr(err->message, "secret") ||
                strstr(err->message, "Evil"))
                fail_msg("case %zu: %s", i, err->message);
            assert_null(pc.token);
            sp_error_free(err);
            continue;
        }
        assert_int_equal(pc.expires_ms, cases[i].expires_ms);
        if (pc.cert_pem.len)
            assert_string_equal(pc.key_pem.data, "K");
        else
            assert_string_equal(pc.token, "t");
        sp_kube_plugin_cred_dispose(&pc);
    }
}

/* The fake plugin: counts its runs in plugin-runs, keeps what it was given
 * in plugin-info, answers by plugin-mode with token tok-N (N its run). */
static const char plugin_py[] =
    "import json, os, sys, time\n"
    "d = sys.argv[1]\n"
    "runs = os.path.join(d, 'plugin-runs')\n"
    "n = int(open(runs).read()) + 1 if os.path.exists(runs) else 1\n"
    "open(runs, 'w').write(str(n))\n"
    "info = os.environ.get('KUBERNETES_EXEC_INFO', '')\n"
    "open(os.path.join(d, 'plugin-info'), 'w').write(info + '\\n' + "
    "os.environ.get('PLUGIN_VAR', '') + '\\n' + ' '.join(sys.argv[2:]))\n"
    "sys.stderr.write('fake plugin: run %d\\n' % n)\n"
    "mode = open(os.path.join(d, 'plugin-mode')).read().strip()\n"
    "if mode == 'bad':\n"
    "    print('tok-%d {' % n); sys.exit(0)\n"
    "if mode == 'fail':\n"
    "    sys.exit(3)\n"
    "if mode == 'sleep':\n"
    "    time.sleep(20)\n"
    "exp = '2020-01-01T00:00:00Z' if mode == 'expired' else '2999-01-01T00:00:00Z'\n"
    "st = {'token': 'tok-%d' % n, 'expirationTimestamp': exp}\n"
    "if mode == 'cert':\n"
    "    st = {'clientCertificateData': open(os.path.join(d, 'client.pem')).read(),\n"
    "          'clientKeyData': open(os.path.join(d, 'client.key')).read()}\n"
    "print(json.dumps({'apiVersion': json.loads(info)['apiVersion'],\n"
    "                  'kind': 'ExecCredential', 'status': st}))\n";

/* A kubeconfig whose user runs command (python3 from PATH by default). */
static char *plugin_kubeconfig(const fake *f, const char *command, const char *extra)
{
    cleanup_free char *ca = b64_file("ca.pem");
    cleanup_free char *py = tu_join(scratch, "plugin.py");
    return sp_xasprintf(
        "{\"apiVersion\":\"v1\",\"kind\":\"Config\",\"clusters\":[{\"name\":\"fake\",\"cluster\":"
        "{\"server\":\"https://127.0.0.1:%d\",\"certificate-authority-data\":\"%s\"}}],"
        "\"users\":[{\"name\":\"p\",\"user\":{\"exec\":{\"apiVersion\":\"" V1 "\","
        "\"command\":\"%s\",\"args\":[\"%s\",\"%s\",\"an arg\"],\"env\":[{\"name\":"
        "\"PLUGIN_VAR\",\"value\":\"from-kubeconfig\"}],\"interactiveMode\":\"IfAvailable\","
        "\"provideClusterInfo\":true%s}}}],"
        "\"contexts\":[{\"name\":\"fake\",\"context\":{\"cluster\":\"fake\",\"user\":\"p\"}}],"
        "\"current-context\":\"fake\"}",
        f->port, ca, command ? command : "python3", py, scratch, extra ? extra : "");
}

static sp_kube *open_plugin(const fake *f, const char *command, const char *extra,
                            const sp_kube_opts *o)
{
    cleanup_free char *kc = plugin_kubeconfig(f, command, extra);
    sp_kube_creds c;
    sp_error *err = NULL;
    if (sp_kube_creds_parse_kubeconfig(&c, kc, strlen(kc), &err) < 0)
        fail_msg("plugin kubeconfig: %s", err->message);
    sp_kube *k = NULL;
    if (sp_kube_open(&k, &c, o, &err) < 0)
        fail_msg("open: %s", err->message);
    return k;
}

static int plugin_runs(void)
{
    cleanup_free char *s = tu_read(scratch, "plugin-runs", NULL);
    return s ? (int)strtol(s, NULL, 10) : 0;
}

static void plugin_reset(const char *mode)
{
    cleanup_free char *runs = tu_join(scratch, "plugin-runs");
    unlink(runs);
    tu_write(scratch, "plugin-mode", mode, 0600);
}

/* A call that must fail with rc, its message holding want and no token. */
static void list_fails(sp_kube *k, int rc, const char *want)
{
    cJSON *list = NULL;
    sp_error *err = NULL;
    assert_int_equal(sp_kube_pod_list(k, NULL, &list, &err), rc);
    if (!strstr(err->message, want) || strstr(err->message, "tok-"))
        fail_msg("%s", err->message);
    assert_null(strchr(err->message, '\n'));
    sp_error_free(err);
}

static void list_ok(sp_kube *k)
{
    cJSON *list = NULL;
    sp_error *err = NULL;
    if (sp_kube_pod_list(k, NULL, &list, &err) < 0)
        fail_msg("list: %s", err->message);
    cJSON_Delete(list);
}

static void test_exec_plugin(void **state)
{
    (void)state;
    tu_write(scratch, "plugin.py", plugin_py, 0600);
    /* Cached: one run for many calls, with what kubectl gives a plugin. */
    tu_write(scratch, "tokens", "token-one\ntok-1\n", 0600);
    plugin_reset("fresh");
    sp_kube *k = open_plugin(&tok_fake, NULL, NULL, NULL);
    for (int i = 0; i < 3; i++)
        list_ok(k);
    assert_int_equal(plugin_runs(), 1);
    cleanup_free char *info = tu_read(scratch, "plugin-info", NULL);
    cleanup_free char *server = sp_xasprintf("\"server\":\"https://127.0.0.1:%d\"", tok_fake.port);
    assert_non_null(strstr(info, "{\"kind\":\"ExecCredential\",\"apiVersion\":\"" V1 "\","
                                 "\"spec\":{\"interactive\":false,\"cluster\":{"));
    assert_non_null(strstr(info, server));
    assert_non_null(strstr(info, "\"certificate-authority-data\":\"LS0t"));
    assert_non_null(strstr(info, "\nfrom-kubeconfig\nan arg"));
    /* A 401 (the token was revoked): the plugin runs once more. */
    tu_write(scratch, "tokens", "token-one\ntok-2\n", 0600);
    list_ok(k);
    assert_int_equal(plugin_runs(), 2);
    list_ok(k);
    assert_int_equal(plugin_runs(), 2);
    /* Still refused after the rerun: SP_EDENIED, one rerun only. */
    tu_write(scratch, "tokens", "token-one\n", 0600);
    list_fails(k, SP_EDENIED, "Unauthorized");
    assert_int_equal(plugin_runs(), 3);
    sp_kube_free(k);

    /* Expired at once: a run for every call. */
    tu_write(scratch, "tokens", "token-one\ntok-1\ntok-2\ntok-3\n", 0600);
    plugin_reset("expired");
    k = open_plugin(&tok_fake, NULL, NULL, NULL);
    list_ok(k);
    list_ok(k);
    list_ok(k);
    assert_int_equal(plugin_runs(), 3);
    sp_kube_free(k);
    tu_write(scratch, "tokens", "token-one\n", 0600);

    /* Bad answers: one clear line each, nothing the plugin printed. */
    plugin_reset("bad");
    k = open_plugin(&tok_fake, NULL, NULL, NULL);
    list_fails(k, SP_EINVAL, "the exec credential plugin printed no ExecCredential");
    tu_write(scratch, "plugin-mode", "fail", 0600);
    list_fails(k, SP_ERROR, "plugin python3 exited with status 3");
    sp_kube_free(k);
    sp_kube_opts o = SP_KUBE_OPTS_INIT;
    o.plugin_timeout_ms = 300;
    plugin_reset("sleep");
    k = open_plugin(&tok_fake, NULL, NULL, &o);
    int64_t t0 = sp_now_ms();
    list_fails(k, SP_ETIMEOUT, "did not finish within 300 ms");
    assert_true(sp_now_ms() - t0 < 5000);
    sp_kube_free(k);
    /* Not installed, in PATH or at a path: its installHint. */
    k = open_plugin(&tok_fake, "sandpod-no-such-plugin",
                    ",\"installHint\":\"get it with: apt install sandpod-no-such-plugin\"", NULL);
    list_fails(k, SP_ENOTFOUND,
               "the exec credential plugin sandpod-no-such-plugin is not installed: get it with: "
               "apt install sandpod-no-such-plugin");
    sp_kube_free(k);
    k = open_plugin(&tok_fake, "/nonexistent/auth", NULL, NULL);
    list_fails(k, SP_ENOTFOUND, "plugin /nonexistent/auth is not installed");
    sp_kube_free(k);
    /* A file of that name that is not executable, earlier in PATH (or a
     * folder of PATH this user may not search): still not installed, as
     * kubectl says, not execvp's "permission denied". */
    cleanup_free char *noexec = tu_join(scratch, "noexec");
    tu_mkdir(scratch, "noexec");
    tu_write(noexec, "sandpod-no-such-plugin", "#!/bin/sh\nexit 0\n", 0644);
    cleanup_free char *old_path = sp_xstrdup(getenv("PATH"));
    cleanup_free char *new_path = sp_xasprintf("%s:%s", noexec, old_path);
    setenv("PATH", new_path, 1);
    k = open_plugin(&tok_fake, "sandpod-no-such-plugin", NULL, NULL);
    list_fails(k, SP_ENOTFOUND, "plugin sandpod-no-such-plugin is not installed");
    sp_kube_free(k);
    setenv("PATH", old_path, 1);
}

/* The plugin's stderr, with and without debug logging: *out what reached
 * ours, *log the debug log. */
static void plugin_stderr(bool debug, char **out, sp_buf *log)
{
    tu_write(scratch, "tokens", "token-one\ntok-1\n", 0600);
    plugin_reset("fresh");
    cleanup_free char *path = tu_join(scratch, "stderr");
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    sp_kube_opts o = SP_KUBE_OPTS_INIT;
    o.log = debug ? log_line : NULL;
    o.log_userdata = log;
    sp_kube *k = open_plugin(&tok_fake, NULL, NULL, &o);
    list_ok(k);
    sp_kube_free(k);
    dup2(saved, 2);
    close(saved);
    *out = tu_read(scratch, "stderr", NULL);
    tu_write(scratch, "tokens", "token-one\n", 0600);
}

static void test_exec_plugin_debug(void **state)
{
    (void)state;
    tu_write(scratch, "plugin.py", plugin_py, 0600);
    sp_buf log = SP_BUF_INIT;
    char *err_out = NULL;
    plugin_stderr(true, &err_out, &log);
    assert_non_null(strstr(err_out, "fake plugin: run 1\n"));
    free(err_out);
    assert_non_null(strstr(log.data, "kubernetes: exec credential plugin python3: ok ("));
    assert_null(strstr(log.data, "tok-"));
    sp_buf_dispose(&log);
    plugin_stderr(false, &err_out, &log);
    assert_string_equal(err_out, "");
    free(err_out);
    assert_null(log.data);
}

/* A token file of two lines (the fake's list of good tokens) is refused
 * before it can split the Authorization header. */
static void test_token_file_lines(void **state)
{
    (void)state;
    tu_write(scratch, "tokens", "token-one\ntok-1\n", 0600);
    sp_kube *k = open_token(NULL);
    list_fails(k, SP_EINVAL, "holds more than one line or control characters");
    sp_kube_free(k);
    tu_write(scratch, "tokens", "token-one\n", 0600);
}

/* The plugin as kubectl hands it over (its JSON of our kubeconfig). */
static void test_exec_plugin_kubectl(void **state)
{
    (void)state;
    if (!have_kubectl)
        skip();
    cleanup_free char *kc = plugin_kubeconfig(&tok_fake, NULL, ",\"installHint\":\"hint\"");
    tu_write(scratch, "kc-plugin", kc, 0600);
    cleanup_free char *path = tu_join(scratch, "kc-plugin");
    /* The kubectl here (gcloud's dispatcher) runs the plugin itself during
     * config view: it must answer. */
    tu_write(scratch, "plugin.py", plugin_py, 0600);
    plugin_reset("fresh");
    sp_kube_creds c;
    sp_error *err = NULL;
    if (sp_kube_creds_kubeconfig(&c, "/usr/bin/kubectl", path, NULL, &err) < 0)
        fail_msg("kubeconfig: %s", err->message);
    assert_non_null(c.plugin);
    assert_string_equal(c.plugin->api_version, V1);
    assert_string_equal(c.plugin->argv[0], "python3");
    assert_string_equal(c.plugin->argv[3], "an arg");
    assert_string_equal(c.plugin->env[0], "PLUGIN_VAR=from-kubeconfig");
    assert_string_equal(c.plugin->install_hint, "hint");
    assert_true(c.plugin->cluster_info);
    tu_write(scratch, "tokens", "token-one\ntok-1\n", 0600);
    plugin_reset("fresh");
    sp_kube *k = NULL;
    assert_int_equal(sp_kube_open(&k, &c, NULL, &err), 0);
    list_ok(k);
    assert_int_equal(plugin_runs(), 1);
    sp_kube_free(k);
    tu_write(scratch, "tokens", "token-one\n", 0600);
}

/* pods/exec against the fake's echoing exec; *out its stdout. */
static int exec_echo(sp_kube *k, const char *pod, sp_buf *out, sp_error **err)
{
    const char *argv[] = {"echo", "hi there", NULL};
    sp_kube_exec_spec s = {.pod = pod, .argv = argv, .timeout_ms = 5000};
    sp_ws *ws = NULL;
    int rc = sp_kube_exec_connect(&ws, k, &s, err);
    if (rc < 0)
        return rc;
    sp_buf errb = SP_BUF_INIT;
    int code = -2;
    unsigned close_code = 0;
    rc = sp_kube_exec_collect(ws, out, &errb, &code, &close_code, 5000, NULL, err);
    sp_buf_dispose(&errb);
    sp_ws_free(ws);
    if (rc == 0)
        assert_int_equal(code, 0);
    return rc;
}

static void test_exec_plugin_pods_exec(void **state)
{
    (void)state;
    tu_write(scratch, "plugin.py", plugin_py, 0600);
    sp_error *err = NULL;
    /* A token from the plugin, rerun after a 401 on the upgrade. */
    tu_write(scratch, "tokens", "token-one\ntok-1\n", 0600);
    plugin_reset("fresh");
    sp_kube *k = open_plugin(&tok_fake, NULL, NULL, NULL);
    create(k, "exec-by-plugin", "fake/ready");
    assert_int_equal(sp_kube_pod_wait_ready(k, "exec-by-plugin", 10000, &err), 0);
    sp_buf out = SP_BUF_INIT;
    if (exec_echo(k, "exec-by-plugin", &out, &err) < 0)
        fail_msg("exec: %s", err->message);
    assert_string_equal(out.data, "ran: echo hi there\n");
    assert_int_equal(plugin_runs(), 1);
    tu_write(scratch, "tokens", "token-one\ntok-2\n", 0600);
    sp_buf_dispose(&out);
    if (exec_echo(k, "exec-by-plugin", &out, &err) < 0)
        fail_msg("exec after 401: %s", err->message);
    assert_int_equal(plugin_runs(), 2);
    sp_buf_dispose(&out);
    tu_write(scratch, "tokens", "token-one\n", 0600);
    assert_int_equal(exec_echo(k, "exec-by-plugin", &out, &err), SP_EDENIED);
    assert_null(strstr(err->message, "tok-"));
    sp_error_free(err);
    err = NULL;
    assert_int_equal(plugin_runs(), 3);
    sp_buf_dispose(&out);
    sp_kube_free(k);
    k = open_token(NULL);
    assert_int_equal(sp_kube_pod_delete(k, "exec-by-plugin", 0, &err), 0);
    sp_kube_free(k);

    /* A client certificate from the plugin, over REST and the WebSocket. */
    plugin_reset("cert");
    k = open_plugin(&cert_fake, NULL, NULL, NULL);
    create(k, "exec-by-cert", "fake/ready");
    assert_int_equal(sp_kube_pod_wait_ready(k, "exec-by-cert", 10000, &err), 0);
    if (exec_echo(k, "exec-by-cert", &out, &err) < 0)
        fail_msg("exec: %s", err->message);
    assert_string_equal(out.data, "ran: echo hi there\n");
    sp_buf_dispose(&out);
    assert_int_equal(plugin_runs(), 1);
    sp_kube_free(k);
}

/* pods/exec with the kubeconfig's client certificate and no token; the
 * same server refuses the upgrade without it. */
static void test_pods_exec_client_cert(void **state)
{
    (void)state;
    cleanup_free char *kc = tu_read(scratch, "kc-cert", NULL);
    sp_kube_creds c;
    sp_error *err = NULL;
    if (sp_kube_creds_parse_kubeconfig(&c, kc, strlen(kc), &err) < 0)
        fail_msg("kubeconfig: %s", err->message);
    assert_null(c.token);
    sp_kube *k = NULL;
    assert_int_equal(sp_kube_open(&k, &c, NULL, &err), 0);
    create(k, "exec-cert", "fake/ready");
    assert_int_equal(sp_kube_pod_wait_ready(k, "exec-cert", 10000, &err), 0);
    sp_buf out = SP_BUF_INIT;
    if (exec_echo(k, "exec-cert", &out, &err) < 0)
        fail_msg("exec: %s", err->message);
    assert_string_equal(out.data, "ran: echo hi there\n");
    sp_buf_dispose(&out);

    sp_kube *nocert = open_explicit(&cert_fake, "ca.pem", NULL);
    int rc = exec_echo(nocert, "exec-cert", &out, &err);
    if (rc != SP_EDENIED && rc != SP_ERROR)
        fail_msg("exec without a client certificate: %d %s", rc, err ? err->message : "");
    sp_error_free(err);
    err = NULL;
    sp_buf_dispose(&out);
    sp_kube_free(nocert);
    assert_int_equal(sp_kube_pod_delete(k, "exec-cert", 0, &err), 0);
    sp_kube_free(k);
}

static int collect(const char *data, size_t len, void *ud, sp_error **err)
{
    (void)err;
    sp_buf_add(ud, data, len);
    return 0;
}

/* A log that is not followed has no deadline (a long one was cut at the
 * client's 30 s), only a bound on silence. */
static void test_pod_log(void **state)
{
    (void)state;
    sp_kube_opts o = SP_KUBE_OPTS_INIT;
    o.timeout_ms = 1000;
    sp_kube *k = open_token(&o);
    sp_error *err = NULL;
    create(k, "logs", "fake/ready");
    sp_kube_log_query q = {.container = "work", .tail_lines = -1};
    sp_buf b = {0};

    /* Six lines 400 ms apart: twice the timeout, and all of it arrives. */
    fault(k, "{\"log\":{\"lines\":6,\"pace_ms\":400}}");
    if (sp_kube_pod_log(k, "logs", &q, collect, &b, &err) < 0)
        fail_msg("log: %s", err->message);
    assert_string_equal(b.data, "log line 1\nlog line 2\nlog line 3\nlog line 4\nlog line 5\n"
                                "log line 6\n");
    sp_buf_dispose(&b);

    /* A server that goes silent for longer than the timeout has failed:
     * what came before it was handed on. */
    fault(k, "{\"log\":{\"lines\":2,\"stall_ms\":4000}}");
    assert_int_equal(sp_kube_pod_log(k, "logs", &q, collect, &b, &err), SP_ETIMEOUT);
    assert_non_null(strstr(err->message, "kubernetes: log of pod logs: "));
    assert_non_null(strstr(err->message, "sent nothing for 1000 ms"));
    assert_string_equal(b.data, "log line 1\n");
    sp_error_free(err);
    err = NULL;
    sp_buf_dispose(&b);

    /* A Pod that is not there. */
    fault(k, "{\"log\":null}");
    assert_int_equal(sp_kube_pod_log(k, "no-such-pod", &q, collect, &b, &err), SP_ENOTFOUND);
    sp_error_free(err);
    sp_buf_dispose(&b);
    assert_int_equal(sp_kube_pod_delete(k, "logs", 0, NULL), 0);
    sp_kube_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_errors),
        cmocka_unit_test(test_kubeconfig_parse),
        cmocka_unit_test(test_pod_state),
        cmocka_unit_test(test_pod_calls),
        cmocka_unit_test(test_wait_failures),
        cmocka_unit_test(test_watch_faults),
        cmocka_unit_test(test_watch_without_err),
        cmocka_unit_test(test_watch_until_deleted),
        cmocka_unit_test(test_throttling),
        cmocka_unit_test(test_pod_log),
        cmocka_unit_test(test_debug_log),
        cmocka_unit_test(test_kubeconfig_token),
        cmocka_unit_test(test_client_cert),
        cmocka_unit_test(test_tls_verified),
        cmocka_unit_test(test_in_cluster),
        cmocka_unit_test(test_plugin_parse),
        cmocka_unit_test(test_exec_plugin),
        cmocka_unit_test(test_exec_plugin_kubectl),
        cmocka_unit_test(test_exec_plugin_pods_exec),
        cmocka_unit_test(test_pods_exec_client_cert),
        cmocka_unit_test(test_exec_plugin_debug),
        cmocka_unit_test(test_token_file_lines),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
