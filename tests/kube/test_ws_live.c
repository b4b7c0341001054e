/* The WebSocket client over its libcurl transport (CONNECT_ONLY) against an
 * independent server: python3-websockets (ws_server.py) on 127.0.0.1, over
 * http:// and https://. Skips when python3-websockets is missing (not
 * under CI=true, where setup.sh installs it). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "base.h"
#include "kube_exec.h"
#include "kube_testutil.h"
#include "testutil.h"
#include "ws.h"

static pid_t server_pid = -1;
static int port_main, port_v4, port_tls;
static char *scratch;

static int start_server(void **state)
{
    (void)state;
    scratch = tu_mkdtemp();
    char line[128];
    int st;
    if (kt_start_server(&server_pid, &st, line, sizeof(line), WS_SERVER, scratch, NULL) < 0 ||
        sscanf(line, "PORTS %d %d %d", &port_main, &port_v4, &port_tls) != 3) {
        kt_stop_server(&server_pid);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77 && !kt_ci()) {
            fprintf(stderr, "skip: python3-websockets is not installed\n");
            exit(77);
        }
        fprintf(stderr, "ws_server.py did not start (status %d)\n", st);
        return -1;
    }
    return 0;
}

static int stop_server(void **state)
{
    (void)state;
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
    }
    tu_rmtree(scratch);
    free(scratch);
    return 0;
}

static sp_ws *open_ws(int port, const char *scheme, const char *path, const sp_ws_opts *o)
{
    char url[256];
    snprintf(url, sizeof(url), "%s://127.0.0.1:%d%s", scheme, port, path);
    sp_ws *ws = NULL;
    sp_error *err = NULL;
    if (sp_ws_connect(&ws, url, o, &err) < 0)
        fail_msg("connect %s: %s", url, err->message);
    return ws;
}

static void recv_ok(sp_ws *ws, sp_ws_msg *m)
{
    sp_error *err = NULL;
    if (sp_ws_recv(ws, m, 10000, &err) < 0)
        fail_msg("recv: %s", err->message);
}

static void echo_checks(int port, const char *scheme)
{
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.protocols = sp_kube_exec_protocols;
    char ca[512];
    snprintf(ca, sizeof(ca), "%s/cert.pem", scratch);
    o.ca_file = ca;
    sp_ws *ws = open_ws(port, scheme, "/echo", &o);
    assert_string_equal(sp_ws_protocol(ws), SP_KUBE_PROTO_V5);
    sp_ws_msg m;
    assert_int_equal(sp_ws_send(ws, SP_WS_TEXT, "h\xc3\xa9llo", 6, 0, NULL), 0);
    recv_ok(ws, &m);
    assert_int_equal(m.opcode, SP_WS_TEXT);
    assert_int_equal(m.len, 6);
    assert_memory_equal(m.data, "h\xc3\xa9llo", 6);
    /* Binary, sent in fragments of 3 bytes: the server reassembles it. */
    static const uint8_t bin[] = {0, 1, 2, 0xff, 0xfe, 0, 7};
    assert_int_equal(sp_ws_send(ws, SP_WS_BINARY, bin, sizeof(bin), 3, NULL), 0);
    recv_ok(ws, &m);
    assert_int_equal(m.opcode, SP_WS_BINARY);
    assert_int_equal(m.len, sizeof(bin));
    assert_memory_equal(m.data, bin, sizeof(bin));
    /* An empty message. */
    assert_int_equal(sp_ws_send(ws, SP_WS_BINARY, "", 0, 0, NULL), 0);
    recv_ok(ws, &m);
    assert_int_equal(m.len, 0);
    assert_int_equal(sp_ws_close(ws, SP_WS_CLOSE_NORMAL, "done", NULL), 0);
    sp_ws_free(ws);
}

static void test_echo_http(void **state)
{
    (void)state;
    echo_checks(port_main, "http");
    echo_checks(port_main, "ws");
}

static void test_echo_https(void **state)
{
    (void)state;
    echo_checks(port_tls, "https");
    echo_checks(port_tls, "wss");
}

