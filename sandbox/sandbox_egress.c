/* A sandbox's egress policy as the public calls see it (sandpod/egress.h):
 * the rules checked and kept in sandbox.json; the kind puts them in force
 * (the local one through its proxy, local_egress.c). */
#include <stdio.h>
#include <string.h>

#include "egress_policy.h"
#include "kind.h"
#include "sandbox_internal.h"
#include "sandpod/egress.h"

int sp_egress_rule_check(const char *rule, bool allow, sp_error **err)
{
    sp_egress_rule r;
    int rc =
        sp_egress_rule_parse(&r, rule ? rule : "", allow ? SP_EGRESS_ALLOW : SP_EGRESS_DENY, err);
    if (rc == 0)
        sp_egress_rule_dispose(&r);
    return rc;
}

static int add_lines(sp_strv *out, const char *const *rules, bool allow, sp_error **err)
{
    for (size_t i = 0; rules && rules[i]; i++) {
        int r = sp_egress_rule_check(rules[i], allow, err);
        if (r < 0)
            return r;
        char *line = sp_xasprintf("%s %s", allow ? "allow" : "deny", rules[i]);
        bool dup = false;
        for (size_t k = 0; k < out->n && !dup; k++)
            dup = strcmp(out->v[k], line) == 0;
        if (dup)
            free(line);
        else
            sp_strv_push(out, line);
    }
    return 0;
}

int sp_sandbox_egress_from_opts(char ***out, const sp_sandbox_opts *o, sp_error **err)
{
    *out = NULL;
    if (o->setup_allow && !o->allow && !o->deny)
        return sp_err_set(err, SP_EINVAL, 0,
                          "--setup-allow widens egress rules for setup: give --allow or --deny "
                          "too (or --setup-network for a setup with the default network)");
    for (size_t i = 0; o->setup_allow && o->setup_allow[i]; i++) {
        int r = sp_egress_rule_check(o->setup_allow[i], true, err);
        if (r < 0)
            return r;
    }
    if (!o->allow && !o->deny)
        return 0;
    if (o->network != SP_NET_NONE)
        return sp_err_set(
            err, SP_EINVAL, 0,
            "egress rules (--allow, --deny) make the sandbox's proxy its only network: "
            "leave --network at none");
    sp_strv v = {0};
    int r;
    if ((r = add_lines(&v, o->deny, false, err)) < 0 ||
        (r = add_lines(&v, o->allow, true, err)) < 0) {
        sp_strv_dispose(&v);
        return r;
    }
    *out = sp_strv_steal(&v);
    return 0;
}

void sp_sandbox_egress_split(char **lines, sp_strv *allow, sp_strv *deny)
{
    for (char **l = lines; l && *l; l++) {
        if (strncmp(*l, "allow ", 6) == 0)
            sp_strv_push(allow, sp_xstrdup(*l + 6));
        else if (strncmp(*l, "deny ", 5) == 0)
            sp_strv_push(deny, sp_xstrdup(*l + 5));
    }
}

int sp_sandbox_egress(char ***rules, const sp_sandbox *sb, sp_error **err)
{
    (void)err;
    *rules = sb->cfg.egress ? sp_strv_copy((const char *const *)sb->cfg.egress) : NULL;
    return 0;
}

int sp_sandbox_egress_change(sp_sandbox *sb, const sp_egress_change_opts *opts, sp_error **err)
{
    if (SP_OPTS_CHECK(opts, 1, SP_EGRESS_CHANGE_OPTS_VERSION, "sp_egress_change_opts", err) < 0)
        return SP_EINVAL;
    int r = sp_sandbox_lock(sb, err);
    if (r < 0)
        return r;
    if (!sb->cfg.egress) {
        sp_sandbox_unlock(sb);
        return sp_err_set(err, SP_EINVAL, 0,
                          "sandbox %s has no egress policy (make it with --allow or --deny to have "
                          "one)",
                          sb->name);
    }
    sp_strv v = {0};
    for (char **l = sb->cfg.egress; *l; l++) {
        bool drop = false;
        const char *text = strchr(*l, ' ') + 1;
        for (size_t i = 0; opts && opts->remove && opts->remove[i] && !drop; i++)
            drop = strcmp(text, opts->remove[i]) == 0;
        if (!drop)
            sp_strv_push(&v, sp_xstrdup(*l));
    }
    for (size_t i = 0; opts && opts->remove && opts->remove[i]; i++) {
        bool found = false;
        for (char **l = sb->cfg.egress; *l && !found; l++)
            found = strcmp(strchr(*l, ' ') + 1, opts->remove[i]) == 0;
        if (!found) {
            sp_strv_dispose(&v);
            sp_sandbox_unlock(sb);
            return sp_err_set(err, SP_EINVAL, 0, "--remove '%s': sandbox %s has no such rule",
                              opts->remove[i], sb->name);
        }
    }
    /* Deny lines first: the order is the one decisions are named in. */
    sp_strv deny = {0};
    if ((r = add_lines(&deny, opts ? opts->deny : NULL, false, err)) < 0 ||
        (r = add_lines(&v, opts ? opts->allow : NULL, true, err)) < 0) {
        sp_strv_dispose(&deny);
        sp_strv_dispose(&v);
        sp_sandbox_unlock(sb);
        return r;
    }
    sp_strv all = {0};
    for (size_t i = 0; i < deny.n; i++)
        sp_strv_push(&all, steal_pointer(&deny.v[i]));
    for (size_t i = 0; i < v.n; i++) {
        bool dup = false;
        for (size_t k = 0; k < all.n && !dup; k++)
            dup = strcmp(all.v[k], v.v[i]) == 0;
        if (!dup)
            sp_strv_push(&all, steal_pointer(&v.v[i]));
    }
    sp_strv_dispose(&deny);
    sp_strv_dispose(&v);
    char **old = sb->cfg.egress;
    sb->cfg.egress = sp_strv_steal(&all);
    if ((r = sb->kind->egress_set(sb, err)) < 0 || (r = sp_sandbox_save(sb, err)) < 0) {
        sp_strv_free(sb->cfg.egress);
        sb->cfg.egress = old;
        sb->kind->egress_set(sb, NULL);
    } else {
        sp_strv_free(old);
    }
    sp_sandbox_unlock(sb);
    return r;
}

int sp_sandbox_egress_log(int *fd, sp_sandbox *sb, sp_error **err)
{
    *fd = -1;
    if (!sb->cfg.egress)
        return sp_err_set(err, SP_EINVAL, 0,
                          "sandbox %s has no egress policy, so no connection log", sb->name);
    return sb->kind->egress_log(fd, sb, err);
}
