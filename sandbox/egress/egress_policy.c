/* The egress policy: rules as the user writes them, the special ranges,
 * and the decision on one connection (egress_policy.h says the rules). */
#include "egress_policy.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base.h"

#define MAX_RULE_TEXT 1024
#define MAX_NAME      253
#define MAX_LABEL     63

/* The ranges no name rule opens: not globally reachable (IANA's special
 * purpose registries), or reaching the host, its neighbours or a cloud's
 * metadata service. Where ranges nest, the most specific one names the
 * refusal (255.255.255.255 is "broadcast", not "reserved"). Left out on
 * purpose: 198.18.0.0/15, the benchmarking range. It is not routed on the
 * internet, and sandpod's own tests put their stand-ins for the internet
 * there (DESIGN.md: no interface of these machines uses it); a site that
 * routes it inside writes --deny 198.18.0.0/15. */
static const struct {
    sp_egress_net net;
    const char *name;
} builtin[] = {
    {{4, 8, {0}}, "unspecified (this network)"},                      /* 0.0.0.0/8 */
    {{4, 8, {10}}, "private"},                                        /* 10.0.0.0/8 */
    {{4, 10, {100, 64}}, "carrier-grade NAT"},                        /* 100.64.0.0/10 */
    {{4, 8, {127}}, "loopback"},                                      /* 127.0.0.0/8 */
    {{4, 16, {169, 254}}, "link-local (cloud metadata)"},             /* 169.254.0.0/16 */
    {{4, 12, {172, 16}}, "private"},                                  /* 172.16.0.0/12 */
    {{4, 24, {192, 0, 0}}, "reserved (IETF protocol assignments)"},   /* 192.0.0.0/24 */
    {{4, 24, {192, 0, 2}}, "documentation"},                          /* 192.0.2.0/24 */
    {{4, 24, {192, 88, 99}}, "6to4 relay"},                           /* 192.88.99.0/24 */
    {{4, 16, {192, 168}}, "private"},                                 /* 192.168.0.0/16 */
    {{4, 24, {198, 51, 100}}, "documentation"},                       /* 198.51.100.0/24 */
    {{4, 24, {203, 0, 113}}, "documentation"},                        /* 203.0.113.0/24 */
    {{4, 4, {224}}, "multicast"},                                     /* 224.0.0.0/4 */
    {{4, 4, {240}}, "reserved"},                                      /* 240.0.0.0/4 */
    {{4, 32, {255, 255, 255, 255}}, "broadcast"},                     /* 255.255.255.255 */
    {{6, 8, {0}}, "reserved (IPv4-compatible and translated forms)"}, /* ::/8 */
    {{6, 128, {0}}, "unspecified"},                                   /* :: */
    {{6, 128, {[15] = 1}}, "loopback"},                               /* ::1 */
    {{6, 48, {0, 0x64, 0xff, 0x9b, 0, 1}}, "NAT64 (local use)"},      /* 64:ff9b:1::/48 */
    {{6, 64, {1}}, "discard"},                                        /* 100::/64 */
    {{6, 32, {0x20, 0x01, 0, 0}}, "Teredo"},                          /* 2001::/32 */
    {{6, 48, {0x20, 0x01, 0, 2, 0, 0}}, "benchmarking"},              /* 2001:2::/48 */
    {{6, 32, {0x20, 0x01, 0x0d, 0xb8}}, "documentation"},             /* 2001:db8::/32 */
    {{6, 16, {0x20, 0x02}}, "6to4"},                                  /* 2002::/16 */
    {{6, 20, {0x3f, 0xff}}, "documentation"},                         /* 3fff::/20 */
    {{6, 7, {0xfc}}, "unique local"},                                 /* fc00::/7 */
    {{6, 10, {0xfe, 0x80}}, "link-local"},                            /* fe80::/10 */
    {{6, 10, {0xfe, 0xc0}}, "site-local (deprecated)"},               /* fec0::/10 */
    {{6, 8, {0xff}}, "multicast"},                                    /* ff00::/8 */
};

static const char *opt_name(sp_egress_verdict v)
{
    return v == SP_EGRESS_ALLOW ? "--allow" : "--deny";
}

/* The text as a message may show it: one line, at most 200 bytes. */
static char *shown(const char *text)
{
    size_t n = strnlen(text, 200);
    char *s = sp_xstrndup(text, n);
    bool utf8 = sp_utf8_valid(s, n);
    for (char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f || (!utf8 && (unsigned char)*c >= 0x80))
            *c = '?';
    return s;
}

