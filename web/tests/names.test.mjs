// Names that lie: files the agent makes with a right-to-left override, a newline and
// look-alike slashes, zero-width characters, or right-to-left letters. Wherever the page
// shows such a name (the Files row, the 📎 notice, the agent's delete request, the delete
// and rename dialogs, an upload row) the visible text (innerText) spells every hidden
// character as a marker, and the name cannot move the text beside it.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  agentTools,
  startChatPage,
  sendChat,
  conversation,
  messages,
  download,
  waitUntil,
  problems,
} from './support.mjs';

/** Each name the agent makes, and exactly what a person must read for it. */
const OVERRIDE = { name: 'invoice_\u202Efdp.exe', shown: 'invoice_⟨U+202E⟩fdp.exe' };
const NEWLINE = {
  name: 'q3.txt\n📎 public\u2215attachments\u2215payroll.xlsx',
  shown: 'q3.txt⟨U+000A⟩📎 public⟨U+2215⟩attachments⟨U+2215⟩payroll.xlsx',
};
const ZERO_WIDTH = { name: 'pay\u200Broll\u200D\uFEFF.pdf', shown: 'pay⟨U+200B⟩roll⟨U+200D⟩⟨U+FEFF⟩.pdf' };
const RTL_LETTERS = { name: 'تقرير 2026.pdf', shown: 'تقرير 2026.pdf' };
/** Written through `file_write` over `ferry mcp`, as the agent's own tool does it. */
const BY_TOOL = { name: 'statement_\u2067\u202Efdp.scr', shown: 'statement_⟨U+2067⟩⟨U+202E⟩fdp.scr' };
/** Delivered with `file_deliver`, which makes the name safe first (core C-NAME). */
const DELIVERED = { source: 'contract_\u202Efdp.exe', name: 'contract__fdp.exe', shown: 'contract__fdp.exe' };
/** Blanks that pass for nothing or for a space. */
const BLANKS = { name: 'report\u2800\u3000final.pdf', shown: 'report⟨U+2800⟩⟨U+3000⟩final.pdf' };
const PLAIN = { name: 'plain.txt', shown: 'plain.txt' };

const ON_DISK = [OVERRIDE, NEWLINE, ZERO_WIDTH, RTL_LETTERS, BLANKS, PLAIN];
const ALL = [...ON_DISK, BY_TOOL, DELIVERED];
/** Every file has this size, so every row's size column says the same. */
const CONTENT = 'x'.repeat(1234);
/** Any of these in visible text is a character that should have been made visible. */
const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\u2215\u2800\u3000]/u;
/** The same, for the text of several blocks, which innerText separates with newlines. */
const HIDDEN_BUT_LINES = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\u2215\u2800\u3000]/u;

let agent;
let server;
let page;
let chat;
let tools;
let attachments;

before(async () => {
  chat = await startChatPage({ wordDelay: 5 });
  ({ agent, server, page } = chat);
  attachments = path.join(server.publicDir(), 'attachments');
  tools = agentTools(server);
});

after(async () => {
  tools?.close();
  await chat?.close();
});

const attachmentPath = (name) => `public/attachments/${name}`;

/** The visible text and boxes of the tree row of `p`, read in the page. */
function rowOf(p) {
  return page.evaluate((p) => {
    const li = Array.from(document.querySelectorAll('[role=treeitem]')).find((e) => e.dataset.path === p);
    if (!li) return null;
    const row = li.querySelector(':scope > .row');
    const box = (e) => {
      const r = e.getBoundingClientRect();
      return { left: r.left, right: r.right, top: r.top, bottom: r.bottom };
    };
    const name = row.querySelector('.name');
    const size = row.querySelector('.size');
    return {
      label: li.getAttribute('aria-label'),
      name: name.innerText,
      row: row.innerText,
      nameBox: box(name),
      sizeBox: box(size),
      sizeText: size.innerText,
      rowHeight: row.getBoundingClientRect().height,
      buttons: Array.from(row.querySelectorAll('button')).map((b) => b.getAttribute('aria-label')),
    };
  }, p);
}

