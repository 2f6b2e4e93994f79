// Shared harness of the browser tests: a real `ferry serve` on loopback with a fresh
// data dir, the real CLI, Debian's Chromium driven by playwright-core, and small helpers.
//
// Run with `node --test web/tests/` (or `cargo test -p ferry-cli --test web`, which does
// that with FERRY_BIN set). Nothing here skips: a missing browser, package or binary
// fails the run with a message that says how to get it.

import { spawn, execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAgent } from './agent.mjs';

export const TESTS_DIR = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(TESTS_DIR, '..', '..');
export const ARTIFACTS = path.join(TESTS_DIR, 'artifacts');
export const FERRY_BIN = process.env.FERRY_BIN || path.join(REPO, 'target', 'debug', 'ferry');
export const CHROMIUM = process.env.FERRY_TEST_CHROMIUM || '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--no-sandbox', // the tests run as root in CI
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

// ---------------------------------------------------------------------------------------
// Preconditions: fail loudly, never skip.

if (!fs.existsSync(CHROMIUM)) {
  throw new Error(
    `${CHROMIUM} is missing: the browser tests drive Debian's Chromium. ` +
      'Run .ci/run, or `apt-get install -y --no-install-recommends chromium`.',
  );
}

let playwright;
try {
  playwright = await import('playwright-core');
} catch (e) {
  throw new Error(
    'playwright-core is not installed in web/tests/node_modules: run `npm ci --prefix web/tests` ' +
      `(or .ci/run). (${e.message})`,
  );
}
export const { chromium } = playwright;

if (!fs.existsSync(FERRY_BIN)) {
  throw new Error(
    `the ferry binary ${FERRY_BIN} does not exist: build it with \`cargo build -p ferry-cli\` ` +
      'or set FERRY_BIN (cargo test sets it).',
  );
}

// ---------------------------------------------------------------------------------------
// Processes and cleanup

const children = new Set();
const tempDirs = new Set();

function killAll() {
  for (const child of children) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
  children.clear();
  for (const dir of tempDirs) {
    try {
      fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      /* best effort */
    }
  }
  tempDirs.clear();
}
process.on('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

/** The environment without any FERRY_* variable (and our own test knobs), plus `extra`. */
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('FERRY_')) env[k] = v;
  }
  return { ...env, ...extra };
}

/** Resolves with `promise`, or rejects after `ms` with `what` in the message. */
export function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` (sync or async) until it returns a truthy value; fails after `timeout` ms. */
export async function waitUntil(fn, { timeout = 5000, interval = 25, what = 'condition' } = {}) {
  const start = Date.now();
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() - start > timeout) {
      throw new Error(`timed out after ${timeout} ms waiting for ${what} (last: ${last})`);
    }
    await sleep(interval);
  }
}

/**
 * Spawns `ferry ARGS…` with its stderr in `logPath`, and waits (20 s at most) until its
 * stdout so far matches `pattern`; resolves with {child, log(), match}. `what` names the
 * wait in errors, which carry stdout and the log.
 */
async function spawnFerry(args, { env, cwd, logPath, pattern, what }) {
  const logFd = fs.openSync(logPath, 'w');
  const child = spawn(FERRY_BIN, args, { env, cwd, stdio: ['ignore', 'pipe', logFd] });
  fs.closeSync(logFd);
  children.add(child);
  const log = () => {
    try {
      return fs.readFileSync(logPath, 'utf8');
    } catch {
      return '';
    }
  };
  let stdout = '';
  const match = await withTimeout(
    new Promise((resolve, reject) => {
      child.stdout.setEncoding('utf8');
      child.stdout.on('data', (chunk) => {
        stdout += chunk;
        const m = pattern.exec(stdout);
        if (m) resolve(m);
      });
      child.on('exit', (code, signal) =>
        reject(new Error(`ferry ${args[0]} exited (${code ?? signal}) before ${what}; stdout:\n${stdout}\nlog:\n${log()}`)),
      );
      child.on('error', reject);
    }),
    20000,
    `ferry ${args[0]} ${what}`,
  );
  return { child, log, match };
}

/**
 * Starts `ferry serve` on a fresh data dir and a free loopback port.
 * `env`: extra environment (FERRY_SECTION__KEY overrides); `config`: ferry.toml text.
 */
export async function startFerry({ env = {}, config } = {}) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ferry-web-'));
  tempDirs.add(tmp);
  const data = path.join(tmp, 'site');
  fs.mkdirSync(data);
  if (config) fs.writeFileSync(path.join(data, 'ferry.toml'), config);
  const { child, log, match } = await spawnFerry(['serve', '--data', data, '--listen', '127.0.0.1:0'], {
    env: cleanEnv(env),
    logPath: path.join(tmp, 'server.log'),
    pattern: /^[^\n]*\n/,
    what: 'printing its address',
  });
  const firstLine = match[0].trim();
  const m = /^(http:\/\/127\.0\.0\.1:\d+)\/#token=(\S+)$/.exec(firstLine);
  if (!m) throw new Error(`ferry serve printed ${JSON.stringify(firstLine)}; log:\n${log()}`);
  const [, base, token] = m;

  const server = {
    base,
    token,
    data,
    url: `${base}/#token=${token}`,
    log,
    pid: child.pid,
    /** `<data>/home/<person>` */
    home: (person = 'me') => path.join(data, 'home', person),
    /** `public/` of a person's main workspace, or of one of their projects. */
    publicDir: (person = 'me', project = null) =>
      project
        ? path.join(data, 'home', person, 'projects', project, 'public')
        : path.join(data, 'home', person, 'public'),
    /** Runs the CLI on this data dir; resolves with stdout, rejects on failure. */
    cli: (args) => runFerry(args, data),
    /** A new token of `kind` for `person` (the CLI prints it on its last line). */
    createToken: async (person, kind) => lastLine(await runFerry(['token', 'create', person, '--kind', kind], data)),
    /** Adds a person and returns their token. */
    addPerson: async (id) => lastLine(await runFerry(['person', 'add', id], data)),
    /** The address that signs `token` in. */
    urlFor: (tok) => `${base}/#token=${tok}`,
    /** fetch() against the gateway with a bearer token (default: me's). */
    api: (p, init = {}) => api(base, p, { token, ...init }),
    async stop() {
      children.delete(child);
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        await withTimeout(exited, 5000, 'ferry serve to exit');
      }
      tempDirs.delete(tmp);
      fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
  return server;
}

