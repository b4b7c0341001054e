/**
 * @file sandpod.h
 * @brief libsandpod: everything in one include.
 */
#ifndef SANDPOD_H
#define SANDPOD_H

#include "sandpod/engine.h"
#include "sandpod/egress.h"
#include "sandpod/error.h"
#include "sandpod/fork.h"
#include "sandpod/template.h"
#include "sandpod/fs.h"
#include "sandpod/hydrate.h"
#include "sandpod/log.h"
#include "sandpod/patch.h"
#include "sandpod/apply.h"
#include "sandpod/attach.h"
#include "sandpod/container.h"
#include "sandpod/podman.h"
#include "sandpod/sandbox.h"
#include "sandpod/sandbox_events.h"
#include "sandpod/sandbox_snapshot.h"
#include "sandpod/session.h"
#include "sandpod/snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The library version, "MAJOR.MINOR.PATCH". */
const char *sp_version(void);

#ifdef __cplusplus
}
#endif

#endif
