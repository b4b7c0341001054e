#!/usr/bin/env python3
"""An independent WebSocket server for test_ws_live: Debian's
python3-websockets (10.x, its asyncio server) plays the other side, so the
client is held to another implementation of RFC 6455, not to itself.

Usage: ws_server.py SCRATCH_DIR. Serves on 127.0.0.1 (ports chosen by the
kernel): a server offering v5 and v4 of the Kubernetes channel protocol, a
v4-only one, and the first again over TLS with a self-signed certificate
(SCRATCH_DIR/cert.pem). Prints "PORTS main v4only tls" once listening.
Exits 77 when the websockets module is missing. The path picks the
behaviour; see handler()."""
import asyncio
import json
import logging
import subprocess
import sys

try:
    import websockets
except ImportError:
    sys.exit(77)

V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"


async def exec_like(ws):
    """pods/exec: stdin on channel 0 until [255, 0] (v5), echoed back on
    channel 1, "err" on 2, then the Status for exit code 3 on channel 3."""
    data = b""
    async for msg in ws:
        if not isinstance(msg, bytes) or not msg:
            await ws.close(1002, "bad message")
            return
        if msg[0] == 0:
            data += msg[1:]
        elif msg[0] == 255 and msg[1:] == b"\x00":
            break
        elif msg[0] == 4:
            size = json.loads(msg[1:])
            data += b"resize %dx%d\n" % (size["Width"], size["Height"])
    await ws.send(b"\x01" + data)
    await ws.send(b"\x02err")
    status = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
              "message": "command terminated with non-zero exit code",
              "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}
    await ws.send(b"\x03" + json.dumps(status).encode())
    await ws.close(1000)


async def handler(ws, path):
    if path.startswith("/echo"):
        async for msg in ws:
            await ws.send(msg)
    elif path == "/big":
        msg = await ws.recv()
        # Back as 16 fragments: the client reassembles them.
        step = (len(msg) + 15) // 16
        await ws.send([msg[i:i + step] for i in range(0, len(msg), step)])
        await ws.wait_closed()
    elif path == "/auth":
        await ws.send(ws.request_headers.get("Authorization", "(none)"))
        await ws.wait_closed()
    elif path == "/ping":
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 5)
        await ws.send("pong-ok")
        await ws.wait_closed()
    elif path == "/close":
        await ws.close(4001, "bye")
    elif path == "/drop":
        # Half a frame (4096 bytes announced, 3 sent), then the TCP
        # connection goes away.
        ws.transport.write(b"\x82\x7e\x10\x00abc")
        await asyncio.sleep(0.1)
        ws.transport.abort()
    elif path == "/silent":
        await asyncio.sleep(30)
    elif path == "/exec":
        await exec_like(ws)


async def main(scratch):
    # Connections the tests drop on purpose are not news; the client's
    # assertions are the verdict.
    logging.getLogger("websockets").setLevel(logging.CRITICAL)
    cert, key = scratch + "/cert.pem", scratch + "/key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    opts = {"max_size": 8 << 20, "ping_interval": None}
    main_srv = await websockets.serve(handler, "127.0.0.1", 0, subprotocols=[V5, V4], **opts)
    v4_srv = await websockets.serve(handler, "127.0.0.1", 0, subprotocols=[V4], **opts)
    tls_srv = await websockets.serve(handler, "127.0.0.1", 0, subprotocols=[V5, V4], ssl=ctx,
                                     **opts)
    ports = [s.sockets[0].getsockname()[1] for s in (main_srv, v4_srv, tls_srv)]
    print("PORTS %d %d %d" % tuple(ports), flush=True)
    await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
