// (e) Chat against the scripted agent: a streamed reply; a file the agent writes itself and
// a file it delivers each show as a 📎 notice under the reply that downloads the file;
// attachments in the composer are uploaded first and their paths sent with the message;
// after a reload the history has the agent's words without the notices, and the files
// are in the tree.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  startChatPage,
  entry,
  download,
  artifact,
  sendChat,
  conversation,
  messages,
  chatRegion,
  recordAssistantStates,
  waitUntil,
  problems,
} from './support.mjs';

let agent;
let server;
let page;
let chat;

before(async () => {
  chat = await startChatPage({ wordDelay: 60 });
  ({ agent, server, page } = chat);
});

after(async () => {
  await chat?.close();
});

const notice = (name) => `📎 ${name} — public/attachments/${name}`;

/** Waits until the last assistant message contains `text`. */
async function replyContains(text, timeout = 10000) {
  await waitUntil(
    async () => {
      const all = messages(page, 'assistant');
      const n = await all.count();
      return n > 0 && (await all.nth(n - 1).innerText()).includes(text);
    },
    { timeout, what: `the reply to contain ${JSON.stringify(text)}` },
  );
}

test('a message gets a streamed reply', { timeout: 30000 }, async (t) => {
  const rec = await recordAssistantStates(page);
  const before = agent.requests.length;
  await sendChat(page, 'hello there');
  await messages(page, 'user').filter({ hasText: 'hello there' }).waitFor({ state: 'visible' });
  const final = 'Hello from the scripted agent. You said: hello there';
  await replyContains(final);
  const states = (await rec.states()).filter((s) => s.trim() && !s.includes(final));
  t.diagnostic(`${states.length} intermediate states of the reply seen`);
  assert.ok(
    states.length >= 2,
    `at least two intermediate states of the reply were shown: ${JSON.stringify(states)}`,
  );
  // The composer is cleared for the next message.
  assert.equal(await page.getByRole('textbox', { name: 'Message', exact: true }).inputValue(), '');

  // The gateway relayed with the workspace's harness token, not the person's.
  assert.equal(agent.requests.length, before + 1);
  const req = agent.requests[before];
  assert.match(req.headers.authorization || '', /^Bearer \S+$/, 'the upstream gets a bearer token');
  assert.notEqual(req.headers.authorization, `Bearer ${server.token}`, "not the person's own token");
  assert.equal(req.body.stream, true);
  assert.ok(agent.lastUserText(before).includes('hello there'), `the agent got the message: ${req.raw}`);
  assert.equal(page.problems.length, 0, problems(page));
});

test('a file the agent writes itself shows as a notice that downloads it', { timeout: 30000 }, async () => {
  await sendChat(page, 'please write report-w.txt');
  const button = conversation(page).getByRole('button', { name: notice('report-w.txt'), exact: true });
  await button.waitFor({ state: 'visible', timeout: 15000 });
  await replyContains('Saved the note to public/attachments/report-w.txt.');
  // Under the reply: below the start of the last assistant message.
  const n = await messages(page, 'assistant').count();
  const replyBox = await messages(page, 'assistant').nth(n - 1).boundingBox();
  const buttonBox = await button.boundingBox();
  assert.ok(buttonBox.y >= replyBox.y, 'the notice is under the reply');
  assert.equal(await button.count(), 1, 'one notice for the file');

  const got = await download(page, () => button.click());
  assert.equal(got.failure, null);
  assert.equal(got.name, 'report-w.txt');
  assert.equal(got.text, 'written by the agent: report-w.txt\n');
});

test('a file the agent delivers shows as a notice that downloads it', { timeout: 30000 }, async () => {
  await sendChat(page, 'please deliver delivered-e.txt');
  const button = conversation(page).getByRole('button', { name: notice('delivered-e.txt'), exact: true });
  await button.waitFor({ state: 'visible', timeout: 15000 });
  await replyContains('Delivered public/attachments/delivered-e.txt.');
  const last = agent.deliveries[agent.deliveries.length - 1];
  assert.equal(last.status, 201, `the harness token the gateway passed delivers: ${last.body}`);
  const got = await download(page, () => button.click());
  assert.equal(got.name, 'delivered-e.txt');
  assert.equal(got.text, 'delivered by the agent: delivered-e.txt\n');
  await page.screenshot({ path: artifact('chat.png'), fullPage: true });
});

