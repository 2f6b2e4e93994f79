// The trash and share links in the Files panel (spec M-DAILY): a delete says it went to
// the trash and offers Undo; the Trash view restores (and says why it cannot over an
// existing name) and deletes forever; Share makes a link that a fresh browser without a
// token downloads byte for byte, until it is revoked. Screenshots at 1440 and 375 px.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startFerry, launchBrowser, openApp, entry, writeFile, waitUntil, TESTS_DIR } from './support.mjs';

const SHOTS = path.join(TESTS_DIR, 'screenshots');

let server;
let browser;
let pub;

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  pub = server.publicDir('me');
  fs.mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const exists = (rel) => fs.existsSync(path.join(pub, rel));

async function withPage(fn, viewport) {
  const page = await openApp(browser, server.url, viewport ? { viewport } : {});
  try {
    await entry(page, 'public/attachments').waitFor({ state: 'visible' });
    await fn(page);
    // The browser logs the refused restore (409) itself; anything else is a problem.
    const unexpected = (page.problems || []).filter((p) => !p.includes('status of 409'));
    assert.deepEqual(unexpected, []);
  } finally {
    await page.context().close();
  }
}

async function deleteByButton(page, name) {
  await page.getByRole('button', { name: `Delete ${name}`, exact: true }).click();
  const ask = page.getByRole('dialog', { name: `Delete ${name}?` });
  await ask.getByRole('button', { name: 'Delete', exact: true }).click();
  await ask.waitFor({ state: 'hidden' });
}

test('delete says it went to the trash, and Undo brings it back', { timeout: 30000 }, async () => {
  writeFile(path.join(pub, 'undo-me.txt'), 'undo\n');
  await withPage(async (page) => {
    await entry(page, 'public/undo-me.txt').waitFor({ state: 'visible' });
    await deleteByButton(page, 'undo-me.txt');
    const notice = page.getByRole('status').filter({ hasText: 'to the trash' });
    await notice.waitFor({ state: 'visible' });
    assert.match(await notice.innerText(), /Moved undo-me\.txt to the trash\./);
    await waitUntil(() => !exists('undo-me.txt'), { what: 'the file to leave public/' });
    await entry(page, 'public/undo-me.txt').waitFor({ state: 'detached' });
    await notice.getByRole('button', { name: 'Undo delete of undo-me.txt' }).click();
    await entry(page, 'public/undo-me.txt').waitFor({ state: 'visible' });
    assert.equal(fs.readFileSync(path.join(pub, 'undo-me.txt'), 'utf8'), 'undo\n');
    await page.getByText('Restored public/undo-me.txt.').waitFor({ state: 'visible' });
  });
});

test('the Trash view restores, refuses to overwrite, and deletes forever', { timeout: 45000 }, async () => {
  writeFile(path.join(pub, 'keep.txt'), 'first\n');
  writeFile(path.join(pub, 'gone.txt'), 'gone\n');
  writeFile(path.join(pub, 'folder', 'inside.txt'), 'inside\n');
  await withPage(async (page) => {
    await entry(page, 'public/keep.txt').waitFor({ state: 'visible' });
    await deleteByButton(page, 'keep.txt');
    await deleteByButton(page, 'gone.txt');
    await deleteByButton(page, 'folder');
    await waitUntil(() => !exists('keep.txt') && !exists('folder'), { what: 'the deletes' });

    // A new keep.txt takes the old one's place.
    writeFile(path.join(pub, 'keep.txt'), 'second\n');

    await page.getByRole('button', { name: 'Trash', exact: true }).click();
    const view = page.getByRole('dialog', { name: 'Trash' });
    await view.waitFor({ state: 'visible' });
    const list = view.getByRole('list', { name: 'Deleted files' });
    await list.getByRole('listitem').nth(2).waitFor({ state: 'visible' });
    assert.equal(await list.getByRole('listitem').count(), 3);
    await page.screenshot({ path: path.join(SHOTS, 'trash-1440.png'), fullPage: false });

    // Restoring onto an existing name: the server's message, in the view.
    await view.getByRole('button', { name: 'Restore keep.txt', exact: true }).click();
    const alert = view.getByRole('alert');
    await alert.waitFor({ state: 'visible' });
    assert.match(await alert.innerText(), /public\/keep\.txt already exists/);
    assert.equal(fs.readFileSync(path.join(pub, 'keep.txt'), 'utf8'), 'second\n');

    // A folder comes back whole.
    await view.getByRole('button', { name: 'Restore folder', exact: true }).click();
    await view.getByText('Restored public/folder.').waitFor({ state: 'visible' });
    assert.equal(fs.readFileSync(path.join(pub, 'folder', 'inside.txt'), 'utf8'), 'inside\n');
    assert.equal(await list.getByRole('listitem').count(), 2);

    // Delete forever asks first, then the entry is gone from the trash.
    await view.getByRole('button', { name: 'Delete gone.txt forever', exact: true }).click();
    const ask = page.getByRole('dialog', { name: 'Delete gone.txt forever?' });
    await ask.getByRole('button', { name: 'Delete forever', exact: true }).click();
    await ask.waitFor({ state: 'hidden' });
    await waitUntil(async () => (await list.getByRole('listitem').count()) === 1, { what: 'one entry left' });
    const listed = (await server.api('/v1/trash')).json;
    assert.deepEqual(listed.entries.map((e) => e.name), ['keep.txt']);

    await view.getByRole('button', { name: 'Close', exact: true }).click();
    await view.waitFor({ state: 'hidden' });
    await entry(page, 'public/folder').waitFor({ state: 'visible' });
  });
});

