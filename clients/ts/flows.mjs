// Drives an mcpcluster endpoint with the official TypeScript MCP SDK client
// (@modelcontextprotocol/sdk, StreamableHTTPClientTransport), which speaks
// 2025-11-25: every demo tool and ping_client, sampling and elicitation
// answered through setRequestHandler, roots, progress (onprogress) and log
// notifications, resource subscriptions, tools/list_changed, prompts and
// completion, a stream cut mid-call and resumed (by resumeStream(lastEventId)
// and by the transport's own reconnection), and terminateSession()
// (DELETE), after which the session id must get 404.
//
// With --tasks it runs the experimental tasks of 2025-11-25 instead,
// through client.experimental.tasks, against the conformance tool pack
// (slow_compute, confirm_delete, failing_job): callToolStream to the
// result, an elicitation inside a task answered through tasks/result,
// listTasks, getTask, cancelTask, a failing task, and
// notifications/tasks/status.
//
//   MCP_TS_SDK=<dir of @modelcontextprotocol/sdk> node flows.mjs URL [--cluster] [--tasks] [--node URL]...
//
// --cluster relaxes the checks that depend on one node's demo state (the
// counter and the run-time tool "extra" live in each node); every --node
// URL is also asked for the deleted session (it must answer 404 too).
// Prints one line per check ("ok NAME" or "FAIL NAME: why") and exits 1 if
// any check failed, 2 on a usage error or the overall timeout.
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.MCP_TS_SDK;
const args = process.argv.slice(2);
const url = args[0];
if (!sdkDir || !url || url.startsWith("--")) {
  console.error("usage: MCP_TS_SDK=<dir of @modelcontextprotocol/sdk> node flows.mjs URL [--cluster] [--node URL]...");
  process.exit(2);
}
const cluster = args.includes("--cluster");
const tasksOnly = args.includes("--tasks");
const nodes = [];
for (let i = 1; i < args.length; i++) if (args[i] === "--node") nodes.push(args[++i]);

