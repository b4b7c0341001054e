/* sandpod engine: shared between cmd_engine.c (the table, ls/add/rm/
 * default) and cmd_engine_test.c (test). */
#ifndef SANDPOD_CMD_ENGINE_H
#define SANDPOD_CMD_ENGINE_H

#include <stdbool.h>

#include <cJSON.h>

#include "sandpod/engine.h"

struct cli_engine_test {
    const char *name;
    const char *state_root; /* NULL: the default */
    const char *url;        /* --url: the Podman service of a podman engine */
    bool json, no_probe;
    int timeout_s; /* the probe Pod's wait for Ready */
    bool timeout_set;
};

/* Run the checks of `sandpod engine test`; the exit code. */
int cli_engine_test(const struct cli_engine_test *t);

/* An engine as JSON (the keys of engines.json, plus "name"). */
cJSON *cli_engine_json(const sp_engine *e);

#endif
