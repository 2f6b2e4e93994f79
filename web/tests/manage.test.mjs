// (c) New folder, rename, move (dialog and drag onto a folder), delete; no controls for
// attachments/ itself, and the API refuses a forged request anyway.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startFerry, launchBrowser, openApp, entry, expand, writeFile, waitUntil, problems } from './support.mjs';

let server;
let browser;
let pub;

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  pub = server.publicDir('me');
  writeFile(path.join(pub, 'a.txt'), 'a\n');
  writeFile(path.join(pub, 'm.txt'), 'm\n');
  fs.mkdirSync(path.join(pub, 'dest'), { recursive: true });
  writeFile(path.join(pub, 'c.txt'), 'c\n');
  writeFile(path.join(pub, 'trash.txt'), 'trash\n');
  fs.mkdirSync(path.join(pub, 'archive'), { recursive: true });
  writeFile(path.join(pub, 'old', 'inside.txt'), 'inside\n');
  writeFile(path.join(pub, 'attachments', 'inbox.txt'), 'delivered\n');
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const exists = (rel) => fs.existsSync(path.join(pub, rel));

async function withPage(fn) {
  const page = await openApp(browser, server.url);
  try {
    await entry(page, 'public/attachments').waitFor({ state: 'visible' });
    await fn(page);
  } finally {
    await page.context().close();
  }
}

