// Drives an mcpcluster endpoint with authorization on through the official
// TypeScript MCP SDK client's OAuth support (an OAuthClientProvider given to
// StreamableHTTPClientTransport), against the test OpenID provider that
// scripts/cluster.sh --auth runs (which registers the clients used here):
//
//   - authorization code with PKCE as the pre-registered public client "app":
//     the first request gets 401, the SDK reads the Protected Resource
//     Metadata and the authorization server's metadata and sends the user
//     agent to the authorization URL (here a headless one: the provider's
//     login step approves at once), the code is exchanged with
//     transport.finishAuth, and a new connection calls tools;
//   - client credentials as the confidential client "svc"
//     (ClientCredentialsProvider, its scope option set: in SDK 1.32.2 the
//     client-credentials token request asks for that scope, not the one a
//     401 or 403 challenge names);
//   - step-up: holding a token of scope mcp:read only, the client gets 403
//     insufficient_scope, sends the user agent to authorize the scope the
//     challenge names, and after finishAuth the calls succeed with the new
//     token;
//   - per-tool step-up: the tool add needs mcp:math besides mcp:tools; with
//     a token of mcp:tools it is not listed, calling it gets 403
//     insufficient_scope, the user agent authorizes the larger scope, and
//     after finishAuth the same session calls it.
//
//   MCP_TS_SDK=<dir of @modelcontextprotocol/sdk> node oauth.mjs URL ISSUER
//
// Prints one line per check ("ok NAME" or "FAIL NAME: why") and exits 1 if
// any check failed, 2 on a usage error or the overall timeout.
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.MCP_TS_SDK;
const [url, issuer] = process.argv.slice(2);
if (!sdkDir || !url || !issuer) {
  console.error("usage: MCP_TS_SDK=<dir of @modelcontextprotocol/sdk> node oauth.mjs URL ISSUER");
  process.exit(2);
}
const sdk = (p) => import(pathToFileURL(path.join(sdkDir, "dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { UnauthorizedError } = await sdk("client/auth.js");
const { ClientCredentialsProvider } = await sdk("client/auth-extensions.js");

const REDIRECT = "http://127.0.0.1:1/callback";
const overall = setTimeout(() => {
  console.log("FAIL timeout: the flows did not finish within 90s");
  process.exit(2);
}, 90000);

class CheckError extends Error {}
function check(cond, msg) {
  if (!cond) throw new CheckError(msg);
}

// Every HTTP exchange the SDK makes (MCP requests and OAuth ones).
const wire = [];
const recordingFetch = async (input, init) => {
  const res = await fetch(input, init);
  const u = String(input instanceof Request ? input.url : input);
  let body = init?.body;
  if (body instanceof URLSearchParams) body = body.toString();
  wire.push({ url: u, method: init?.method ?? "GET", status: res.status, body: typeof body === "string" ? body : "" });
  return res;
};

// headlessLogin opens an authorization URL as a browser would and follows
// the provider's redirects up to the redirect URI; it returns that URI.
async function headlessLogin(authorizationUrl) {
  let next = String(authorizationUrl);
  for (let i = 0; i < 10; i++) {
    const res = await fetch(next, { redirect: "manual" });
    const loc = res.headers.get("location");
    check(res.status >= 300 && res.status < 400 && loc, `authorization: status ${res.status} at ${next}, no redirect`);
    next = new URL(loc, next).toString();
    if (next.startsWith(REDIRECT)) return new URL(next);
  }
  throw new CheckError("authorization: too many redirects");
}

// An OAuthClientProvider for the pre-registered public client "app",
// whose user agent is headlessLogin.
class AppProvider {
  constructor() {
    this.authorizations = [];
    this.code = undefined;
  }
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return { client_name: "mcpcluster-ts-oauth", redirect_uris: [REDIRECT], grant_types: ["authorization_code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() {
    return this._info ?? { client_id: "app" };
  }
  saveClientInformation(info) {
    this._info = info;
  }
  tokens() {
    return this._tokens;
  }
  saveTokens(t) {
    this._tokens = t;
  }
  saveCodeVerifier(v) {
    this._verifier = v;
  }
  codeVerifier() {
    return this._verifier;
  }
  async redirectToAuthorization(u) {
    this.authorizations.push(new URL(u));
    const back = await headlessLogin(u);
    check(back.searchParams.get("code"), `authorization refused: ${back.searchParams.get("error")}`);
    this.code = back.searchParams.get("code");
  }
}

let failed = 0;
async function flow(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e instanceof CheckError ? e.message : e?.stack ?? e}`);
  }
}

// callTools lists the tools and calls echo n times (nginx spreads the
// calls over the nodes, each of which verifies the token).
async function callTools(client, n) {
  const { tools } = await client.listTools();
  check(tools.some((t) => t.name === "echo"), "tools/list has no echo");
  for (let i = 0; i < n; i++) {
    const res = await client.callTool({ name: "echo", arguments: { text: `oauth ${i}` } });
    check(!res.isError && res.content?.[0]?.text === `oauth ${i}`, `tools/call echo #${i}: ${JSON.stringify(res)}`);
  }
}

const newClient = () => new Client({ name: "mcpcluster-ts-oauth", version: "1.0.0" });

await flow("authorization code with PKCE", async () => {
  const provider = new AppProvider();
  const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch });
  let refused;
  try {
    await newClient().connect(first);
  } catch (e) {
    refused = e;
  }
  check(refused instanceof UnauthorizedError, `the first connection: got ${refused}, want UnauthorizedError (401, then the redirect)`);
  check(wire.some((w) => w.url.startsWith(url) && w.status === 401), "no 401 from the endpoint");
  check(wire.some((w) => w.url.includes("/.well-known/oauth-protected-resource") && w.status === 200), "the Protected Resource Metadata was not fetched");
  check(wire.some((w) => w.url.startsWith(issuer + "/.well-known/") && w.status === 200), "the authorization server's metadata was not fetched");
  check(provider.authorizations.length === 1, `${provider.authorizations.length} authorizations, want 1`);
  const a = provider.authorizations[0];
  check(a.toString().startsWith(issuer + "/"), `authorization at ${a}, not at ${issuer}`);
  check(a.searchParams.get("resource") === url, `authorization resource ${a.searchParams.get("resource")}, want ${url}`);
  check(a.searchParams.get("code_challenge_method") === "S256", "authorization without PKCE S256");
  check((a.searchParams.get("scope") ?? "").split(" ").includes("mcp:tools"), `authorization scope ${a.searchParams.get("scope")} lacks mcp:tools`);
  await first.finishAuth(provider.code);
  check(provider.tokens()?.access_token, "no access token after finishAuth");
  const client = newClient();
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch }));
  check(client.getServerVersion()?.name, "no server info after initialize");
  await callTools(client, 6);
  await client.close();
});

