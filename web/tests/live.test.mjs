// (d) Live deliveries: with the page open, a file the agent writes into
// public/attachments/ itself and a file delivered through /v1/deliveries both appear in the
// tree within about 1.5 s, without a reload (GET /v1/events).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startFerry, launchBrowser, openApp, entry, expand, startFileServer, problems } from './support.mjs';

// "within ~1.5 s": the gateway notices a file written on disk within a second, then the
// page reloads the listing. The bound allows a little scheduling noise on a busy machine.
const LIVE_BOUND_MS = 2000;

let server;
let browser;
let files;
let harness;
let page;

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  harness = await server.createToken('me', 'harness');
  files = await startFileServer({
    '/out/report.txt': { body: 'delivered out of band\n' },
  });
  page = await openApp(browser, server.url);
  await entry(page, 'public/attachments').waitFor({ state: 'visible' });
  // Let the events stream connect before anything changes.
  await page.waitForTimeout(500);
  await page.evaluate(() => {
    window.__sameDocument = true;
  });
});

after(async () => {
  await page?.context().close();
  await browser?.close();
  await files?.close();
  await server?.stop();
});

/** Waits for the entry of `p` to exist; returns the ms it took since `t0`. */
async function appearsWithin(p, t0) {
  await entry(page, p).waitFor({ state: 'attached', timeout: LIVE_BOUND_MS + 3000 });
  return Date.now() - t0;
}

test('a file written on disk into public/attachments/ appears without reload', { timeout: 30000 }, async (t) => {
  const target = path.join(server.publicDir('me'), 'attachments', 'from-disk.txt');
  const t0 = Date.now();
  fs.writeFileSync(target, 'the agent wrote this\n');
  const ms = await appearsWithin('public/attachments/from-disk.txt', t0);
  t.diagnostic(`written on disk → in the tree: ${ms} ms`);
  console.log(`live: written on disk → in the tree: ${ms} ms`);
  assert.ok(ms <= LIVE_BOUND_MS, `appeared after ${ms} ms (bound ${LIVE_BOUND_MS} ms)`);
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page did not reload');
  await expand(page, 'public/attachments');
  await entry(page, 'public/attachments/from-disk.txt').waitFor({ state: 'visible', timeout: 2000 });
});

test('a file posted to /v1/deliveries appears without reload', { timeout: 30000 }, async (t) => {
  const attachments = entry(page, 'public/attachments');
  const wasExpanded = await attachments.getAttribute('aria-expanded');
  const t0 = Date.now();
  const answer = await server.api('/v1/deliveries', {
    token: harness,
    json: { url: files.url('/out/report.txt'), filename: 'delivered-live.txt' },
  });
  assert.equal(answer.status, 201, answer.text);
  assert.equal(answer.json.path, 'public/attachments/delivered-live.txt');
  const ms = await appearsWithin('public/attachments/delivered-live.txt', t0);
  t.diagnostic(`delivered → in the tree: ${ms} ms`);
  console.log(`live: POST /v1/deliveries → in the tree: ${ms} ms`);
  assert.ok(ms <= LIVE_BOUND_MS, `appeared after ${ms} ms (bound ${LIVE_BOUND_MS} ms)`);
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page did not reload');
  // A reloaded listing keeps the folder the person had opened.
  assert.equal(await attachments.getAttribute('aria-expanded'), wasExpanded, 'expansion kept across the refresh');
  await entry(page, 'public/attachments/delivered-live.txt').waitFor({ state: 'visible', timeout: 2000 });
  assert.equal(page.problems.length, 0, problems(page));
});
