/* overlay is below sandbox: must not compile with overlay's include dirs. */
#include "sandpod/sandbox.h"
