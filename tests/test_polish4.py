"""Items named at stop 50 and mended here (polish round 4), each through the path a user takes.

1. The model gateway has one bound on a request's body: the 64 MB it accepts is also what it reads to pin the model
   (it refused 16-64 MB bodies as unreadable, so an installed program attaching a few images failed), the values a
   parse may make bounded apart (`MAX_REQUEST_ITEMS`); the refusal of a longer body states the bound. The request
   the real runner forwards is covered in test_agents_round3 (24 MB of images, pinned).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time

from automedbench_models.gateway import MAX_REQUEST_BYTES, SOCKET_NAME, ModelGateway
from test_agents_round1 import Provider


def test_a_body_over_the_gateways_bound_is_refused_naming_the_bound(tmp_path):
    """Before: "automedbench: request too large", no bound named (while 16 MB bodies were refused as unreadable)."""
    folder = tmp_path / "gw"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with Provider("slow") as provider:
            gw = ModelGateway(provider.url.removesuffix("/v1"), "openai", None, model="m", max_calls=5,
                              deadline=time.monotonic() + 60)
            gw.start(fd)
            try:
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.connect(str(folder / SOCKET_NAME))
                    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\n\r\n" % (MAX_REQUEST_BYTES + 1))
                    reply = http.client.HTTPResponse(sock)
                    reply.begin()
                    status, body = reply.status, reply.read()
            finally:
                gw.close()
        assert provider.received == [], provider.received
    finally:
        os.close(fd)
    assert status == 413, status
    message = json.loads(body)["error"]["message"]
    assert f"at most {MAX_REQUEST_BYTES >> 20} MB" in message and str(MAX_REQUEST_BYTES + 1) in message, message
