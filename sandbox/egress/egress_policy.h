/* A sandbox's egress policy: the rules `create --allow/--deny` write, and
 * the decision on one connection the proxy is about to make. Pure: no
 * I/O, no resolving, no clock; the proxy resolves names itself and asks
 * about the address it will connect to. Internal to the library.
 *
 * Rules, as written:
 *   example.com[:PORT]        that name only (any case, one trailing dot ignored)
 *   *.example.com[:PORT]      any name below example.com, at any depth, and
 *                             NOT example.com itself (write both to have both):
 *                             a wildcard is read as "the sub-domains", as
 *                             Anthropic's sandbox-runtime and Codex read it
 *   10.0.0.0/8[:PORT]         an IPv4 network; a bare address is a /32
 *   [2001:db8::/32]:PORT      an IPv6 network or address with a port
 *   2001:db8::/32, ::1        an IPv6 network or address without a port
 * PORT is one port (443) or a range (8000-8999), 1 to 65535; none: any port.
 * Host names are LDH labels (letters, digits, '-' not at either end of a
 * label) plus '_' anywhere in a label (names such as `_acme.example.com`
 * or old bucket names exist, and resolvers accept them); a label at most 63
 * bytes, the name at most 253; its last label not all digits (`127.1` is
 * an address to a resolver, not a name). Non-ASCII names are refused:
 * write the punycode form (xn--...). `*` alone is refused (that is
 * `--network default`), and so is a wildcard over one label (`*.com`).
 *
 * The decision (sp_egress_decide()):
 *  1. a deny rule that matches wins: by name on the name the client asked
 *     for, by network on the address; its port range must hold the port;
 *  2. an address in a special range (loopback, link-local and cloud
 *     metadata, private, CGNAT, unique local, multicast, reserved, ... and
 *     what the caller adds: the host's own addresses, the Podman bridge)
 *     is refused unless an allow CIDR rule holds it AND lies within the
 *     most specific special range that holds it: `--allow 10.0.0.0/8`
 *     opens the private 10/8, `--allow 169.254.169.254` opens the metadata
 *     address, `--allow 0.0.0.0/0` opens neither. A name rule never opens
 *     a special address, so a name that resolves there (DNS rebinding) is
 *     refused even when a rule allows the name;
 *  3. then the first allow rule whose name matches (when a valid name is
 *     given) or whose network holds the address, with the port in range;
 *  4. else deny: a policy denies what it does not allow, and one with no
 *     rules denies everything.
 * An address is judged in its IPv4 form when it embeds one that decides
 * where packets go: IPv4-mapped `::ffff:a.b.c.d` and the NAT64 well-known
 * prefix `64:ff9b::/96` (a translator sends the packets to a.b.c.d), so
 * `::ffff:127.0.0.1` is loopback and `::ffff:8.8.8.8` meets the rule
 * `8.8.8.8`; rules are written in the IPv4 form for them (a rule inside
 * those prefixes is refused, and IPv6 rules never hold them). 6to4
 * (2002::/16), Teredo (2001::/32), the IPv4-compatible and translated
 * forms (in ::/8) and NAT64's local-use prefix are special as a whole:
 * deprecated or local, and they embed IPv4 addresses a relay would reach. */
#ifndef SANDPOD_EGRESS_POLICY_H
#define SANDPOD_EGRESS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>

#include "sandpod/error.h"

struct sockaddr;

typedef enum sp_egress_verdict {
    SP_EGRESS_DENY = 0,
    SP_EGRESS_ALLOW = 1,
} sp_egress_verdict;

typedef enum sp_egress_kind {
    SP_EGRESS_HOST = 0,   /* one name */
    SP_EGRESS_DOMAIN = 1, /* *.suffix: the names below suffix */
    SP_EGRESS_CIDR = 2,   /* a network (a bare address: /32 or /128) */
} sp_egress_kind;

/* An IPv4 or IPv6 network; an IPv4 one uses the first 4 bytes. */
typedef struct sp_egress_net {
    uint8_t family; /* 4 or 6 */
    uint8_t prefix; /* 0-32 or 0-128 */
    uint8_t addr[16];
} sp_egress_net;

typedef struct sp_egress_rule {
    sp_egress_verdict verdict;
    sp_egress_kind kind;
    char *host;                /* HOST: the name; DOMAIN: the suffix (no "*."); lowercase */
    sp_egress_net net;         /* CIDR */
    uint16_t port_lo, port_hi; /* 1-65535 for any port */
    char *text;                /* as written */
} sp_egress_rule;

/* A special range the caller adds (the host's own addresses, the Podman
 * bridge); the built-in ones are a table in egress_policy.c. */
typedef struct sp_egress_special {
    sp_egress_net net;
    char *name;
} sp_egress_special;

typedef struct sp_egress_policy {
    sp_egress_rule *rules;
    size_t n_rules;
    sp_egress_special *special;
    size_t n_special;
} sp_egress_policy;
#define SP_EGRESS_POLICY_INIT                                                                      \
    {                                                                                              \
        NULL, 0, NULL, 0                                                                           \
    }

