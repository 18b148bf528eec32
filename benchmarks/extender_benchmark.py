# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an HTTP scheduler extender costs per plan (docs/extenders.md).

    .venv/bin/python benchmarks/extender_benchmark.py [--sizes 50x1000,1000x10000] [--runs N] [--delay-ms 1]
                                                      [--seed N] [--json] [--server python|http.server|node]

A loopback extender in its own process, so it does not share the planner's interpreter (this script with
--serve: on asyncio by default, or with --server http.server on Python's http.server, a thread per connection;
or, with --server node, the same extender in Node.js, extender_benchmark.js), answers every call after
``--delay-ms`` (1 ms): the filter passes every node but one in ten, whose reason is "node(s) were in
maintenance", and prioritize scores each node 0..10 from its name. For each generated problem
(benchmarks/generate.py) plan() runs without an extender, with one in nodeCacheCapable mode (NodeNames) and
with one that gets the full NodeList, interleaved (A, B, C, A, B, C, ...), and the table shows the medians,
the ratio to the plan without an extender, the calls per service and verb and the seconds spent in the
extender. Goals: at most one call per service and verb, and at most 1.5x at 50x1000.
A benchmark, not a test: it always exits 0 (2 on bad arguments) and prints MISS where a goal is missed.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

from ansible_collections.gangplank.platform.plugins.module_utils.extender.transport import post  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.extender.transport import parse_profile  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan  # noqa: E402
from generate import generate  # noqa: E402

DEFAULT_SIZES = ((50, 1000), (1000, 10000))
DEFAULT_SEED = 20240611
RATIO_GOAL = {(50, 1000): 1.5}


def _digest(name):
    return zlib.crc32(name.encode())


def _answer(path, args):
    """The loopback extender's answer to ``args`` (ExtenderArgs) on ``path``: the filter refuses a node when the
    CRC-32 of its name is 0 modulo 10 (in maintenance), prioritize scores it CRC-32 modulo 11."""
    if args.get("NodeNames") is not None:
        names, items = args["NodeNames"], None
    else:
        items = args["Nodes"]["items"]
        names = [item["metadata"]["name"] for item in items]
    if not path.endswith("/filter"):
        return [{"Host": name, "Score": _digest(name) % 11} for name in names]
    refused = {name for name in names if _digest(name) % 10 == 0}
    answer = {"FailedNodes": {name: "node(s) were in maintenance" for name in refused}, "Error": ""}
    if items is None:
        answer["NodeNames"] = [name for name in names if name not in refused]
    else:
        answer["Nodes"] = {"items": [item for item in items if item["metadata"]["name"] not in refused]}
    return answer


