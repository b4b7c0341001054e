/**
 * @file sandpod/egress.h
 * A sandbox's egress policy: which hosts its workload may reach.
 *
 * A sandbox made with rules (sp_sandbox_opts.allow and .deny, version 3)
 * has no network of its own: its only way out is a proxy sandpod runs for
 * it alone, which its commands reach through HTTP_PROXY, HTTPS_PROXY and
 * ALL_PROXY (set for every command; HTTP CONNECT, absolute http:// URLs and
 * SOCKS5 on 127.0.0.1:3128). The proxy resolves names itself, looks up
 * only names a rule allows, and judges every address it would connect to.
 *
 * Rules, as written (one per --allow or --deny):
 *   example.com[:PORT]     that name only
 *   *.example.com[:PORT]   the names below example.com (not example.com itself)
 *   10.0.0.0/8[:PORT]      an IPv4 network (a bare address: that address)
 *   [2001:db8::/32]:PORT   an IPv6 network with a port (2001:db8::/32 without)
 * PORT is one port or a range (8000-8999); none: any port. A deny rule
 * that matches wins; then an allow rule; anything else is refused.
 * Loopback, link-local (cloud metadata), private and other special ranges,
 * and this host's own addresses, are refused unless an allow rule names
 * them by network: a name that resolves there is refused even when a rule
 * allows the name (DNS rebinding).
 */
#ifndef SANDPOD_EGRESS_H
#define SANDPOD_EGRESS_H

#include <stdbool.h>

#include "sandpod/error.h"
#include "sandpod/sandbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The port of the proxy on the workload's loopback. */
#define SP_EGRESS_PROXY_PORT 3128

/**
 * Check one rule as the user wrote it.
 *
 * @return 0; SP_EINVAL with one line naming the rule and what is wrong
 */
int sp_egress_rule_check(const char *rule, bool allow, sp_error **err);

/**
 * The sandbox's policy: "allow RULE" and "deny RULE" lines in the order
 * they are decided, NULL-terminated, in *rules (free each and the array);
 * *rules is NULL when the sandbox has no policy (its network is its
 * `network` option's).
 *
 * @return 0
 */
int sp_sandbox_egress(char ***rules, const sp_sandbox *sb, sp_error **err);

#define SP_EGRESS_CHANGE_OPTS_VERSION 1

/** A change to a running sandbox's policy. */
typedef struct sp_egress_change_opts {
    unsigned version;
    const char *const *allow;  /**< rules to add as allow (NULL: none) */
    const char *const *deny;   /**< rules to add as deny (NULL: none) */
    const char *const *remove; /**< rules to remove, as written ("pypi.org") */
} sp_egress_change_opts;
#define SP_EGRESS_CHANGE_OPTS_INIT                                                                 \
    {                                                                                              \
        .version = SP_EGRESS_CHANGE_OPTS_VERSION                                                   \
    }

/**
 * Change the policy of a sandbox that has one, without a restart: the
 * proxy reads it anew within 100 ms, and cuts the open connections the new
 * policy no longer allows. Removals first, then additions (a rule already
 * there is not added twice). All or nothing: a bad rule changes nothing.
 *
 * @return 0; SP_EINVAL (a bad rule, a rule to remove that is not there, a
 *         sandbox without a policy, a remote sandbox); SP_ENOTFOUND
 */
int sp_sandbox_egress_change(sp_sandbox *sb, const sp_egress_change_opts *opts, sp_error **err);

/**
 * Open the sandbox's connection log for reading: one JSON object per line,
 * per connection, written when it ends: "event" ("connection"), "time"
 * (RFC 3339, UTC, ms),
 * "proto" ("connect", "http", "socks", "refused"), "host", "port",
 * "addr" (the address connected to, or ""), "verdict" ("allow" or "deny"),
 * "up" and "down" (bytes), "ms", "rule" (the deciding rule or null) and
 * "why" (one line). *fd is the caller's to close.
 *
 * @return 0; SP_ENOTFOUND (no connection yet); SP_EINVAL (no policy, or
 *         a remote sandbox)
 */
int sp_sandbox_egress_log(int *fd, sp_sandbox *sb, sp_error **err);

/**
 * Rotate a brokered secret of a running (or stopped) sandbox, without a
 * restart: its proxy puts the value read from `source` ("env:VAR" or
 * "file:PATH", read here, as at create) in place of NAME's stand-in from
 * its next request on. source NULL takes the secret away: its stand-in
 * then goes as it is, and means nothing. The stand-in in the workload's
 * environment stays the same; a secret the sandbox was not made with
 * cannot be added (it has no stand-in there).
 *
 * @return 0; SP_EINVAL (no such secret, a bad source, a remote sandbox);
 *         SP_ENOTFOUND (a missing file)
 */
int sp_sandbox_secret_set(sp_sandbox *sb, const char *name, const char *source, sp_error **err);

#ifdef __cplusplus
}
#endif

#endif