/* "--allow 'TEXT': " and the rest, as SP_EINVAL. */
SP_PRINTF(4, 5)
static int rule_err(sp_error **err, sp_egress_verdict v, const char *text, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cleanup_free char *raw = sp_xvasprintf(fmt, ap);
    va_end(ap);
    /* The reason may quote part of the rule: one line too. */
    cleanup_free char *what = shown(raw);
    cleanup_free char *t = shown(text);
    return sp_err_set(err, SP_EINVAL, 0, "%s '%s': %s", opt_name(v), t, what);
}

static bool all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* "443" or "8000-8999" into lo..hi; NULL, or why not. */
static const char *parse_ports(const char *s, uint16_t *lo, uint16_t *hi)
{
    if (!*s)
        return "no port after ':'";
    const char *dash = strchr(s, '-');
    size_t n1 = dash ? (size_t)(dash - s) : strlen(s);
    const char *s2 = dash ? dash + 1 : s;
    size_t n2 = strlen(s2);
    if (!all_digits(s, n1) || !all_digits(s2, n2) || n1 > 5 || n2 > 5)
        return "a port is a number from 1 to 65535, or a range such as 8000-8999";
    unsigned long a = strtoul(s, NULL, 10), b = strtoul(s2, NULL, 10);
    if (a < 1 || a > 65535 || b < 1 || b > 65535)
        return "a port is a number from 1 to 65535";
    if (a > b)
        return "a port range runs from low to high (8000-8999)";
    *lo = (uint16_t)a;
    *hi = (uint16_t)b;
    return NULL;
}

static bool bits_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, whole) != 0)
        return false;
    if (!rest)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

/* Does net hold the address (or network) a? */
static bool net_holds(const sp_egress_net *net, const sp_egress_net *a)
{
    return net->family == a->family && a->prefix >= net->prefix &&
           bits_equal(net->addr, a->addr, net->prefix);
}

/* The IPv4 address an IPv6 one stands for, where packets to it go there:
 * IPv4-mapped (::ffff:0:0/96) and NAT64's well-known prefix (64:ff9b::/96). */
static bool embedded_v4(const uint8_t a[16])
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    return memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0;
}

/* "ADDR" or "ADDR/PREFIX" (IPv6 when it holds a ':') into *out; NULL, or
 * why not in `why` (a message of at most 160 bytes). */
static bool parse_net(sp_egress_net *out, const char *s, size_t n, char why[160])
{
    memset(out, 0, sizeof(*out));
    const char *slash = memchr(s, '/', n);
    size_t an = slash ? (size_t)(slash - s) : n;
    char a[INET6_ADDRSTRLEN + 1];
    bool v6 = memchr(s, ':', an) != NULL;
    unsigned max = v6 ? 128 : 32;
    if (an >= sizeof(a) || an == 0) {
        snprintf(why, 160, "not an IPv%d address", v6 ? 6 : 4);
        return false;
    }
    memcpy(a, s, an);
    a[an] = '\0';
    if (inet_pton(v6 ? AF_INET6 : AF_INET, a, out->addr) != 1) {
        if (v6)
            snprintf(why, 160, "'%.*s' is not an IPv6 address (with a port: [ADDRESS]:PORT)",
                     (int)an, a);
        else
            snprintf(why, 160, "'%.*s' is not an IPv4 address (four numbers: 10.0.0.1)", (int)an,
                     a);
        return false;
    }
    out->family = v6 ? 6 : 4;
    out->prefix = (uint8_t)max;
    if (slash) {
        const char *p = slash + 1;
        size_t pn = n - an - 1;
        if (!all_digits(p, pn) || pn > 3 || strtoul(p, NULL, 10) > max) {
            snprintf(why, 160, "the prefix length after '/' is a number from 0 to %u", max);
            return false;
        }
        out->prefix = (uint8_t)strtoul(p, NULL, 10);
    }
    sp_egress_net masked = *out;
    unsigned whole = out->prefix / 8, rest = out->prefix % 8;
    if (whole < 16) {
        if (rest)
            masked.addr[whole] &= (uint8_t)(0xff << (8 - rest));
        memset(masked.addr + whole + (rest ? 1 : 0), 0, 16 - whole - (rest ? 1 : 0));
    }
    if (memcmp(masked.addr, out->addr, 16) != 0) {
        char t[INET6_ADDRSTRLEN];
        inet_ntop(v6 ? AF_INET6 : AF_INET, masked.addr, t, sizeof(t));
        snprintf(why, 160, "bits are set past the prefix: the network is %s/%u", t,
                 (unsigned)out->prefix);
        return false;
    }
    if (v6 && out->prefix >= 96 && embedded_v4(out->addr)) {
        char t[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, out->addr + 12, t, sizeof(t));
        if (out->prefix == 128)
            snprintf(why, 160, "an address with an IPv4 one inside is judged as IPv4: write %s", t);
        else
            snprintf(why, 160, "an address with an IPv4 one inside is judged as IPv4: write %s/%u",
                     t, (unsigned)out->prefix - 96);
        return false;
    }
    return true;
}