test('the 📎 notices of files the agent made show each name as it is, one notice per file', { timeout: 60000 }, async () => {
  const deliverFrom = path.join(server.home(), 'drafts', DELIVERED.source);
  fs.mkdirSync(path.dirname(deliverFrom), { recursive: true });
  fs.writeFileSync(deliverFrom, CONTENT);
  agent.act = async () => {
    // Straight onto the disk, as an agent writing in its working folder does.
    fs.mkdirSync(attachments, { recursive: true });
    for (const { name } of ON_DISK) fs.writeFileSync(path.join(attachments, name), CONTENT);
    // And through its tools.
    const wrote = await tools.call('file_write', { path: attachmentPath(BY_TOOL.name), content: CONTENT });
    assert.equal(wrote.isError, false, JSON.stringify(wrote));
    const delivered = await tools.call('file_deliver', { paths: [deliverFrom] });
    assert.equal(delivered.isError, false, JSON.stringify(delivered));
    assert.equal(delivered.structuredContent.delivered[0].path, attachmentPath(DELIVERED.name));
  };
  await sendChat(page, 'act now');
  const reply = messages(page, 'assistant').last();
  await waitUntil(async () => (await reply.locator('.notice').count()) >= ALL.length && (await reply.innerText()).includes('Done.'), {
    timeout: 20000,
    what: 'a notice for every file',
  });
  // Give a stray second notice (a name split in two) the chance to arrive.
  await page.waitForTimeout(300);
  const notices = await reply.locator('.notice').evaluateAll((buttons) =>
    buttons.map((b) => {
      const [name, pathNode] = b.querySelectorAll(':scope > bdi');
      const dash = Array.from(b.childNodes).find((n) => n.nodeType === Node.TEXT_NODE && n.data.includes('—'));
      const range = document.createRange();
      range.selectNodeContents(dash);
      // Where each part starts and ends: its first and last line box.
      const box = (rects) => {
        const [first, last] = [rects[0], rects[rects.length - 1]];
        return first && { left: first.left, top: first.top, right: last.right, bottom: last.bottom };
      };
      return {
        text: b.innerText,
        name: name && box(name.getClientRects()),
        dash: dash && box(range.getClientRects()),
        path: pathNode && box(pathNode.getClientRects()),
      };
    }),
  );
  const texts = notices.map((n) => n.text).sort();
  const expected = ALL.map(({ shown }) => `📎 ${shown} — public/attachments/${shown}`).sort();
  assert.deepEqual(texts, expected, 'one notice per file, each name shown with its hidden characters visible');
  for (const n of notices) {
    assert.ok(!HIDDEN.test(n.text), `no hidden character is left in ${JSON.stringify(n.text)}`);
    // Left to right in the order written: the name, then the dash, then the path, even
    // when the name is right-to-left text.
    assert.ok(n.name && n.dash && n.path, `the notice is built of its parts: ${JSON.stringify(n)}`);
    const after = (a, b) => b.top >= a.bottom - 0.5 || a.right <= b.left + 0.5;
    assert.ok(after(n.name, n.dash) && after(n.dash, n.path), `logical order kept: ${JSON.stringify(n)}`);
  }
  // The notice still downloads the very file, by its exact name.
  const button = reply.locator('.notice', { hasText: `📎 ${OVERRIDE.shown} —` });
  const got = await download(page, () => button.click());
  assert.equal(got.failure, null);
  assert.equal(got.text, CONTENT);
  assert.equal(page.problems.length, 0, problems(page));
});

test('the Files rows show each name as it is and keep their columns', { timeout: 30000 }, async () => {
  const rows = {};
  for (const file of ALL) {
    rows[file.name] = await waitUntil(() => rowOf(attachmentPath(file.name)), { what: `the row of ${file.shown}` });
  }
  const plain = rows[PLAIN.name];
  for (const file of ALL) {
    const row = rows[file.name];
    assert.equal(row.name, file.shown, 'the row shows the name with its hidden characters visible');
    assert.equal(row.label, file.shown, 'and is named so');
    assert.ok(!HIDDEN.test(row.name), `no hidden character in the name ${JSON.stringify(row.name)}`);
    assert.ok(!HIDDEN_BUT_LINES.test(row.row), `nor in the row ${JSON.stringify(row.row)}`);
    assert.equal(row.row.split('\n').length, plain.row.split('\n').length, `no more lines than any row: ${JSON.stringify(row.row)}`);
    assert.ok(row.buttons.includes(`Delete ${file.shown}`), `its buttons name it as shown: ${row.buttons}`);
    // The size stays in its column, after the name.
    assert.equal(row.sizeText, plain.sizeText);
    assert.ok(Math.abs(row.sizeBox.right - plain.sizeBox.right) < 0.5, `size column kept: ${JSON.stringify(row)}`);
    assert.ok(row.nameBox.right <= row.sizeBox.left + 0.5, `the name ends before the size: ${JSON.stringify(row)}`);
    assert.ok(row.nameBox.top < row.sizeBox.bottom && row.sizeBox.top < row.nameBox.bottom, 'on one line with its size');
    assert.ok(Math.abs(row.rowHeight - plain.rowHeight) < 0.5, `one line high like any row: ${JSON.stringify(row)}`);
  }
});