static void test_tls_verified(void **state)
{
    (void)state;
    /* Without the test CA the self-signed certificate is refused. */
    char url[128];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/echo", port_tls);
    sp_ws *ws = NULL;
    sp_error *err = NULL;
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.protocols = sp_kube_exec_protocols;
    assert_true(sp_ws_connect(&ws, url, &o, &err) < 0);
    assert_null(ws);
    assert_non_null(strstr(err->message, "certificate"));
    sp_error_free(err);
}

static void test_v4_fallback(void **state)
{
    (void)state;
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.protocols = sp_kube_exec_protocols;
    sp_ws *ws = open_ws(port_v4, "http", "/echo", &o);
    assert_string_equal(sp_ws_protocol(ws), SP_KUBE_PROTO_V4);
    /* v4 cannot say end of stdin. */
    sp_error *err = NULL;
    assert_int_equal(sp_kube_exec_close_stdin(ws, &err), SP_EINVAL);
    assert_non_null(strstr(err->message, "v5.channel.k8s.io"));
    sp_error_free(err);
    sp_ws_free(ws);
    /* Offering only v5 to a v4-only server fails the handshake clearly. */
    static const char *const v5only[] = {SP_KUBE_PROTO_V5, NULL};
    o.protocols = v5only;
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/echo", port_v4);
    err = NULL;
    ws = NULL;
    assert_true(sp_ws_connect(&ws, url, &o, &err) < 0);
    assert_non_null(strstr(err->message, "none of the offered subprotocols"));
    sp_error_free(err);
}

static void test_bearer(void **state)
{
    (void)state;
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.bearer_token = "t0ken.abc";
    sp_ws *ws = open_ws(port_main, "http", "/auth", &o);
    assert_string_equal(sp_ws_protocol(ws), "");
    sp_ws_msg m;
    recv_ok(ws, &m);
    assert_int_equal(m.len, strlen("Bearer t0ken.abc"));
    assert_memory_equal(m.data, "Bearer t0ken.abc", m.len);
    sp_ws_free(ws);
}

static void test_big_fragmented(void **state)
{
    (void)state;
    size_t n = 1u << 20;
    uint8_t *big = sp_xmalloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (uint8_t)(i * 7 + (i >> 11));
    sp_ws *ws = open_ws(port_main, "http", "/big", NULL);
    assert_int_equal(sp_ws_send(ws, SP_WS_BINARY, big, n, 60000, NULL), 0);
    sp_ws_msg m;
    recv_ok(ws, &m);
    assert_int_equal(m.opcode, SP_WS_BINARY);
    assert_int_equal(m.len, n);
    assert_memory_equal(m.data, big, n);
    sp_ws_free(ws);
    /* The same with a limit below it: a clear error, not a 1 MiB buffer. */
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.max_message = 1000;
    ws = open_ws(port_main, "http", "/big", &o);
    assert_int_equal(sp_ws_send(ws, SP_WS_BINARY, big, n, 0, NULL), 0);
    sp_error *err = NULL;
    assert_int_equal(sp_ws_recv(ws, &m, 10000, &err), SP_ETOOBIG);
    assert_non_null(strstr(err->message, "limit"));
    sp_error_free(err);
    sp_ws_free(ws);
    free(big);
}

static void test_ping_pong(void **state)
{
    (void)state;
    sp_ws *ws = open_ws(port_main, "http", "/ping", NULL);
    sp_ws_msg m;
    /* The server's ping is answered inside recv; it then says so. */
    recv_ok(ws, &m);
    assert_int_equal(m.opcode, SP_WS_TEXT);
    assert_memory_equal(m.data, "pong-ok", 7);
    /* Our own ping's pong is dropped on the way to the next message. */
    assert_int_equal(sp_ws_ping(ws, "x", 1, NULL), 0);
    assert_int_equal(sp_ws_close(ws, SP_WS_CLOSE_NORMAL, NULL, NULL), 0);
    sp_ws_free(ws);
}