typedef enum sp_egress_reason {
    SP_EGRESS_R_RULE = 0,    /* a rule decided: rule is set */
    SP_EGRESS_R_NO_RULE = 1, /* no rule allows it: the default deny */
    SP_EGRESS_R_SPECIAL = 2, /* a special address no allow CIDR rule names: special is set */
    SP_EGRESS_R_ADDRESS = 3, /* not an IPv4 or IPv6 address */
    SP_EGRESS_R_NAME = 4,    /* not a valid host name (sp_egress_may_resolve()) */
    SP_EGRESS_R_NO_NAME = 5, /* no name rule allows it (sp_egress_may_resolve()) */
} sp_egress_reason;

typedef struct sp_egress_decision {
    sp_egress_verdict verdict;
    sp_egress_reason reason;
    const sp_egress_rule *rule;  /* the rule that decided (in the policy), or NULL */
    const char *special;         /* the special range's name (static or the policy's), or NULL */
    char addr[INET6_ADDRSTRLEN]; /* the address as judged (IPv4 for a mapped one); "" for R_ADDRESS
                                  */
} sp_egress_decision;

/*
 * Parse one rule as the user wrote it (the forms above) into *out, which
 * owns copies of the name and the text (free with sp_egress_rule_dispose()).
 * `verdict` is what the rule says and names the option in messages.
 *
 * @return 0; SP_EINVAL with one line naming the rule ("--allow
 *         'exa mple.com': ...") and *out zeroed
 */
int sp_egress_rule_parse(sp_egress_rule *out, const char *text, sp_egress_verdict verdict,
                         sp_error **err);
/* Free what a rule owns and zero it; accepts a zeroed rule. */
void sp_egress_rule_dispose(sp_egress_rule *r);

/* Parse `text` and append it to the policy's rules (their order is the
 * order decisions name the first match in). @return as sp_egress_rule_parse() */
int sp_egress_policy_add(sp_egress_policy *p, const char *text, sp_egress_verdict verdict,
                         sp_error **err);
/* Add a special range: `cidr` an IPv4 or IPv6 address or network without
 * brackets or port ("10.88.0.0/16", "fd00::5"), `name` what a refusal calls
 * it ("podman bridge", "this host"). Where it is more specific than a
 * built-in range, or as specific, its name is the one given.
 * @return 0; SP_EINVAL naming cidr */
int sp_egress_policy_add_special(sp_egress_policy *p, const char *cidr, const char *name,
                                 sp_error **err);
/* A policy file's text (egress_dir.h): lines "allow RULE" and "deny RULE",
 * blank lines and "#" comments; "# version V" names its version (copied
 * into version, vcap bytes, "" when it has none). Appends the rules to p.
 * @return 0; SP_EINVAL naming the first bad line (p then holds the rules
 *         before it: dispose of it) */
int sp_egress_policy_parse(sp_egress_policy *p, const char *text, size_t len, char *version,
                           size_t vcap, sp_error **err);
/* Free the rules and added ranges and zero the policy; accepts a zeroed one. */
void sp_egress_policy_dispose(sp_egress_policy *p);

/*
 * Contract: decide whether a connection to `addr` (AF_INET or AF_INET6;
 * its port is ignored) on `port`, for a client that asked for `host`
 * (NULL or an IP literal when it asked for an address), may be made,
 * following the order above. *out receives the verdict, the reason, the
 * rule that decided (pointing into p: valid while p is unchanged) or the
 * special range's name, and the address as judged. The name is matched as
 * given, lowercased and without one trailing dot; a name that is not a
 * valid host name matches no name rule. Never fails: what cannot be judged
 * is denied.
 *
 * @return true when the connection is allowed
 */
bool sp_egress_decide(sp_egress_decision *out, const sp_egress_policy *p, const char *host,
                      const struct sockaddr *addr, uint16_t port);

/*
 * Contract: whether the proxy may look up `host` for a connection on
 * `port`, before it resolves anything: a name deny rule that matches
 * refuses; a name allow rule (one name, or *.suffix) whose port range holds
 * the port allows; anything else is refused (SP_EGRESS_R_NO_NAME), so a
 * workload cannot make the proxy send a lookup of a name no rule names
 * (DNS tunnelling: the name itself would carry the data out). Network
 * rules never allow a lookup: a name reaches an address of a CIDR rule
 * only when a name rule names it too. The addresses the lookup gives are
 * then judged one by one with sp_egress_decide().
 *
 * @return true when the name may be resolved
 */
bool sp_egress_may_resolve(sp_egress_decision *out, const sp_egress_policy *p, const char *host,
                           uint16_t port);

/* Whether a rule names (host, port) as the client gave them: a name rule
 * the name (as sp_egress_decide() matches it), a network rule an address
 * literal it holds; the port in its range. No address is judged special. */
bool sp_egress_rule_names(const sp_egress_rule *r, const char *host, uint16_t port);

/* One line for a 403 body and the connection log: "allowed by --allow
 * 'example.com'", "denied by --deny '*.evil.com'", "refused: 127.0.0.1 is
 * loopback and no --allow CIDR rule names it", "refused: no --allow rule
 * matches (default deny)". The caller frees it. */
char *sp_egress_decision_text(const sp_egress_decision *d);

/* Whether a and b name the same host: ASCII case aside, a final dot aside. */
bool sp_egress_same_host(const char *a, const char *b);

#endif
