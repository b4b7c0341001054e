/* Unit tests for sandbox/egress/egress_policy.c: rules as written (every
 * refusal and its message), and the decision: deny first, special ranges
 * only through a CIDR rule that names them (so DNS rebinding is refused),
 * mapped and NAT64 addresses judged as IPv4, default deny. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "egress_policy.h"
#include "testutil.h"

#define A SP_EGRESS_ALLOW
#define D SP_EGRESS_DENY

/* A public IPv4 and IPv6 address (no special range holds them). */
#define PUB4 "93.184.215.14"
#define PUB6 "2606:4700::1111"

static void expect_refused(const char *text, sp_egress_verdict v, const char *needle)
{
    sp_egress_rule r;
    sp_error *err = NULL;
    memset(&r, 0xa5, sizeof(r));
    int rc = sp_egress_rule_parse(&r, text, v, &err);
    if (rc != SP_EINVAL || !err)
        fail_msg("'%s' was accepted (rc %d)", text, rc);
    if (!strstr(err->message, needle))
        fail_msg("'%s' not in '%s'", needle, err->message);
    if (strchr(err->message, '\n'))
        fail_msg("a message of two lines: '%s'", err->message);
    assert_null(r.host);
    assert_null(r.text);
    sp_error_free(err);
}

static sp_egress_rule parsed(const char *text)
{
    sp_egress_rule r;
    sp_error *err = NULL;
    if (sp_egress_rule_parse(&r, text, A, &err) != 0)
        fail_msg("'%s' refused: %s", text, err->message);
    return r;
}

static void add(sp_egress_policy *p, const char *text, sp_egress_verdict v)
{
    sp_error *err = NULL;
    if (sp_egress_policy_add(p, text, v, &err) != 0)
        fail_msg("'%s' refused: %s", text, err->message);
}

/* Decide on host (may be NULL) connecting to the IPv4 or IPv6 address ip. */
static bool decide(sp_egress_decision *d, const sp_egress_policy *p, const char *host,
                   const char *ip, uint16_t port)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(9); /* the port parameter decides, not this */
        assert_int_equal(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(9);
        assert_int_equal(inet_pton(AF_INET, ip, &s4->sin_addr), 1);
    }
    bool ok = sp_egress_decide(d, p, host, (struct sockaddr *)&ss, port);
    assert_int_equal(ok, d->verdict == SP_EGRESS_ALLOW);
    return ok;
}

/* Expect an allow or deny by the rule written as text. */
static void expect_rule(const sp_egress_policy *p, const char *host, const char *ip, uint16_t port,
                        sp_egress_verdict v, const char *text)
{
    sp_egress_decision d;
    decide(&d, p, host, ip, port);
    if (d.verdict != v || d.reason != SP_EGRESS_R_RULE || !d.rule ||
        strcmp(d.rule->text, text) != 0)
        fail_msg("%s %s:%u: verdict %d reason %d rule '%s', expected %d by '%s'", host ? host : "-",
                 ip, port, d.verdict, d.reason, d.rule ? d.rule->text : "", v, text);
}

static void expect_reason(const sp_egress_policy *p, const char *host, const char *ip,
                          uint16_t port, sp_egress_reason why, const char *special)
{
    sp_egress_decision d;
    assert_false(decide(&d, p, host, ip, port));
    if (d.reason != why || (special && (!d.special || strcmp(d.special, special) != 0)))
        fail_msg("%s %s:%u: reason %d special '%s' rule '%s', expected %d '%s'", host ? host : "-",
                 ip, port, d.reason, d.special ? d.special : "", d.rule ? d.rule->text : "", why,
                 special ? special : "");
    assert_null(d.rule);
}