/* Is s[0..n) a host name (lowercase already)? NULL, or why not. */
static const char *check_name(const char *s, size_t n)
{
    if (n == 0)
        return "no host name";
    if (n > MAX_NAME)
        return "a host name is at most 253 bytes";
    const char *label = s;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        size_t len = (size_t)(s + i - label);
        if (len == 0)
            return "a host name has no empty label ('..', or a '.' at the start)";
        if (len > MAX_LABEL)
            return "a label of a host name is at most 63 bytes";
        if (label[0] == '-' || label[len - 1] == '-')
            return "a label of a host name neither starts nor ends with '-'";
        for (size_t j = 0; j < len; j++) {
            char c = label[j];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
                return "a host name holds only letters, digits, '-', '_' and '.'";
        }
        if (i == n && all_digits(label, len))
            return "the last label of a host name is not a number (an IPv4 address has four)";
        label = s + i + 1;
    }
    return NULL;
}

/* The name as matched: lowercased, one trailing dot removed, into buf
 * (MAX_NAME + 2 bytes); false when that is no host name. */
static bool normal_name(char *buf, const char *host)
{
    size_t n = strnlen(host, MAX_NAME + 2);
    if (n > MAX_NAME + 1)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = host[i];
        buf[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    if (n > 0 && buf[n - 1] == '.')
        n--;
    buf[n] = '\0';
    return check_name(buf, n) == NULL;
}

/* The host part of a rule that is no address: a name or *.suffix. */
static int parse_name(sp_egress_rule *r, const char *text, const char *h, size_t n,
                      sp_egress_verdict v, sp_error **err)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)h[i] >= 0x80)
            return rule_err(err, v, text,
                            "a non-ASCII host name: write its punycode form (xn--...), as "
                            "`idn2` prints it");
    if (n == 1 && h[0] == '*')
        return rule_err(err, v, text,
                        "'*' alone would allow every host: use --network default for that");
    bool wild = n >= 2 && h[0] == '*' && h[1] == '.';
    const char *s = wild ? h + 2 : h;
    size_t sn = wild ? n - 2 : n;
    if (memchr(s, '*', sn))
        return rule_err(err, v, text,
                        "a wildcard is only the whole first label, as in '*.example.com'");
    char name[MAX_NAME + 2];
    if (sn > MAX_NAME + 1)
        return rule_err(err, v, text, "a host name is at most 253 bytes");
    for (size_t i = 0; i < sn; i++)
        name[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
    if (sn > 0 && name[sn - 1] == '.')
        sn--;
    name[sn] = '\0';
    const char *why = check_name(name, sn);
    if (why)
        return rule_err(err, v, text, "%s", why);
    if (wild && !memchr(name, '.', sn))
        return rule_err(err, v, text,
                        "'*.%s' would allow a whole top-level domain: name at least two labels "
                        "after '*.'",
                        name);
    r->kind = wild ? SP_EGRESS_DOMAIN : SP_EGRESS_HOST;
    r->host = sp_xstrdup(name);
    return 0;
}