/** Runs `ferry ARGS` on `data`; resolves with its stdout. */
export function runFerry(args, data) {
  return new Promise((resolve, reject) => {
    execFile(
      FERRY_BIN,
      args,
      { env: cleanEnv({ FERRY_DATA: data }), timeout: 20000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`ferry ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`));
        else resolve(stdout);
      },
    );
  });
}

/** The last non-empty line of a command's output. */
export function lastLine(stdout) {
  const lines = stdout.split('\n').map((l) => l.trim()).filter(Boolean);
  if (!lines.length) throw new Error('the command printed nothing');
  return lines[lines.length - 1];
}

/**
 * fetch(`${base}${p}`) with `Authorization: Bearer token` and a 15 s timeout.
 * `json`: a body to send as JSON. Resolves with {status, headers, text, json}.
 */
export async function api(base, p, { token, json, method, headers = {}, body, timeout = 15000 } = {}) {
  const h = { ...headers };
  if (token) h.authorization = `Bearer ${token}`;
  if (json !== undefined) {
    h['content-type'] = 'application/json';
    body = JSON.stringify(json);
  }
  const res = await fetch(`${base}${p}`, {
    method: method || (body !== undefined ? 'POST' : 'GET'),
    headers: h,
    body,
    signal: AbortSignal.timeout(timeout),
  });
  const text = await res.text();
  let parsed = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, text, json: parsed };
}

/** A multipart upload of one file through the API (for expected error messages). */
export async function apiUpload(server, name, bytes, { project } = {}) {
  const form = new FormData();
  if (project) form.append('project', project);
  form.append('file', new Blob([bytes]), name);
  return api(server.base, '/v1/media', { token: server.token, method: 'POST', body: form });
}

/**
 * A tiny HTTP server on loopback that serves `files` ({"/path": {body, headers}}), for
 * deliveries. Resolves with {base, url(p), hits, close()}.
 */
export async function startFileServer(files) {
  const hits = [];
  const srv = http.createServer((req, res) => {
    hits.push(req.url);
    const f = files[req.url];
    if (!f) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', ...(f.headers || {}) });
    res.end(f.body);
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${srv.address().port}`;
  return {
    base,
    hits,
    url: (p) => `${base}${p}`,
    close: () => new Promise((r) => {
      srv.closeAllConnections?.();
      srv.close(() => r());
    }),
  };
}

// ---------------------------------------------------------------------------------------
// The browser

/** Launches Debian's Chromium headless. */
export async function launchBrowser() {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 30000 });
}

/**
 * Opens `url` in a new context of `browser` and waits until the Files region shows.
 * Records page errors and console errors on `page.problems` for diagnostics.
 */
export async function openApp(
  browser,
  url,
  { viewport = { width: 1280, height: 900 }, waitFiles = true, beforeGoto = null } = {},
) {
  const context = await browser.newContext({ viewport, acceptDownloads: true });
  context.setDefaultTimeout(10000);
  context.setDefaultNavigationTimeout(15000);
  await context.addInitScript(() => {
    window.__cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`),
    );
  });
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') page.problems.push(`console: ${m.text()}`);
  });
  // A test that must see the page's first requests starts watching here.
  if (beforeGoto) await beforeGoto(page);
  page.response = await page.goto(url);
  if (waitFiles) await page.getByRole('region', { name: 'Files' }).waitFor({ state: 'visible' });
  return page;
}

