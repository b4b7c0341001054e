/* The one set of cJSON helpers every module uses (internal; cJSON stays
 * out of the public headers). Reading: typed getters that give a default
 * for a missing or mistyped key. Building: add-or-fail and finish, so a
 * builder can chain steps and hand back NULL when one failed.
 *
 * cJSON's allocators are set once per process (sp_json_init(), behind a
 * pthread_once) to malloc that aborts on out-of-memory, like sp_xmalloc,
 * and free: the library treats OOM the same everywhere. Both are the C
 * library's malloc and free, so a tree built before the hooks were set
 * (or by the host program's own cJSON calls) is still freed correctly. */
#ifndef SANDPOD_JSON_H
#define SANDPOD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "sandpod/error.h"

/* Set cJSON's hooks; once per process, from any thread. sp_json_parse()
 * calls it; entry points that build JSON before parsing any call it too. */
void sp_json_init(void);

/* Parse len bytes (need not be NUL-terminated); NULL when invalid. */
cJSON *sp_json_parse(const char *s, size_t len);

/**
 * Parse JSON text keeping integers beyond 2^53 exact: cJSON alone turns
 * `1795600000123456789` into a double that prints as
 * `1.7956000001234568e+18`; here such a number becomes a raw item holding
 * its literal, which prints back unchanged. Use it wherever JSON made
 * elsewhere is parsed to be printed again (tool results relayed from a
 * peer, `sandpod call`). NULL on bad JSON.
 */
cJSON *sp_json_parse_exact(const char *text, size_t len);

/* The member `key` of object o (case-sensitive), or NULL. */
const cJSON *sp_json_get(const cJSON *o, const char *key);
/* Its string, or NULL when missing or not a string. */
const char *sp_json_str(const cJSON *o, const char *key);
/* Its string, or dflt. */
const char *sp_json_str_or(const cJSON *o, const char *key, const char *dflt);
/* A copy of its string (caller frees), or NULL. */
char *sp_json_strdup(const cJSON *o, const char *key);
/* Its number as an integer, or dflt when missing, not a number or out of
 * int64 range. */
int64_t sp_json_int(const cJSON *o, const char *key, int64_t dflt);
/* Its number, or dflt. */
double sp_json_num(const cJSON *o, const char *key, double dflt);
/* Its boolean, or dflt when missing or not a boolean. */
bool sp_json_bool(const cJSON *o, const char *key, bool dflt);

/* An array of the strings of a NULL-terminated vector (NULL: empty). */
cJSON *sp_json_strv(const char *const *v);
/* The same with each string made by make() (say, a sanitizing one); NULL
 * when make() or the array fails. */
cJSON *sp_json_strv_map(const char *const *v, cJSON *(*make)(const char *s));

/* Add item to obj under key; on failure (item NULL, obj not an object)
 * item is freed and false returned. */
bool sp_json_add(cJSON *obj, const char *key, cJSON *item);

/* obj when ok, else obj freed and NULL: the end of a builder. */
cJSON *sp_json_finish(cJSON *obj, bool ok);

/* *err from a JSON error object {"code", "message", "reason"} (a peer's
 * or a tool's, sp_code_name/sp_reason_name names); fallback when it has no
 * message. Returns the code. */
int sp_err_from_json(sp_error **err, const cJSON *e, const char *fallback);

#endif
