/* The engine's pieces end to end against the Podman-backed fake API server
 * (fake_podman.py, held to kubectl by test_fake_podman.sh): sandpod's REST
 * client creates a Pod that `podman kube play` runs, waits for it Ready
 * over a watch, execs into it through sandpod's WebSocket client (v5 with
 * stdin and its close, v4 from a v4-only server, a tty resized on channel
 * 4), and deletes it: Podman has no Pod left. A Pod whose image is missing
 * is one line from its Events. Skips without python3, openssl or Podman
 * (not under CI=true). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base.h"
#include "kube.h"
#include "kube_exec.h"
#include "kube_testutil.h"
#include "testutil.h"

#define BUSYBOX "localhost/sandpod-busybox:latest"
/* read x; for i in 1 2 3 4 5 6 7 8 9 10; do s=$(stty size); [ "$s" = "33 77" ] && break; sleep 0.3;
 * done; echo "size $s" */
#define STTY_LOOP                                                                                  \
    "read%20x%3B%20for%20i%20in%201%202%203%204%205%206%207%208%209%2010%3B%20do%20s%3D%24%"       \
    "28stty%20size%29%3B%20%5B%20%22%24s%22%20%3D%20%2233%2077%22%20%5D%20%26%26%20break%3B%"      \
    "20sleep%200.3%3B%20done%3B%20echo%20%22size%20%24s%22"

static char *scratch;
static pid_t fake_pid = -1;
static int port;
static sp_kube *kube;
/* The Pods made, removed at the end whatever happened. */
static char *made[8];
static size_t n_made;

static void skip_or_fail(const char *what)
{
    fprintf(stderr, "%s%s\n", kt_ci() ? "" : "skip: ", what);
    exit(kt_ci() ? 1 : 77);
}

