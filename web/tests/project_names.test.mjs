// M-DAILY "Names people type", projects: "New project" takes a name as people type it
// ("Q2 Report"), the switcher shows that name and switches to the derived id; two
// projects of one name are told apart by their ids; a name that gives no id is said so
// in the dialog. Screenshots at 1440 and 375 px.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFerry, launchBrowser, openApp, entry, problems } from './support.mjs';

const SCREENSHOTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'screenshots');
let server;
let browser;

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

async function newProject(page, name) {
  await page.getByRole('button', { name: 'New project', exact: true }).click();
  const dialog = page.getByRole('dialog', { name: 'New project' });
  await dialog.getByLabel('Project name', { exact: true }).fill(name);
  await dialog.getByRole('button', { name: 'OK', exact: true }).click();
  return dialog;
}

test('a project made from a name is shown by it and switched to', { timeout: 60000 }, async () => {
  const page = await openApp(browser, server.url, { viewport: { width: 1440, height: 900 } });
  try {
    const switcher = page.getByRole('combobox', { name: 'Project', exact: true });
    const dialog = await newProject(page, 'Q2 Report');
    await dialog.waitFor({ state: 'hidden' });
    assert.equal(await switcher.inputValue(), 'q2-report');
    assert.equal((await switcher.locator('option:checked').innerText()).trim(), 'Q2 Report');
    await entry(page, 'public/attachments').waitFor({ state: 'visible' });
    assert.ok(fs.existsSync(path.join(server.publicDir('me', 'q2-report'), 'attachments')));

    // The same name again: a second project, both told apart by their ids.
    await (await newProject(page, 'Q2 Report')).waitFor({ state: 'hidden' });
    assert.equal(await switcher.inputValue(), 'q2-report-2');
    const options = (await switcher.locator('option').allInnerTexts()).map((t) => t.trim());
    assert.deepEqual(options, ['Main workspace', 'Q2 Report (q2-report)', 'Q2 Report (q2-report-2)']);

    // Markup in a name is text, never markup.
    await (await newProject(page, '<img src=x onerror="window.__pwned=1">')).waitFor({ state: 'hidden' });
    assert.equal(await page.evaluate(() => window.__pwned ?? null), null);
    assert.equal(await switcher.locator('option img').count(), 0);

    // A name that gives no id: the server's words in the dialog, which stays open.
    const refused = await newProject(page, '日本語');
    const error = refused.locator('.dialog-error');
    await error.filter({ hasText: 'a-z, 0-9' }).waitFor({ state: 'visible' });
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, 'project-name-refused-1440.png') });
    await refused.getByRole('button', { name: 'Cancel', exact: true }).click();
    await page.screenshot({ path: path.join(SCREENSHOTS, 'project-names-1440.png') });
    // The refused name's 400 is the one expected resource failure.
    const unexpected = page.problems.filter((p) => !p.includes('status of 400'));
    assert.deepEqual(unexpected, [], problems(page));
  } finally {
    await page.context().close();
  }

  const small = await openApp(browser, server.url, { viewport: { width: 375, height: 800 } });
  try {
    const switcher = small.getByRole('combobox', { name: 'Project', exact: true });
    await switcher.selectOption({ label: 'Q2 Report (q2-report)' });
    await small.screenshot({ path: path.join(SCREENSHOTS, 'project-names-375.png') });
    const box = await switcher.boundingBox();
    assert.ok(box.height >= 40, `the switcher is ${box.height} px high`);
  } finally {
    await small.context().close();
  }
});