def _serve_http_server(delay, protocol):
    """The loopback extender on Python's http.server (--server http.server): prints its port, then answers until
    killed; a thread per connection, each answer after time.sleep. HTTP/1.1 keeps connections open between calls,
    as extenders written with Go's net/http or Node.js do; HTTP/1.0 closes each one."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = protocol

        def do_POST(self):  # noqa: N802
            args = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(delay)
            body = json.dumps(_answer(self.path, args)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 128        # Go's and Node's listen backlogs are larger still; Python's default is 5
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def _serve(delay, protocol):
    """The loopback extender on asyncio (--server python, the default): prints its port, then answers until killed.
    One event loop, no thread per connection, the request head split by hand; the JSON work per call is the
    http.server one's (json.loads of the request, json.dumps of the answer), the answer goes out ``delay`` after the
    request was read (a timer, not a sleeping thread). A lean Python service, as one on asyncio is written."""
    import asyncio                     # pylint: disable=import-outside-toplevel
    close = protocol == "HTTP/1.0"

    class Extender(asyncio.Protocol):
        def __init__(self):
            self.transport = None
            self.buffer = bytearray()

        def connection_made(self, transport):
            self.transport = transport

        def data_received(self, data):
            self.buffer += data
            while True:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
                length = 0
                for line in lines[1:]:
                    name, _colon, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                if len(self.buffer) < end + 4 + length:
                    return
                args = json.loads(bytes(self.buffer[end + 4:end + 4 + length]))
                del self.buffer[:end + 4 + length]
                asyncio.get_running_loop().call_later(delay, self.reply, lines[0].split()[1], args)

        def reply(self, path, args):
            if self.transport.is_closing():
                return
            body = json.dumps(_answer(path, args)).encode()
            self.transport.write(b"%s 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
                protocol.encode(), len(body), b"Connection: close\r\n" if close else b"", body))
            if close:
                self.transport.close()

    async def main():
        server = await asyncio.get_running_loop().create_server(Extender, "127.0.0.1", 0, backlog=128)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


def _sizes(text):
    try:
        return [tuple(int(part) for part in item.lower().split("x")) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("expected NODESxINSTANCES[,...], got %r" % text)


def round_trip(port):
    """The median of 20 sequential bare calls (a Pod and two node names) as the planner makes them: what one call
    costs on this machine, which its load can make far more than --delay-ms."""
    config = parse_profile({"extenders": [{"urlPrefix": "http://127.0.0.1:%d/gangplank" % port, "filterVerb": "filter",
                                           "nodeCacheCapable": True}]}).plugins[-4].config
    body = json.dumps({"Pod": {"metadata": {"name": "probe"}}, "Nodes": None, "NodeNames": ["a", "b"]}).encode()
    times = []
    for _unused in range(20):
        started = time.perf_counter()
        post(config, "filter", body)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run_size(nodes, instances, seed, runs, port):
    problem = generate(nodes, instances, seed)
    services = sum(1 for spec in problem["services"].values() if not spec.get("sidecar"))
    url = "http://127.0.0.1:%d/gangplank" % port
    variants = {
        "none": None,
        "names": parse_profile({"extenders": [{"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
                                               "weight": 1, "nodeCacheCapable": True}]}),
        "nodes": parse_profile({"extenders": [{"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
                                               "weight": 1}]}),
    }
    times = {name: [] for name in variants}
    spent = {name: [] for name in variants}        # seconds in the extender, per run
    results = {}
    for _unused in range(runs):
        for name, profile in variants.items():     # interleaved: A, B, C, A, B, C, ...
            data = copy.deepcopy(problem)
            started = time.perf_counter()
            results[name] = plan(data, profile=profile)
            times[name].append(time.perf_counter() - started)
            if profile is not None:
                spent[name].append(results[name]["extenders"][0]["seconds"])
    row = {"nodes": nodes, "instances": instances, "services": services, "runs": runs,
           "median_ms": {name: statistics.median(values) * 1000.0 for name, values in times.items()}, "modes": {}}
    for name in ("names", "nodes"):
        entry = results[name]["extenders"][0]
        # The median of the paired ratios (run i with, over run i without): the machine's load changes between
        # runs, much less within one pair.
        ratio = statistics.median(with_ / without for with_, without in zip(times[name], times["none"]))
        goal = RATIO_GOAL.get((nodes, instances))
        calls_ok = entry["filter_calls"] <= services and entry["prioritize_calls"] <= services
        row["modes"][name] = {
            "ratio": ratio, "feasible": results[name]["feasible"], "path": results[name]["path"],
            "filter_calls": entry["filter_calls"], "prioritize_calls": entry["prioritize_calls"],
            "extender_seconds": statistics.median(spent[name]),
            "status": "PASS" if calls_ok and (goal is None or ratio <= goal) else "MISS",
            "goal": "<= 1 call per service and verb" + (", <= %gx" % goal if goal else ""),
        }
    row["feasible_without"] = results["none"]["feasible"]
    return row


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", type=_sizes, default=list(DEFAULT_SIZES))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delay-ms", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--protocol", choices=("HTTP/1.1", "HTTP/1.0"), default="HTTP/1.1",
                        help="what the loopback extender speaks (HTTP/1.0: a new connection per call)")
    parser.add_argument("--server", choices=("python", "http.server", "node"), default="python",
                        help="the loopback extender: this script's on asyncio (python, the default), on Python's "
                             "http.server (a thread per connection), or the same extender in Node.js "
                             "(extender_benchmark.js)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.serve:
        (_serve_http_server if options.server == "http.server" else _serve)(options.delay_ms / 1000.0, options.protocol)
        return 0
    if options.server == "node":
        node = shutil.which("node")
        if node is None:
            parser.error("--server node: node (Node.js) is not installed")
        command = [node, os.path.join(os.path.dirname(os.path.abspath(__file__)), "extender_benchmark.js"),
                   str(options.delay_ms), options.protocol]
    else:
        command = [sys.executable, os.path.abspath(__file__), "--serve", "--server", options.server,
                   "--delay-ms", str(options.delay_ms), "--protocol", options.protocol]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        before = round_trip(port)
        rows = [run_size(nodes, instances, options.seed, options.runs, port) for nodes, instances in options.sizes]
        after = round_trip(port)
    finally:
        server.kill()
        server.wait()
    if options.json:
        print(json.dumps({"server": options.server, "round_trip_ms": [before * 1000.0, after * 1000.0], "rows": rows},
                         indent=2))
        return 0
    print("extender (%s, %s) answering after %g ms on loopback; one bare call measured %.1f ms before the runs, %.1f ms "
          "after; %d interleaved runs per variant; medians" % (
              {"python": "Python asyncio", "http.server": "Python http.server", "node": "Node.js"}[options.server],
              options.protocol, options.delay_ms,
              before * 1000.0, after * 1000.0, options.runs))
    header = ("size", "services", "none ms", "mode", "with ms", "ratio", "filter", "prio", "ext s (med)", "result")
    print("%-12s %8s %10s  %-6s %10s %6s %8s %8s %11s  %s" % header)
    for row in rows:
        for mode, figures in row["modes"].items():
            print("%-12s %8d %10.1f  %-6s %10.1f %5.2fx %8d %8d %11.3f  %s (%s)%s" % (
                "%dx%d" % (row["nodes"], row["instances"]), row["services"], row["median_ms"]["none"], mode,
                row["median_ms"][mode], figures["ratio"], figures["filter_calls"], figures["prioritize_calls"],
                figures["extender_seconds"], figures["status"], figures["goal"],
                "" if figures["feasible"] else " INFEASIBLE"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
