#!/bin/sh
# Throwaway TLS material for the fake API server, in DIR: a CA (ca.pem),
# a server certificate for 127.0.0.1 (server.pem/key), a client
# certificate (client.pem/key), and an unrelated CA (other-ca.pem) that
# must not be trusted.
set -eu
d=$1
cd "$d"
q() { "$@" >/dev/null 2>&1; }
q openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=fake-ca \
    -keyout ca.key -out ca.pem
q openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=other-ca \
    -keyout other-ca.key -out other-ca.pem
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
q openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr
q openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile san.ext -out server.pem
printf 'extendedKeyUsage=clientAuth\n' > client.ext
q openssl req -newkey rsa:2048 -nodes -subj /CN=sandpod-test/O=system:masters \
    -keyout client.key -out client.csr
q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile client.ext -out client.pem
echo "token-one" > tokens
