/* Unit tests for sandbox/egress/egress_secrets.c: names, scopes (the
 * scheme's port when none is given), the proxy's file both ways and its
 * refusals, which connections a secret is for, and replacing stand-ins
 * only where a secret may go; and of the host side's HTTPS pieces
 * (sandbox_secrets.c): the variables that point clients at the proxy's CA
 * and the CAs the proxy trusts upstream. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress_proxy.h"
#include "egress_secrets.h"
#include "sandbox_internal.h"
#include "testutil.h"

#define S1 SP_SECRET_STANDIN_PREFIX "0123456789abcdef0123456789abcdef01234567"
#define S2 SP_SECRET_STANDIN_PREFIX "89abcdef0123456789abcdef0123456789abcdef"

static void test_names(void **state)
{
    (void)state;
    assert_true(sp_egress_secret_name_ok("GITHUB_TOKEN"));
    assert_true(sp_egress_secret_name_ok("_k1"));
    assert_false(sp_egress_secret_name_ok(""));
    assert_false(sp_egress_secret_name_ok("1TOKEN"));
    assert_false(sp_egress_secret_name_ok("A-B"));
    assert_false(sp_egress_secret_name_ok("A=B"));
    assert_false(sp_egress_secret_name_ok("HTTPS_PROXY"));
    assert_false(sp_egress_secret_name_ok("PATH"));
    assert_false(sp_egress_secret_name_ok("SSL_CERT_FILE"));
}

static void expect_scope(const char *text, bool plain, uint16_t lo, uint16_t hi)
{
    sp_egress_scope s;
    sp_error *err = NULL;
    if (sp_egress_scope_parse(&s, text, &err) < 0)
        fail_msg("'%s' refused: %s", text, err->message);
    assert_int_equal(s.plain, plain);
    assert_int_equal(s.rule.port_lo, lo);
    assert_int_equal(s.rule.port_hi, hi);
    sp_egress_rule_dispose(&s.rule);
}

static void expect_bad_scope(const char *text, const char *needle)
{
    sp_egress_scope s;
    sp_error *err = NULL;
    assert_int_equal(sp_egress_scope_parse(&s, text, &err), SP_EINVAL);
    if (!strstr(err->message, needle))
        fail_msg("'%s' not in '%s'", needle, err->message);
    sp_error_free(err);
}

static void test_scopes(void **state)
{
    (void)state;
    expect_scope("api.example.com", false, 443, 443);
    expect_scope("api.example.com:8443", false, 8443, 8443);
    expect_scope("*.example.com", false, 443, 443);
    expect_scope("http://git.test", true, 80, 80);
    expect_scope("http://git.test:8080/", true, 8080, 8080);
    expect_scope("http://10.0.0.5:8080", true, 8080, 8080);
    expect_bad_scope("https://api.example.com", "a scope is HOST[:PORT]");
    expect_bad_scope("ftp://x.test", "a scope is HOST[:PORT]");
    expect_bad_scope("exa mple.com", "--secret-for 'exa mple.com'");
    expect_bad_scope("*", "--secret-for '*'");
}

static void test_file(void **state)
{
    (void)state;
    const char text[] =
        "# sandpod secrets 1\n"
        "secret TOKEN " S1 " h 736b2d6c697665 api.example.com,http://git.test:8080\n"
        "\n"
        "secret KEY " S2 " hqb 00ff *.example.com:8443\n";
    sp_egress_secrets s = {0};
    sp_error *err = NULL;
    assert_int_equal(sp_egress_secrets_parse(&s, text, strlen(text), &err), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.v[0].name, "TOKEN");
    assert_int_equal(s.v[0].value_len, 7);
    assert_memory_equal(s.v[0].value, "sk-live", 7);
    assert_false(s.v[0].in_query);
    assert_true(s.v[1].in_query && s.v[1].in_body);
    assert_int_equal(s.v[1].value[1], 0xff);
    char *again = sp_egress_secrets_text(&s);
    assert_string_equal(again, "# sandpod secrets 1\n"
                               "secret TOKEN " S1
                               " h 736b2d6c697665 api.example.com,http://git.test:8080\n"
                               "secret KEY " S2 " hqb 00ff *.example.com:8443\n");
    free(again);

    /* Which connections each is for: host, port and TLS or not. */
    assert_true(sp_egress_secret_for(&s.v[0], "api.example.com", 443, true));
    assert_true(sp_egress_secret_for(&s.v[0], "API.Example.com.", 443, true));
    assert_false(sp_egress_secret_for(&s.v[0], "api.example.com", 80, false));
    assert_false(sp_egress_secret_for(&s.v[0], "api.example.com", 8443, true));
    assert_true(sp_egress_secret_for(&s.v[0], "git.test", 8080, false));
    assert_false(sp_egress_secret_for(&s.v[0], "git.test", 8080, true));
    assert_false(sp_egress_secret_for(&s.v[0], "evil.test", 443, true));
    assert_true(sp_egress_secret_for(&s.v[1], "a.b.example.com", 8443, true));
    assert_false(sp_egress_secret_for(&s.v[1], "example.com", 8443, true));
    sp_egress_secrets_dispose(&s);

    /* An address scope: the literal the client named, in its network. */
    const char lit[] = "secret L " S1 " h 6b http://127.0.0.1:8080,10.1.0.0/16:443\n";
    assert_int_equal(sp_egress_secrets_parse(&s, lit, strlen(lit), &err), 0);
    assert_true(sp_egress_secret_for(&s.v[0], "127.0.0.1", 8080, false));
    assert_false(sp_egress_secret_for(&s.v[0], "127.0.0.2", 8080, false));
    assert_false(sp_egress_secret_for(&s.v[0], "127.0.0.1", 8081, false));
    assert_true(sp_egress_secret_for(&s.v[0], "10.1.2.3", 443, true));
    assert_false(sp_egress_secret_for(&s.v[0], "localhost", 8080, false));
    sp_egress_secrets_dispose(&s);

    /* Refused, each naming its line. */
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"secret TOKEN " S1 " h 6b a.test\nsecret X", "line 2: not 'secret NAME"},
        {"secret 1X " S1 " h 6b a.test\n", "line 1: '1X' is not a secret's name"},
        {"secret X sandpod-standin-00 h 6b a.test\n", "line 1: a malformed stand-in"},
        {"secret X " S1 " q 6b a.test\n", "where 'q' is not h[q][b]"},
        {"secret X " S1 " h 6 a.test\n", "line 1: a malformed value"},
        {"secret X " S1 " h zz a.test\n", "line 1: a malformed value"},
        {"secret X " S1 " h 6b https://a.test\n", "a scope is HOST[:PORT]"},
        {"secret X " S1 " h 6b a.test\nsecret X " S2 " h 6b a.test\n", "line 2: 'X' twice"},
        {"secret X " S1 " h 6b a.test\nsecret Y " S1 " h 6b a.test\n", "line 2: 'Y' twice"},
        {"secret X " S1 " h 6b a.test extra\n", "line 1: not 'secret NAME"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sp_egress_secrets b = {0};
        err = NULL;
        if (sp_egress_secrets_parse(&b, bad[i].text, strlen(bad[i].text), &err) != SP_EINVAL)
            fail_msg("accepted: %s", bad[i].text);
        if (!strstr(err->message, bad[i].needle))
            fail_msg("'%s' not in '%s'", bad[i].needle, err->message);
        sp_error_free(err);
        sp_egress_secrets_dispose(&b);
    }
}

