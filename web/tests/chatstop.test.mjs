// (e2) Chat as people expect, against the scripted agent: Stop ends a reply that would go
// on forever, the gateway closes the agent's connection at once, and the words that came
// stay (on the page and, after a reload, in the history); a long conversation loads its
// last turns first and the earlier ones on request.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startChatPage,
  sendChat,
  conversation,
  messages,
  chatRegion,
  waitUntil,
  problems,
} from './support.mjs';

let agent;
let server;
let page;
let chat;

before(async () => {
  chat = await startChatPage({ wordDelay: 0 });
  ({ agent, server, page } = chat);
});

after(async () => {
  await chat?.close();
});

const button = (name) => chatRegion(page).getByRole('button', { name, exact: true });

/** Every message of the saved conversation, oldest first, read page by page. */
async function savedConversation() {
  const all = [];
  let before = null;
  for (;;) {
    const r = await server.api(`/v1/chat/history${before === null ? '' : `?before=${before}`}`);
    assert.equal(r.status, 200, r.text);
    all.unshift(...r.json.messages);
    if (r.json.earlier === null) return all;
    before = r.json.earlier;
  }
}

test('Stop ends the reply, the agent is hung up on, and the words that came stay', { timeout: 30000 }, async () => {
  const asked = agent.requests.length;
  await sendChat(page, 'talk forever');
  const reply = messages(page, 'assistant').last();
  await waitUntil(async () => (await reply.innerText()).includes('w3 '), { timeout: 10000, what: 'a few words' });
  await button('Stop').waitFor({ state: 'visible' });
  assert.equal(await button('Send').isDisabled(), true, 'Send waits while the reply streams');

  await button('Stop').click();
  const stoppedAt = Date.now();
  const record = agent.requests[asked];
  await waitUntil(() => record.closedAt !== undefined, { timeout: 5000, what: 'the gateway to hang up on the agent' });
  assert.ok(record.closedAt - stoppedAt < 2000, `hung up ${record.closedAt - stoppedAt} ms after Stop`);

  await reply.getByText('Stopped.', { exact: true }).waitFor({ state: 'visible' });
  assert.equal(await button('Stop').isHidden(), true, 'Stop goes with the stream');
  assert.equal(await button('Send').isEnabled(), true, 'the composer is free again');
  const shown = (await reply.innerText()).replace('Stopped.', '').trim();
  assert.match(shown, /^w0 w1 w2 w3\b/, shown);
  assert.equal(await reply.getByRole('alert').count(), 0, 'a stop is no error');

  // Saved as far as it came: a prefix of what the page showed, or all of it.
  let saved;
  await waitUntil(
    async () => {
      saved = (await savedConversation()).at(-1);
      return saved?.role === 'assistant';
    },
    { timeout: 5000, what: 'the partial reply to be saved' },
  );
  assert.match(saved.text, /^w0 w1 w2 w3\b/, saved.text);
  assert.ok(shown.startsWith(saved.text.trim()) || saved.text.startsWith(shown), `${saved.text} / ${shown}`);

  // The next message is answered as usual.
  await sendChat(page, 'hello after stop');
  const last = () => messages(page, 'assistant').last().innerText();
  await waitUntil(async () => (await last()).includes('You said: hello after stop'), {
    timeout: 10000,
    what: 'the next reply',
  });
  assert.equal(page.problems.length, 0, problems(page));
});

test('a long conversation shows its last turns first and the earlier ones on request', { timeout: 60000 }, async () => {
  // More than a page (50 messages) of quick turns.
  for (let i = 0; i < 30; i++) {
    const r = await server.api('/v1/chat', { json: { message: `bench 1 turn ${i}` } });
    assert.equal(r.status, 200, r.text);
  }
  const saved = await savedConversation();
  assert.ok(saved.length > 60, `${saved.length} messages saved`);

  await page.reload();
  await conversation(page).waitFor({ state: 'visible' });
  const shownTexts = async () =>
    (await conversation(page).locator('article .message-text').allInnerTexts()).map((t) => t.trim());
  await waitUntil(async () => (await shownTexts()).length === 50, { timeout: 10000, what: 'the newest page' });
  const newest = await shownTexts();
  assert.deepEqual(newest, saved.slice(-50).map((m) => m.text.trim()), 'the newest 50, oldest of them first');
  // The end of the conversation is in view.
  const atEnd = await conversation(page).evaluate(
    (log) => log.scrollHeight - log.scrollTop - log.clientHeight < 48,
  );
  assert.ok(atEnd, 'scrolled to the last turn');

  const earlier = conversation(page).getByRole('button', { name: 'Load earlier messages', exact: true });
  await earlier.click();
  await waitUntil(async () => (await shownTexts()).length === saved.length, { timeout: 10000, what: 'the older page' });
  assert.deepEqual(await shownTexts(), saved.map((m) => m.text.trim()), 'the whole conversation, in order');
  assert.equal(await earlier.count(), 0, 'nothing older to load');
  assert.equal(page.problems.length, 0, problems(page));
});
