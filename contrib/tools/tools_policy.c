/* The approval policy and the fs mode, by name. */
#include "tools_core.h"

/* ----------------------------------------------------------- policies -- */

int sp_tools_approval_parse(sp_tools_approval *out, const char *s)
{
    if (!s)
        return SP_EINVAL;
    if (strcmp(s, "never") == 0)
        *out = SP_APPROVAL_NEVER;
    else if (strcmp(s, "untrusted") == 0)
        *out = SP_APPROVAL_UNTRUSTED;
    else if (strcmp(s, "on-request") == 0)
        *out = SP_APPROVAL_ON_REQUEST;
    else
        return SP_EINVAL;
    return 0;
}

const char *sp_tools_approval_name(sp_tools_approval a)
{
    switch (a) {
    case SP_APPROVAL_NEVER:
        return "never";
    case SP_APPROVAL_UNTRUSTED:
        return "untrusted";
    case SP_APPROVAL_ON_REQUEST:
        return "on-request";
    }
    return "unknown";
}

int sp_tools_fs_mode_parse(sp_tools_fs_mode *out, const char *s)
{
    if (s && strcmp(s, "restricted") == 0)
        *out = SP_FS_MODE_RESTRICTED;
    else if (s && strcmp(s, "unrestricted") == 0)
        *out = SP_FS_MODE_UNRESTRICTED;
    else
        return SP_EINVAL;
    return 0;
}

bool tools_needs_approval(const sp_tools *t, const tool_def *d)
{
    switch (t->opts.approval) {
    case SP_APPROVAL_NEVER:
        return false;
    case SP_APPROVAL_UNTRUSTED:
        return d->tier != SP_TOOL_SAFE;
    case SP_APPROVAL_ON_REQUEST:
        return d->tier == SP_TOOL_DANGEROUS;
    }
    return true;
}

/* "shell: make test" for a person deciding. */
char *tools_summary_of(const tool_def *d, const cJSON *args)
{
    const char *v = d->summary_arg ? sp_json_str_or(args, d->summary_arg, NULL) : NULL;
    if (!v)
        return sp_xstrdup(d->name);
    /* One line: stop at the first newline. */
    const char *nl = strchr(v, '\n');
    size_t n = nl ? (size_t)(nl - v) : strlen(v);
    char *q = tools_quote(v, n);
    char *s = sp_xasprintf("%s: %s%s", d->name, q, nl ? " ..." : "");
    free(q);
    return s;
}