test('the Trash view at 375 px', { timeout: 30000 }, async () => {
  await withPage(
    async (page) => {
      await page.getByRole('button', { name: 'Trash', exact: true }).click();
      const view = page.getByRole('dialog', { name: 'Trash' });
      await view.getByRole('list', { name: 'Deleted files' }).getByRole('listitem').first().waitFor();
      await page.screenshot({ path: path.join(SHOTS, 'trash-375.png'), fullPage: false });
      for (const button of await view.getByRole('button').all()) {
        const box = await button.boundingBox();
        assert.ok(box.height >= 40 && box.width >= 40, `${await button.innerText()}: ${JSON.stringify(box)}`);
      }
    },
    { width: 375, height: 800 },
  );
});

test('a share link downloads the file without a token until it is revoked', { timeout: 45000 }, async () => {
  const bytes = Buffer.alloc(300 * 1024);
  for (let i = 0; i < bytes.length; i += 1) bytes[i] = (i * 7 + 3) % 256;
  writeFile(path.join(pub, 'shared.pdf'), bytes);
  await withPage(async (page) => {
    await page.getByRole('button', { name: 'Share shared.pdf', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Share shared.pdf' });
    await dialog.waitFor({ state: 'visible' });
    await dialog.getByLabel('Link expires after').selectOption({ label: '7 days' });
    await dialog.getByRole('button', { name: 'Create link', exact: true }).click();
    const field = dialog.getByLabel('Link', { exact: true });
    await waitUntil(async () => (await field.inputValue()).includes('/s/'), { what: 'the link' });
    const link = await field.inputValue();
    assert.ok(link.startsWith(`${server.base}/s/`), link);
    await dialog.getByRole('button', { name: 'Copy', exact: true }).click();
    await dialog.getByRole('status').filter({ hasText: /Copied|Selected/ }).waitFor();
    const live = dialog.getByRole('list', { name: 'Live links' });
    await live.getByRole('listitem').first().waitFor();
    await page.screenshot({ path: path.join(SHOTS, 'share-1440.png'), fullPage: false });

    // Seven days, as chosen.
    const shares = (await server.api('/v1/shares')).json;
    const life = Date.parse(shares.shares[0].expiresAt) - Date.parse(shares.shares[0].createdAt);
    assert.equal(life, 7 * 86400 * 1000);

    // A fresh browser, no token anywhere: the same bytes.
    const stranger = await browser.newContext();
    try {
      const response = await stranger.request.get(link);
      assert.equal(response.status(), 200);
      assert.equal(response.headers()['cache-control'], 'private, no-store');
      assert.match(response.headers()['content-disposition'], /^attachment;/);
      assert.ok(Buffer.from(await response.body()).equals(bytes), 'the bytes match');

      await live.getByRole('button', { name: 'Revoke link to shared.pdf', exact: true }).click();
      await live.getByRole('listitem').first().waitFor({ state: 'detached' });
      await dialog.getByText('No live links.').waitFor({ state: 'visible' });
      const after = await stranger.request.get(link);
      assert.equal(after.status(), 410);
      assert.equal((await after.json()).error.code, 'share_revoked');
    } finally {
      await stranger.close();
    }
  });
});

test('the Share dialog at 375 px', { timeout: 30000 }, async () => {
  writeFile(path.join(pub, 'phone.txt'), 'phone\n');
  await withPage(
    async (page) => {
      await page.getByRole('button', { name: 'Share phone.txt', exact: true }).click();
      const dialog = page.getByRole('dialog', { name: 'Share phone.txt' });
      await dialog.getByRole('button', { name: 'Create link', exact: true }).click();
      await dialog.getByRole('list', { name: 'Live links' }).getByRole('listitem').first().waitFor();
      await page.screenshot({ path: path.join(SHOTS, 'share-375.png'), fullPage: false });
      for (const button of await dialog.getByRole('button').all()) {
        const box = await button.boundingBox();
        assert.ok(box.height >= 40 && box.width >= 40, `${await button.innerText()}: ${JSON.stringify(box)}`);
      }
    },
    { width: 375, height: 800 },
  );
});
