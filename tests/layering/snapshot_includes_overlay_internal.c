/* snapshot sees overlay's public headers only, not its internals. */
#include "fs_internal.h"