int sp_egress_rule_parse(sp_egress_rule *out, const char *text, sp_egress_verdict verdict,
                         sp_error **err)
{
    memset(out, 0, sizeof(*out));
    if (!text || !*text)
        return sp_err_set(err, SP_EINVAL, 0, "%s: an empty rule", opt_name(verdict));
    if (strnlen(text, MAX_RULE_TEXT + 1) > MAX_RULE_TEXT)
        return rule_err(err, verdict, text, "a rule is at most %d bytes", MAX_RULE_TEXT);
    sp_egress_rule r = {.verdict = verdict, .port_lo = 1, .port_hi = 65535};
    const char *host = text, *port = NULL;
    size_t hn = strlen(text);
    bool addr = false;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close)
            return rule_err(err, verdict, text, "no ']' after '['");
        host = text + 1;
        hn = (size_t)(close - host);
        if (!memchr(host, ':', hn))
            return rule_err(err, verdict, text, "brackets are for IPv6 addresses only");
        if (close[1] == ':')
            port = close + 2;
        else if (close[1])
            return rule_err(err, verdict, text, "only ':PORT' may follow ']'");
        addr = true;
    } else {
        const char *colon = strchr(text, ':');
        if (colon && strchr(colon + 1, ':')) {
            addr = true; /* a bare IPv6 address or network: no port */
        } else if (colon) {
            hn = (size_t)(colon - text);
            port = colon + 1;
        }
        if (!addr && hn > 0 && strspn(text, "0123456789./") >= hn)
            addr = true; /* digits, dots and a '/': IPv4 */
        else if (!addr && memchr(text, '/', hn))
            return rule_err(err, verdict, text,
                            "a network is an address and a prefix length (10.0.0.0/8)");
    }
    if (port) {
        const char *why = parse_ports(port, &r.port_lo, &r.port_hi);
        if (why)
            return rule_err(err, verdict, text, "%s", why);
    }
    if (addr) {
        char why[160];
        if (!parse_net(&r.net, host, hn, why))
            return rule_err(err, verdict, text, "%s", why);
        r.kind = SP_EGRESS_CIDR;
    } else {
        int rc = parse_name(&r, text, host, hn, verdict, err);
        if (rc < 0)
            return rc;
    }
    r.text = sp_xstrdup(text);
    *out = r;
    return 0;
}

void sp_egress_rule_dispose(sp_egress_rule *r)
{
    free(r->host);
    free(r->text);
    memset(r, 0, sizeof(*r));
}

int sp_egress_policy_add(sp_egress_policy *p, const char *text, sp_egress_verdict verdict,
                         sp_error **err)
{
    sp_egress_rule r;
    int rc = sp_egress_rule_parse(&r, text, verdict, err);
    if (rc < 0)
        return rc;
    p->rules = sp_xrealloc(p->rules, (p->n_rules + 1) * sizeof(*p->rules));
    p->rules[p->n_rules++] = r;
    return 0;
}

int sp_egress_policy_add_special(sp_egress_policy *p, const char *cidr, const char *name,
                                 sp_error **err)
{
    sp_egress_net net;
    char why[160];
    if (!cidr || !parse_net(&net, cidr, strlen(cidr), why)) {
        cleanup_free char *t = shown(cidr ? cidr : "");
        return sp_err_set(err, SP_EINVAL, 0, "special range '%s': %s", t,
                          cidr ? why : "none given");
    }
    p->special = sp_xrealloc(p->special, (p->n_special + 1) * sizeof(*p->special));
    p->special[p->n_special++] = (sp_egress_special){net, sp_xstrdup(name ? name : "special")};
    return 0;
}

void sp_egress_policy_dispose(sp_egress_policy *p)
{
    for (size_t i = 0; i < p->n_rules; i++)
        sp_egress_rule_dispose(&p->rules[i]);
    free(p->rules);
    for (size_t i = 0; i < p->n_special; i++)
        free(p->special[i].name);
    free(p->special);
    memset(p, 0, sizeof(*p));
}

/* The address as judged, as a /32 or /128; false for another family. */
static bool judged_addr(sp_egress_net *a, const struct sockaddr *sa)
{
    memset(a, 0, sizeof(*a));
    if (sa && sa->sa_family == AF_INET) {
        const uint8_t *b = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
        *a = (sp_egress_net){.family = 4, .prefix = 32, .addr = {b[0], b[1], b[2], b[3]}};
        return true;
    }
    if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        const uint8_t *b = in6->sin6_addr.s6_addr;
        if (embedded_v4(b)) {
            *a = (sp_egress_net){.family = 4, .prefix = 32, .addr = {b[12], b[13], b[14], b[15]}};
        } else {
            a->family = 6;
            a->prefix = 128;
            memcpy(a->addr, b, 16);
        }
        return true;
    }
    return false;
}

/* The most specific special range holding a (a range the caller added
 * wins a tie), or NULL. */