static void test_parse_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *text, *needle;
    } cases[] = {
        {"exa mple.com", "--allow 'exa mple.com': a host name holds only letters"},
        /* fuzz_egress: the reason quoted the address with its newline. */
        {"[2001:db8::\n64]:443", "'2001:db8::?64' is not an IPv6 address"},
        {"10.0.0\n.1", "--allow '10.0.0?.1': a host name holds only"},
        {"*", "--allow '*': '*' alone would allow every host: use --network default"},
        {"*:443", "use --network default"},
        {"*.com", "'*.com' would allow a whole top-level domain"},
        {"*.COM.", "'*.com' would allow a whole top-level domain"},
        {"a.*.example.com", "a wildcard is only the whole first label"},
        {"*example.com", "a wildcard is only the whole first label"},
        {"foo*.example.com", "a wildcard is only the whole first label"},
        {"*.*.example.com", "a wildcard is only the whole first label"},
        {"b\xc3\xbc"
         "cher.de",
         "non-ASCII host name: write its punycode form (xn--"},
        {"-a.example.com", "neither starts nor ends with '-'"},
        {"a-.example.com", "neither starts nor ends with '-'"},
        {"a..example.com", "no empty label"},
        {".example.com", "no empty label"},
        {"example.com..", "no empty label"},
        {"a.1", "the last label of a host name is not a number"},
        {"example.com:0", "a port is a number from 1 to 65535"},
        {"example.com:65536", "a port is a number from 1 to 65535"},
        {"example.com:", "no port after ':'"},
        {"example.com:http", "a port is a number from 1 to 65535, or a range"},
        {"example.com:1-", "a port is a number from 1 to 65535, or a range"},
        {"example.com:-5", "a port is a number from 1 to 65535, or a range"},
        {"example.com:+5", "a port is a number from 1 to 65535, or a range"},
        {"example.com:9000-8000", "a port range runs from low to high"},
        {"example.com/24", "a network is an address and a prefix length"},
        {"example.com:443:1", "is not an IPv6 address (with a port: [ADDRESS]:PORT)"},
        {"[2001:db8::1", "no ']' after '['"},
        {"[1.2.3.4]:443", "brackets are for IPv6 addresses only"},
        {"[2001:db8::1]443", "only ':PORT' may follow ']'"},
        {"[2001:db8::1]:0", "a port is a number from 1 to 65535"},
        {"[2001:db8::1]:99999", "a port is a number from 1 to 65535"},
        {"1.2.3.256", "'1.2.3.256' is not an IPv4 address"},
        {"127.1", "'127.1' is not an IPv4 address"},
        {"10.0.0.1/8", "bits are set past the prefix: the network is 10.0.0.0/8"},
        {"10.0.0.0/33", "the prefix length after '/' is a number from 0 to 32"},
        {"10.0.0.0/", "the prefix length after '/' is a number from 0 to 32"},
        {"10.0.0.0/8:0", "a port is a number from 1 to 65535"},
        {"2001:db8::1/129", "the prefix length after '/' is a number from 0 to 128"},
        {"2001:db8::1/32", "the network is 2001:db8::/32"},
        {"fe80::1%eth0", "'fe80::1%eth0' is not an IPv6 address"},
        {"::ffff:127.0.0.1", "judged as IPv4: write 127.0.0.1"},
        {"[::ffff:10.0.0.0/104]:443", "judged as IPv4: write 10.0.0.0/8"},
        {"64:ff9b::808:808", "judged as IPv4: write 8.8.8.8"},
        {"exa\nmple.com", "--allow 'exa?mple.com': a host name holds only"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_refused(cases[i].text, A, cases[i].needle);

    expect_refused("exa mple.com", D, "--deny 'exa mple.com': a host name holds only");
    expect_refused("", A, "--allow: an empty rule");
    expect_refused(NULL, D, "--deny: an empty rule");

    char label[80], name[300], text[1100];
    memset(label, 'a', 64);
    memcpy(label + 64, ".com", 5);
    expect_refused(label, A, "a label of a host name is at most 63 bytes");
    /* 254 bytes: 3 labels of 63, one of 62, and the dots. */
    memset(name, 'a', 254);
    name[63] = name[127] = name[191] = '.';
    name[254] = '\0';
    expect_refused(name, A, "a host name is at most 253 bytes");
    memset(text, 'a', 1025);
    text[1025] = '\0';
    expect_refused(text, A, "a rule is at most 1024 bytes");
}

static void test_parse_names(void **state)
{
    (void)state;
    sp_egress_rule r = parsed("Example.COM.");
    assert_int_equal(r.kind, SP_EGRESS_HOST);
    assert_int_equal(r.verdict, A);
    assert_string_equal(r.host, "example.com");
    assert_string_equal(r.text, "Example.COM.");
    assert_int_equal(r.port_lo, 1);
    assert_int_equal(r.port_hi, 65535);
    sp_egress_rule_dispose(&r);
    assert_null(r.text);

    r = parsed("*.Example.com.:443");
    assert_int_equal(r.kind, SP_EGRESS_DOMAIN);
    assert_string_equal(r.host, "example.com");
    assert_int_equal(r.port_lo, 443);
    assert_int_equal(r.port_hi, 443);
    sp_egress_rule_dispose(&r);

    r = parsed("*.co.uk"); /* no public suffix list: two labels are enough */
    assert_string_equal(r.host, "co.uk");
    sp_egress_rule_dispose(&r);

    static const char *fine[] = {"_acme-challenge.example.com", "xn--bcher-kva.de", "localhost",
                                 "a1.example.com:8000-8999", "1a.example"};
    for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
        r = parsed(fine[i]);
        assert_int_equal(r.kind, SP_EGRESS_HOST);
        sp_egress_rule_dispose(&r);
    }

    /* The limits themselves pass: a 63-byte label, a 253-byte name. */
    char name[300];
    memset(name, 'a', 253);
    name[63] = name[127] = name[191] = '.';
    name[253] = '\0';
    r = parsed(name);
    assert_int_equal(strlen(r.host), 253);
    sp_egress_rule_dispose(&r);
}