static void test_server_close(void **state)
{
    (void)state;
    sp_ws *ws = open_ws(port_main, "http", "/close", NULL);
    sp_ws_msg m;
    recv_ok(ws, &m);
    assert_int_equal(m.opcode, SP_WS_CLOSE);
    assert_int_equal(m.close_code, 4001);
    assert_int_equal(m.reason_len, 3);
    assert_memory_equal(m.reason, "bye", 3);
    sp_error *err = NULL;
    assert_true(sp_ws_recv(ws, &m, 1000, &err) < 0);
    assert_non_null(strstr(err->message, "closed"));
    sp_error_free(err);
    assert_int_equal(sp_ws_close(ws, SP_WS_CLOSE_NORMAL, NULL, NULL), 0);
    sp_ws_free(ws);
}

static void test_drop_mid_message(void **state)
{
    (void)state;
    sp_ws *ws = open_ws(port_main, "http", "/drop", NULL);
    sp_ws_msg m;
    sp_error *err = NULL;
    int64_t t0 = sp_now_ms();
    int rc = sp_ws_recv(ws, &m, 10000, &err);
    assert_true(rc < 0);
    assert_int_not_equal(rc, SP_ETIMEOUT);
    assert_true(sp_now_ms() - t0 < 5000);
    if (!strstr(err->message, "middle of a message") && !strstr(err->message, "receive"))
        fail_msg("unclear error: %s", err->message);
    sp_error_free(err);
    sp_ws_free(ws);
}

static void test_timeout(void **state)
{
    (void)state;
    sp_ws *ws = open_ws(port_main, "http", "/silent", NULL);
    sp_ws_msg m;
    sp_error *err = NULL;
    int64_t t0 = sp_now_ms();
    assert_int_equal(sp_ws_recv(ws, &m, 300, &err), SP_ETIMEOUT);
    int64_t took = sp_now_ms() - t0;
    assert_true(took >= 250 && took < 3000);
    sp_error_free(err);
    sp_ws_free(ws);
}

static void test_refused_upgrade(void **state)
{
    (void)state;
    /* websockets answers a plain-HTTP path it cannot upgrade: here, a
     * request to a port with nothing listening is refused by libcurl. */
    sp_ws *ws = NULL;
    sp_error *err = NULL;
    assert_true(sp_ws_connect(&ws, "http://127.0.0.1:1/echo", NULL, &err) < 0);
    assert_null(ws);
    assert_non_null(strstr(err->message, "127.0.0.1:1"));
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_ws_connect(&ws, "ftp://127.0.0.1/x", NULL, &err), SP_EINVAL);
    sp_error_free(err);
}

static void test_exec_channels(void **state)
{
    (void)state;
    sp_ws_opts o = SP_WS_OPTS_INIT;
    o.protocols = sp_kube_exec_protocols;
    sp_ws *ws = open_ws(port_main, "http", "/exec", &o);
    assert_int_equal(sp_kube_exec_write(ws, "abc\n", 4, NULL), 0);
    assert_int_equal(sp_kube_exec_resize(ws, 80, 24, NULL), 0);
    assert_int_equal(sp_kube_exec_close_stdin(ws, NULL), 0);
    sp_buf out = SP_BUF_INIT, errb = SP_BUF_INIT;
    int code;
    unsigned close_code = 0;
    sp_error *err = NULL;
    if (sp_kube_exec_collect(ws, &out, &errb, &code, &close_code, 10000, NULL, &err) < 0)
        fail_msg("exec: %s", err->message);
    assert_int_equal(close_code, 1000);
    assert_string_equal(out.data, "abc\nresize 80x24\n");
    assert_string_equal(errb.data, "err");
    assert_int_equal(code, 3);
    sp_buf_dispose(&out);
    sp_buf_dispose(&errb);
    sp_ws_free(ws);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_http),        cmocka_unit_test(test_echo_https),
        cmocka_unit_test(test_tls_verified),     cmocka_unit_test(test_v4_fallback),
        cmocka_unit_test(test_bearer),           cmocka_unit_test(test_big_fragmented),
        cmocka_unit_test(test_ping_pong),        cmocka_unit_test(test_server_close),
        cmocka_unit_test(test_drop_mid_message), cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_refused_upgrade),  cmocka_unit_test(test_exec_channels),
    };
    return cmocka_run_group_tests(tests, start_server, stop_server);
}