static const sp_egress_net *special_of(const sp_egress_policy *p, const sp_egress_net *a,
                                       const char **name)
{
    const sp_egress_net *best = NULL;
    for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
        if (net_holds(&builtin[i].net, a) && (!best || builtin[i].net.prefix > best->prefix)) {
            best = &builtin[i].net;
            *name = builtin[i].name;
        }
    for (size_t i = 0; i < p->n_special; i++)
        if (net_holds(&p->special[i].net, a) &&
            (!best || p->special[i].net.prefix >= best->prefix)) {
            best = &p->special[i].net;
            *name = p->special[i].name;
        }
    return best;
}

static bool rule_matches(const sp_egress_rule *r, const char *name, const sp_egress_net *a,
                         uint16_t port)
{
    if (port < r->port_lo || port > r->port_hi)
        return false;
    switch (r->kind) {
    case SP_EGRESS_HOST:
        return name && strcmp(name, r->host) == 0;
    case SP_EGRESS_DOMAIN: {
        if (!name)
            return false;
        size_t n = strlen(name), sn = strlen(r->host);
        return n > sn + 1 && name[n - sn - 1] == '.' && strcmp(name + n - sn, r->host) == 0;
    }
    case SP_EGRESS_CIDR:
        return net_holds(&r->net, a);
    }
    return false;
}

bool sp_egress_rule_names(const sp_egress_rule *r, const char *host, uint16_t port)
{
    char name[MAX_NAME + 2];
    if (!host)
        return false;
    if (r->kind == SP_EGRESS_CIDR) {
        /* Built from the bytes, not through a sockaddr: judged_addr()
         * reads one through another struct type, which -O2 may reorder
         * against stores made here (strict aliasing). */
        uint8_t b[16];
        sp_egress_net a = {0};
        if (inet_pton(AF_INET, host, b) == 1) {
            a = (sp_egress_net){.family = 4, .prefix = 32, .addr = {b[0], b[1], b[2], b[3]}};
        } else if (inet_pton(AF_INET6, host, b) == 1) {
            if (embedded_v4(b)) {
                a = (sp_egress_net){
                    .family = 4, .prefix = 32, .addr = {b[12], b[13], b[14], b[15]}};
            } else {
                a.family = 6;
                a.prefix = 128;
                memcpy(a.addr, b, 16);
            }
        } else {
            return false;
        }
        return rule_matches(r, NULL, &a, port);
    }
    return normal_name(name, host) && rule_matches(r, name, NULL, port);
}

static bool decided(sp_egress_decision *out, sp_egress_verdict v, sp_egress_reason why,
                    const sp_egress_rule *rule, const char *special)
{
    out->verdict = v;
    out->reason = why;
    out->rule = rule;
    out->special = special;
    return v == SP_EGRESS_ALLOW;
}

bool sp_egress_decide(sp_egress_decision *out, const sp_egress_policy *p, const char *host,
                      const struct sockaddr *addr, uint16_t port)
{
    memset(out, 0, sizeof(*out));
    sp_egress_net a;
    if (!judged_addr(&a, addr))
        return decided(out, SP_EGRESS_DENY, SP_EGRESS_R_ADDRESS, NULL, NULL);
    inet_ntop(a.family == 4 ? AF_INET : AF_INET6, a.addr, out->addr, sizeof(out->addr));
    char buf[MAX_NAME + 2];
    const char *name = host && normal_name(buf, host) ? buf : NULL;

    for (size_t i = 0; i < p->n_rules; i++)
        if (p->rules[i].verdict == SP_EGRESS_DENY && rule_matches(&p->rules[i], name, &a, port))
            return decided(out, SP_EGRESS_DENY, SP_EGRESS_R_RULE, &p->rules[i], NULL);

    const char *sname = NULL;
    const sp_egress_net *special = special_of(p, &a, &sname);
    if (special) {
        /* Only a network rule that lies within the range opens it: one
         * that merely holds it (0.0.0.0/0) was written for the internet. */
        for (size_t i = 0; i < p->n_rules; i++) {
            const sp_egress_rule *r = &p->rules[i];
            if (r->verdict == SP_EGRESS_ALLOW && r->kind == SP_EGRESS_CIDR &&
                rule_matches(r, NULL, &a, port) && net_holds(special, &r->net))
                return decided(out, SP_EGRESS_ALLOW, SP_EGRESS_R_RULE, r, NULL);
        }
        return decided(out, SP_EGRESS_DENY, SP_EGRESS_R_SPECIAL, NULL, sname);
    }

    for (size_t i = 0; i < p->n_rules; i++)
        if (p->rules[i].verdict == SP_EGRESS_ALLOW && rule_matches(&p->rules[i], name, &a, port))
            return decided(out, SP_EGRESS_ALLOW, SP_EGRESS_R_RULE, &p->rules[i], NULL);
    return decided(out, SP_EGRESS_DENY, SP_EGRESS_R_NO_RULE, NULL, NULL);
}

