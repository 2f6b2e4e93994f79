// (g) Bad input and isolation: a file name made of markup shows as text; `/` sends a
// Content-Security-Policy and Referrer-Policy: no-referrer; one person's events stream does
// not carry another person's deliveries.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  startFerry,
  launchBrowser,
  openApp,
  entry,
  tree,
  writeFile,
  startFileServer,
  readEventsInPage,
  problems,
} from './support.mjs';

const EVIL = '<img src=x onerror=window.__xss=1>.txt';

let server;
let browser;
let files;

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  files = await startFileServer({ '/secret.txt': { body: 'for me only\n' } });
  // Written on disk: an upload would have its name made safe (C-NAME) first.
  writeFile(path.join(server.publicDir('me'), EVIL), 'markup in a name\n');
});

after(async () => {
  await browser?.close();
  await files?.close();
  await server?.stop();
});

test('a file name made of markup is shown as text', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const item = entry(page, `public/${EVIL}`);
    await item.waitFor({ state: 'visible' });
    assert.ok((await item.innerText()).includes(EVIL), `the name is shown literally: ${await item.innerText()}`);
    assert.equal(
      await tree(page).getByRole('treeitem', { name: new RegExp(`^${EVIL.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`) }).count(),
      1,
    );
    await page.waitForTimeout(300);
    assert.equal(await page.evaluate(() => window.__xss), undefined, 'no script ran');
    assert.equal(await tree(page).locator('img').count(), 0, 'no element made from the name');
    // Its controls carry the name as text too.
    await page.getByRole('button', { name: `Rename ${EVIL}`, exact: true }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor({ state: 'visible' });
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
    assert.equal(await page.evaluate(() => window.__xss), undefined, 'no script ran');
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('the page is served with a Content-Security-Policy and no referrer', { timeout: 30000 }, async (t) => {
  const page = await openApp(browser, server.url);
  try {
    const headers = await page.response.allHeaders();
    t.diagnostic(`content-security-policy: ${headers['content-security-policy']}`);
    assert.ok(headers['content-security-policy'], 'a Content-Security-Policy header on /');
    assert.equal(headers['referrer-policy'], 'no-referrer');
    // The page keeps to its own policy: nothing it does is refused.
    await page.waitForTimeout(300);
    const violations = page.problems.filter((p) => /Content Security Policy|Refused to/i.test(p));
    assert.deepEqual(violations, [], 'no CSP violation while the page loads');
    assert.deepEqual(await page.evaluate(() => window.__cspViolations), [], 'no securitypolicyviolation event');
    // The static assets get the same headers.
    const direct = await fetch(`${server.base}/`);
    assert.ok(direct.headers.get('content-security-policy'));
    assert.equal(direct.headers.get('referrer-policy'), 'no-referrer');
    assert.match(direct.headers.get('content-type') || '', /text\/html/);
  } finally {
    await page.context().close();
  }
});

test("a person's events stream does not carry another person's deliveries", { timeout: 30000 }, async () => {
  const bobToken = await server.addPerson('bob');
  const harness = await server.createToken('me', 'harness');
  const bob = await openApp(browser, server.urlFor(bobToken));
  const me = await openApp(browser, server.url);
  try {
    const bobEvents = await readEventsInPage(bob, 2500);
    const meEvents = await readEventsInPage(me, 2500);
    await bob.waitForTimeout(200);
    const delivered = await server.api('/v1/deliveries', {
      token: harness,
      json: { url: files.url('/secret.txt'), filename: 'secret-of-me.txt' },
    });
    assert.equal(delivered.status, 201, delivered.text);
    const uploaded = await server.api('/v1/media', {
      method: 'POST',
      body: (() => {
        const f = new FormData();
        f.append('file', new Blob(['mine\n']), 'me-upload.txt');
        return f;
      })(),
    });
    assert.equal(uploaded.status, 201, uploaded.text);

    const seenByMe = await meEvents.result();
    const seenByBob = await bobEvents.result();
    assert.equal(seenByMe.status, 200);
    assert.equal(seenByBob.status, 200);
    // The control: the owner's stream does carry the event.
    assert.ok(seenByMe.text.includes('secret-of-me.txt'), `me's stream: ${JSON.stringify(seenByMe.text)}`);
    assert.ok(!seenByBob.text.includes('secret-of-me.txt'), `bob's stream: ${JSON.stringify(seenByBob.text)}`);
    assert.ok(!seenByBob.text.includes('me-upload.txt'), `bob's stream: ${JSON.stringify(seenByBob.text)}`);
    // And bob's own tree does not show it.
    await entry(bob, 'public/attachments').waitFor({ state: 'visible' });
    assert.equal(await entry(bob, 'public/attachments/secret-of-me.txt').count(), 0);
  } finally {
    await bob.context().close();
    await me.context().close();
  }
});