static void test_replace(void **state)
{
    (void)state;
    const char text[] = "secret TOKEN " S1 " h 5345435245542d31 api.example.com\n"
                        "secret KEY " S2 " hq 5345435245542d32 api.example.com\n";
    sp_egress_secrets s = {0};
    sp_error *err = NULL;
    assert_int_equal(sp_egress_secrets_parse(&s, text, strlen(text), &err), 0);
    const char head[] = "Authorization: Bearer " S1 "\r\nX-Key: " S2
                        "\r\nX-Other: " SP_SECRET_STANDIN_PREFIX "zz\r\n";
    unsigned char *out = NULL;
    size_t n = 0;
    /* Headers: every secret for the host. */
    assert_int_equal(sp_egress_secrets_replace(&s, "api.example.com", 443, true, false, false, head,
                                               strlen(head), &out, &n),
                     2);
    const char want[] =
        "Authorization: Bearer SECRET-1\r\nX-Key: SECRET-2\r\nX-Other: " SP_SECRET_STANDIN_PREFIX
        "zz\r\n";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(out, want, n);
    free(out);
    /* Another host, or plain HTTP to it: nothing. */
    assert_int_equal(sp_egress_secrets_replace(&s, "evil.test", 443, true, false, false, head,
                                               strlen(head), &out, &n),
                     0);
    assert_memory_equal(out, head, strlen(head));
    free(out);
    assert_int_equal(sp_egress_secrets_replace(&s, "api.example.com", 80, false, false, false, head,
                                               strlen(head), &out, &n),
                     0);
    free(out);
    /* The query string: only the secret that goes there. */
    const char target[] = "/v1?a=" S1 "&b=" S2;
    assert_int_equal(sp_egress_secrets_replace(&s, "api.example.com", 443, true, true, false,
                                               target, strlen(target), &out, &n),
                     1);
    const char want_q[] = "/v1?a=" S1 "&b=SECRET-2";
    assert_int_equal(n, strlen(want_q));
    assert_memory_equal(out, want_q, n);
    free(out);
    /* The body: neither goes there. */
    assert_int_equal(sp_egress_secrets_replace(&s, "api.example.com", 443, true, false, true,
                                               target, strlen(target), &out, &n),
                     0);
    free(out);
    /* Found wherever they are; a bare prefix is no stand-in. */
    assert_ptr_equal(sp_egress_secrets_find(&s, head, strlen(head)), &s.v[0]);
    assert_ptr_equal(sp_egress_secrets_find(&s, "x" S2, strlen(S2) + 1), &s.v[1]);
    assert_null(sp_egress_secrets_find(&s, SP_SECRET_STANDIN_PREFIX "zz", 18));
    sp_egress_secrets_dispose(&s);
}

