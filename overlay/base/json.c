/* The one set of cJSON helpers (json.h). */
#include "json.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static void set_hooks(void)
{
    cJSON_Hooks h = {sp_xmalloc, free};
    cJSON_InitHooks(&h);
}

void sp_json_init(void)
{
    pthread_once(&hooks_once, set_hooks);
}

cJSON *sp_json_parse(const char *s, size_t len)
{
    sp_json_init();
    return s ? cJSON_ParseWithLength(s, len) : NULL;
}

const cJSON *sp_json_get(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

const char *sp_json_str(const cJSON *o, const char *key)
{
    return sp_json_str_or(o, key, NULL);
}

const char *sp_json_str_or(const cJSON *o, const char *key, const char *dflt)
{
    const cJSON *v = sp_json_get(o, key);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

char *sp_json_strdup(const cJSON *o, const char *key)
{
    const char *s = sp_json_str(o, key);
    return s ? sp_xstrdup(s) : NULL;
}

int64_t sp_json_int(const cJSON *o, const char *key, int64_t dflt)
{
    double d = sp_json_num(o, key, 0.0 / 0.0);
    if (d != d || d > 9.0e18 || d < -9.0e18)
        return dflt;
    return (int64_t)d;
}

double sp_json_num(const cJSON *o, const char *key, double dflt)
{
    const cJSON *v = sp_json_get(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

bool sp_json_bool(const cJSON *o, const char *key, bool dflt)
{
    const cJSON *v = sp_json_get(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

cJSON *sp_json_strv(const char *const *v)
{
    return sp_json_strv_map(v, cJSON_CreateString);
}

cJSON *sp_json_strv_map(const char *const *v, cJSON *(*make)(const char *s))
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && v && v[i]; i++) {
        cJSON *s = make(v[i]);
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

bool sp_json_add(cJSON *obj, const char *key, cJSON *item)
{
    if (!item)
        return false;
    if (!cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

cJSON *sp_json_finish(cJSON *obj, bool ok)
{
    if (!ok) {
        cJSON_Delete(obj);
        return NULL;
    }
    return obj;
}

/* ------------------------------------------------------- exact parse -- */

/* The number literals of a JSON text, in document order: a string scan
 * that skips string contents. */
static void number_literals(const char *s, size_t len, sp_strv *out)
{
    size_t i = 0;
    while (i < len) {
        char ch = s[i];
        if (ch == '"') {
            for (i++; i < len && s[i] != '"'; i++)
                if (s[i] == '\\')
                    i++;
            i++;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            size_t st = i;
            while (i < len && strchr("+-.eE0123456789", s[i]))
                i++;
            sp_strv_push(out, sp_xstrndup(s + st, i - st));
        } else {
            i++;
        }
    }
}

/* Walk the tree in document order; an integer of 16 digits or more gets
 * its literal back as a raw item. */
static void restore_numbers(cJSON *node, const sp_strv *lits, size_t *k)
{
    for (cJSON *c = node; c; c = c->next) {
        if (cJSON_IsNumber(c)) {
            /* cJSON prints 16 digits and more in exponent form, or rounded. */
            if (*k < lits->n && (c->valuedouble >= 1e15 || c->valuedouble <= -1e15)) {
                const char *lit = lits->v[*k];
                if (!strpbrk(lit, ".eE")) { /* an integer */
                    c->type = cJSON_Raw;
                    c->valuestring = sp_xstrdup(lit);
                }
            }
            (*k)++;
        } else if (c->child) {
            restore_numbers(c->child, lits, k);
        }
    }
}

cJSON *sp_json_parse_exact(const char *text, size_t len)
{
    cJSON *o = sp_json_parse(text, len);
    if (!o)
        return NULL;
    sp_strv lits = {0};
    number_literals(text, len, &lits);
    size_t k = 0;
    restore_numbers(o, &lits, &k);
    sp_strv_dispose(&lits);
    return o;
}

int sp_err_from_json(sp_error **err, const cJSON *e, const char *fallback)
{
    int r = sp_err_set(err, sp_code_from_name(sp_json_str(e, "code")), 0, "%s",
                       sp_json_str_or(e, "message", fallback));
    return sp_err_reason(err, sp_reason_from_name(sp_json_str(e, "reason")), r);
}
