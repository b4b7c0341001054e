/* A client for a kubernetes engine (sandpod/engine.h): its credentials by
 * the header's rule, its namespace over the credentials' one. */
#include <stdlib.h>
#include <string.h>

#include "kube.h"

static int engine_creds(sp_kube_creds *c, const sp_engine *e, sp_error **err)
{
    if (e->server)
        return sp_kube_creds_explicit(c, e->server, e->token_file, e->ca_file, NULL, err);
    if (e->kubeconfig || e->context)
        return sp_kube_creds_kubeconfig(c, e->kubectl, e->kubeconfig, e->context, err);
    sp_error *in = NULL;
    int r = sp_kube_creds_incluster(c, NULL, &in);
    if (r != SP_ENOTFOUND) {
        if (r < 0 && err)
            *err = in;
        else
            sp_error_free(in);
        return r;
    }
    sp_error_free(in);
    sp_kube_creds_dispose(c);
    return sp_kube_creds_kubeconfig(c, e->kubectl, NULL, NULL, err);
}

int sp_kube_open_engine(sp_kube **out, const sp_engine *e, const sp_kube_opts *ko, sp_error **err)
{
    *out = NULL;
    if (!e || e->kind != SP_ENGINE_KUBERNETES)
        return sp_err_set(err, SP_EINVAL, 0, "engine %s is not a kubernetes engine",
                          e && e->name ? e->name : "(none)");
    sp_kube_creds c = {0};
    int r = engine_creds(&c, e, err);
    if (r < 0) {
        sp_kube_creds_dispose(&c);
        return sp_err_wrap(err, r, "engine %s: credentials", e->name);
    }
    if (e->ns) {
        free(c.ns);
        c.ns = sp_xstrdup(e->ns);
    }
    return sp_kube_open(out, &c, ko, err);
}
