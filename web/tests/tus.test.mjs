// Resumable uploads (M-DAILY, tus 1.0 at /v1/uploads): a 200 MiB file uploaded from the
// page survives a dropped connection and a page reload, and goes on from where the
// server stood each time (never from byte 0 again); and a tus client nobody here wrote
// (tus-js-client, from npm) uploads and resumes against the same server.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as tus from 'tus-js-client';
import { startFerry, launchBrowser, openApp, entry, waitUntil, problems, TESTS_DIR } from './support.mjs';

/** Where a screenshot of this test goes (git-ignored). */
function shot(name) {
  const dir = path.join(TESTS_DIR, 'screenshots');
  fs.mkdirSync(dir, { recursive: true });
  return path.join(dir, name);
}

const MiB = 1024 * 1024;
const BIG = 200 * MiB;
let server;
let browser;
let tmp;

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ferry-tus-'));
});

after(async () => {
  await browser?.close();
  await server?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

function randomFile(name, size) {
  const file = path.join(tmp, name);
  const fd = fs.openSync(file, 'w');
  const block = crypto.randomBytes(MiB);
  for (let i = 0; i < size / MiB; i += 1) {
    block.writeUInt32LE(i, 0);
    fs.writeSync(fd, block);
  }
  fs.closeSync(fd);
  return file;
}

/**
 * A TCP relay in front of the gateway whose connections the test can cut at once, as a
 * dropped network would: `drop()` destroys every connection open through it.
 */
async function startRelay(target) {
  const { hostname, port } = new URL(target);
  const open = new Set();
  const relay = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    open.add(client);
    open.add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  await new Promise((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${relay.address().port}`,
    drop: () => {
      const n = open.size;
      for (const s of open) s.destroy();
      open.clear();
      return n;
    },
    close: () => {
      relay.close();
      for (const s of open) s.destroy();
      open.clear();
    },
  };
}

const sha256 = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/** Where the server says the upload at `location` stands. */
async function serverOffset(location) {
  const answer = await server.api(location);
  assert.equal(answer.status, 200, answer.text);
  return JSON.parse(answer.text).offset;
}

const uploadItem = (page, name) =>
  page.getByRole('list', { name: 'Uploads', exact: true }).getByRole('listitem').filter({ hasText: name });

test('a 200 MiB upload survives a dropped connection and a reload, resuming where it was', { timeout: 240000 }, async () => {
  const file = randomFile('big.csv', BIG);
  const patches = [];
  const posts = [];
  const failed = [];
  const heads = [];
  const watch = (page) => {
    page.on('request', (r) => {
      const url = new URL(r.url());
      if (!url.pathname.startsWith('/v1/uploads')) return;
      if (r.method() === 'PATCH') patches.push({ at: Date.now(), offset: Number(r.headers()['upload-offset']) });
      if (r.method() === 'POST') posts.push(url.pathname);
      if (r.method() === 'HEAD') heads.push(Date.now());
    });
    page.on('requestfailed', (r) => {
      if (new URL(r.url()).pathname.startsWith('/v1/uploads')) failed.push(`${r.method()} ${r.failure()?.errorText}`);
    });
  };
  // The uploads slowed to a pace a test can catch mid-way (the page's own network).
  const throttle = async (page) => {
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', {
      offline: false,
      latency: 0,
      downloadThroughput: -1,
      uploadThroughput: 24 * MiB,
    });
    return cdp;
  };

  const relay = await startRelay(server.base);
  let page = await openApp(browser, `${relay.base}/#token=${server.token}`, { viewport: { width: 1440, height: 900 } });
  let location;
  try {
    watch(page);
    await throttle(page);
    const created = page.waitForResponse(
      (r) => new URL(r.url()).pathname === '/v1/uploads' && r.request().method() === 'POST',
      { timeout: 15000 },
    );
    await page.getByLabel('Files to upload', { exact: true }).setInputFiles(file);
    const answer = await created;
    assert.equal(answer.status(), 201);
    location = answer.headers()['location'];
    assert.match(location, /^\/v1\/uploads\/[0-9a-f]{32}$/);

    // Mid-upload: nothing in public/ yet, the progress shown.
    await waitUntil(async () => (await serverOffset(location)) >= 20 * MiB, {
      timeout: 60000,
      what: 'the first 20 MiB to arrive',
    });
    assert.ok(!fs.existsSync(path.join(server.publicDir('me'), 'big.csv')), 'not placed before the last byte');
    await page.screenshot({ path: shot('tus-in-progress-1440.png') });

    // The connection drops mid-part (every connection of the page cut at once).
    const before = patches.length;
    const headsBefore = heads.length;
    assert.ok(relay.drop() > 0, 'connections were open');
    await new Promise((r) => setTimeout(r, 300));
    const offline = await serverOffset(location);
    // The page asks the server where it stands (HEAD), then goes on from there. (Chromium
    // may first resend the cut PATCH itself; the server refuses that one, 409 or 423.)
    await waitUntil(async () => heads.length > headsBefore, { timeout: 40000, what: 'a HEAD after the drop' });
    const firstHead = heads[headsBefore];
    await waitUntil(async () => patches.some((p) => p.at >= firstHead), { timeout: 40000, what: 'a PATCH after the HEAD' });
    const resumedAt = patches.find((p) => p.at >= firstHead).offset;
    assert.ok(resumedAt > 0, `the upload went on from byte ${resumedAt}, not 0`);
    assert.ok(resumedAt >= offline, `resumed at ${resumedAt}, where the server stood (${offline})`);
    await uploadItem(page, 'big.csv')
      .getByText(/resumed/)
      .waitFor({ timeout: 15000 })
      .catch(async (e) => {
        throw new Error(`${e.message}; item: ${await uploadItem(page, 'big.csv').innerText()}; failed: ${failed}; patches: ${JSON.stringify(patches)}`);
      });

    // A reload mid-way: the same file chosen again goes on where the server stands.
    await waitUntil(async () => (await serverOffset(location)) >= 90 * MiB, {
      timeout: 90000,
      what: '90 MiB to arrive',
    });
  } catch (e) {
    await page.context().close();
    throw e;
  }
  await page.reload();
  await page.getByRole('region', { name: 'Files' }).waitFor({ state: 'visible' });
  const standing = await serverOffset(location);
  assert.ok(standing >= 90 * MiB && standing < BIG, `the server holds ${standing} bytes`);
  const beforeReload = { patches: patches.length, posts: posts.length };
  try {
    await throttle(page);
    await page.getByLabel('Files to upload', { exact: true }).setInputFiles(file);
    await waitUntil(async () => patches.length > beforeReload.patches, {
      timeout: 20000,
      what: 'a PATCH after the reload',
    });
    assert.equal(posts.length, beforeReload.posts, 'no new upload was created after the reload');
    const afterReload = patches[beforeReload.patches].offset;
    assert.ok(afterReload >= standing, `after the reload it went on from ${afterReload} (server had ${standing})`);
    await uploadItem(page, 'big.csv').getByText(/resumed/).waitFor({ timeout: 15000 });
    await page.screenshot({ path: shot('tus-resumed-1440.png') });
    await page.setViewportSize({ width: 375, height: 800 });
    await page.screenshot({ path: shot('tus-resumed-375.png') });

    await entry(page, 'public/big.csv').waitFor({ state: 'visible', timeout: 120000 });
    await uploadItem(page, 'big.csv').getByText('Uploaded', { exact: true }).waitFor({ timeout: 15000 });
    await page.screenshot({ path: shot('tus-done-375.png') });
    assert.equal(sha256(path.join(server.publicDir('me'), 'big.csv')), sha256(file));
    // Every PATCH started where the one before had left the server, never at 0 again.
    assert.equal(patches.filter((p) => p.offset === 0).length, 1, 'byte 0 was sent once');
    const status = JSON.parse((await server.api(location)).text);
    assert.equal(status.complete, true);
    assert.equal(status.file.sha256, sha256(file));
    assert.equal(page.problems.filter((p) => !/ERR_INTERNET_DISCONNECTED|Failed to load resource/.test(p)).length, 0, problems(page));
  } finally {
    await page.context().close();
    relay.close();
  }
  // 375 px: the in-progress view too.
  const small = await openApp(browser, server.url, { viewport: { width: 375, height: 800 } });
  try {
    const other = randomFile('second.csv', 40 * MiB);
    const cdp = await small.context().newCDPSession(small);
    await cdp.send('Network.emulateNetworkConditions', {
      offline: false,
      latency: 0,
      downloadThroughput: -1,
      uploadThroughput: 8 * MiB,
    });
    await small.getByLabel('Files to upload', { exact: true }).setInputFiles(other);
    await waitUntil(async () => /[1-9]\d* %/.test(await uploadItem(small, 'second.csv').innerText()), {
      timeout: 15000,
      what: 'the progress of second.csv',
    });
    await small.screenshot({ path: shot('tus-in-progress-375.png') });
    const stop = uploadItem(small, 'second.csv').getByRole('button', { name: 'Stop second.csv' });
    const box = await stop.boundingBox();
    assert.ok(box.width >= 40 && box.height >= 40, `the Stop button is ${box.width}×${box.height}`);
    await stop.click();
    await uploadItem(small, 'second.csv').getByText('Cancelled').waitFor({ timeout: 10000 });
  } finally {
    await small.context().close();
  }
});

/** Runs one tus-js-client upload to its end; resolves with what it reported. */
function tusJs(data, options) {
  return new Promise((resolve, reject) => {
    const seen = { progress: [] };
    const upload = new tus.Upload(data, {
      endpoint: `${server.base}/v1/uploads`,
      headers: { Authorization: `Bearer ${server.token}` },
      chunkSize: 4 * MiB,
      retryDelays: [100, 500],
      ...options,
      onProgress: (sent) => {
        seen.progress.push(sent);
        options.onProgress?.(sent, upload);
      },
      onSuccess: () => resolve({ ...seen, url: upload.url }),
      onError: reject,
    });
    seen.upload = upload;
    upload.start();
  });
}

test('tus-js-client uploads and resumes against the gateway', { timeout: 120000 }, async () => {
  const data = crypto.randomBytes(20 * MiB);
  const done = await tusJs(data, { metadata: { filename: 'from-tus-js.csv' } });
  assert.equal(
    crypto.createHash('sha256').update(fs.readFileSync(path.join(server.publicDir('me'), 'from-tus-js.csv'))).digest('hex'),
    crypto.createHash('sha256').update(data).digest('hex'),
  );
  assert.match(done.url, /\/v1\/uploads\/[0-9a-f]{32}$/);

  // Stopped after the first parts, then resumed by URL: it goes on from the server's offset.
  const second = crypto.randomBytes(16 * MiB);
  let url;
  await new Promise((resolve, reject) => {
    const upload = new tus.Upload(second, {
      endpoint: `${server.base}/v1/uploads`,
      headers: { Authorization: `Bearer ${server.token}` },
      chunkSize: 4 * MiB,
      metadata: { filename: 'resumed-tus-js.csv' },
      onChunkComplete: (_chunk, accepted) => {
        if (accepted >= 8 * MiB) {
          url = upload.url;
          upload.abort().then(resolve, reject);
        }
      },
      onError: reject,
    });
    upload.start();
  });
  const answer = JSON.parse((await server.api(new URL(url).pathname)).text);
  assert.equal(answer.offset, 8 * MiB);
  assert.ok(!fs.existsSync(path.join(server.publicDir('me'), 'resumed-tus-js.csv')));
  const resumed = await tusJs(second, { uploadUrl: url, metadata: { filename: 'resumed-tus-js.csv' } });
  assert.ok(resumed.progress[0] >= 8 * MiB, `resumed from ${resumed.progress[0]}, not 0`);
  assert.equal(
    crypto.createHash('sha256').update(fs.readFileSync(path.join(server.publicDir('me'), 'resumed-tus-js.csv'))).digest('hex'),
    crypto.createHash('sha256').update(second).digest('hex'),
  );

  // Another person's upload URL is unknown to tus-js-client as to anyone.
  const bea = await server.addPerson('bea');
  await assert.rejects(
    new Promise((resolve, reject) => {
      new tus.Upload(Buffer.from('x'.repeat(100)), {
        uploadUrl: url,
        headers: { Authorization: `Bearer ${bea}` },
        retryDelays: null,
        onSuccess: resolve,
        onError: reject,
      }).start();
    }),
  );
});
