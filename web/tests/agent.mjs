// A scripted upstream agent for the browser tests (test code only): an OpenAI-compatible
// `POST /v1/chat/completions` with `stream: true`, answering word by word.
//
// What it does in a turn is chosen by the last user message:
//   "fail"          → 500
//   "drop"          → starts streaming, then destroys the socket
//   "write [NAME]"  → writes public/attachments/NAME into the workspace itself, mid-reply
//   "deliver [NAME]"→ serves NAME from its own HTTP server and POSTs /v1/deliveries to the
//                     gateway with the bearer token it was given
//   "html"          → answers with markup (which a page must show as text)
//   "markdown"      → answers with Markdown (bold, code, a list, a table, a code block)
//                     full of hostile HTML and `javascript:`/`data:` links
//   "act"           → awaits `agent.act()` (set by the test: the agent's own work with
//                     files, however it does it) mid-reply, then says it is done
//   "bench N"       → N tokens, no delay (relay overhead measurement)
//   "forever"       → a word every 100 ms until the gateway hangs up, which it records as
//                     `closedAt` (ms since the epoch) on the request's record
//   anything else   → a short greeting that quotes the message
// It records every request (headers and JSON body) in `agent.requests`.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const NAME_RE = /\b([\w-]+\.[A-Za-z0-9]{1,5})\b/;

/**
 * Starts the agent. `data`: the site's data dir (to write into a workspace); the person is
 * `me`. `gateway`: the gateway's base URL (settable later as `agent.gateway = …`, since the
 * gateway is started after the agent). `wordDelay`: ms between streamed words.
 */
export async function startAgent({ data = null, gateway = null, wordDelay = 40, person = 'me' } = {}) {
  const agent = {
    data,
    gateway,
    person,
    wordDelay,
    requests: [],
    deliveries: [],
    /** What the "act" turn does: an async function of {project}. */
    act: null,
    /** Files it serves for deliveries: "/files/NAME" → bytes. */
    served: new Map(),
    base: null,
    url: null,
    close: null,
  };
  const sockets = new Set();

  const srv = http.createServer(async (req, res) => {
    if (req.method === 'GET' && agent.served.has(req.url)) {
      const body = agent.served.get(req.url);
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
      res.end(body);
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"no such route"}}');
      return;
    }
    let raw = '';
    for await (const chunk of req) raw += chunk;
    let body = null;
    try {
      body = JSON.parse(raw);
    } catch {
      /* recorded as null */
    }
    const record = { headers: req.headers, body, raw, time: Date.now() };
    agent.requests.push(record);
    try {
      await turn(agent, req, res, body, record);
    } catch (e) {
      record.error = String(e && e.stack ? e.stack : e);
      if (!res.headersSent) res.writeHead(500).end(String(e));
      else res.destroy();
    }
  });
  srv.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  agent.base = `http://127.0.0.1:${srv.address().port}`;
  agent.url = `${agent.base}/v1/chat/completions`;
  agent.close = () =>
    new Promise((r) => {
      for (const s of sockets) s.destroy();
      srv.close(() => r());
    });
  /** The text of the last user message of the last request (or of request `i`). */
  agent.lastUserText = (i = agent.requests.length - 1) => lastUser(agent.requests[i]?.body);
  return agent;
}

/** The content of the last `user` message, as text (string or array-of-parts content). */
export function lastUser(body) {
  const msgs = (body && body.messages) || [];
  for (let i = msgs.length - 1; i >= 0; i--) {
    if (msgs[i].role === 'user') return contentText(msgs[i].content);
  }
  return '';
}

export function contentText(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === 'string' ? p : p.text || '')).join('');
  return '';
}

/** A reply in Markdown with every trick a reply could try to run code or leave the page. */
export const HOSTILE_MARKDOWN = [
  'Here is **the summary** and some `inline code`.',
  '',
  '- first item',
  '- second item',
  '',
  '| name | size |',
  '|------|------|',
  '| a.txt | 1 KB |',
  '',
  '```js',
  'const x = "<b>not bold</b>";',
  '```',
  '',
  'Links: [safe](https://example.com/page) [run](javascript:window.__xssLink=1) ' +
    '[data](data:text/html,<script>window.__xssData=1</script>) [spaced]( javascript:window.__xssLink2=1 ) ' +
    '<a href="javascript:window.__xssA=1">raw link</a> [entity](jav&#x09;ascript:window.__xssEnt=1)',
  '',
  '<script>window.__xssScript=1</script>',
  '<img src=x onerror="window.__xssImg=1">',
  '<iframe src="javascript:window.__xssFrame=1"></iframe>',
  '<svg onload="window.__xssSvg=1"></svg>',
  '<form action="https://example.com"><button>Submit</button></form>',
  '![tracker](https://example.com/pixel.png) [![x](x" onerror="window.__xssNested=1)](https://example.com)',
  '<details open ontoggle="window.__xssToggle=1">x</details> <style>body{display:none}</style>',
  '<meta http-equiv="refresh" content="0;url=https://example.com">',
].join('\n');

