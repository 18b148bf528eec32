# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A maintenance-list scheduler extender: kube-scheduler's extender protocol, Python standard library only.

    python3 maintenance_extender.py --maintenance maintenance.txt [--bind 127.0.0.1] [--port 8888]
                                    [--token-file token.txt]

The maintenance file, read again on every request (edit it while the service runs), holds one node per
line; ``#`` starts a comment:

    gpu-07              # in maintenance: no new work goes there
    gpu-12 soon         # maintenance planned: allowed, but scored last

- ``POST /filter`` (kube's ExtenderArgs in, ExtenderFilterResult out): nodes in maintenance are refused
  with the reason "node(s) were in maintenance"; the others pass. Works with ``nodeCacheCapable``
  (NodeNames) and without (a NodeList).
- ``POST /prioritize`` (ExtenderArgs in, HostPriorityList out): 0 for nodes with maintenance planned,
  10 for the others.
- With ``--token-file``, a request without ``Authorization: Bearer <token>`` gets HTTP 401.

``--port 0`` picks a free port; the port is printed on the first line of stdout. docs/extenders.md shows
the matching profile; nothing here is specific to gangplank, so kube-scheduler can use it too.
"""

from __future__ import annotations

import argparse
import hmac
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_REQUEST = 64 * 1024 * 1024


def read_maintenance(path):
    """{node: "now" or "soon"} from the maintenance file."""
    listed = {}
    with open(path, encoding="utf-8") as stream:
        for line in stream:
            words = line.split("#", 1)[0].split()
            if words:
                listed[words[0]] = "soon" if words[1:2] == ["soon"] else "now"
    return listed


def candidate_names(args):
    """The node names of kube's ExtenderArgs: NodeNames (nodeCacheCapable) or the NodeList's items."""
    if args.get("NodeNames") is not None:
        return list(args["NodeNames"]), None
    items = (args.get("Nodes") or {}).get("items") or []
    return [item["metadata"]["name"] for item in items], items


def filter_nodes(args, listed):
    names, items = candidate_names(args)
    failed = {name: "node(s) were in maintenance" for name in names if listed.get(name) == "now"}
    passed = [name for name in names if name not in failed]
    result = {"FailedNodes": failed, "FailedAndUnresolvableNodes": {}, "Error": ""}
    if items is None:
        result.update(NodeNames=passed, Nodes=None)
    else:
        result.update(Nodes={"metadata": {}, "items": [item for item in items if item["metadata"]["name"] in passed]},
                      NodeNames=None)
    return result


def prioritize_nodes(args, listed):
    names, _items = candidate_names(args)
    return [{"Host": name, "Score": 0 if listed.get(name) == "soon" else 10} for name in names]


def make_handler(maintenance, token):
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive, as Go's and Node's servers do: a scheduler sends the calls of a plan over a few connections.
        protocol_version = "HTTP/1.1"
        # Answer at once: with Nagle's algorithm on, the body would wait for the headers' acknowledgement.
        disable_nagle_algorithm = True

        def do_POST(self):  # noqa: N802 (http.server's name)
            if token is not None and not hmac.compare_digest(self.headers.get("Authorization", ""), "Bearer " + token):
                return self._answer(401, {"Error": "unauthorized"}, close=True)
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_REQUEST:
                return self._answer(413, {"Error": "request too large"}, close=True)
            verb = self.path.rstrip("/").rsplit("/", 1)[-1]
            try:
                args = json.loads(self.rfile.read(length))
                listed = read_maintenance(maintenance)
                if verb == "filter":
                    return self._answer(200, filter_nodes(args, listed))
                if verb == "prioritize":
                    return self._answer(200, prioritize_nodes(args, listed))
            except (ValueError, KeyError, TypeError, AttributeError, OSError) as error:
                # kube's convention: a filter that cannot decide says so in Error, with HTTP 200.
                return self._answer(200, {"Error": "maintenance extender: %s: %s" % (type(error).__name__, error)})
            return self._answer(404, {"Error": "unknown verb %s" % verb})

        def _answer(self, status, value, close=False):
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if close:
                # The request's body was not read: the connection cannot carry another request.
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):      # quiet: one line per request is noise for a scheduler
            pass

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True           # a kept-alive connection's thread does not hold up the exit
    request_queue_size = 128        # the listen backlog (Python's default, 5, drops connections made at once)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--maintenance", required=True, help="the maintenance list file")
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8888, help="0: any free port (printed)")
    parser.add_argument("--token-file", help="require this bearer token")
    options = parser.parse_args(argv)
    token = None
    if options.token_file:
        with open(options.token_file, encoding="ascii") as stream:
            token = stream.read().strip()
    server = Server((options.bind, options.port), make_handler(options.maintenance, token))
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
