/* `sandpod peer protections`: what its container is kept from, as JSON. */
#ifndef SANDPOD_CMD_PEER_PROTECTIONS_H
#define SANDPOD_CMD_PEER_PROTECTIONS_H

#include <stdbool.h>

/* network: also try a direct connection to the cluster's API service. */
int peer_protections(bool network);

#endif