static void test_standin(void **state)
{
    (void)state;
    char a[SP_SECRET_STANDIN_LEN + 1], b[SP_SECRET_STANDIN_LEN + 1];
    assert_int_equal(sp_egress_standin_new(a), 0);
    assert_int_equal(sp_egress_standin_new(b), 0);
    assert_int_equal(strlen(a), SP_SECRET_STANDIN_LEN);
    assert_true(strncmp(a, SP_SECRET_STANDIN_PREFIX, strlen(SP_SECRET_STANDIN_PREFIX)) == 0);
    assert_string_not_equal(a, b);
    char line[256];
    snprintf(line, sizeof(line), "secret X %s h 6b a.test\n", a);
    sp_egress_secrets s = {0};
    sp_error *err = NULL;
    assert_int_equal(sp_egress_secrets_parse(&s, line, strlen(line), &err), 0);
    sp_egress_secrets_dispose(&s);
}

static void test_remove(void **state)
{
    (void)state;
    const char *text = "secret A " S1 " h 61 a.test\n"
                       "secret B " S2 " h 62 http://b.test\n"
                       "secret C " SP_SECRET_STANDIN_PREFIX
                       "00000000000000000000000000000000000000cc h 63 c.test\n";
    sp_egress_secrets s = {0};
    sp_error *err = NULL;
    assert_int_equal(sp_egress_secrets_parse(&s, text, strlen(text), &err), 0);
    assert_true(sp_egress_secrets_over_tls(&s));
    sp_egress_secrets_remove(&s, 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.v[0].name, "B");
    assert_string_equal(s.v[1].name, "C");
    sp_egress_secrets_remove(&s, 1);
    assert_int_equal(s.n, 1);
    /* B alone is for plain HTTP: no CA is needed. */
    assert_false(sp_egress_secrets_over_tls(&s));
    sp_egress_secrets_dispose(&s);
}

