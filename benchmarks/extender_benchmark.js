// The loopback extender of benchmarks/extender_benchmark.py in Node.js (--server node): the same verdicts as the
// Python one (the filter refuses a node when the CRC-32 of its name is 0 modulo 10, "node(s) were in maintenance";
// prioritize scores it CRC-32 modulo 11), answered after the delay, but with Node's HTTP server and JSON, whose own
// cost per call is a fraction of Python's http.server's. No dependencies.
//     node extender_benchmark.js <delay ms> <HTTP/1.1|HTTP/1.0>     prints its port (127.0.0.1, port 0) first
"use strict";
const http = require("http");

const delay = parseFloat(process.argv[2] || "1");
const closeEach = process.argv[3] === "HTTP/1.0";

const TABLE = new Int32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  TABLE[n] = c;
}

function crc32(text) {
  let crc = -1;
  for (const byte of Buffer.from(text, "utf8")) crc = TABLE[(crc ^ byte) & 0xff] ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}

function answer(path, args) {
  let names, items = null;
  if (args.NodeNames != null) names = args.NodeNames;
  else {
    items = args.Nodes.items;
    names = items.map((item) => item.metadata.name);
  }
  if (!path.endsWith("/filter")) return names.map((name) => ({ Host: name, Score: crc32(name) % 11 }));
  const refused = new Set(names.filter((name) => crc32(name) % 10 === 0));
  const failed = {};
  for (const name of refused) failed[name] = "node(s) were in maintenance";
  const result = { FailedNodes: failed, Error: "" };
  if (items === null) result.NodeNames = names.filter((name) => !refused.has(name));
  else result.Nodes = { items: items.filter((item) => !refused.has(item.metadata.name)) };
  return result;
}

const server = http.createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const args = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const reply = () => {
      const body = Buffer.from(JSON.stringify(answer(request.url, args)));
      const headers = { "Content-Type": "application/json", "Content-Length": body.length };
      if (closeEach) headers.Connection = "close";
      response.writeHead(200, headers);
      response.end(body);
    };
    if (delay > 0) setTimeout(reply, delay);
    else setImmediate(reply);
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, "127.0.0.1", 511, () => console.log(server.address().port));