bool sp_egress_may_resolve(sp_egress_decision *out, const sp_egress_policy *p, const char *host,
                           uint16_t port)
{
    memset(out, 0, sizeof(*out));
    char buf[MAX_NAME + 2];
    if (!host || !normal_name(buf, host))
        return decided(out, SP_EGRESS_DENY, SP_EGRESS_R_NAME, NULL, NULL);
    for (size_t i = 0; i < p->n_rules; i++)
        if (p->rules[i].verdict == SP_EGRESS_DENY && p->rules[i].kind != SP_EGRESS_CIDR &&
            rule_matches(&p->rules[i], buf, NULL, port))
            return decided(out, SP_EGRESS_DENY, SP_EGRESS_R_RULE, &p->rules[i], NULL);
    for (size_t i = 0; i < p->n_rules; i++)
        if (p->rules[i].verdict == SP_EGRESS_ALLOW && p->rules[i].kind != SP_EGRESS_CIDR &&
            rule_matches(&p->rules[i], buf, NULL, port))
            return decided(out, SP_EGRESS_ALLOW, SP_EGRESS_R_RULE, &p->rules[i], NULL);
    return decided(out, SP_EGRESS_DENY, SP_EGRESS_R_NO_NAME, NULL, NULL);
}

char *sp_egress_decision_text(const sp_egress_decision *d)
{
    switch (d->reason) {
    case SP_EGRESS_R_RULE: {
        cleanup_free char *t = shown(d->rule->text);
        return sp_xasprintf("%s by %s '%s'", d->verdict == SP_EGRESS_ALLOW ? "allowed" : "denied",
                            opt_name(d->rule->verdict), t);
    }
    case SP_EGRESS_R_SPECIAL:
        return sp_xasprintf("refused: %s is %s and no --allow CIDR rule names it", d->addr,
                            d->special);
    case SP_EGRESS_R_NO_RULE:
        return sp_xstrdup("refused: no --allow rule matches (default deny)");
    case SP_EGRESS_R_NAME:
        return sp_xstrdup("refused: not a valid host name");
    case SP_EGRESS_R_NO_NAME:
        return sp_xstrdup("refused: no --allow rule names this host, and a name is looked up "
                          "only when one does (default deny)");
    case SP_EGRESS_R_ADDRESS:
        break;
    }
    return sp_xstrdup("refused: not an IPv4 or IPv6 address");
}

int sp_egress_policy_parse(sp_egress_policy *p, const char *text, size_t len, char *version,
                           size_t vcap, sp_error **err)
{
    static const char vline[] = "# version ";
    if (vcap)
        version[0] = '\0';
    for (size_t at = 0, n = 1; at < len; n++) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t ll = (nl ? (size_t)(nl - text) : len) - at;
        cleanup_free char *line = sp_xstrndup(text + at, ll);
        at += ll + (nl != NULL);
        line[strcspn(line, "\r")] = '\0';
        if (strlen(line) != ll && strlen(line) + 1 != ll)
            return sp_err_set(err, SP_EINVAL, 0, "policy line %zu: a NUL byte", n);
        if (vcap && strncmp(line, vline, sizeof(vline) - 1) == 0)
            snprintf(version, vcap, "%s", line + sizeof(vline) - 1);
        if (!line[0] || line[0] == '#')
            continue;
        sp_egress_verdict v;
        const char *rule;
        if (strncmp(line, "allow ", 6) == 0) {
            v = SP_EGRESS_ALLOW;
            rule = line + 6;
        } else if (strncmp(line, "deny ", 5) == 0) {
            v = SP_EGRESS_DENY;
            rule = line + 5;
        } else {
            return sp_err_set(err, SP_EINVAL, 0, "policy line %zu: not a rule: %.100s", n, line);
        }
        int r = sp_egress_policy_add(p, rule, v, err);
        if (r < 0)
            return sp_err_wrap(err, r, "policy line %zu", n);
    }
    return 0;
}

bool sp_egress_same_host(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la && a[la - 1] == '.')
        la--;
    if (lb && b[lb - 1] == '.')
        lb--;
    return la == lb && strncasecmp(a, b, la) == 0;
}