static bool has(char **v, const char *entry)
{
    for (; v && *v; v++)
        if (strcmp(*v, entry) == 0)
            return true;
    return false;
}

static void test_ca_env(void **state)
{
    (void)state;
    sp_strv env = {0};
    const char *user[] = {"SSL_CERT_FILE=/mine.pem", "OTHER=1", NULL};
    sp_sandbox_secrets_ca_env(&env, user);
    char **v = sp_strv_steal(&env);
    /* What -e sets is the user's; the rest name the bundle or the CA. */
    assert_false(has(v, "SSL_CERT_FILE=/.sandpod/egress/ca-bundle.pem"));
    assert_true(has(v, "CURL_CA_BUNDLE=/.sandpod/egress/ca-bundle.pem"));
    assert_true(has(v, "REQUESTS_CA_BUNDLE=/.sandpod/egress/ca-bundle.pem"));
    assert_true(has(v, "GIT_SSL_CAINFO=/.sandpod/egress/ca-bundle.pem"));
    assert_true(has(v, "NODE_EXTRA_CA_CERTS=/.sandpod/egress/ca.pem"));
    size_t n = 0;
    for (char **e = v; *e; e++)
        n++;
    assert_int_equal(n, 9);
    sp_strv_free(v);
}

static void test_trust(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *host = "-----BEGIN CERTIFICATE-----\nHOST\n-----END CERTIFICATE-----\n";
    const char *extra = "-----BEGIN CERTIFICATE-----\nEXTRA\n-----END CERTIFICATE-----";
    tu_write(dir, "host.pem", host, 0644);
    tu_write(dir, "extra.pem", extra, 0644);
    tu_write(dir, "not.pem", "hello\n", 0644);
    char *host_path = tu_join(dir, "host.pem"), *extra_path = tu_join(dir, "extra.pem");
    char *not_path = tu_join(dir, "not.pem"), *none = tu_join(dir, "none.pem");
    char *old = getenv("SSL_CERT_FILE") ? strdup(getenv("SSL_CERT_FILE")) : NULL;
    setenv("SSL_CERT_FILE", host_path, 1);
    sp_error *err = NULL;
    /* The host's bundle, then the extra CAs (a newline added), kept apart too. */
    assert_int_equal(sp_sandbox_secrets_trust(dir, extra_path, &err), 0);
    char *up = tu_read(dir, SP_EGRESS_UPSTREAM_CA, NULL),
         *mine = tu_read(dir, SP_EGRESS_EXTRA_CA, NULL);
    char want[512];
    snprintf(want, sizeof(want), "%s%s\n", host, extra);
    assert_string_equal(up, want);
    snprintf(want, sizeof(want), "%s\n", extra);
    assert_string_equal(mine, want);
    free(up);
    free(mine);
    /* A file with no certificate, a missing one: refused, named. */
    assert_int_equal(sp_sandbox_secrets_trust(dir, not_path, &err), SP_EINVAL);
    assert_non_null(strstr(err->message, "no PEM certificate in it"));
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_sandbox_secrets_trust(dir, none, &err), SP_ENOTFOUND);
    assert_non_null(strstr(err->message, "none.pem"));
    sp_error_free(err);
    if (old)
        setenv("SSL_CERT_FILE", old, 1);
    else
        unsetenv("SSL_CERT_FILE");
    free(old);
    free(host_path);
    free(extra_path);
    free(not_path);
    free(none);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),   cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_file),    cmocka_unit_test(test_replace),
        cmocka_unit_test(test_standin), cmocka_unit_test(test_remove),
        cmocka_unit_test(test_ca_env),  cmocka_unit_test(test_trust),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
