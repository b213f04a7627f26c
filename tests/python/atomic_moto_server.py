"""moto's S3 server with S3's conditional writes made atomic, as S3 makes them.

moto checks `If-None-Match: *` and then stores the object, with nothing between the two: of two writes of one
key at once, both can pass the check and both be told they wrote it (a CI run had one of 40 tasks so, in
test_object_store.py's race of two attempts per task). S3 lets one through and refuses the other. Here the
conditional writes go through moto one at a time; every other request runs as moto runs it.

Usage: python atomic_moto_server.py <port>   (on 127.0.0.1)
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

_conditional_writes = threading.Lock()


def atomic_conditional_writes(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") == "PUT" and environ.get("HTTP_IF_NONE_MATCH"):
            with _conditional_writes:
                return list(app(environ, start_response))  # the whole answer, before the next write's check
        return app(environ, start_response)

    return serve


if __name__ == "__main__":
    moto = DomainDispatcherApplication(create_backend_app)
    run_simple("127.0.0.1", int(sys.argv[1]), atomic_conditional_writes(moto), threaded=True, request_handler=MotoRequestHandler)
