// (f) No upstream configured: the chat shows the no_agent message and the Files panel still
// works. An upstream that fails (500) or drops mid-reply shows an error alert in the chat.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAgent } from './agent.mjs';
import { startFerry, launchBrowser, openApp, entry, sendChat, chatRegion, messages } from './support.mjs';

let bare;
let agent;
let withAgent;
let browser;

before(async () => {
  bare = await startFerry();
  agent = await startAgent({ wordDelay: 20 });
  withAgent = await startFerry({ env: { FERRY_AGENT__UPSTREAM: agent.url } });
  agent.data = withAgent.data;
  agent.gateway = withAgent.base;
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await agent?.close();
  await bare?.stop();
  await withAgent?.stop();
});

test('no upstream: the no_agent message, and the Files panel still works', { timeout: 30000 }, async () => {
  const direct = await bare.api('/v1/chat', { json: { message: 'hi' } });
  assert.equal(direct.status, 503, direct.text);
  assert.equal(direct.json?.error?.code, 'no_agent');
  const message = direct.json.error.message;
  assert.match(message, /upstream/i, 'the message says which setting to make');

  const page = await openApp(browser, bare.url);
  try {
    await sendChat(page, 'is anyone there?');
    const alert = chatRegion(page).getByRole('alert');
    await alert.waitFor({ state: 'visible' });
    assert.ok((await alert.innerText()).includes(message), `shows ${JSON.stringify(message)}: ${await alert.innerText()}`);

    await page
      .getByLabel('Files to upload', { exact: true })
      .setInputFiles({ name: 'still-works.txt', mimeType: 'text/plain', buffer: Buffer.from('ok\n') });
    await entry(page, 'public/still-works.txt').waitFor({ state: 'visible' });
    await page.getByRole('button', { name: 'New folder', exact: true }).waitFor({ state: 'visible' });
  } finally {
    await page.context().close();
  }
});

for (const [what, say] of [
  ['an upstream that answers 500', 'please fail now'],
  ['an upstream that drops the connection mid-reply', 'please drop now'],
]) {
  test(`${what} shows an error alert in the chat`, { timeout: 30000 }, async () => {
    const page = await openApp(browser, withAgent.url);
    try {
      const alert = chatRegion(page).getByRole('alert');
      assert.equal(await alert.count(), 0, 'no alert before');
      await sendChat(page, say);
      await messages(page, 'user').filter({ hasText: say }).waitFor({ state: 'visible' });
      await alert.first().waitFor({ state: 'visible', timeout: 10000 });
      assert.ok((await alert.first().innerText()).trim().length > 0, 'the alert says something');
      // The composer is usable again.
      const box = page.getByRole('textbox', { name: 'Message', exact: true });
      await box.fill('again');
      assert.ok(await page.getByRole('button', { name: 'Send', exact: true }).isEnabled(), 'Send works again');
    } finally {
      await page.context().close();
    }
  });
}
