// (j) Performance figures, reported and written to web/tests/artifacts/perf.json, never
// asserted as timings:
// - time to the first render of the Files panel with 1,000 and with 10,000 entries (flat in
//   public/), and their ratio (linear rendering gives about 10);
// - the relay overhead of POST /v1/chat: ms per token through the gateway vs straight from
//   the scripted agent, in the same run.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startAgent } from './agent.mjs';
import { startFerry, launchBrowser, artifact, api } from './support.mjs';

const RUNS = 3;
const TOKENS = 1000;
const figures = {
  when: new Date().toISOString(),
  machine: { cpus: os.cpus().length, node: process.version },
};

let agent;
let server;
let browser;
let bobToken;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const round = (x, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

/** Fills a public/ with `files` files, flat (+ attachments/ = `files` + 1 entries). */
function fill(dir, files) {
  fs.mkdirSync(dir, { recursive: true });
  for (let i = 0; i < files; i++) {
    fs.writeFileSync(path.join(dir, `f${String(i).padStart(5, '0')}.txt`), 'x');
  }
}

before(async () => {
  agent = await startAgent({ wordDelay: 0 });
  server = await startFerry({ env: { FERRY_AGENT__UPSTREAM: agent.url } });
  agent.data = server.data;
  agent.gateway = server.base;
  bobToken = await server.addPerson('bob');
  // 999 files + attachments/ = 1,000 entries; 9,999 + attachments/ = 10,000 (the listing's cap).
  fill(server.publicDir('me'), 999);
  fill(server.publicDir('bob'), 9999);
  browser = await launchBrowser();
  figures.machine.chromium = browser.version();
});

after(async () => {
  fs.writeFileSync(artifact('perf.json'), `${JSON.stringify(figures, null, 2)}\n`);
  console.log(`perf: wrote ${artifact('perf.json')}`);
  await browser?.close();
  await agent?.close();
  await server?.stop();
});

/**
 * Opens the page with `token` and returns when `n` tree entries exist: {dom, rendered,
 * listing} in ms since navigation start (dom: the n-th treeitem is in the document;
 * rendered: the first task after the frame that follows; listing: GET /v1/files done).
 */
async function firstRender(token, n) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    await context.addInitScript((n) => {
      window.__perf = { dom: null, rendered: null };
      const check = () => {
        if (window.__perf.dom !== null) return;
        if (document.querySelectorAll('[role="treeitem"]').length >= n) {
          window.__perf.dom = performance.now();
          observer.disconnect();
          requestAnimationFrame(() => setTimeout(() => (window.__perf.rendered = performance.now()), 0));
        }
      };
      const observer = new MutationObserver(check);
      observer.observe(document, { subtree: true, childList: true });
    }, n);
    const page = await context.newPage();
    await page.goto(server.urlFor(token), { waitUntil: 'commit', timeout: 15000 });
    await page.waitForFunction(() => window.__perf && window.__perf.rendered !== null, null, {
      timeout: 60000,
      polling: 100,
    }).catch(async (e) => {
      const count = await page.evaluate(() => document.querySelectorAll('[role="treeitem"]').length).catch(() => '?');
      throw new Error(`${n} tree entries never showed (${count} did): ${e.message}`);
    });
    return await page.evaluate(() => {
      const listing = performance
        .getEntriesByType('resource')
        .filter((e) => new URL(e.name).pathname === '/v1/files')
        .map((e) => e.responseEnd);
      return { dom: window.__perf.dom, rendered: window.__perf.rendered, listing: listing[0] ?? null };
    });
  } finally {
    await context.close();
  }
}