// The SDK lives in the npm tools cache, not next to this script: import its
// ESM entry points by file URL.
const sdk = (p) => import(pathToFileURL(path.join(sdkDir, "dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ToolListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  TaskStatusNotificationSchema,
  CallToolResultSchema,
  RELATED_TASK_META_KEY,
} = await sdk("types.js");

// The demo pack's tools, with ping_client, which the reference node adds
// when it serves HTTP.
const DEMO_TOOLS = ["add", "bump_counter", "echo", "elicit", "ping_client", "progress", "roots", "sample", "toggle_extra_tool"];
const ROOT_URI = "file:///work/project";
const WAIT_MS = 20000;

const overall = setTimeout(() => {
  console.log("FAIL timeout: the flows did not finish within 120s");
  process.exit(2);
}, 120000);

class CheckError extends Error {}
function check(cond, msg) {
  if (!cond) throw new CheckError(msg);
}
function eq(got, want, what) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  check(g === w, `${what}: got ${g}, want ${w}`);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(what, cond) {
  const deadline = Date.now() + WAIT_MS;
  while (!cond()) {
    if (Date.now() > deadline) throw new CheckError(`timed out after ${WAIT_MS}ms waiting for ${what}`);
    await sleep(10);
  }
}

// Wire: a fetch that records every exchange and, when armed, cuts the SSE
// response of one POST after a number of progress notifications. Events up
// to the cut are delivered whole; then the body fails and the underlying
// connection is closed, as when a network path drops.
class Wire {
  constructor() {
    this.log = [];
    this.cut = null; // {when(msg), after, lastEventId, done}
    this.fetch = this.fetch.bind(this);
  }
  armCut(when, after) {
    this.cut = { when, after, lastEventId: "", done: false };
  }
  async fetch(input, init = {}) {
    const headers = new Headers(init.headers);
    let msg = null;
    if (typeof init.body === "string") {
      try { msg = JSON.parse(init.body); } catch { msg = null; }
    }
    const ex = {
      method: init.method ?? "GET",
      sessionId: headers.get("mcp-session-id"),
      version: headers.get("mcp-protocol-version"),
      lastEventId: headers.get("last-event-id"),
      msg,
      status: 0,
    };
    this.log.push(ex);
    const res = await fetch(input, init);
    ex.status = res.status;
    const c = this.cut;
    if (c && !c.done && ex.method === "POST" && msg && c.when(msg) &&
        (res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      c.done = true;
      return new Response(cutStream(res.body, c), { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    return res;
  }
  describe() {
    return this.log.map((e, i) => {
      let what = e.msg?.method ?? (e.msg && ("result" in e.msg || "error" in e.msg) ? `response ${e.msg.id}` : "");
      if (e.msg?.params?.name) what += ` ${e.msg.params.name}`;
      return `  ${i} ${e.method} ${what} -> ${e.status}${e.lastEventId ? ` (Last-Event-ID ${e.lastEventId})` : ""}`;
    }).join("\n");
  }
}

function cutStream(body, c) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  const enc = new TextEncoder();
  let buf = "";
  let seen = 0;
  let cut = false;
  return new ReadableStream({
    async pull(controller) {
      if (cut) {
        await reader.cancel().catch(() => {});
        controller.error(new Error("connection cut by the test"));
        return;
      }
      for (;;) {
        const m = /\r?\n\r?\n/.exec(buf);
        if (m) {
          const ev = buf.slice(0, m.index + m[0].length);
          buf = buf.slice(m.index + m[0].length);
          const id = /^id:\s?(.*)$/m.exec(ev);
          if (id) c.lastEventId = id[1].trim();
          controller.enqueue(enc.encode(ev));
          if (ev.includes('"notifications/progress"') && ++seen >= c.after) cut = true;
          return;
        }
        const { value, done } = await reader.read();
        if (done) {
          if (buf) controller.enqueue(enc.encode(buf));
          buf = "";
          controller.close();
          return;
        }
        buf += dec.decode(value, { stream: true });
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

// A client whose handlers answer sampling with "re:<prompt>", elicitation
// with a name and an email, roots/list with one root, and record what the
// server sent.
function newClient(rec) {
  const client = new Client(
    { name: "mcpcluster-ts-test", version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    rec.samples.push(req.params);
    const prompt = req.params.messages?.[0]?.content?.text ?? "";
    return { role: "assistant", model: "test-model", stopReason: "endTurn", content: { type: "text", text: `re:${prompt}` } };
  });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    rec.elicits.push(req.params);
    return { action: "accept", content: { name: "Ada", email: "ada@example.com" } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: ROOT_URI, name: "project" }] }));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { rec.logs.push(n.params); });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { rec.toolsChanged++; });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { rec.updated.push(n.params.uri); });
  return client;
}

function newRecorder() {
  return { samples: [], elicits: [], logs: [], toolsChanged: 0, updated: [], errors: [] };
}

async function connect(reconnectionOptions) {
  const rec = newRecorder();
  const wire = new Wire();
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: wire.fetch, reconnectionOptions });
  const client = newClient(rec);
  client.onerror = (e) => rec.errors.push(String(e?.message ?? e));
  await client.connect(transport);
  return { client, transport, wire, rec };
}

const text = (res) => res?.content?.[0]?.text;

let failed = 0;
let current = null;
async function step(name, fn) {
  try {
    const detail = await fn();
    console.log(`ok ${name}${detail ? ` (${detail})` : ""}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e instanceof CheckError ? e.message : e?.stack ?? e}`);
    if (current) console.log(`  HTTP exchanges of the session:\n${current.wire.describe()}`);
  }
}

async function call(s, name, args = {}, options) {
  const res = await s.client.callTool({ name, arguments: args }, undefined, { timeout: WAIT_MS, ...options });
  check(!res.isError, `${name}: isError result: ${text(res)}`);
  return res;
}

// progressCall calls progress with onprogress and checks that every step
// and the closing log message arrive exactly once. resume, if given, runs
// once the wire has cut the response.
async function progressCall(s, steps, delayMs, resume) {
  const seen = [];
  let token = "";
  const p = call(s, "progress", { steps, delayMs }, {
    onprogress: (pr) => seen.push(pr),
    onresumptiontoken: (t) => { token = t; },
  });
  if (resume) {
    let settled = false;
    p.then(() => { settled = true; }, () => { settled = true; });
    await waitFor("the cut", () => settled || (s.wire.cut?.done && seen.length >= s.wire.cut.after));
    if (settled) {
      await p;
      throw new CheckError("the call finished without its response being cut");
    }
    await sleep(50);
    await resume(token);
  }
  const res = await p;
  eq(text(res), `done after ${steps} steps`, "progress result");
  const logText = `completed ${steps} steps`;
  await waitFor(`log message "${logText}"`, () => s.rec.logs.some((l) => l.data === logText));
  const counts = new Map();
  for (const pr of seen) {
    counts.set(pr.progress, (counts.get(pr.progress) ?? 0) + 1);
    eq(pr.total, steps, `total of progress ${pr.progress}`);
  }
  for (let i = 1; i <= steps; i++) eq(counts.get(i) ?? 0, 1, `times progress ${i} was received`);
  eq(seen.length, steps, "progress notifications");
  const logs = s.rec.logs.filter((l) => l.data === logText);
  eq(logs.map((l) => [l.level, l.logger]), [["info", "demo"]], `log messages "${logText}"`);
  return token;
}

// The client answered the server's request with a POST that got 202.
async function checkAnswered(s, what) {
  const answers = () => s.wire.log.filter((e) => e.method === "POST" && e.msg && !e.msg.method && ("result" in e.msg || "error" in e.msg));
  check(answers().length > 0, `${what}: the client POSTed no JSON-RPC response`);
  await waitFor("the answers' statuses", () => answers().every((e) => e.status !== 0));
  for (const e of answers()) eq(e.status, 202, `${what}: status of the POSTed response`);
}

async function rawStatus(method, target, sessionId) {
  const init = {
    method,
    headers: { accept: "application/json, text/event-stream", "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25" },
    signal: AbortSignal.timeout(5000),
  };
  if (method === "POST") {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify({ jsonrpc: "2.0", id: 99, method: "ping" });
  }
  const res = await fetch(target, init);
  await res.body?.cancel();
  return res.status;
}

// ---------------------------------------------------------------- tasks ---
// drain runs a callToolStream to its end and returns its messages.
async function drain(stream) {
  const msgs = [];
  for await (const m of stream) msgs.push(m);
  return msgs;
}

if (tasksOnly) {
  const rec = newRecorder();
  const statuses = [];
  const wire = new Wire();
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: wire.fetch });
  const client = new Client({ name: "mcpcluster-ts-tasks", version: "1.0.0" }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    rec.elicits.push(req.params);
    return { action: "accept", content: { confirm: true } };
  });
  client.setNotificationHandler(TaskStatusNotificationSchema, (n) => { statuses.push(n.params); });
  client.onerror = (e) => rec.errors.push(String(e?.message ?? e));
  current = { wire };
  await client.connect(transport);
  const tasks = client.experimental.tasks;
  const ids = [];

  await step("tasks capability", async () => {
    const caps = client.getServerCapabilities();
    check(caps?.tasks?.requests?.tools?.call && caps.tasks.list && caps.tasks.cancel, `capabilities.tasks: ${JSON.stringify(caps?.tasks)}`);
    const { tools } = await client.listTools();
    const support = Object.fromEntries(tools.filter((t) => t.execution).map((t) => [t.name, t.execution.taskSupport]));
    eq([support.slow_compute, support.failing_job, support.greet], ["optional", "required", undefined], "execution.taskSupport of slow_compute, failing_job, greet");
  });

  await step("callToolStream to the result", async () => {
    const msgs = await drain(tasks.callToolStream({ name: "slow_compute", arguments: { seconds: 0.3, label: "ts" } }, undefined, { timeout: WAIT_MS }));
    const created = msgs.find((m) => m.type === "taskCreated");
    check(created, `no taskCreated in ${JSON.stringify(msgs)}`);
    ids.push(created.task.taskId);
    const last = msgs[msgs.length - 1];
    check(last.type === "result", `last message ${JSON.stringify(last)}, want the result`);
    eq(text(last.result), "computed ts after 0.3s", "task result");
    eq(last.result._meta?.[RELATED_TASK_META_KEY]?.taskId, created.task.taskId, "related-task of the result");
    eq((await tasks.getTask(created.task.taskId)).status, "completed", "getTask status");
    return `task ${created.task.taskId}, ${msgs.length} messages`;
  });

  await step("elicitation inside a task", async () => {
    const msgs = await drain(tasks.callToolStream({ name: "confirm_delete", arguments: { filename: "x.txt" } }, undefined, { timeout: WAIT_MS }));
    const created = msgs.find((m) => m.type === "taskCreated");
    check(created, `no taskCreated in ${JSON.stringify(msgs)}`);
    ids.push(created.task.taskId);
    const last = msgs[msgs.length - 1];
    check(last.type === "result", `last message ${JSON.stringify(last)}, want the result`);
    eq(text(last.result), "deleted x.txt", "task result after the elicitation");
    eq(rec.elicits.length, 1, "elicitations answered");
    eq(rec.elicits[0]._meta?.[RELATED_TASK_META_KEY]?.taskId, created.task.taskId, "related-task of the elicitation");
    await checkAnswered({ wire }, "elicitation in a task");
    return `statuses seen: ${msgs.filter((m) => m.type === "taskStatus").map((m) => m.task.status).join(",")}`;
  });

  await step("cancelTask", async () => {
    const stream = tasks.callToolStream({ name: "slow_compute", arguments: { seconds: 60 } }, undefined, { timeout: WAIT_MS });
    const first = await stream.next();
    check(first.value?.type === "taskCreated", `first message ${JSON.stringify(first.value)}, want taskCreated`);
    const id = first.value.task.taskId;
    ids.push(id);
    const cancelled = await tasks.cancelTask(id);
    eq(cancelled.status, "cancelled", "cancelTask status");
    const rest = [];
    for await (const m of stream) rest.push(m);
    const last = rest[rest.length - 1];
    check(last?.type === "error" && /cancelled/.test(last.error.message), `after the cancel: ${JSON.stringify(last)}, want the cancelled error`);
    eq((await tasks.getTask(id)).status, "cancelled", "getTask after cancelTask");
  });

  await step("failing task", async () => {
    const msgs = await drain(tasks.callToolStream({ name: "failing_job", arguments: {} }, undefined, { timeout: WAIT_MS }));
    const created = msgs.find((m) => m.type === "taskCreated");
    check(created, `no taskCreated in ${JSON.stringify(msgs)}`);
    ids.push(created.task.taskId);
    const last = msgs[msgs.length - 1];
    check(last.type === "error" && /failed/.test(last.error.message), `last message ${JSON.stringify(last)}, want the failed error`);
    const res = await tasks.getTaskResult(created.task.taskId, CallToolResultSchema, { timeout: WAIT_MS });
    check(res.isError === true, `getTaskResult of the failed task: ${JSON.stringify(res)}, want the isError tool result`);
  });

  await step("listTasks", async () => {
    const seen = new Set();
    let cursor;
    do {
      const page = await tasks.listTasks(cursor);
      for (const t of page.tasks) seen.add(t.taskId);
      cursor = page.nextCursor;
    } while (cursor);
    for (const id of ids) check(seen.has(id), `listTasks: ${id} missing from ${[...seen]}`);
    eq(seen.size, ids.length, "tasks listed");
  });

  await step("notifications/tasks/status", async () => {
    await waitFor("a completed status notification", () => statuses.some((n) => n.taskId === ids[0] && n.status === "completed"));
    await waitFor("a cancelled status notification", () => statuses.some((n) => n.taskId === ids[2] && n.status === "cancelled"));
    return `${statuses.length} status notifications`;
  });

  await client.close();
  clearTimeout(overall);
  console.log(failed ? `FAIL ${failed} check(s) failed` : "PASS all checks");
  process.exit(failed ? 1 : 0);
}