/** The Files tree. */
export const tree = (page) => page.getByRole('tree', { name: 'Files in public' });

/** The tree entry for a `public/…` path. */
export const entry = (page, p) => page.locator(`[role="treeitem"][data-path="${cssEscape(p)}"]`);

export function cssEscape(s) {
  return s.replace(/["\\]/g, '\\$&');
}

/** Escapes a string for use in a RegExp. */
export const reEscape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Makes the folders along `p` (a `public/…` folder path) expanded, clicking the collapsed
 * ones on their name. Returns the entry of `p`.
 */
export async function expand(page, p) {
  const parts = p.split('/');
  for (let i = 2; i <= parts.length; i++) {
    const folderPath = parts.slice(0, i).join('/');
    const item = entry(page, folderPath);
    await item.waitFor({ state: 'attached', timeout: 5000 });
    if ((await item.getAttribute('aria-expanded')) === 'false') {
      const name = parts[i - 1];
      await item.getByText(name, { exact: true }).first().click();
      try {
        await waitUntil(async () => (await item.getAttribute('aria-expanded')) === 'true', {
          timeout: 2000,
          what: `${folderPath} to expand`,
        });
      } catch {
        // A tree that expands with the keyboard only (ARIA tree pattern).
        await item.focus();
        await page.keyboard.press('ArrowRight');
        await waitUntil(async () => (await item.getAttribute('aria-expanded')) === 'true', {
          timeout: 2000,
          what: `${folderPath} to expand (click, then ArrowRight)`,
        });
      }
    }
  }
  return entry(page, p);
}

/** Waits for the download that `action` starts; returns {name, text}. */
export async function download(page, action) {
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 10000 }), action()]);
  const file = await dl.path();
  return { name: dl.suggestedFilename(), text: fs.readFileSync(file, 'utf8'), failure: await dl.failure() };
}

/** Makes the artifacts folder and returns the path of `name` in it. */
export function artifact(name) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  return path.join(ARTIFACTS, name);
}

/** Writes a file, making its parent folders. */
export function writeFile(p, content, mtime) {
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
  if (mtime) fs.utimesSync(p, mtime, mtime);
}

/**
 * Reads `GET /v1/events` inside `page` (with the token the page holds) for `ms`
 * milliseconds; resolves with {status, text}. Starts reading at once; `ready` resolves
 * once the response headers arrived.
 */
export async function readEventsInPage(page, ms) {
  await page.evaluate((ms) => {
    window.__events = { status: 0, text: '', done: false, ready: false };
    const ctl = new AbortController();
    const token = sessionStorage.getItem('ferry.token');
    setTimeout(() => ctl.abort(), ms);
    (async () => {
      try {
        const r = await fetch('/v1/events', { headers: { authorization: `Bearer ${token}` }, signal: ctl.signal });
        window.__events.status = r.status;
        window.__events.ready = true;
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          window.__events.text += dec.decode(value, { stream: true });
        }
      } catch (e) {
        window.__events.error = String(e);
      } finally {
        window.__events.ready = true;
        window.__events.done = true;
      }
    })();
  }, ms);
  await page.waitForFunction(() => window.__events.ready, null, { timeout: 5000 });
  return {
    result: async () => {
      await page.waitForFunction(() => window.__events.done, null, { timeout: ms + 5000 });
      return page.evaluate(() => window.__events);
    },
  };
}

/** A short report of what went wrong in a page, for assertion messages. */
export function problems(page) {
  return page.problems && page.problems.length ? `\npage problems:\n  ${page.problems.join('\n  ')}` : '';
}

// ---------------------------------------------------------------------------------------
// Chat

export const chatRegion = (page) => page.getByRole('region', { name: 'Chat', exact: true });
export const conversation = (page) => page.getByRole('log', { name: 'Conversation', exact: true });
export const messages = (page, role) => conversation(page).locator(`[data-role="${role}"]`);

/** Types `text` into the composer and presses Send. */
export async function sendChat(page, text) {
  await page.getByRole('textbox', { name: 'Message', exact: true }).fill(text);
  await page.getByRole('button', { name: 'Send', exact: true }).click();
}

/**
 * Records every distinct text the last assistant message shows, in `window.__states`
 * (for checking that a reply streams in rather than arriving whole).
 */
