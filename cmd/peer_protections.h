/* `sandpod peer protections`: what its container is kept from, as JSON. */
#ifndef SANDPOD_CMD_PEER_PROTECTIONS_H
#define SANDPOD_CMD_PEER_PROTECTIONS_H

int peer_protections(void);

#endif