// ---------------------------------------------------------------- flows ---
const s = await connect({ initialReconnectionDelay: 1000, maxReconnectionDelay: 30000, reconnectionDelayGrowFactor: 1.5, maxRetries: 0 });
current = s;

await step("handshake", async () => {
  const init = s.wire.log[0];
  eq(init.msg?.method, "initialize", "first request");
  eq(init.msg?.params?.protocolVersion, "2025-11-25", "requested protocolVersion");
  eq(s.transport.protocolVersion, "2025-11-25", "negotiated protocolVersion");
  check(s.transport.sessionId, "no Mcp-Session-Id after initialize");
  await waitFor("the standalone GET stream", () => s.wire.log.some((e) => e.method === "GET" && !e.lastEventId && e.status === 200));
  for (const e of s.wire.log.slice(1)) {
    eq([e.sessionId, e.version], [s.transport.sessionId, "2025-11-25"], `headers of ${e.method} ${e.msg?.method ?? ""}`);
  }
});

await step("tools/list", async () => {
  const { tools } = await s.client.listTools();
  const names = tools.map((t) => t.name);
  for (const want of DEMO_TOOLS) check(names.includes(want), `tools/list: ${want} missing from ${names}`);
  check(tools.find((t) => t.name === "add")?.outputSchema, "tool add has no outputSchema");
});