static void test_parse_addresses(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int family, prefix;
        uint16_t lo, hi;
        const char *addr;
    } cases[] = {
        {"10.0.0.0/8:443", 4, 8, 443, 443, "10.0.0.0"},
        {"1.2.3.4", 4, 32, 1, 65535, "1.2.3.4"},
        {"0.0.0.0/0", 4, 0, 1, 65535, "0.0.0.0"},
        {"[2001:db8::1]:443", 6, 128, 443, 443, "2001:db8::1"},
        {"[2001:DB8::/32]:8000-8999", 6, 32, 8000, 8999, "2001:db8::"},
        {"2001:db8::/32", 6, 32, 1, 65535, "2001:db8::"},
        {"::1", 6, 128, 1, 65535, "::1"},
        {"[::1]", 6, 128, 1, 65535, "::1"},
        {"::/0", 6, 0, 1, 65535, "::"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sp_egress_rule r = parsed(cases[i].text);
        assert_int_equal(r.kind, SP_EGRESS_CIDR);
        assert_null(r.host);
        assert_string_equal(r.text, cases[i].text);
        assert_int_equal(r.net.family, cases[i].family);
        assert_int_equal(r.net.prefix, cases[i].prefix);
        assert_int_equal(r.port_lo, cases[i].lo);
        assert_int_equal(r.port_hi, cases[i].hi);
        char t[INET6_ADDRSTRLEN];
        inet_ntop(cases[i].family == 4 ? AF_INET : AF_INET6, r.net.addr, t, sizeof(t));
        assert_string_equal(t, cases[i].addr);
        sp_egress_rule_dispose(&r);
    }
}

