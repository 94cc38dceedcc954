#!/usr/bin/env python3
"""A homeserver that answers what a test tells it to: the Matrix backend's hostile-server tests.

    hostile-homeserver.py SCRIPT_FILE PORT_FILE

Binds 127.0.0.1 on a free port, writes the port to PORT_FILE, and answers every request from the
JSON in SCRIPT_FILE, read afresh per request: {"<path prefix>": answer, ...}, the longest matching
prefix of the request path winning ("" matches everything). An answer:

    {"status": 200, "body": "text", "repeat": N, "delay": seconds, "headers": {"Name": "value"},
     "close": true}

"body" is sent "repeat" times (default 1); "close" drops the connection without an answer.
Requests are logged (method and path only) to stderr. Standard library only.
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with open(sys.argv[1]) as f:
            script = json.load(f)
        path = self.path.split("?", 1)[0]
        best = None
        for prefix, spec in script.items():
            if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
                best = (prefix, spec)
        spec = best[1] if best else {"status": 404, "body": '{"errcode":"M_UNRECOGNIZED","error":"no script"}'}
        if spec.get("delay"):
            time.sleep(spec["delay"])
        if spec.get("close"):
            self.close_connection = True
            return
        body = spec.get("body", "").encode() * int(spec.get("repeat", 1))
        self.send_response(spec.get("status", 200))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in spec.get("headers", {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_GET = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.command, self.path.split("?", 1)[0]))


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])
    server.serve_forever()


if __name__ == "__main__":
    main()