await step("echo", async () => {
  eq(text(await call(s, "echo", { text: "hello from ts-sdk" })), "hello from ts-sdk", "echo");
});

await step("add", async () => {
  const res = await call(s, "add", { a: 2, b: 3.5 });
  eq(res.structuredContent, { sum: 5.5 }, "add structuredContent");
});

await step("progress+logs", async () => {
  await s.client.setLoggingLevel("info");
  await progressCall(s, 5, 10);
});

await step("sample", async () => {
  const prompt = "What is 2+2? (ts)";
  eq(text(await call(s, "sample", { prompt })), `re:${prompt}`, "sample");
  eq(s.rec.samples.length, 1, "sampling requests");
  eq(s.rec.samples[0].maxTokens, 100, "sampling maxTokens");
  await checkAnswered(s, "sample");
  return "sampling/createMessage answered with a POSTed response -> 202";
});

await step("elicit", async () => {
  eq(text(await call(s, "elicit", { message: "Who are you?" })), 'received {"email":"ada@example.com","name":"Ada"}', "elicit");
  eq(s.rec.elicits.length, 1, "elicitation requests");
  eq(s.rec.elicits[0].message, "Who are you?", "elicitation message");
  eq([...(s.rec.elicits[0].requestedSchema?.required ?? [])].sort(), ["email", "name"], "elicitation required fields");
  await checkAnswered(s, "elicit");
});