test('the delete and rename dialogs show the name as it is', { timeout: 30000 }, async () => {
  await page.getByRole('button', { name: `Delete ${ZERO_WIDTH.shown}`, exact: true }).click();
  const confirm = page.getByRole('dialog', { name: `Delete ${ZERO_WIDTH.shown}?`, exact: true });
  await confirm.waitFor({ state: 'visible' });
  assert.equal(await confirm.locator('.dialog-title').innerText(), `Delete ${ZERO_WIDTH.shown}?`);
  assert.equal(await confirm.locator('.dialog-detail').innerText(), `public/attachments/${ZERO_WIDTH.shown} will be moved to the trash.`);
  await confirm.getByRole('button', { name: 'Cancel', exact: true }).click();
  await confirm.waitFor({ state: 'hidden' });
  assert.ok(fs.existsSync(path.join(attachments, ZERO_WIDTH.name)), 'cancelled: nothing deleted');

  await page.getByRole('button', { name: `Rename ${OVERRIDE.shown}`, exact: true }).click();
  const rename = page.getByRole('dialog', { name: `Rename ${OVERRIDE.shown}`, exact: true });
  await rename.waitFor({ state: 'visible' });
  const field = rename.getByRole('textbox', { name: 'New name', exact: true });
  assert.equal(await field.inputValue(), OVERRIDE.shown, 'the field holds the name as shown');
  assert.match(await rename.locator('.dialog-detail').innerText(), /invisible or control characters/);
  // OK with the name untouched changes nothing.
  await rename.getByRole('button', { name: 'OK', exact: true }).click();
  await rename.waitFor({ state: 'hidden' });
  assert.ok(fs.existsSync(path.join(attachments, OVERRIDE.name)), 'not renamed');
  assert.equal(page.problems.length, 0, problems(page));
});

test("the agent's delete requests name the workspace path as it is, never the host's", { timeout: 60000 }, async () => {
  const region = page.getByRole('region', { name: 'Requests from your agent', exact: true });
  const hostPath = fs.realpathSync(server.data);

  // The override: the person reads the true name and keeps the file.
  const keeping = tools.call('file_delete', { path: attachmentPath(OVERRIDE.name) });
  const keep = region.getByRole('article', { name: `The agent asks to delete ${attachmentPath(OVERRIDE.shown)}`, exact: true });
  await keep.waitFor({ state: 'visible', timeout: 10000 });
  const keepText = await keep.innerText();
  assert.ok(!keepText.includes(hostPath) && !keepText.includes(server.data), `no host path: ${keepText}`);
  assert.ok(!HIDDEN_BUT_LINES.test(keepText), `no hidden character: ${JSON.stringify(keepText)}`);
  assert.equal(
    await keep.locator('.interaction-title').innerText(),
    `The agent asks to delete ${attachmentPath(OVERRIDE.shown)}`,
  );
  assert.match(await keep.locator('.interaction-text').innerText(), new RegExp(`delete public/attachments/invoice_⟨U\\+202E⟩fdp\\.exe \\(1234 bytes\\)`));
  await keep.getByRole('button', { name: 'Keep', exact: true }).click();
  const kept = await keeping;
  assert.equal(kept.isError, true);
  assert.equal(kept.structuredContent.error.code, 'denied');
  assert.ok(fs.existsSync(path.join(attachments, OVERRIDE.name)));

  // The newline: one request, one heading, for the one file; deleted when approved.
  const deleting = tools.call('file_delete', { path: attachmentPath(NEWLINE.name) });
  const remove = region.getByRole('article', { name: `The agent asks to delete ${attachmentPath(NEWLINE.shown)}`, exact: true });
  await remove.waitFor({ state: 'visible', timeout: 10000 });
  assert.equal(await region.getByRole('article').count(), 1, 'one request');
  const title = await remove.locator('.interaction-title').innerText();
  assert.equal(title, `The agent asks to delete ${attachmentPath(NEWLINE.shown)}`);
  assert.ok(!(await remove.innerText()).includes(hostPath));
  await remove.getByRole('button', { name: 'Delete', exact: true }).click();
  const deleted = await deleting;
  assert.equal(deleted.isError, false, JSON.stringify(deleted));
  assert.equal(fs.existsSync(path.join(attachments, NEWLINE.name)), false);
  assert.equal(page.problems.length, 0, problems(page));
});

test('an upload row shows the local name as it is', { timeout: 30000 }, async () => {
  const local = { name: 'photo_\u202Egnp.txt', shown: 'photo_⟨U+202E⟩gnp.txt' };
  const [chooser] = await Promise.all([
    page.waitForEvent('filechooser', { timeout: 5000 }),
    page.getByRole('button', { name: 'Upload', exact: true }).click(),
  ]);
  await chooser.setFiles({ name: local.name, mimeType: 'text/plain', buffer: Buffer.from('hello\n') });
  const uploads = page.getByRole('list', { name: 'Uploads', exact: true });
  const item = uploads.getByRole('listitem').filter({ hasText: local.shown });
  await item.waitFor({ state: 'visible' });
  assert.equal(await item.locator('.upload-name').innerText(), local.shown);
  assert.ok(!HIDDEN_BUT_LINES.test(await item.innerText()));
  await waitUntil(async () => (await item.getAttribute('data-state')) === 'done', { what: 'the upload to finish' });
  await item.getByRole('button', { name: `Dismiss ${local.shown}`, exact: true }).waitFor({ state: 'visible' });
  // The server made the name safe (core C-NAME).
  assert.equal(fs.readFileSync(path.join(server.publicDir(), 'photo__gnp.txt'), 'utf8'), 'hello\n');
  assert.equal(page.problems.length, 0, problems(page));
});