/** Fills the one open dialog's text field `label` and presses OK. */
async function answerDialog(page, label, value) {
  const dialog = page.getByRole('dialog');
  await dialog.waitFor({ state: 'visible' });
  // A labelled text field (an input with suggestions has the role combobox).
  const field = dialog.getByLabel(label, { exact: true });
  await field.fill(value);
  await dialog.getByRole('button', { name: 'OK', exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
}

test('new folder', { timeout: 30000 }, async () => {
  await withPage(async (page) => {
    await page.getByRole('button', { name: 'New folder', exact: true }).click();
    await answerDialog(page, 'Folder name', 'reports');
    await entry(page, 'public/reports').waitFor({ state: 'visible' });
    assert.ok(fs.statSync(path.join(pub, 'reports')).isDirectory());
  });
});

test('Cancel leaves things as they were', { timeout: 30000 }, async () => {
  await withPage(async (page) => {
    await page.getByRole('button', { name: 'New folder', exact: true }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Folder name', { exact: true }).fill('never');
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert.ok(!exists('never'));
  });
});

test('rename', { timeout: 30000 }, async () => {
  await withPage(async (page) => {
    await page.getByRole('button', { name: 'Rename a.txt', exact: true }).click();
    await answerDialog(page, 'New name', 'b.txt');
    await entry(page, 'public/b.txt').waitFor({ state: 'visible' });
    await entry(page, 'public/a.txt').waitFor({ state: 'detached' });
    assert.ok(exists('b.txt') && !exists('a.txt'));
  });
});

test('names as people type them: a folder "Reports 2026", a rename with accents', { timeout: 30000 }, async () => {
  writeFile(path.join(pub, 'cv.txt'), 'cv\n');
  await withPage(async (page) => {
    await page.getByRole('button', { name: 'New folder', exact: true }).click();
    await answerDialog(page, 'Folder name', 'Reports 2026');
    await entry(page, 'public/Reports 2026').waitFor({ state: 'visible' });
    assert.ok(fs.statSync(path.join(pub, 'Reports 2026')).isDirectory());
    await page.getByRole('button', { name: 'Rename cv.txt', exact: true }).click();
    await answerDialog(page, 'New name', 'Résumé (v2).txt');
    await entry(page, 'public/Résumé (v2).txt').waitFor({ state: 'visible' });
    assert.ok(exists('Résumé (v2).txt') && !exists('cv.txt'));
    // What cannot be a name is refused with the server's reason, in the dialog.
    await page.getByRole('button', { name: 'New folder', exact: true }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Folder name', { exact: true }).fill('.ferry-tmp-mine');
    await dialog.getByRole('button', { name: 'OK', exact: true }).click();
    const alert = dialog.getByRole('alert');
    await alert.waitFor({ state: 'visible' });
    assert.match(await alert.innerText(), /ferry's own temporaries/);
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
    assert.ok(!exists('.ferry-tmp-mine'));
  });
});

test('move with the dialog', { timeout: 30000 }, async () => {
  await withPage(async (page) => {
    await entry(page, 'public/dest').waitFor({ state: 'visible' });
    await page.getByRole('button', { name: 'Move m.txt', exact: true }).click();
    const field = page.getByRole('dialog').getByLabel('Move to folder', { exact: true });
    await field.waitFor({ state: 'visible' });
    // The field names a folder; follow the form the page pre-fills ("public/…" or relative).
    const prefilled = await field.inputValue();
    const target = prefilled.startsWith('public') ? 'public/dest' : 'dest';
    await answerDialog(page, 'Move to folder', target);
    await waitUntil(() => exists('dest/m.txt') && !exists('m.txt'), { timeout: 5000, what: 'm.txt moved on disk' });
    await entry(page, 'public/m.txt').waitFor({ state: 'detached' });
    await expand(page, 'public/dest');
    await entry(page, 'public/dest/m.txt').waitFor({ state: 'visible' });
  });
});

test('move by dragging an entry onto a folder', { timeout: 30000 }, async () => {
  await withPage(async (page) => {
    const source = entry(page, 'public/c.txt');
    const target = entry(page, 'public/archive');
    await source.waitFor({ state: 'visible' });
    await source
      .getByText('c.txt', { exact: true })
      .first()
      .dragTo(target.getByText('archive', { exact: true }).first());
    await waitUntil(() => exists('archive/c.txt') && !exists('c.txt'), {
      timeout: 5000,
      what: 'c.txt moved into archive/ on disk',
    });
    await entry(page, 'public/c.txt').waitFor({ state: 'detached' });
    await expand(page, 'public/archive');
    await entry(page, 'public/archive/c.txt').waitFor({ state: 'visible' });
  });
});

test('delete a file and a folder', { timeout: 30000 }, async () => {
  await withPage(async (page) => {
    await page.getByRole('button', { name: 'Delete trash.txt', exact: true }).click();
    const ask = page.getByRole('dialog', { name: 'Delete trash.txt?' });
    await ask.waitFor({ state: 'visible' });
    await ask.getByRole('button', { name: 'Delete', exact: true }).click();
    await entry(page, 'public/trash.txt').waitFor({ state: 'detached' });
    assert.ok(!exists('trash.txt'));

    await page.getByRole('button', { name: 'Delete old', exact: true }).click();
    const askFolder = page.getByRole('dialog', { name: 'Delete old?' });
    await askFolder.getByRole('button', { name: 'Cancel', exact: true }).click();
    await askFolder.waitFor({ state: 'hidden' });
    assert.ok(exists('old/inside.txt'), 'Cancel keeps the folder');
    await page.getByRole('button', { name: 'Delete old', exact: true }).click();
    await page.getByRole('dialog', { name: 'Delete old?' }).getByRole('button', { name: 'Delete', exact: true }).click();
    await entry(page, 'public/old').waitFor({ state: 'detached' });
    assert.ok(!exists('old'), 'folders are deleted recursively');
    assert.equal(page.problems.length, 0, problems(page));
  });
});

test('attachments itself has no rename, move or delete controls', { timeout: 30000 }, async () => {
  await withPage(async (page) => {
    for (const verb of ['Rename', 'Move', 'Delete', 'Download']) {
      assert.equal(
        await page.getByRole('button', { name: `${verb} attachments`, exact: true }).count(),
        0,
        `no "${verb} attachments" button`,
      );
    }
    assert.notEqual(await entry(page, 'public/attachments').getAttribute('draggable'), 'true', 'not draggable');
    // Files inside attachments/ can be moved out and deleted.
    await expand(page, 'public/attachments');
    await entry(page, 'public/attachments/inbox.txt').waitFor({ state: 'visible' });
    for (const verb of ['Rename', 'Move', 'Delete', 'Download']) {
      assert.equal(
        await page.getByRole('button', { name: `${verb} inbox.txt`, exact: true }).count(),
        1,
        `a "${verb} inbox.txt" button`,
      );
    }
  });
});

test('a forged request against attachments is refused with 403', { timeout: 30000 }, async () => {
  await withPage(async (page) => {
    const answers = await page.evaluate(async () => {
      const auth = { authorization: `Bearer ${sessionStorage.getItem('ferry.token')}` };
      const json = { ...auth, 'content-type': 'application/json' };
      const call = async (url, init) => {
        const r = await fetch(url, init);
        return { status: r.status, body: await r.json().catch(() => null) };
      };
      return {
        moveFrom: await call('/v1/files/move', {
          method: 'POST',
          headers: json,
          body: JSON.stringify({ from: 'public/attachments', to: 'public/renamed' }),
        }),
        moveTo: await call('/v1/files/move', {
          method: 'POST',
          headers: json,
          body: JSON.stringify({ from: 'public/archive', to: 'public/attachments' }),
        }),
        remove: await call('/v1/files?path=public/attachments', { method: 'DELETE', headers: auth }),
      };
    });
    for (const [what, answer] of Object.entries(answers)) {
      assert.equal(answer.status, 403, `${what}: ${JSON.stringify(answer)}`);
      assert.equal(answer.body?.error?.code, 'managed_by_system', `${what}: ${JSON.stringify(answer)}`);
    }
    assert.ok(fs.statSync(path.join(pub, 'attachments')).isDirectory());
    assert.ok(exists('attachments/inbox.txt'));
    assert.ok(!exists('renamed'));
  });
});
