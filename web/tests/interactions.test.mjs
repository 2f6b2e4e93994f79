// Requests from the agent: a pending approval or file pick shows in the page, and the
// person's answer reaches the request's row.
//
// The agent tool that asks is played by writing the request into the site's metadata
// database with the `sqlite3` command, as a tool in another process does through the same
// database; the page learns of it from the gateway alone.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { agentTools, startFerry, launchBrowser, openApp, waitUntil, problems } from './support.mjs';

const SQLITE = process.env.FERRY_TEST_SQLITE || 'sqlite3';
try {
  execFileSync(SQLITE, ['-version'], { stdio: 'ignore' });
} catch (e) {
  throw new Error(
    `\`${SQLITE}\` does not run (${e.message}): these tests play the agent's tool by writing its ` +
      'request into the site database. `apt-get install -y --no-install-recommends sqlite3`, or set FERRY_TEST_SQLITE.',
  );
}

/** How long a request may take to show: the gateway polls every 400 ms. */
const SHOW_BOUND_MS = 5000;
/** How long a request stays answerable in these tests. */
const REQUEST_TTL_MS = 10 * 60 * 1000;
const REGION = 'Requests from your agent';

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

// ---------------------------------------------------------------------------------------
// The requester

/** Runs one SQL statement on the site database; resolves with its output. */
function sql(statement) {
  const db = path.join(server.data, '.ferry', 'site.db');
  return new Promise((resolve, reject) => {
    execFile(SQLITE, ['-cmd', '.timeout 5000', db, statement], { timeout: 15000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`sqlite3 failed: ${err.message}\n${stderr}`));
      else resolve(stdout.trim());
    });
  });
}

const quote = (s) => `'${String(s).replace(/'/g, "''")}'`;

/** A fresh request id of the shape the site makes: prefix + 16 base32 characters. */
function newId(prefix) {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  return prefix + Array.from(crypto.randomBytes(16), (b) => alphabet[b % 32]).join('');
}

async function requestApproval({ subject, summary = '', tool = 'file_delete' }) {
  const id = newId('ap_');
  const now = Date.now();
  await sql(
    'INSERT INTO interactions (id, person, kind, state, tool, subject, summary, created_ms, expires_ms) ' +
      `VALUES (${quote(id)}, 'me', 'approval', 'pending', ${quote(tool)}, ${quote(subject)}, ${quote(summary)}, ${now}, ${now + REQUEST_TTL_MS})`,
  );
  return id;
}

async function requestPick(prompt) {
  const id = newId('pk_');
  const now = Date.now();
  // A pick's link expires on a whole second, as the site makes them.
  const expires = Math.floor((now + REQUEST_TTL_MS) / 1000) * 1000;
  await sql(
    'INSERT INTO interactions (id, person, kind, state, prompt, created_ms, expires_ms) ' +
      `VALUES (${quote(id)}, 'me', 'pick', 'pending', ${quote(prompt)}, ${now}, ${expires})`,
  );
  return id;
}

const stateOf = (id) => sql(`SELECT state FROM interactions WHERE id = ${quote(id)}`);

async function expectState(id, want) {
  await waitUntil(async () => (await stateOf(id)) === want, { timeout: 5000, what: `${id} to be ${want}` });
}

// ---------------------------------------------------------------------------------------
// The page

const region = (page) => page.getByRole('region', { name: REGION, exact: true });
const request = (page, name) => region(page).getByRole('article', { name, exact: true });

/** Opens the app and waits until its event stream is connected. */
async function openPage(options) {
  const opened = Date.now();
  const page = await openApp(browser, server.url, options);
  // Connected once the gateway sees the page: it records the person's presence then.
  const seen = () => sql(`SELECT COUNT(*) FROM web_presence WHERE person = 'me' AND seen_ms >= ${opened}`);
  await waitUntil(async () => Number(await seen()) > 0, { timeout: 5000, what: 'the page to be seen by the gateway' });
  return page;
}