test('attached files are uploaded first and their paths sent with the message', { timeout: 30000 }, async () => {
  // Order of events on the wire: the upload must be answered before the message goes.
  const wire = [];
  const onResponse = (r) => new URL(r.url()).pathname === '/v1/media' && wire.push(`media ${r.status()}`);
  const onRequest = (r) => new URL(r.url()).pathname === '/v1/chat' && wire.push('chat');
  page.on('response', onResponse);
  page.on('request', onRequest);
  const [chooser] = await Promise.all([
    page.waitForEvent('filechooser', { timeout: 5000 }),
    page.getByRole('button', { name: 'Attach files', exact: true }).click(),
  ]);
  assert.ok(chooser.isMultiple(), 'the composer takes several files');
  await chooser.setFiles([
    { name: 'brief.txt', mimeType: 'text/plain', buffer: Buffer.from('the brief\n') },
    { name: 'extra.txt', mimeType: 'text/plain', buffer: Buffer.from('not needed\n') },
  ]);
  const chat = chatRegion(page);
  await chat.getByText('brief.txt').first().waitFor({ state: 'visible' });
  await chat.getByText('extra.txt').first().waitFor({ state: 'visible' });
  // Chips are removable.
  await chat.getByRole('button', { name: /remove.*extra\.txt|extra\.txt.*remove/i }).click();
  await waitUntil(async () => (await chat.getByText('extra.txt').count()) === 0, {
    timeout: 3000,
    what: 'the extra.txt chip to go',
  });

  const before = agent.requests.length;
  const chatRequest = page.waitForRequest((r) => r.method() === 'POST' && new URL(r.url()).pathname === '/v1/chat');
  await sendChat(page, 'summarize the attachment');
  const sent = (await chatRequest).postDataJSON();
  page.off('response', onResponse);
  page.off('request', onRequest);
  const mediaDone = wire.indexOf('media 201');
  assert.ok(
    mediaDone >= 0 && mediaDone < wire.indexOf('chat'),
    `the attachment is uploaded (201) before the message is sent: ${wire.join(', ')}`,
  );
  assert.deepEqual(sent.attachments, ['public/brief.txt'], `sent: ${JSON.stringify(sent)}`);
  assert.equal(fs.readFileSync(path.join(server.publicDir('me'), 'brief.txt'), 'utf8'), 'the brief\n');
  await waitUntil(() => agent.requests.length > before, { timeout: 10000, what: 'the agent to be asked' });
  const said = agent.lastUserText(before);
  assert.ok(said.includes('summarize the attachment'), said);
  assert.ok(said.includes('public/brief.txt'), `the agent is told the path: ${JSON.stringify(said)}`);
  assert.ok(!said.includes('extra.txt'), 'a removed chip is not sent');
  await replyContains('You said: summarize the attachment');
  await entry(page, 'public/brief.txt').waitFor({ state: 'attached' });
});

test("markup in the agent's reply shows as text", { timeout: 30000 }, async () => {
  await sendChat(page, 'reply with html please');
  await replyContains('<b>bold</b>');
  await page.waitForTimeout(200);
  assert.equal(await page.evaluate(() => window.__xssChat), undefined);
  assert.equal(await conversation(page).locator('img, b').count(), 0, 'no element made from the reply');
});

test('after a reload: the words stay, the notices go, the files are in the tree', { timeout: 30000 }, async () => {
  await page.reload();
  await conversation(page).waitFor({ state: 'visible' });
  await waitUntil(async () => (await messages(page, 'assistant').count()) >= 5, {
    timeout: 10000,
    what: 'the history to load',
  });
  const log = conversation(page);
  const text = await log.innerText();
  assert.ok(text.includes('hello there'));
  assert.ok(text.includes('Saved the note to public/attachments/report-w.txt.'), text);
  assert.ok(text.includes('Delivered public/attachments/delivered-e.txt.'), text);
  assert.ok(!text.includes('📎'), `no notice after a reload: ${text}`);
  assert.equal(await log.getByRole('button', { name: /^📎/ }).count(), 0);

  await entry(page, 'public/attachments/report-w.txt').waitFor({ state: 'attached' });
  await entry(page, 'public/attachments/delivered-e.txt').waitFor({ state: 'attached' });

  const history = await server.api('/v1/chat/history');
  assert.equal(history.status, 200, history.text);
  const saved = history.json.messages;
  assert.ok(!JSON.stringify(saved).includes('📎'), 'the saved conversation holds no notice');
  const withAttachment = saved.find((m) => m.role === 'user' && m.text.includes('summarize the attachment'));
  assert.deepEqual(withAttachment?.attachments, ['public/brief.txt']);
  for (const m of saved) {
    assert.ok(['user', 'assistant'].includes(m.role), JSON.stringify(m));
    assert.ok(!Number.isNaN(Date.parse(m.time)), `RFC 3339 time: ${JSON.stringify(m)}`);
  }
});