static void test_wildcard(void **state)
{
    (void)state;
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    add(&p, "*.example.com", A);
    expect_rule(&p, "a.example.com", PUB4, 443, A, "*.example.com");
    expect_rule(&p, "a.b.c.example.com", PUB4, 443, A, "*.example.com");
    expect_rule(&p, "A.Example.COM.", PUB6, 443, A, "*.example.com");
    /* Not the apex, not a look-alike, not a name that merely holds it. */
    expect_reason(&p, "example.com", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    expect_reason(&p, "badexample.com", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    expect_reason(&p, "example.com.evil.net", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    expect_reason(&p, ".example.com", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    expect_reason(&p, "a..example.com", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    expect_reason(&p, NULL, PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    /* Both, when both are written. */
    add(&p, "example.com", A);
    expect_rule(&p, "example.com", PUB4, 443, A, "example.com");
    expect_rule(&p, "EXAMPLE.com.", PUB4, 443, A, "example.com");
    /* A name that is no host name matches no name rule. */
    expect_reason(&p, "example.com:443", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    expect_reason(&p, "x.example.com/", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    sp_egress_policy_dispose(&p);
}

static void test_ports(void **state)
{
    (void)state;
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    add(&p, "any.example", A);
    add(&p, "one.example:443", A);
    add(&p, "range.example:8000-8999", A);
    add(&p, "8.8.8.8:53", A);
    expect_rule(&p, "any.example", PUB4, 1, A, "any.example");
    expect_rule(&p, "any.example", PUB4, 65535, A, "any.example");
    expect_rule(&p, "one.example", PUB4, 443, A, "one.example:443");
    expect_reason(&p, "one.example", PUB4, 80, SP_EGRESS_R_NO_RULE, NULL);
    expect_reason(&p, "range.example", PUB4, 7999, SP_EGRESS_R_NO_RULE, NULL);
    expect_rule(&p, "range.example", PUB4, 8000, A, "range.example:8000-8999");
    expect_rule(&p, "range.example", PUB4, 8999, A, "range.example:8000-8999");
    expect_reason(&p, "range.example", PUB4, 9000, SP_EGRESS_R_NO_RULE, NULL);
    expect_rule(&p, NULL, "8.8.8.8", 53, A, "8.8.8.8:53");
    expect_reason(&p, NULL, "8.8.8.8", 443, SP_EGRESS_R_NO_RULE, NULL);
    expect_reason(&p, NULL, "8.8.4.4", 53, SP_EGRESS_R_NO_RULE, NULL);
    sp_egress_policy_dispose(&p);
}

static void test_deny_wins(void **state)
{
    (void)state;
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    /* By name, whichever comes first. */
    add(&p, "bad.example.com", D);
    add(&p, "*.example.com", A);
    add(&p, "*.evil.example.net", D);
    add(&p, "*.example.net", A);
    expect_rule(&p, "bad.example.com", PUB4, 443, D, "bad.example.com");
    expect_rule(&p, "BAD.example.com.", PUB4, 443, D, "bad.example.com");
    expect_rule(&p, "good.example.com", PUB4, 443, A, "*.example.com");
    expect_rule(&p, "x.evil.example.net", PUB4, 443, D, "*.evil.example.net");
    expect_rule(&p, "ok.example.net", PUB4, 443, A, "*.example.net");
    /* By network, over a name rule, and over an earlier network rule. */
    add(&p, "8.8.0.0/16", A);
    add(&p, "93.184.0.0/16", D);
    add(&p, "[2606:4700::/32]:443", D);
    add(&p, "8.8.8.8", D);
    expect_rule(&p, "good.example.com", PUB4, 443, D, "93.184.0.0/16");
    expect_rule(&p, "good.example.com", PUB6, 443, D, "[2606:4700::/32]:443");
    expect_rule(&p, "good.example.com", PUB6, 80, A, "*.example.com");
    expect_rule(&p, NULL, "8.8.8.8", 53, D, "8.8.8.8");
    expect_rule(&p, NULL, "8.8.4.4", 53, A, "8.8.0.0/16");
    /* By port only on its ports. */
    add(&p, "ssh.example.org:22", D);
    add(&p, "ssh.example.org", A);
    expect_rule(&p, "ssh.example.org", PUB6, 22, D, "ssh.example.org:22");
    expect_rule(&p, "ssh.example.org", PUB6, 2222, A, "ssh.example.org");
    /* Over a special range a CIDR rule opened. */
    add(&p, "10.0.0.0/8", A);
    add(&p, "10.1.2.3", D);
    expect_rule(&p, NULL, "10.1.2.4", 80, A, "10.0.0.0/8");
    expect_rule(&p, NULL, "10.1.2.3", 80, D, "10.1.2.3");
    sp_egress_policy_dispose(&p);
}

static void test_default_deny(void **state)
{
    (void)state;
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    sp_egress_decision d;
    expect_reason(&p, "example.com", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    assert_false(decide(&d, &p, NULL, PUB6, 443));
    add(&p, "a.example", A);
    add(&p, "b.example", D);
    expect_reason(&p, "c.example", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    expect_reason(&p, "example", PUB4, 443, SP_EGRESS_R_NO_RULE, NULL);
    assert_false(decide(&d, &p, "c.example", PUB4, 443));
    char *t = sp_egress_decision_text(&d);
    assert_string_equal(t, "refused: no --allow rule matches (default deny)");
    free(t);
    sp_egress_policy_dispose(&p);
}

/* Every built-in special range: refused for an allowed name (the name
 * resolved there: DNS rebinding), opened by a CIDR rule within it, and
 * not by one that merely holds it. */
static void test_special_ranges(void **state)
{
    (void)state;
    static const struct {
        const char *ip, *name, *cidr;
    } cases[] = {
        {"0.0.0.0", "unspecified (this network)", "0.0.0.0/8"},
        {"0.1.2.3", "unspecified (this network)", "0.0.0.0/8"},
        {"10.1.2.3", "private", "10.0.0.0/8"},
        {"100.64.0.1", "carrier-grade NAT", "100.64.0.0/10"},
        {"100.127.255.254", "carrier-grade NAT", "100.64.0.0/10"},
        {"127.0.0.1", "loopback", "127.0.0.0/8"},
        {"127.255.0.9", "loopback", "127.255.0.0/16:443"},
        {"169.254.169.254", "link-local (cloud metadata)", "169.254.169.254"},
        {"172.16.0.1", "private", "172.16.0.0/12"},
        {"172.31.255.255", "private", "172.31.0.0/16"},
        {"192.0.0.192", "reserved (IETF protocol assignments)", "192.0.0.0/24"},
        {"192.0.2.1", "documentation", "192.0.2.0/24"},
        {"192.88.99.1", "6to4 relay", "192.88.99.0/24"},
        {"192.168.1.1", "private", "192.168.0.0/16"},
        {"198.51.100.7", "documentation", "198.51.100.0/24"},
        {"203.0.113.9", "documentation", "203.0.113.0/24"},
        {"224.0.0.251", "multicast", "224.0.0.0/4"},
        {"239.255.255.250", "multicast", "239.0.0.0/8"},
        {"240.0.0.1", "reserved", "240.0.0.0/4"},
        {"255.255.255.255", "broadcast", "255.255.255.255"},
        {"::", "unspecified", "::/128"},
        {"::1", "loopback", "::1"},
        {"::7f00:1", "reserved (IPv4-compatible and translated forms)", "::/8"},
        {"::ffff:0:a00:1", "reserved (IPv4-compatible and translated forms)", "::/8"},
        {"64:ff9b:1::a00:1", "NAT64 (local use)", "64:ff9b:1::/48"},
        {"100::1", "discard", "100::/64"},
        {"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo", "2001::/32"},
        {"2001:2::1", "benchmarking", "2001:2::/48"},
        {"2001:db8::1", "documentation", "2001:db8::/32"},
        {"2002:7f00:1::1", "6to4", "2002::/16"},
        {"3fff::1", "documentation", "3fff::/20"},
        {"fd00:ec2::254", "unique local", "fc00::/7"},
        {"fe80::1", "link-local", "fe80::/10"},
        {"fec0::1", "site-local (deprecated)", "fec0::/10"},
        {"ff02::1", "multicast", "ff00::/8"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sp_egress_policy p = SP_EGRESS_POLICY_INIT;
        add(&p, "victim.example.com", A);
        add(&p, "*.victim.example.com", A);
        add(&p, "0.0.0.0/0", A);
        add(&p, "::/0", A);
        expect_reason(&p, "victim.example.com", cases[i].ip, 443, SP_EGRESS_R_SPECIAL,
                      cases[i].name);
        expect_reason(&p, "a.victim.example.com", cases[i].ip, 443, SP_EGRESS_R_SPECIAL,
                      cases[i].name);
        expect_reason(&p, NULL, cases[i].ip, 443, SP_EGRESS_R_SPECIAL, cases[i].name);
        add(&p, cases[i].cidr, A);
        expect_rule(&p, "victim.example.com", cases[i].ip, 443, A, cases[i].cidr);
        expect_rule(&p, NULL, cases[i].ip, 443, A, cases[i].cidr);
        sp_egress_policy_dispose(&p);
    }
    /* The same public addresses pass: the rules above are not what refused. */
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    add(&p, "victim.example.com", A);
    expect_rule(&p, "victim.example.com", PUB4, 443, A, "victim.example.com");
    expect_rule(&p, "victim.example.com", PUB6, 443, A, "victim.example.com");
    /* The benchmarking range is not special (egress_policy.c says why):
     * the tests' stand-ins for the internet live there. */
    expect_rule(&p, "victim.example.com", "198.18.0.2", 443, A, "victim.example.com");
    expect_rule(&p, "victim.example.com", "198.19.255.1", 443, A, "victim.example.com");
    /* A rule wider than the range, or beside the address, opens nothing. */
    add(&p, "10.0.0.0/7", A);
    add(&p, "10.9.0.0/16", A);
    add(&p, "127.0.0.1:8080", A);
    expect_reason(&p, NULL, "10.1.2.3", 80, SP_EGRESS_R_SPECIAL, "private");
    expect_rule(&p, NULL, "11.1.2.3", 80, A, "10.0.0.0/7");
    expect_rule(&p, NULL, "10.9.0.1", 80, A, "10.9.0.0/16");
    expect_rule(&p, NULL, "127.0.0.1", 8080, A, "127.0.0.1:8080");
    expect_reason(&p, NULL, "127.0.0.1", 22, SP_EGRESS_R_SPECIAL, "loopback");
    sp_egress_policy_dispose(&p);
}

static void test_mapped(void **state)
{
    (void)state;
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    sp_egress_decision d;
    add(&p, "victim.example.com", A);
    add(&p, "::/0", A);
    add(&p, "8.8.8.0/24", A);
    /* IPv4-mapped: the IPv4 address's special range, and IPv4 rules. */
    expect_reason(&p, "victim.example.com", "::ffff:127.0.0.1", 443, SP_EGRESS_R_SPECIAL,
                  "loopback");
    decide(&d, &p, "victim.example.com", "::ffff:169.254.169.254", 80);
    assert_string_equal(d.addr, "169.254.169.254");
    assert_string_equal(d.special, "link-local (cloud metadata)");
    expect_rule(&p, NULL, "::ffff:8.8.8.8", 53, A, "8.8.8.0/24");
    decide(&d, &p, NULL, "::ffff:8.8.8.8", 53);
    assert_string_equal(d.addr, "8.8.8.8");
    /* An IPv6 rule does not hold it: it is not an IPv6 destination. */
    expect_reason(&p, NULL, "::ffff:9.9.9.9", 53, SP_EGRESS_R_NO_RULE, NULL);
    expect_rule(&p, NULL, PUB6, 53, A, "::/0");
    /* NAT64's well-known prefix likewise. */
    expect_reason(&p, "victim.example.com", "64:ff9b::a9fe:a9fe", 80, SP_EGRESS_R_SPECIAL,
                  "link-local (cloud metadata)");
    expect_reason(&p, NULL, "64:ff9b::a00:1", 80, SP_EGRESS_R_SPECIAL, "private");
    expect_rule(&p, NULL, "64:ff9b::808:808", 53, A, "8.8.8.0/24");
    /* An IPv4 deny holds the mapped address too. */
    add(&p, "8.8.8.8", D);
    expect_rule(&p, "victim.example.com", "::ffff:8.8.8.8", 53, D, "8.8.8.8");
    expect_rule(&p, NULL, "64:ff9b::808:808", 53, D, "8.8.8.8");
    /* And an IPv4 CIDR opens a mapped special address. */
    add(&p, "127.0.0.1", A);
    expect_rule(&p, NULL, "::ffff:127.0.0.1", 443, A, "127.0.0.1");
    sp_egress_policy_dispose(&p);
}

static void test_added_special(void **state)
{
    (void)state;
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    sp_error *err = NULL;
    add(&p, "*.example.com", A);
    add(&p, "10.0.0.0/8", A);
    assert_int_equal(sp_egress_policy_add_special(&p, "93.184.215.14", "this host", &err), 0);
    assert_int_equal(sp_egress_policy_add_special(&p, "10.88.0.0/16", "podman bridge", &err), 0);
    assert_int_equal(sp_egress_policy_add_special(&p, "2606:4700::/32", "this host", &err), 0);
    expect_reason(&p, "www.example.com", PUB4, 443, SP_EGRESS_R_SPECIAL, "this host");
    expect_reason(&p, "www.example.com", PUB6, 443, SP_EGRESS_R_SPECIAL, "this host");
    expect_rule(&p, "www.example.com", "93.184.215.15", 443, A, "*.example.com");
    /* 10/8 opens the private range, not the bridge inside it. */
    expect_rule(&p, NULL, "10.1.1.1", 80, A, "10.0.0.0/8");
    expect_reason(&p, NULL, "10.88.0.5", 80, SP_EGRESS_R_SPECIAL, "podman bridge");
    add(&p, "10.88.0.0/16", A);
    expect_rule(&p, NULL, "10.88.0.5", 80, A, "10.88.0.0/16");
    /* As specific as a built-in range: the caller's name. */
    assert_int_equal(sp_egress_policy_add_special(&p, "127.0.0.0/8", "this host", &err), 0);
    expect_reason(&p, NULL, "127.0.0.1", 80, SP_EGRESS_R_SPECIAL, "this host");

    assert_int_equal(sp_egress_policy_add_special(&p, "nope", "x", &err), SP_EINVAL);
    assert_non_null(strstr(err->message, "special range 'nope': 'nope' is not an IPv4 address"));
    sp_error_free(err);
    err = NULL;
    assert_int_equal(sp_egress_policy_add_special(&p, "[::1]:80", "x", &err), SP_EINVAL);
    assert_non_null(strstr(err->message, "special range '[::1]:80'"));
    sp_error_free(err);
    sp_egress_policy_dispose(&p);
    assert_null(p.rules);
    assert_int_equal(p.n_special, 0);
}

/* A name is looked up only when a name rule allows it: network rules,
 * however wide, never make the proxy resolve (DNS tunnelling). */
static void test_may_resolve(void **state)
{
    (void)state;
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    add(&p, "0.0.0.0/0", A);
    add(&p, "*.example.com:443", A);
    add(&p, "pypi.org", A);
    add(&p, "bad.example.com", D);
    sp_egress_decision d;
    assert_true(sp_egress_may_resolve(&d, &p, "files.example.com", 443));
    assert_ptr_equal(d.rule, &p.rules[1]);
    assert_true(sp_egress_may_resolve(&d, &p, "PyPI.org.", 8080));
    assert_false(sp_egress_may_resolve(&d, &p, "files.example.com", 80));
    assert_int_equal(d.reason, SP_EGRESS_R_NO_NAME);
    assert_false(sp_egress_may_resolve(&d, &p, "example.com", 443));
    assert_false(sp_egress_may_resolve(&d, &p, "bad.example.com", 443));
    assert_int_equal(d.reason, SP_EGRESS_R_RULE);
    assert_ptr_equal(d.rule, &p.rules[3]);
    assert_false(sp_egress_may_resolve(&d, &p, "secret-data.attacker.net", 443));
    assert_int_equal(d.reason, SP_EGRESS_R_NO_NAME);
    char *t = sp_egress_decision_text(&d);
    assert_non_null(strstr(t, "looked up only"));
    free(t);
    assert_false(sp_egress_may_resolve(&d, &p, "exa mple.com", 443));
    assert_int_equal(d.reason, SP_EGRESS_R_NAME);
    assert_false(sp_egress_may_resolve(&d, &p, NULL, 443));
    sp_egress_policy_dispose(&p);
}

static void test_decision_text(void **state)
{
    (void)state;
    sp_egress_policy p = SP_EGRESS_POLICY_INIT;
    sp_egress_decision d;
    add(&p, "*.Example.com", A);
    add(&p, "bad.example.com:443", D);
    static const struct {
        const char *host, *ip, *text;
    } cases[] = {
        {"www.example.com", PUB4, "allowed by --allow '*.Example.com'"},
        {"bad.example.com", PUB4, "denied by --deny 'bad.example.com:443'"},
        {"www.example.com", "::ffff:127.0.0.1",
         "refused: 127.0.0.1 is loopback and no --allow CIDR rule names it"},
        {"www.example.org", PUB4, "refused: no --allow rule matches (default deny)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        decide(&d, &p, cases[i].host, cases[i].ip, 443);
        char *t = sp_egress_decision_text(&d);
        assert_string_equal(t, cases[i].text);
        free(t);
    }
    /* What is no IP address is refused, not judged. */
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    assert_false(sp_egress_decide(&d, &p, "www.example.com", (struct sockaddr *)&un, 443));
    assert_int_equal(d.reason, SP_EGRESS_R_ADDRESS);
    assert_false(sp_egress_decide(&d, &p, "www.example.com", NULL, 443));
    assert_int_equal(d.reason, SP_EGRESS_R_ADDRESS);
    char *t = sp_egress_decision_text(&d);
    assert_string_equal(t, "refused: not an IPv4 or IPv6 address");
    free(t);
    sp_egress_policy_dispose(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_refusals),  cmocka_unit_test(test_parse_names),
        cmocka_unit_test(test_parse_addresses), cmocka_unit_test(test_wildcard),
        cmocka_unit_test(test_ports),           cmocka_unit_test(test_deny_wins),
        cmocka_unit_test(test_default_deny),    cmocka_unit_test(test_special_ranges),
        cmocka_unit_test(test_mapped),          cmocka_unit_test(test_added_special),
        cmocka_unit_test(test_decision_text),   cmocka_unit_test(test_may_resolve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
