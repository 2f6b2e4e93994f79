// (a) Opening the printed address: the token moves out of the address bar into session
// storage; the Files tree shows the managed attachments/ folder and nested folders with
// sizes and times; the project switcher lists the person's projects.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {
  startFerry,
  launchBrowser,
  openApp,
  tree,
  entry,
  expand,
  writeFile,
  problems,
} from './support.mjs';

let server;
let browser;
const MTIME = new Date('2024-03-15T10:20:00Z');

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  const pub = server.publicDir('me');
  writeFile(path.join(pub, 'reports', '2024', 'q1.txt'), 'x'.repeat(2048), MTIME);
  writeFile(path.join(pub, 'reports', 'summary.md'), '# summary\n', MTIME);
  writeFile(path.join(pub, 'notes.md'), 'notes\n', MTIME);
  const created = await server.api('/v1/projects', { json: { id: 'q2-report' } });
  assert.equal(created.status, 201, `POST /v1/projects: ${created.text}`);
  writeFile(path.join(server.publicDir('me', 'q2-report'), 'project-only.txt'), 'in the project\n', MTIME);
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('the token leaves the address bar for session storage', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const url = page.url();
    assert.ok(!url.includes('#token'), `the address still has the fragment: ${url}`);
    assert.ok(!url.includes(server.token), `the address still has the token: ${url}`);
    assert.equal(await page.evaluate(() => location.hash), '');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('ferry.token')), server.token);
    // No cookies: the token travels as a header only.
    assert.deepEqual(await page.context().cookies(), []);
    // The panels show instead of the sign-in form.
    await page.getByRole('region', { name: 'Chat', exact: true }).waitFor({ state: 'visible' });
    assert.equal(await page.getByRole('button', { name: 'Sign in', exact: true }).count(), 0);
  } finally {
    await page.context().close();
  }
});

test('without a token the page asks for one', { timeout: 30000 }, async () => {
  const page = await openApp(browser, `${server.base}/`, { waitFiles: false });
  try {
    await page.getByLabel('Token', { exact: true }).waitFor({ state: 'visible' });
    await page.getByLabel('Token', { exact: true }).fill(server.token);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await tree(page).waitFor({ state: 'visible' });
    await entry(page, 'public/notes.md').waitFor({ state: 'attached' });
    assert.equal(await page.evaluate(() => sessionStorage.getItem('ferry.token')), server.token);
  } finally {
    await page.context().close();
  }
});

test('the Files tree: managed attachments, nested folders, sizes and times', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const files = tree(page);
    await files.waitFor({ state: 'visible' });

    const attachments = entry(page, 'public/attachments');
    await attachments.waitFor({ state: 'visible' });
    assert.equal(await attachments.getAttribute('data-managed'), 'true');
    assert.match(await attachments.innerText(), /managed/i, 'attachments shows the text "managed"');
    assert.ok(
      (await files.getByRole('treeitem', { name: /^attachments/ }).count()) >= 1,
      'a treeitem whose accessible name starts with "attachments"',
    );
    assert.notEqual(await attachments.getAttribute('aria-expanded'), null, 'folders carry aria-expanded');

    // Folders first, then files, sorted by name (as the listing orders them).
    const topLevel = await page.evaluate(() => {
      const t = document.querySelector('[role="tree"]');
      return [...t.querySelectorAll('[role="treeitem"]')]
        .map((e) => e.getAttribute('data-path'))
        .filter((p) => p && p.split('/').length === 2);
    });
    assert.deepEqual(topLevel, ['public/attachments', 'public/reports', 'public/notes.md']);

    await expand(page, 'public/reports/2024');
    const q1 = entry(page, 'public/reports/2024/q1.txt');
    await q1.waitFor({ state: 'visible' });
    assert.ok(
      (await files.getByRole('treeitem', { name: /^q1\.txt/ }).count()) === 1,
      'the nested file is a treeitem named "q1.txt…"',
    );
    const text = await q1.innerText();
    // 2048 bytes are 2 KiB, and are called that: not "2.0 KB", which would mean 2000.
    assert.match(text, /(?<![\d.])2\.0 KiB/, `size of 2048 bytes shown in KiB: ${text}`);
    assert.equal(await page.evaluate(async () => (await import('/format.js')).formatSize(9 * 1024 * 1024)), '9.0 MiB');
    assert.match(text, /2024|Mar|\b15\b|year/, `a modification time shown: ${text}`);
    assert.equal(await entry(page, 'public/reports').getAttribute('aria-expanded'), 'true');
    await entry(page, 'public/reports/summary.md').waitFor({ state: 'visible' });
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('the project switcher lists projects and shows their files', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const project = page.getByRole('combobox', { name: 'Project', exact: true });
    await project.waitFor({ state: 'visible' });
    await page.getByRole('button', { name: 'New project', exact: true }).waitFor({ state: 'visible' });
    const options = await project.evaluate((el) => [...el.querySelectorAll('option')].map((o) => o.textContent.trim()));
    assert.equal(options[0], 'Main workspace', `options: ${options}`);
    assert.ok(options.includes('q2-report'), `the project created through the API is listed: ${options}`);

    await entry(page, 'public/notes.md').waitFor({ state: 'attached' });
    await project.selectOption({ label: 'q2-report' });
    await entry(page, 'public/project-only.txt').waitFor({ state: 'visible' });
    await entry(page, 'public/attachments').waitFor({ state: 'visible' });
    assert.equal(await entry(page, 'public/notes.md').count(), 0, 'the main workspace files are gone');

    await project.selectOption({ label: 'Main workspace' });
    await entry(page, 'public/notes.md').waitFor({ state: 'visible' });
    assert.equal(await entry(page, 'public/project-only.txt').count(), 0);
  } finally {
    await page.context().close();
  }
});