await step("roots", async () => {
  eq(text(await call(s, "roots")), ROOT_URI, "roots");
});

// The server pings the client over its GET stream, from whichever node
// runs the call; the SDK answers on its own.
await step("ping_client", async () => {
  const got = text(await call(s, "ping_client"));
  check(/^pong after /.test(got), `ping_client: got ${got}, want pong after <duration>`);
  return got;
});

await step("bump_counter", async () => {
  const uri = "demo://counter";
  await s.client.subscribeResource({ uri });
  const before = s.rec.updated.filter((u) => u === uri).length;
  const n = Number(text(await call(s, "bump_counter")));
  check(Number.isInteger(n) && n > 0, `bump_counter returned ${n}, want a positive count`);
  await waitFor(`notifications/resources/updated for ${uri}`, () => s.rec.updated.filter((u) => u === uri).length > before);
  const res = await s.client.readResource({ uri });
  const v = Number(res.contents?.[0]?.text);
  check(Number.isInteger(v), `counter reads ${res.contents?.[0]?.text}, want a number`);
  if (!cluster) eq(v, n, "counter value");
  await s.client.unsubscribeResource({ uri });
});

await step("toggle_extra_tool", async () => {
  let before = s.rec.toolsChanged;
  const got = text(await call(s, "toggle_extra_tool"));
  await waitFor("notifications/tools/list_changed", () => s.rec.toolsChanged > before);
  if (cluster) {
    check(got === "added" || got === "removed", `toggle_extra_tool: got ${got}, want added or removed`);
    return;
  }
  eq(got, "added", "first toggle");
  check((await s.client.listTools()).tools.some((t) => t.name === "extra"), "tools/list lacks extra after adding it");
  eq(text(await call(s, "extra")), "extra", "extra");
  before = s.rec.toolsChanged;
  eq(text(await call(s, "toggle_extra_tool")), "removed", "second toggle");
  await waitFor("notifications/tools/list_changed", () => s.rec.toolsChanged > before);
  check(!(await s.client.listTools()).tools.some((t) => t.name === "extra"), "tools/list still has extra after removing it");
});

