/* Fuzz target: what the egress proxy parses from the workload and from the
 * network: a TLS ClientHello's server name, a DNS answer, and a rule as a
 * user writes it.
 *
 * Input: byte 0 picks the parser (0: ClientHello, 1: DNS answer with the id
 * in bytes 1-2, for "example.com"; 2: an allow rule, 3: a deny rule; with
 * bit 7 set, a secrets file, egress_secrets.h); the rest is its input. Properties: nothing is read
 * past the input (ASan); a server name is NUL-terminated, holds no NUL and fits; a DNS answer gives
 * at most SP_EGRESS_MAX_ADDRS addresses, each IPv4 or IPv6; a rule is refused with one line naming
 * the option, or decides connections without failing; a secrets file that parses gives the same
 * text back when written and read again, and replacing stand-ins in it stops. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "egress_policy.h"
#include "egress_proxy.h"
#include "egress_resolve.h"
#include "egress_secrets.h"
#include "fuzz.h"
#include "sandpod/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 << 16)
        return 0;
    const uint8_t *in = data + 1;
    size_t len = size - 1;
    if (data[0] & 0x80) {
        sp_egress_secrets s = {0}, again = {0};
        sp_error *err = NULL;
        if (sp_egress_secrets_parse(&s, (const char *)in, len, &err) == 0) {
            char *t = sp_egress_secrets_text(&s);
            FZ_ASSERT(sp_egress_secrets_parse(&again, t, strlen(t), NULL) == 0, "re-read: %s", t);
            char *t2 = sp_egress_secrets_text(&again);
            FZ_ASSERT(strcmp(t, t2) == 0, "not the same text:\n%s\n%s", t, t2);
            unsigned char *out = NULL;
            size_t n = 0;
            sp_egress_secrets_replace(&s, "api.example.com", 443, true, false, false, in, len, &out,
                                      &n);
            free(out);
            free(t);
            free(t2);
        } else {
            FZ_ASSERT(err && err->message && !strchr(err->message, '\n'), "bad error");
        }
        sp_error_free(err);
        sp_egress_secrets_dispose(&s);
        sp_egress_secrets_dispose(&again);
        return 0;
    }
    switch (data[0] & 3) {
    case 0: {
        char name[256];
        int tls = 0;
        int r = sp_egress_sni(name, sizeof(name), in, len, &tls);
        FZ_ASSERT(r >= -2 && r <= 1, "sni returned %d", r);
        if (r == 1) {
            FZ_ASSERT(tls, "a server name outside TLS");
            size_t n = strnlen(name, sizeof(name));
            FZ_ASSERT(n > 0 && n < sizeof(name), "server name of %zu bytes", n);
        }
        break;
    }
    case 1: {
        if (len < 2)
            return 0;
        sp_egress_addrs out = {.n = 0};
        int rcode = 0;
        int r = sp_egress_dns_parse(&out, in + 2, len - 2, (unsigned)in[0] << 8 | in[1],
                                    "example.com", &rcode);
        FZ_ASSERT(r >= -1 && out.n <= SP_EGRESS_MAX_ADDRS, "dns: %d, %zu addresses", r, out.n);
        for (size_t i = 0; i < out.n; i++)
            FZ_ASSERT(out.a[i].ss_family == AF_INET || out.a[i].ss_family == AF_INET6, "family %d",
                      out.a[i].ss_family);
        break;
    }
    default: {
        char *text = fz_cstr(in, len);
        sp_egress_verdict v = (data[0] & 3) == 2 ? SP_EGRESS_ALLOW : SP_EGRESS_DENY;
        sp_egress_policy p = SP_EGRESS_POLICY_INIT;
        sp_error *err = NULL;
        if (sp_egress_policy_add(&p, text, v, &err) < 0) {
            FZ_ASSERT(err && err->message && !strchr(err->message, '\n') &&
                          strncmp(err->message, v == SP_EGRESS_ALLOW ? "--allow" : "--deny",
                                  v == SP_EGRESS_ALLOW ? 7 : 6) == 0,
                      "bad error for '%s'", text);
        } else {
            static const char *const addrs[] = {"127.0.0.1", "10.1.2.3", "93.184.215.14",
                                                "::ffff:169.254.169.254", "2606:4700::1"};
            for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
                struct sockaddr_storage ss;
                FZ_ASSERT(sp_egress_parse_literal(&ss, addrs[i]), "literal %s", addrs[i]);
                sp_egress_decision d;
                sp_egress_decide(&d, &p, "example.com", (struct sockaddr *)&ss, 443);
                sp_egress_may_resolve(&d, &p, text, 443);
                free(sp_egress_decision_text(&d));
            }
        }
        sp_error_free(err);
        sp_egress_policy_dispose(&p);
        free(text);
        break;
    }
    }
    return 0;
}
