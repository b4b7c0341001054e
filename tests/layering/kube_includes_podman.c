/* Must not compile: kube/ is beside the Podman client, not above it. */
#include "podman_internal.h"