await step("prompts", async () => {
  const { prompts } = await s.client.listPrompts();
  check(prompts.some((p) => p.name === "greet"), "prompts/list lacks greet");
  const gp = await s.client.getPrompt({ name: "greet", arguments: { name: "Grace" } });
  eq(gp.messages.map((m) => m.content.text), ["Write a warm greeting for Grace."], "greet messages");
  const c = await s.client.complete({ ref: { type: "ref/prompt", name: "greet" }, argument: { name: "name", value: "g" } });
  eq(c.completion.values, ["Grace"], "completion of g");
});

await step("resources", async () => {
  const { resources } = await s.client.listResources();
  check(resources.some((r) => r.uri === "demo://counter"), "resources/list lacks demo://counter");
  const { resourceTemplates } = await s.client.listResourceTemplates();
  check(resourceTemplates.some((r) => r.uriTemplate === "demo://greeting/{name}"), "resources/templates/list lacks demo://greeting/{name}");
  const rr = await s.client.readResource({ uri: "demo://greeting/Linus" });
  eq(rr.contents.map((c) => c.text), ["Hello, Linus!"], "greeting");
});

await step("resumeStream", async () => {
  // Reconnection is off on this transport (maxRetries 0): the test resumes.
  s.wire.armCut((m) => m.method === "tools/call" && m.params?.name === "progress", 3);
  const getsBefore = s.wire.log.filter((e) => e.method === "GET" && e.lastEventId).length;
  let resumedWith = "";
  await progressCall(s, 8, 50, async (token) => {
    check(token, "no resumption token (event id) before the cut");
    eq(token, s.wire.cut.lastEventId, "resumption token vs the last event id before the cut");
    resumedWith = token;
    await s.transport.resumeStream(token, { onresumptiontoken: () => {} });
  });
  const gets = s.wire.log.filter((e) => e.method === "GET" && e.lastEventId).slice(getsBefore);
  eq(gets.map((e) => [e.lastEventId, e.status]), [[resumedWith, 200]], "resuming GETs");
  return `cut after 3 progress notifications, resumed with GET Last-Event-ID ${resumedWith} -> 200`;
});

await step("terminateSession", async () => {
  const id = s.transport.sessionId;
  await s.transport.terminateSession();
  const del = s.wire.log.filter((e) => e.method === "DELETE");
  eq(del.map((e) => [e.sessionId, e.status >= 200 && e.status < 300]), [[id, true]], "DELETE requests");
  check(s.transport.sessionId === undefined, "the transport still has a session id");
  for (const target of [url, ...nodes]) {
    for (const method of ["POST", "GET"]) {
      eq(await rawStatus(method, target, id), 404, `${method} ${target} with the deleted session id`);
    }
  }
  await s.client.close();
  return `DELETE -> ${del[0].status}; then 404 from ${[url, ...nodes].length} endpoint(s)`;
});

// A second session keeps the transport's default reconnection: the SDK
// itself resumes the cut stream with GET + Last-Event-ID.
await step("automatic reconnection", async () => {
  const a = await connect(undefined);
  current = a;
  try {
    await a.client.setLoggingLevel("info");
    a.wire.armCut((m) => m.method === "tools/call" && m.params?.name === "progress", 3);
    await progressCall(a, 8, 50);
    check(a.wire.cut.done, "the wire did not cut the response");
    const gets = a.wire.log.filter((e) => e.method === "GET" && e.lastEventId);
    check(gets.length >= 1 && gets[0].lastEventId === a.wire.cut.lastEventId && gets[0].status === 200,
      `resumption: got ${JSON.stringify(gets.map((e) => [e.lastEventId, e.status]))}, want GET with Last-Event-ID ${a.wire.cut.lastEventId} -> 200`);
    await a.transport.terminateSession();
    return `cut after 3 progress notifications, the SDK resumed with GET Last-Event-ID ${gets[0].lastEventId} -> 200`;
  } finally {
    await a.client.close();
    current = s;
  }
});

clearTimeout(overall);
console.log(failed ? `FAIL ${failed} check(s) failed` : "PASS all checks");
process.exit(failed ? 1 : 0);
