/* Internals of the tool suite's core files (tools*.c other than the
 * handlers): what one of them defines and another uses. Not installed. */
#ifndef SANDPOD_TOOLS_CORE_H
#define SANDPOD_TOOLS_CORE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs_json.h"
#include "tools_internal.h"

#define DEFAULT_OUTPUT_BYTES 8192
#define DEFAULT_OUTPUT_LINES 200
#define DEFAULT_TEXT_BYTES   65536
#define DEFAULT_LINE_BYTES   500
#define DEFAULT_READ_BYTES   (4u << 20)
#define DEFAULT_WRITE_BYTES  (4u << 20)
#define DEFAULT_TIMEOUT_MS   60000
/* A path or key quoted in a message is cut to this many bytes. */
#define QUOTE_MAX 120

bool tools_sv_has(const sp_strv *sv, const char *s);

/* A short, printable quote of untrusted text for a message. */
char *tools_quote(const char *s, size_t len);

const char *tools_type_of(const cJSON *v);

bool tools_needs_approval(const sp_tools *t, const tool_def *d);

/* "shell: make test" for a person deciding. */
char *tools_summary_of(const tool_def *d, const cJSON *args);

int64_t tools_mono_ms(void);

void tools_emit_event(sp_tools *t, sp_tools_event *ev, const char *error);

bool tools_available(const sp_tools *t, const tool_def *d);

#endif
