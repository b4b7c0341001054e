/* The registry of sandbox kinds (kind.h): which kind runs on which kind of
 * engine, the one place that knows every kind. */
#include "kind.h"

const sp_kind *sp_kind_for(sp_engine_kind k)
{
    return k == SP_ENGINE_PODMAN ? &sp_kind_local : &sp_kind_remote;
}
