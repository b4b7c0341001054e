/* The required literal of a grep pattern, for sp_fs_grep's prefilter.
 * Internal; not installed.
 *
 * A pattern such as `\w+_t\b` or a case-insensitive `sockaddr` gives PCRE2
 * nothing to skip ahead with (no first code unit, or one with a non-ASCII
 * case partner under Unicode rules), so it tries a match at every byte.
 * When every match must contain some literal, grep searches for that
 * literal instead and runs the regex only on the lines that hold it. */
#ifndef SANDPOD_GREP_LITERAL_H
#define SANDPOD_GREP_LITERAL_H

#include <stdbool.h>

#include "base.h"

/* Find bytes that every match of `pattern` within one line contains:
 * compiled as sp_fs_grep compiles it (UTF, UCP, MULTILINE; PCRE2_LITERAL
 * with `fixed`; PCRE2_CASELESS with `caseless`). With `caseless` the
 * literal is ASCII without k or s (the only ASCII letters with a non-ASCII
 * case partner in Unicode: U+212A KELVIN SIGN, U+017F LONG S), and is to
 * be searched ignoring ASCII case. The longest such run is put in `out`
 * (replacing what it held).
 *
 * Conservative: false, and `out` empty, for whatever is not understood
 * (alternation, lookaround, backreferences, inline options, verbs, \Q
 * without \E, a newline named) or when no literal is required. */
bool sp_grep_required_literal(sp_buf *out, const char *pattern, bool fixed, bool caseless);

#endif