test('Files panel: first render with 1,000 and 10,000 entries', { timeout: 150000 }, async (t) => {
  const result = {};
  for (const [label, token, n] of [
    ['1k', server.token, 1000],
    ['10k', bobToken, 10000],
  ]) {
    // The listing alone, from the API.
    const apiMs = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const r = await api(server.base, '/v1/files', { token, timeout: 30000 });
      apiMs.push(performance.now() - t0);
      assert.equal(r.status, 200);
      assert.equal(r.json.entries.length, n, `${n} entries listed`);
    }
    const runs = [];
    for (let i = 0; i < RUNS; i++) runs.push(await firstRender(token, n));
    result[label] = {
      entries: n,
      renderedMs: round(median(runs.map((r) => r.rendered)), 1),
      domMs: round(median(runs.map((r) => r.dom)), 1),
      listingDoneMs: round(median(runs.map((r) => r.listing ?? NaN)), 1),
      // From the listing's arrival to the rendered tree: the page's own share.
      renderAfterListingMs: round(median(runs.map((r) => r.rendered - (r.listing ?? NaN))), 1),
      apiListingMs: round(median(apiMs), 1),
      runs: runs.map((r) => ({ rendered: round(r.rendered, 1), dom: round(r.dom, 1), listing: round(r.listing ?? NaN, 1) })),
    };
  }
  const ratio = round(result['10k'].renderedMs / result['1k'].renderedMs, 2);
  const renderRatio = round(result['10k'].renderAfterListingMs / result['1k'].renderAfterListingMs, 2);
  figures.filesPanel = {
    ...result,
    ratio10kTo1k: ratio,
    linearEnough: ratio <= 10,
    renderAfterListingRatio10kTo1k: renderRatio,
  };
  const line =
    `Files panel first render (median of ${RUNS}, ms since navigation): ` +
    `1,000 entries ${result['1k'].renderedMs} ms (listing fetched at ${result['1k'].listingDoneMs}, API alone ${result['1k'].apiListingMs}); ` +
    `10,000 entries ${result['10k'].renderedMs} ms (listing fetched at ${result['10k'].listingDoneMs}, API alone ${result['10k'].apiListingMs}); ` +
    `ratio ${ratio}${ratio <= 10 ? '' : ' (WORSE THAN LINEAR: > 10)'}; ` +
    `render after the listing arrived: ${result['1k'].renderAfterListingMs} vs ${result['10k'].renderAfterListingMs} ms, ratio ${renderRatio}`;
  t.diagnostic(line);
  console.log(`perf: ${line}`);
});

test('chat relay: ms per token through the gateway vs from the agent directly', { timeout: 90000 }, async (t) => {
  const direct = [];
  const relayed = [];
  let deltaEvents = 0;
  for (let i = 0; i < RUNS; i++) {
    {
      const t0 = performance.now();
      const r = await fetch(agent.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer direct' },
        body: JSON.stringify({ model: 'scripted', stream: true, messages: [{ role: 'user', content: `bench ${TOKENS}` }] }),
        signal: AbortSignal.timeout(30000),
      });
      const text = await r.text();
      direct.push(performance.now() - t0);
      assert.equal((text.match(/"content":"t\d+ "/g) || []).length, TOKENS);
    }
    {
      const t0 = performance.now();
      const r = await fetch(`${server.base}/v1/chat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${server.token}` },
        body: JSON.stringify({ message: `bench ${TOKENS}` }),
        signal: AbortSignal.timeout(30000),
      });
      assert.equal(r.status, 200);
      const text = await r.text();
      relayed.push(performance.now() - t0);
      assert.match(text, /event: done/);
      assert.doesNotMatch(text, /event: error/);
      deltaEvents = (text.match(/^event: delta$/gm) || []).length;
      let relayedText = '';
      for (const m of text.matchAll(/^event: delta\ndata: (.*)$/gm)) relayedText += JSON.parse(m[1]).text;
      assert.ok(relayedText.includes(`t${TOKENS - 1} `), 'every token came through');
    }
  }
  const directPerToken = median(direct) / TOKENS;
  const relayedPerToken = median(relayed) / TOKENS;
  const ratio = round(relayedPerToken / directPerToken, 2);
  figures.chatRelay = {
    tokens: TOKENS,
    runs: RUNS,
    directMsPerToken: round(directPerToken, 4),
    gatewayMsPerToken: round(relayedPerToken, 4),
    ratio,
    deltaEventsPerTurn: deltaEvents,
    directTurnMs: direct.map((x) => round(x, 1)),
    gatewayTurnMs: relayed.map((x) => round(x, 1)),
  };
  const line =
    `chat relay (${TOKENS} tokens, median of ${RUNS}): direct ${round(directPerToken, 4)} ms/token, ` +
    `through the gateway ${round(relayedPerToken, 4)} ms/token, ratio ${ratio} (${deltaEvents} delta events per turn)`;
  t.diagnostic(line);
  console.log(`perf: ${line}`);
});