export async function recordAssistantStates(page) {
  const log = await conversation(page).elementHandle();
  await page.evaluate((log) => {
    window.__states = [];
    const snap = () => {
      const all = log.querySelectorAll('[data-role="assistant"]');
      const last = all[all.length - 1];
      if (!last) return;
      const t = last.textContent;
      if (window.__states[window.__states.length - 1] !== t) window.__states.push(t);
    };
    window.__stateObserver?.disconnect();
    window.__stateObserver = new MutationObserver(snap);
    window.__stateObserver.observe(log, { subtree: true, childList: true, characterData: true });
  }, log);
  return {
    reset: () => page.evaluate(() => (window.__states = [])),
    states: () => page.evaluate(() => window.__states),
  };
}

// ---------------------------------------------------------------------------------------
// The agent's own tools

/**
 * `ferry mcp` for `person` on `server`'s site, spoken to in JSON-RPC lines: the agent's
 * tools as an agent on the same host uses them. `call(name, args)` resolves with the
 * tool's result; `close()` ends it.
 */
export function agentTools(server, person = 'me') {
  const child = spawn(FERRY_BIN, ['mcp', '--data', server.data, '--person', person], {
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  children.add(child);
  const waiting = new Map();
  let buffer = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      const message = JSON.parse(buffer.slice(0, nl));
      buffer = buffer.slice(nl + 1);
      waiting.get(message.id)?.(message);
    }
  });
  let next = 1;
  const send = (message) => child.stdin.write(`${JSON.stringify(message)}\n`);
  const request = (method, params) =>
    new Promise((resolve) => {
      const id = next++;
      waiting.set(id, resolve);
      send({ jsonrpc: '2.0', id, method, params });
    });
  const ready = request('initialize', {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'web-test-agent', version: '1' },
  }).then(() => send({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  return {
    call: async (name, args) => {
      await ready;
      return (await request('tools/call', { name, arguments: args })).result;
    },
    close: () => {
      children.delete(child);
      child.kill();
    },
  };
}

/**
 * A chat page against the scripted agent: the agent (`wordDelay` ms between words), a
 * gateway relaying to it, and the app open in a browser with its conversation shown.
 * `close()` ends all of it.
 */
export async function startChatPage({ wordDelay }) {
  const agent = await startAgent({ wordDelay });
  const server = await startFerry({ env: { FERRY_AGENT__UPSTREAM: agent.url } });
  agent.data = server.data;
  agent.gateway = server.base;
  const browser = await launchBrowser();
  const page = await openApp(browser, server.url);
  await conversation(page).waitFor({ state: 'visible' });
  const close = async () => {
    await page?.context().close();
    await browser?.close();
    await agent?.close();
    await server?.stop();
  };
  return { agent, server, browser, page, close };
}

// ---------------------------------------------------------------------------------------
// Nodes

/**
 * Starts a real `ferry node run` dialing `server`, with its own state folder and HOME and
 * `SHELL` set to `shell`; resolves once it says it connected, with
 * {id, name, pid, home, log(), stop()}. The node shows up pending until approved.
 */
export async function startNode(server, { name, shell = '/bin/bash', args = [] }) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ferry-node-'));
  tempDirs.add(tmp);
  const home = path.join(tmp, 'home');
  fs.mkdirSync(home, { mode: 0o700 });
  const env = cleanEnv({ HOME: home, SHELL: shell });
  // Only what this node is given: no state folder or TLS roots of the caller's.
  for (const key of ['XDG_STATE_HOME', 'SSL_CERT_FILE', 'SSL_CERT_DIR']) delete env[key];
  const gateway = server.base.replace(/^http:/, 'ws:');
  const { child, log, match } = await spawnFerry(
    ['node', 'run', '--gateway', gateway, '--name', name, '--state', path.join(tmp, 'state'), ...args],
    { env, cwd: home, logPath: path.join(tmp, 'node.log'), pattern: /^connected to \S+ as ([0-9a-f]+) /m, what: 'connecting' },
  );
  const id = match[1];
  return {
    id,
    name,
    pid: child.pid,
    home,
    log,
    async stop() {
      children.delete(child);
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        await withTimeout(exited, 5000, 'ferry node run to exit');
      }
    },
  };
}

/** The node `id` as `GET /v1/nodes` (with the admin token `token`) shows it, once `check` holds. */
export async function waitForNode(server, token, id, check, what = 'the node') {
  return waitUntil(
    async () => {
      const answer = await server.api('/v1/nodes', { token });
      if (answer.status !== 200) throw new Error(`GET /v1/nodes answered ${answer.status}: ${answer.text}`);
      const node = answer.json.nodes.find((n) => n.id === id);
      return node && check(node) ? node : null;
    },
    { timeout: 15000, interval: 100, what },
  );
}

/** Whether process `pid` runs (a zombie, dead but not yet reaped, does not). */
export function processRuns(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state follows the command name, which is in parentheses and may hold spaces.
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
