/* sandbox is below contrib: must not compile with sandbox's include dirs. */
#include "tools.h"