static int setup(void **state)
{
    (void)state;
    if (access("/usr/bin/python3", X_OK) < 0)
        skip_or_fail("python3 is missing");
    char *info[] = {"podman", "info", NULL};
    if (kt_run_quiet(info) != 0)
        skip_or_fail("podman does not work here");
    char *exists[] = {"podman", "image", "exists", BUSYBOX, NULL};
    char *build[] = {SRC_DIR "/contrib/image/build-image.sh", NULL};
    if (kt_run_quiet(exists) != 0 && (access("/bin/busybox", X_OK) < 0 || kt_run_quiet(build) != 0))
        skip_or_fail("the busybox image is missing and cannot be built");
    scratch = tu_mkdtemp();
    char *certs[] = {"/bin/sh", MAKE_CERTS, scratch, NULL};
    if (kt_run_quiet(certs) != 0)
        skip_or_fail("openssl could not make the test certificates");
    char line[64];
    int st;
    if (kt_start_server(&fake_pid, &st, line, sizeof(line), FAKE_PODMAN, scratch, NULL) < 0 ||
        sscanf(line, "PORT %d", &port) != 1)
        return -1;
    cleanup_free char *server = sp_xasprintf("https://127.0.0.1:%d", port);
    cleanup_free char *tokens = tu_join(scratch, "tokens");
    cleanup_free char *ca = tu_join(scratch, "ca.pem");
    sp_kube_creds c;
    sp_error *err = NULL;
    if (sp_kube_creds_explicit(&c, server, tokens, ca, "default", &err) < 0 ||
        sp_kube_open(&kube, &c, NULL, &err) < 0) {
        fprintf(stderr, "open: %s\n", err->message);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sp_kube_free(kube);
    for (size_t i = 0; i < n_made; i++) {
        char *rm[] = {"podman", "pod", "rm", "-f", "-t", "0", made[i], NULL};
        kt_run_quiet(rm);
        free(made[i]);
    }
    kt_stop_server(&fake_pid);
    tu_rmtree(scratch);
    free(scratch);
    return 0;
}

/* Create a one-container Pod from image; its generated name. */
static char *create(const char *image)
{
    cleanup_free char *pod = sp_xasprintf(
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"generateName\":\"sp-kp-\"},"
        "\"spec\":{\"restartPolicy\":\"Never\",\"terminationGracePeriodSeconds\":0,"
        "\"containers\":[{\"name\":\"work\",\"image\":\"%s\",\"imagePullPolicy\":\"Never\","
        "\"command\":[\"sleep\",\"600\"]}]}}",
        image);
    cJSON *out = NULL;
    sp_error *err = NULL;
    if (sp_kube_pod_create(kube, pod, &out, &err) < 0)
        fail_msg("create: %s", err->message);
    char *name = sp_xstrdup(sp_json_str(sp_json_get(out, "metadata"), "name"));
    cJSON_Delete(out);
    if (n_made < sizeof(made) / sizeof(made[0]))
        made[n_made++] = sp_xstrdup(name);
    return name;
}

typedef struct exec_result {
    sp_buf out, err;
    int code;
    char proto[32];
} exec_result;

/* Exec query (the command and flags) in Pod name; stdin (may be NULL) is
 * sent, then closed on v5; a resize first when tty. */
static void exec_in(exec_result *r, const char *name, const char *query, const char *in, bool tty)
{
    cleanup_free char *url = sp_xasprintf(
        "https://127.0.0.1:%d/api/v1/namespaces/default/pods/%s/exec?container=work&%s%s", port,
        name, query, tty ? "&tty=true" : "&stderr=true");
    cleanup_free char *ca = tu_join(scratch, "ca.pem");
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.protocols = sp_kube_exec_protocols;
    o.bearer_token = "token-one";
    o.ca_file = ca;
    sp_ws *ws = NULL;
    sp_error *err = NULL;
    if (sp_ws_connect(&ws, url, &o, &err) < 0)
        fail_msg("exec connect %s: %s", query, err->message);
    snprintf(r->proto, sizeof(r->proto), "%s", sp_ws_protocol(ws));
    if (tty)
        assert_int_equal(sp_kube_exec_resize(ws, 77, 33, NULL), 0);
    if (in) {
        assert_int_equal(sp_kube_exec_write(ws, in, strlen(in), NULL), 0);
        if (strcmp(r->proto, SP_KUBE_PROTO_V5) == 0)
            assert_int_equal(sp_kube_exec_close_stdin(ws, NULL), 0);
    }
    r->out = (sp_buf)SP_BUF_INIT;
    r->err = (sp_buf)SP_BUF_INIT;
    unsigned close_code = 0;
    if (sp_kube_exec_collect(ws, &r->out, &r->err, &r->code, &close_code, 60000, NULL, &err) < 0)
        fail_msg("exec: %s", err->message);
    assert_int_equal(close_code, 1000);
    sp_ws_free(ws);
}

static void exec_dispose(exec_result *r)
{
    sp_buf_dispose(&r->out);
    sp_buf_dispose(&r->err);
}

static bool pod_exists(const char *name)
{
    char *argv[] = {"podman", "pod", "exists", (char *)name, NULL};
    return kt_run_quiet(argv) == 0;
}

static void test_create_exec_delete(void **state)
{
    (void)state;
    cleanup_free char *name = create(BUSYBOX);
    sp_error *err = NULL;
    if (sp_kube_pod_wait_ready(kube, name, 120000, &err) < 0)
        fail_msg("wait ready: %s", err->message);
    assert_true(pod_exists(name));

    /* v5: stdin, its close, stdout, stderr, the exit code. */
    exec_result r;
    exec_in(&r, name,
            "command=sh&command=-c&command=cat%3B%20echo%20err%20%3E%262%3B%20exit%203"
            "&stdin=true&stdout=true",
            "from stdin\n", false);
    assert_string_equal(r.proto, SP_KUBE_PROTO_V5);
    assert_string_equal(r.out.data, "from stdin\n");
    assert_string_equal(r.err.data, "err\n");
    assert_int_equal(r.code, 3);
    exec_dispose(&r);

    exec_in(&r, name, "command=true&stdout=true", NULL, false);
    assert_int_equal(r.code, 0);
    exec_dispose(&r);

    /* A tty, resized on channel 4: the size reaches the command (podman
     * passes it on a little later, so the command looks a few times). */
    exec_in(&r, name, "command=sh&command=-c&command=" STTY_LOOP "&stdin=true&stdout=true", "go\n",
            true);
    if (!strstr((const char *)r.out.data, "size 33 77"))
        fail_msg("tty: [%s]", r.out.data);
    assert_int_equal(r.code, 0);
    exec_dispose(&r);

    /* A v4-only server: the client falls back; no stdin close in v4. */
    if (sp_kube_call(kube, "POST", "/fake/faults", "{\"v4_only\":true}", NULL, "fault", &err) < 0)
        fail_msg("fault: %s", err->message);
    exec_in(&r, name, "command=sh&command=-c&command=echo%20v4%3B%20exit%204&stdout=true", NULL,
            false);
    assert_string_equal(r.proto, SP_KUBE_PROTO_V4);
    assert_string_equal(r.out.data, "v4\n");
    assert_int_equal(r.code, 4);
    exec_dispose(&r);
    if (sp_kube_call(kube, "POST", "/fake/faults", "{\"v4_only\":false}", NULL, "fault", &err) < 0)
        fail_msg("fault: %s", err->message);

    if (sp_kube_pod_delete(kube, name, 0, &err) < 0)
        fail_msg("delete: %s", err->message);
    assert_false(pod_exists(name));
    cJSON *out = NULL;
    assert_int_equal(sp_kube_pod_get(kube, name, &out, &err), SP_ENOTFOUND);
    sp_error_free(err);
}

static void test_missing_image(void **state)
{
    (void)state;
    cleanup_free char *name = create("localhost/sandpod-no-such-image:never");
    sp_error *err = NULL;
    assert_int_equal(sp_kube_pod_wait_ready(kube, name, 60000, &err), SP_ERROR);
    assert_non_null(strstr(err->message, "sandpod-no-such-image"));
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_kube_pod_delete(kube, name, 0, &err), 0);
    assert_false(pod_exists(name));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_exec_delete),
        cmocka_unit_test(test_missing_image),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