await flow("client credentials", async () => {
  const provider = new ClientCredentialsProvider({ clientId: "svc", clientSecret: "svc-secret", expectedIssuer: issuer, scope: "mcp:tools" });
  const client = newClient();
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch }));
  check(provider.tokens()?.access_token, "no access token");
  await callTools(client, 3);
  await client.close();
});

await flow("step-up after 403 insufficient_scope", async () => {
  const form = new URLSearchParams({ grant_type: "client_credentials", scope: "mcp:read", resource: url });
  const res = await fetch(issuer + "/oauth/token", {
    method: "POST",
    headers: { authorization: "Basic " + Buffer.from("svc:svc-secret").toString("base64"), "content-type": "application/x-www-form-urlencoded" },
    body: form,
  });
  const narrow = await res.json();
  check(res.ok && narrow.access_token, `a token of scope mcp:read: ${res.status} ${JSON.stringify(narrow)}`);
  const provider = new AppProvider();
  provider.saveTokens({ access_token: narrow.access_token, token_type: "Bearer", issuer });
  const mark = wire.length;
  const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch });
  let refused;
  try {
    await newClient().connect(first);
  } catch (e) {
    refused = e;
  }
  check(refused instanceof UnauthorizedError, `the connection with the narrow token: got ${refused}, want UnauthorizedError (403, then the redirect)`);
  check(wire.slice(mark).some((w) => w.url.startsWith(url) && w.status === 403), "no 403 for the narrow token");
  check(provider.authorizations.length === 1, `${provider.authorizations.length} authorizations after the 403, want 1`);
  const scope = provider.authorizations[0].searchParams.get("scope") ?? "";
  check(scope.split(" ").includes("mcp:tools"), `the step-up asked for scope "${scope}", want mcp:tools from the challenge`);
  await first.finishAuth(provider.code);
  check(provider.tokens()?.access_token !== narrow.access_token, "the client still holds the narrow token");
  const client = newClient();
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch }));
  await callTools(client, 3);
  await client.close();
});

await flow("per-tool step-up", async () => {
  const provider = new AppProvider();
  const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch });
  try {
    await newClient().connect(first);
  } catch (e) {
    check(e instanceof UnauthorizedError, `the first connection: ${e}`);
  }
  await first.finishAuth(provider.code);
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch });
  const client = newClient();
  await client.connect(transport);
  const listed = async () => (await client.listTools()).tools.some((t) => t.name === "add");
  check(!(await listed()), "tools/list shows add to a token without mcp:math");
  const mark = wire.length;
  let refused;
  try {
    await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  } catch (e) {
    refused = e;
  }
  check(refused instanceof UnauthorizedError, `tools/call add with mcp:tools only: got ${refused}, want UnauthorizedError (403, then the redirect)`);
  check(wire.slice(mark).some((w) => w.url.startsWith(url) && w.status === 403), "no 403 for the call");
  check(provider.authorizations.length === 2, `${provider.authorizations.length} authorizations, want 2`);
  const scope = (provider.authorizations[1].searchParams.get("scope") ?? "").split(" ");
  check(scope.includes("mcp:math"), `the step-up asked for scope ${scope.join(" ")}, want mcp:math from the challenge`);
  await transport.finishAuth(provider.code);
  const res = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  check(!res.isError && res.structuredContent?.sum === 5, `tools/call add after the step-up: ${JSON.stringify(res)}`);
  check(await listed(), "tools/list does not show add after the step-up");
  await client.close();
});

clearTimeout(overall);
process.exit(failed ? 1 : 0);
