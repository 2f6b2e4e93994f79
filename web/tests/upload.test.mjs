// (b) Uploads by the button and by drag-and-drop, each with a progress bar; the server's
// message for a 413 and a 400 next to the file; click-to-download; into a chosen project.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  startFerry,
  launchBrowser,
  openApp,
  entry,
  download,
  waitUntil,
  problems,
} from './support.mjs';

const CAP = 1000;
let server;
let browser;

before(async () => {
  server = await startFerry({ env: { FERRY_MEDIA__MAX_UPLOAD_BYTES: String(CAP) } });
  browser = await launchBrowser();
  const created = await server.api('/v1/projects', { json: { id: 'proj-b' } });
  assert.equal(created.status, 201, created.text);
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const uploads = (page) => page.getByRole('list', { name: 'Uploads', exact: true });
const uploadItem = (page, name) => uploads(page).getByRole('listitem').filter({ hasText: name });

/** The fraction a progress bar shows (native <progress> or aria-valuenow). */
async function progressOf(bar) {
  return bar.evaluate((el) => {
    if (el.tagName === 'PROGRESS') return el.max ? el.value / el.max : 0;
    const now = Number(el.getAttribute('aria-valuenow'));
    const max = Number(el.getAttribute('aria-valuemax') || 100);
    return max ? now / max : 0;
  });
}

async function expectUploaded(page, name, content) {
  const item = uploadItem(page, name);
  await item.waitFor({ state: 'visible' });
  const bar = item.getByRole('progressbar');
  assert.ok((await bar.count()) >= 1, `a progress bar for ${name}`);
  await waitUntil(async () => (await bar.count()) === 0 || (await progressOf(bar.first())) >= 0.999, {
    timeout: 5000,
    what: `the progress bar of ${name} to reach 100 %`,
  });
  await entry(page, `public/${name}`).waitFor({ state: 'visible' });
  assert.equal(fs.readFileSync(path.join(server.publicDir('me'), name), 'utf8'), content);
  assert.equal(await item.getByRole('alert').count(), 0, `no error shown for ${name}`);
}

test('upload by the Upload button, then click to download', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const content = 'hello from the button\n';
    const [chooser] = await Promise.all([
      page.waitForEvent('filechooser', { timeout: 5000 }),
      page.getByRole('button', { name: 'Upload', exact: true }).click(),
    ]);
    await chooser.setFiles({ name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
    await expectUploaded(page, 'hello.txt', content);

    const got = await download(page, () =>
      page.getByRole('button', { name: 'Download hello.txt', exact: true }).click(),
    );
    assert.equal(got.failure, null);
    assert.equal(got.name, 'hello.txt');
    assert.equal(got.text, content);
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('upload through the labelled file input', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const content = 'from the input\n';
    await page
      .getByLabel('Files to upload', { exact: true })
      .setInputFiles({ name: 'input.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
    await expectUploaded(page, 'input.txt', content);
  } finally {
    await page.context().close();
  }
});

test('upload by dropping a file onto the Files region', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const content = 'dropped onto the panel\n';
    const dataTransfer = await page.evaluateHandle((content) => {
      const dt = new DataTransfer();
      dt.items.add(new File([content], 'dropped.txt', { type: 'text/plain' }));
      return dt;
    }, content);
    const region = page.getByRole('region', { name: 'Files', exact: true });
    await region.dispatchEvent('dragenter', { dataTransfer });
    await region.dispatchEvent('dragover', { dataTransfer });
    await region.dispatchEvent('drop', { dataTransfer });
    await expectUploaded(page, 'dropped.txt', content);
  } finally {
    await page.context().close();
  }
});

test("a 413 and a 400 show the server's message next to the file", { timeout: 30000 }, async () => {
  const big = Buffer.from('y'.repeat(CAP * 5));
  const exe = Buffer.from('MZ not really\n');
  const page = await openApp(browser, server.url);
  try {
    const input = page.getByLabel('Files to upload', { exact: true });
    // The server's own words, as the page received them.
    const answer = (status) =>
      page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/media' && r.status() === status, {
        timeout: 10000,
      });

    const tooLargeAnswer = answer(413);
    await input.setInputFiles({ name: 'big.txt', mimeType: 'text/plain', buffer: big });
    const tooLarge = await (await tooLargeAnswer).json();
    assert.equal(tooLarge.error.code, 'too_large');
    const bigAlert = uploadItem(page, 'big.txt').getByRole('alert');
    await bigAlert.waitFor({ state: 'visible' });
    assert.ok(
      (await bigAlert.innerText()).includes(tooLarge.error.message),
      `the 413 message ${JSON.stringify(tooLarge.error.message)} is shown: ${await bigAlert.innerText()}`,
    );

    const badExtAnswer = answer(400);
    await input.setInputFiles({ name: 'x.exe', mimeType: 'application/octet-stream', buffer: exe });
    const badExt = await (await badExtAnswer).json();
    assert.equal(badExt.error.code, 'extension_not_allowed');
    const exeAlert = uploadItem(page, 'x.exe').getByRole('alert');
    await exeAlert.waitFor({ state: 'visible' });
    assert.ok(
      (await exeAlert.innerText()).includes(badExt.error.message),
      `the 400 message ${JSON.stringify(badExt.error.message)} is shown: ${await exeAlert.innerText()}`,
    );
    // The first error stays next to its own file.
    assert.ok((await bigAlert.innerText()).includes(tooLarge.error.message));

    assert.equal(await entry(page, 'public/big.txt').count(), 0);
    assert.equal(await entry(page, 'public/x.exe').count(), 0);
    assert.ok(!fs.existsSync(path.join(server.publicDir('me'), 'big.txt')));
  } finally {
    await page.context().close();
  }
});

test('upload into a chosen project', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    await page.getByRole('combobox', { name: 'Project', exact: true }).selectOption({ label: 'proj-b' });
    await entry(page, 'public/attachments').waitFor({ state: 'visible' });
    const content = 'for the project\n';
    await page
      .getByLabel('Files to upload', { exact: true })
      .setInputFiles({ name: 'inproj.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
    await entry(page, 'public/inproj.txt').waitFor({ state: 'visible' });
    assert.equal(fs.readFileSync(path.join(server.publicDir('me', 'proj-b'), 'inproj.txt'), 'utf8'), content);
    assert.ok(!fs.existsSync(path.join(server.publicDir('me'), 'inproj.txt')), 'not in the main workspace');
  } finally {
    await page.context().close();
  }
});

test('a name already there is replaced only when the person says so; a changed name is said', { timeout: 60000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const input = page.getByLabel('Files to upload', { exact: true });
    const send = (content) =>
      input.setInputFiles({ name: 'twice.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
    await send('the first\n');
    await expectUploaded(page, 'twice.txt', 'the first\n');
    const onDisk = () => fs.readFileSync(path.join(server.publicDir('me'), 'twice.txt'), 'utf8');

    // Kept: the question names the file, the old one stays.
    await send('the second\n');
    const question = page.getByRole('dialog', { name: 'Replace twice.txt?' });
    await question.waitFor({ state: 'visible', timeout: 10000 });
    assert.match(await question.innerText(), /public\/twice\.txt is already there \(10 B/);
    await question.getByRole('button', { name: 'Keep', exact: true }).click();
    await uploadItem(page, 'twice.txt').getByText('Kept the old one').waitFor({ timeout: 10000 });
    assert.equal(onDisk(), 'the first\n');

    // Replaced, when the person says so.
    await send('the third\n');
    await question.waitFor({ state: 'visible', timeout: 10000 });
    await question.getByRole('button', { name: 'Replace', exact: true }).click();
    await waitUntil(async () => onDisk() === 'the third\n', { timeout: 10000, what: 'the replaced file' });
    await uploadItem(page, 'twice.txt').getByText('Uploaded').waitFor({ timeout: 10000 });

    // A name C-NAME had to change: the page says under which one it was saved.
    await input.setInputFiles({ name: 'what?.txt', mimeType: 'text/plain', buffer: Buffer.from('q') });
    const note = uploadItem(page, 'what?.txt').getByRole('status');
    await note.waitFor({ timeout: 10000 });
    assert.match(await note.innerText(), /^Saved as what_\.txt/);
    // The two 409s that asked are answers the page expected; nothing else went wrong.
    const others = page.problems.filter((p) => !/status of 409 \(Conflict\)$/.test(p));
    assert.equal(others.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});
