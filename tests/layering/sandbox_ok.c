/* The control: what sandbox may include compiles with its include dirs, so
 * the refusals above fail for the layering, not for a broken command. */
#include "base.h"
#include "json.h"
#include "sandpod.h"
#include "sandpod/snapshot.h"

int sp_layering_ok(void);
int sp_layering_ok(void)
{
    return SP_OK;
}