test('a pending approval appears; Keep denies it', { timeout: 30000 }, async () => {
  const page = await openPage();
  try {
    assert.equal(await region(page).isVisible(), false, 'no requests, no region');
    const id = await requestApproval({ subject: 'notes/old.txt', summary: 'It is an outdated draft.' });
    const item = request(page, 'The agent asks to delete notes/old.txt');
    await item.waitFor({ state: 'visible', timeout: SHOW_BOUND_MS });
    assert.ok(await item.getByText('It is an outdated draft.').isVisible());
    await item.getByRole('button', { name: 'Keep', exact: true }).click();
    await item.waitFor({ state: 'detached', timeout: 5000 });
    await expectState(id, 'denied');
    assert.equal(await region(page).isVisible(), false, 'the region goes with its last request');
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('Delete approves it', { timeout: 30000 }, async () => {
  const page = await openPage();
  try {
    const id = await requestApproval({ subject: 'report-draft.pdf' });
    const item = request(page, 'The agent asks to delete report-draft.pdf');
    await item.waitFor({ state: 'visible', timeout: SHOW_BOUND_MS });
    await item.getByRole('button', { name: 'Delete', exact: true }).click();
    await item.waitFor({ state: 'detached', timeout: 5000 });
    await expectState(id, 'approved');
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('a pick appears; choosing a file uploads it and the request disappears', { timeout: 30000 }, async () => {
  const page = await openPage();
  try {
    const id = await requestPick('Pick the signed contract, please.');
    const item = request(page, 'The agent asks for a file');
    await item.waitFor({ state: 'visible', timeout: SHOW_BOUND_MS });
    assert.ok(await item.getByText('Pick the signed contract, please.').isVisible());
    const content = `the contract ${'.'.repeat(200_000)}\n`;
    const [chooser] = await Promise.all([
      page.waitForEvent('filechooser', { timeout: 5000 }),
      item.getByRole('button', { name: 'Upload file', exact: true }).click(),
    ]);
    await chooser.setFiles({ name: 'contract (signed).pdf', mimeType: 'application/pdf', buffer: Buffer.from(content) });
    await item.waitFor({ state: 'detached', timeout: 10000 });
    await expectState(id, 'arrived');
    const stored = path.join(server.data, 'private', 'people', 'me', 'tmp', 'picks', id, 'contract_signed_.pdf');
    assert.equal(fs.readFileSync(stored, 'utf8'), content);
    await waitUntil(async () => (await page.getByRole('status').textContent()).includes('Sent contract_signed_.pdf'), {
      what: 'the page to say the file was sent',
    });
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('a pick can be declined with Cancel', { timeout: 30000 }, async () => {
  const page = await openPage();
  try {
    const id = await requestPick('Any photo of the whiteboard.');
    const item = request(page, 'The agent asks for a file');
    await item.waitFor({ state: 'visible', timeout: SHOW_BOUND_MS });
    await item.getByRole('button', { name: 'Cancel', exact: true }).click();
    await item.waitFor({ state: 'detached', timeout: 5000 });
    await expectState(id, 'cancelled');
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('at 375 px a request made before the page opened fits and is answered by keyboard', { timeout: 30000 }, async () => {
  const subject = 'projects/q2/very-long-folder-name-for-the-quarterly-numbers/old-export.csv';
  const id = await requestApproval({ subject, summary: 'Superseded by the new export.' });
  const page = await openPage({ viewport: { width: 375, height: 812 } });
  try {
    const item = request(page, `The agent asks to delete ${subject}`);
    await item.waitFor({ state: 'visible', timeout: SHOW_BOUND_MS });
    const widths = await page.evaluate(() => ({
      doc: document.documentElement.scrollWidth,
      body: document.body.scrollWidth,
    }));
    assert.ok(widths.doc <= 375 && widths.body <= 375, `no horizontal scroll: ${JSON.stringify(widths)}`);
    const box = await item.boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= 375.5, `the request fits: ${JSON.stringify(box)}`);
    const remove = item.getByRole('button', { name: 'Delete', exact: true });
    let focused = false;
    for (let i = 0; i < 40 && !focused; i++) {
      await page.keyboard.press('Tab');
      focused = await remove.evaluate((el) => el === document.activeElement);
    }
    assert.ok(focused, 'Tab reaches the Delete button');
    await page.keyboard.press('Enter');
    await item.waitFor({ state: 'detached', timeout: 5000 });
    await expectState(id, 'approved');
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

// ---------------------------------------------------------------------------------------
// The whole chain: the agent's own tools, over MCP, ask the person through this page.

test('the agent deletes and asks for a file through its tools; the person answers on the page', { timeout: 60000 }, async () => {
  const home = path.join(server.data, 'home', 'me');
  fs.writeFileSync(path.join(home, 'draft-v1.txt'), 'old draft\n');
  fs.writeFileSync(path.join(home, 'keep-me.txt'), 'still needed\n');
  const page = await openPage();
  const agent = agentTools(server);
  try {
    // Approved on the page: the file goes.
    const deleting = agent.call('file_delete', { path: 'draft-v1.txt' });
    const approve = request(page, 'The agent asks to delete draft-v1.txt');
    await approve.waitFor({ state: 'visible', timeout: SHOW_BOUND_MS });
    await approve.getByRole('button', { name: 'Delete', exact: true }).click();
    const deleted = await deleting;
    assert.equal(deleted.isError, false, JSON.stringify(deleted));
    assert.equal(fs.existsSync(path.join(home, 'draft-v1.txt')), false);

    // Kept on the page: nothing is deleted and the agent is told.
    const refusing = agent.call('file_delete', { path: 'keep-me.txt' });
    const keep = request(page, 'The agent asks to delete keep-me.txt');
    await keep.waitFor({ state: 'visible', timeout: SHOW_BOUND_MS });
    await keep.getByRole('button', { name: 'Keep', exact: true }).click();
    const refused = await refusing;
    assert.equal(refused.isError, true);
    assert.equal(refused.structuredContent.error.code, 'denied');
    assert.equal(fs.readFileSync(path.join(home, 'keep-me.txt'), 'utf8'), 'still needed\n');

    // A pick: the person chooses a file; the agent gets a workspace path and its expiry.
    const picking = agent.call('file_pick', { prompt: 'The Q3 figures, please.' });
    const pick = request(page, 'The agent asks for a file');
    await pick.waitFor({ state: 'visible', timeout: SHOW_BOUND_MS });
    assert.ok(await pick.getByText('The Q3 figures, please.').isVisible());
    const [chooser] = await Promise.all([
      page.waitForEvent('filechooser', { timeout: 5000 }),
      pick.getByRole('button', { name: 'Upload file', exact: true }).click(),
    ]);
    await chooser.setFiles({ name: 'Q3 figures.csv', mimeType: 'text/csv', buffer: Buffer.from('q,v\n3,42\n') });
    const picked = await picking;
    assert.equal(picked.isError, false, JSON.stringify(picked));
    const where = picked.structuredContent.path;
    assert.ok(where.startsWith(fs.realpathSync(path.join(server.data, 'private', 'people', 'me', 'tmp', 'picks'))), where);
    assert.ok(where.endsWith('/Q3_figures.csv'), where);
    assert.equal(fs.readFileSync(where, 'utf8'), 'q,v\n3,42\n');
    assert.ok(Date.parse(picked.structuredContent.expires) > Date.now());
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    agent.close();
    await page.context().close();
  }
});