function chunk(text) {
  return `data: ${JSON.stringify({
    id: 'chatcmpl-test',
    object: 'chat.completion.chunk',
    model: 'scripted',
    choices: [{ index: 0, delta: { content: text }, finish_reason: null }],
  })}\n\n`;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function startStream(res) {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  res.write(
    `data: ${JSON.stringify({ id: 'chatcmpl-test', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant' } }] })}\n\n`,
  );
}

async function words(agent, res, text) {
  const parts = text.split(/(?<= )/); // keep the spaces with the words
  for (const w of parts) {
    res.write(chunk(w));
    if (agent.wordDelay) await sleep(agent.wordDelay);
  }
}

function finish(res) {
  res.write(
    `data: ${JSON.stringify({ id: 'chatcmpl-test', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
  );
  res.write('data: [DONE]\n\n');
  res.end();
}

function attachmentsDir(agent, project) {
  if (!agent.data) throw new Error('the agent was not given the data dir');
  const home = path.join(agent.data, 'home', agent.person);
  return project
    ? path.join(home, 'projects', project, 'public', 'attachments')
    : path.join(home, 'public', 'attachments');
}

async function turn(agent, req, res, body, record) {
  const said = lastUser(body);
  const lower = said.toLowerCase();
  const project = req.headers['x-ferry-project'] || null;
  record.project = project;

  if (!body || body.stream !== true) {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end('{"error":{"message":"this scripted agent only streams"}}');
    return;
  }

  const bench = /\bbench (\d+)\b/.exec(lower);
  if (bench) {
    const n = Number(bench[1]);
    startStream(res);
    for (let i = 0; i < n; i++) res.write(chunk(`t${i} `));
    finish(res);
    return;
  }

  if (/\bforever\b/.test(lower)) {
    startStream(res);
    const closed = new Promise((r) => res.on('close', r));
    let open = true;
    closed.then(() => {
      open = false;
      record.closedAt = Date.now();
    });
    for (let i = 0; open; i++) {
      res.write(chunk(`w${i} `));
      await Promise.race([sleep(100), closed]);
    }
    return;
  }

  if (/\bfail\b/.test(lower)) {
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end('{"error":{"message":"scripted failure","type":"server_error"}}');
    return;
  }

  if (/\bdrop\b/.test(lower)) {
    startStream(res);
    res.write(chunk('Starting '));
    await sleep(50);
    res.write(chunk('to answer '));
    await sleep(100);
    res.socket.destroy();
    return;
  }

  if (/\bwrite\b/.test(lower)) {
    const name = (NAME_RE.exec(said.replace(/public\/\S+/g, '')) || [])[1] || 'agent-note.txt';
    startStream(res);
    await words(agent, res, 'Working on it. ');
    const dir = attachmentsDir(agent, project);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, name), `written by the agent: ${name}\n`);
    record.wrote = path.join(dir, name);
    await words(agent, res, `Saved the note to public/attachments/${name}.`);
    // Give the gateway's watcher time to notice the file before the turn ends.
    await sleep(300);
    finish(res);
    return;
  }

  if (/\bdeliver\b/.test(lower)) {
    const name = (NAME_RE.exec(said.replace(/public\/\S+/g, '')) || [])[1] || 'delivered.txt';
    startStream(res);
    await words(agent, res, 'Fetching the file. ');
    const content = Buffer.from(`delivered by the agent: ${name}\n`);
    agent.served.set(`/files/${name}`, content);
    if (!agent.gateway) throw new Error('the agent does not know the gateway');
    const r = await fetch(`${agent.gateway}/v1/deliveries`, {
      method: 'POST',
      headers: {
        authorization: req.headers.authorization || '',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ url: `${agent.base}/files/${name}`, filename: name, ...(project ? { project } : {}) }),
      signal: AbortSignal.timeout(10000),
    });
    const answer = await r.text();
    agent.deliveries.push({ status: r.status, body: answer, auth: req.headers.authorization });
    record.delivery = { status: r.status, body: answer };
    if (r.status === 201) await words(agent, res, `Delivered public/attachments/${name}.`);
    else await words(agent, res, `The delivery failed with ${r.status}.`);
    await sleep(300);
    finish(res);
    return;
  }

  if (/\bact\b/.test(lower)) {
    if (!agent.act) throw new Error('the test set no agent.act');
    startStream(res);
    await words(agent, res, 'Working on it. ');
    await agent.act({ project });
    await words(agent, res, 'Done.');
    finish(res);
    return;
  }

  if (/\bmarkdown\b/.test(lower)) {
    startStream(res);
    await words(agent, res, HOSTILE_MARKDOWN);
    finish(res);
    return;
  }

  if (/\bhtml\b/.test(lower)) {
    startStream(res);
    await words(agent, res, 'Here: <img src=x onerror="window.__xssChat=1"> <b>bold</b> ');
    finish(res);
    return;
  }

  startStream(res);
  await words(agent, res, `Hello from the scripted agent. You said: ${said.slice(0, 200)}`);
  finish(res);
}
