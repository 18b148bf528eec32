// A scheduler extender in Node.js (no dependencies), written against kube-scheduler's extender/v1 types:
// it proves gangplank's wire format is language-neutral. Started by test_extender.py:
//     node zone_extender.js <mode>        mode: nodes (Nodes in, Nodes out) or names (nodeCacheCapable)
// It prints its port (bound to 127.0.0.1, port 0) on the first line of stdout.
//   POST /ext/filter      refuses nodes whose label zone is "closed" (FailedNodes) and nodes labelled
//                         broken=true (FailedAndUnresolvableNodes); pods labelled
//                         app.kubernetes.io/name=needs-gpu also need nvidia.com/gpu capacity.
//   POST /ext/prioritize  scores each node by its label "rank" (0..10), default 0.
//   GET  /calls           the number of calls per verb and pod name, as JSON.
"use strict";
const http = require("http");

const mode = process.argv[2] || "nodes";
const calls = {};

function labelsOf(node) {
  return (node.metadata && node.metadata.labels) || {};
}

function filter(args) {
  const pod = args.Pod;
  const needsGpu = pod.metadata.labels["app.kubernetes.io/name"] === "needs-gpu";
  const failed = {};
  const unresolvable = {};
  if (mode === "names") {
    // Names only: a name ending in "-closed" is closed.
    const passed = [];
    for (const name of args.NodeNames) {
      if (name.endsWith("-closed")) failed[name] = "node(s) were in a closed zone";
      else passed.push(name);
    }
    return { Nodes: null, NodeNames: passed, FailedNodes: failed, FailedAndUnresolvableNodes: unresolvable, Error: "" };
  }
  const items = [];
  for (const node of args.Nodes.items) {
    const labels = labelsOf(node);
    const name = node.metadata.name;
    if (labels.broken === "true") unresolvable[name] = "node(s) were broken";
    else if (labels.zone === "closed") failed[name] = "node(s) were in a closed zone";
    else if (needsGpu && !(node.status.capacity["nvidia.com/gpu"] > 0)) failed[name] = "node(s) had no GPU for needs-gpu";
    else items.push(node);
  }
  return { Nodes: { metadata: {}, items: items }, NodeNames: null, FailedNodes: failed,
           FailedAndUnresolvableNodes: unresolvable, Error: "" };
}

function prioritize(args) {
  const result = [];
  if (mode === "names") {
    for (const name of args.NodeNames) result.push({ Host: name, Score: name.endsWith("-best") ? 10 : 0 });
    return result;
  }
  for (const node of args.Nodes.items) {
    const rank = parseInt(labelsOf(node).rank || "0", 10);
    result.push({ Host: node.metadata.name, Score: rank });
  }
  return result;
}

const server = http.createServer((request, response) => {
  let body = "";
  request.on("data", (chunk) => { body += chunk; });
  request.on("end", () => {
    if (request.method === "GET" && request.url === "/calls") {
      response.writeHead(200, { "Content-Type": "application/json" });
      response.end(JSON.stringify(calls));
      return;
    }
    let answer;
    try {
      const args = JSON.parse(body);
      const verb = request.url.split("/").pop();
      const key = verb + " " + args.Pod.metadata.name;
      calls[key] = (calls[key] || 0) + 1;
      if (verb === "filter") answer = filter(args);
      else if (verb === "prioritize") answer = prioritize(args);
      else { response.writeHead(404); response.end("no such verb"); return; }
    } catch (error) {
      response.writeHead(200, { "Content-Type": "application/json" });
      response.end(JSON.stringify({ Error: "extender could not read the request: " + error.message }));
      return;
    }
    response.writeHead(200, { "Content-Type": "application/json" });
    response.end(JSON.stringify(answer));
  });
});

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(server.address().port + "\n");
});
