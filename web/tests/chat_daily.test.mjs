// M-DAILY "Chat as people expect": a reply's Markdown is rendered (bold, code, a list, a
// table, a code block) while nothing hostile in it runs, injects or navigates; it
// streams in (rendered again as it grows); "New conversation" empties the panel and the
// agent no longer sees the old messages; an agent that is down reads "The agent is not
// answering", never a transport error. Screenshots at 1440 and 375 px.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAgent, lastUser } from './agent.mjs';
import {
  startFerry,
  launchBrowser,
  openApp,
  sendChat,
  chatRegion,
  messages,
  conversation,
  recordAssistantStates,
  waitUntil,
  problems,
} from './support.mjs';

const SCREENSHOTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'screenshots');
let agent;
let server;
let down;
let browser;

before(async () => {
  agent = await startAgent({ wordDelay: 5 });
  server = await startFerry({ env: { FERRY_AGENT__UPSTREAM: agent.url } });
  agent.data = server.data;
  agent.gateway = server.base;
  // An upstream where nothing listens.
  const closed = await startAgent();
  const deadUrl = closed.url;
  await closed.close();
  down = await startFerry({ env: { FERRY_AGENT__UPSTREAM: deadUrl } });
  browser = await launchBrowser();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await agent?.close();
  await server?.stop();
  await down?.stop();
});

/** Every window.__xss… flag the hostile reply tries to set. */
const flags = (page) =>
  page.evaluate(() => Object.keys(window).filter((k) => k.startsWith('__xss')));

test('a reply in Markdown is rendered, and nothing hostile in it runs', { timeout: 60000 }, async () => {
  for (const width of [1440, 375]) {
    const page = await openApp(browser, server.url, { viewport: { width, height: 900 } });
    const dialogs = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      d.dismiss().catch(() => {});
    });
    const popups = [];
    page.context().on('page', (p) => popups.push(p.url()));
    try {
      const start = page.url();
      await recordAssistantStates(page);
      const asked = `show me markdown at ${width}`;
      await sendChat(page, asked);
      // The reply to this very message: the conversation's history (the reply at the
      // other width among it) may arrive after the message is sent.
      const reply = conversation(page).locator(
        `[data-role="user"]:has-text("${asked}") + [data-role="assistant"]`,
      );
      await reply.locator('table').waitFor({ state: 'visible', timeout: 15000 });
      await waitUntil(async () => (await reply.getAttribute('aria-busy')) === null, {
        timeout: 15000,
        what: 'the reply to finish',
      });
      const body = reply.locator('.message-text');
      // Rendered: bold, inline code, a list, a table, a code block.
      assert.equal((await body.locator('strong').first().innerText()).trim(), 'the summary');
      assert.ok((await body.locator('p code').first().innerText()).includes('inline code'));
      assert.equal(await body.locator('ul > li').count(), 2);
      assert.deepEqual((await body.locator('th').allInnerTexts()).map((t) => t.trim()), ['name', 'size']);
      assert.equal((await body.locator('td').first().innerText()).trim(), 'a.txt');
      const block = body.locator('pre code');
      assert.equal((await block.innerText()).trim(), 'const x = "<b>not bold</b>";');
      // Nothing hostile became markup.
      for (const tag of ['script', 'img', 'iframe', 'svg', 'form', 'button', 'details', 'style', 'meta', 'b']) {
        assert.equal(await body.locator(tag).count(), 0, `a <${tag}> in the reply`);
      }
      assert.equal(await body.locator('[onerror], [onload], [ontoggle], [style]').count(), 0);
      // The raw HTML is shown as the text it is.
      assert.ok((await body.innerText()).includes('<script>window.__xssScript=1</script>'));
      // Links: only the web one keeps a target, opened apart from the page.
      const links = await body.locator('a').evaluateAll((as) =>
        as.map((a) => ({ text: a.textContent, href: a.getAttribute('href'), target: a.target, rel: a.rel })),
      );
      const withTarget = links.filter((l) => l.href !== null);
      assert.ok(withTarget.length >= 1, JSON.stringify(links));
      for (const link of withTarget) {
        assert.match(link.href, /^https:\/\/example\.com\//, JSON.stringify(link));
        assert.equal(link.target, '_blank');
        assert.deepEqual(link.rel.split(' ').sort(), ['noopener', 'noreferrer']);
      }
      assert.ok((await body.innerText()).includes('<a href="javascript:window.__xssA=1">raw link</a>'));
      for (const text of ['run', 'data', 'spaced', 'entity']) {
        const link = links.find((l) => l.text === text);
        assert.ok(link, `the ${text} link is shown as text: ${JSON.stringify(links)}`);
        assert.equal(link.href, null, `the ${text} link keeps no target`);
      }
      // Clicking what was a javascript: link does nothing.
      await body.locator('a', { hasText: 'run' }).click();
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(page.url(), start, 'the page navigated');
      assert.deepEqual(await flags(page), [], 'a hostile flag was set');
      assert.deepEqual(dialogs, [], 'a dialog opened');
      assert.deepEqual(popups, [], 'a page opened');
      assert.deepEqual(await page.evaluate(() => window.__cspViolations), [], 'the CSP had to step in');
      // It streamed in: rendered more than once on the way.
      const states = await page.evaluate(() => window.__states || []);
      assert.ok(states.length >= 2, `rendered ${states.length} times`);
      await page.screenshot({ path: path.join(SCREENSHOTS, `chat-markdown-${width}.png`), fullPage: true });
      assert.equal(page.problems.length, 0, problems(page));

      // After a reload, the saved reply is rendered the same way.
      await page.reload();
      const saved = messages(page, 'assistant').last().locator('.message-text');
      await saved.locator('table').waitFor({ state: 'visible' });
      assert.equal(await saved.locator('script, img, iframe').count(), 0);
      assert.deepEqual(await flags(page), []);
    } finally {
      await page.context().close();
    }
  }
});

test('New conversation empties the panel and the agent no longer sees the old one', { timeout: 60000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    await sendChat(page, 'remember the word pelican');
    await messages(page, 'assistant').filter({ hasText: 'pelican' }).waitFor({ timeout: 15000 });
    await waitUntil(async () => (await messages(page, 'assistant').last().getAttribute('aria-busy')) === null, {
      what: 'the reply to finish',
    });
    const chat = chatRegion(page);
    await chat.getByRole('button', { name: 'New conversation', exact: true }).click();
    await waitUntil(async () => (await messages(page, 'user').count()) === 0, { what: 'an empty panel' });
    await chat.getByText('Ask your agent for something.').waitFor();
    assert.equal(
      await page.evaluate(() => document.activeElement?.id),
      'message',
      'the composer has the focus',
    );
    const before = agent.requests.length;
    await sendChat(page, 'what was the word?');
    await waitUntil(() => agent.requests.length > before, { what: 'the next request upstream' });
    const sent = agent.requests.at(-1).body.messages.filter((m) => m.role !== 'system');
    assert.deepEqual(sent.map((m) => m.content), ['what was the word?']);
    assert.equal(lastUser(agent.requests.at(-1).body), 'what was the word?');
    // A reload shows only the new conversation.
    await messages(page, 'assistant').last().waitFor();
    await page.reload();
    await messages(page, 'user').first().waitFor();
    assert.deepEqual(await messages(page, 'user').allInnerTexts(), ['what was the word?']);

    // While a reply streams, New conversation stops it first.
    await sendChat(page, 'forever');
    await messages(page, 'assistant').filter({ hasText: 'w1' }).waitFor({ timeout: 10000 });
    await chat.getByRole('button', { name: 'New conversation', exact: true }).click();
    await waitUntil(async () => (await messages(page, 'assistant').count()) === 0, { what: 'an empty panel' });
    const forever = agent.requests.at(-1);
    await waitUntil(() => forever.closedAt !== undefined, { timeout: 5000, what: 'the upstream turn to be cancelled' });
    assert.ok(await page.getByRole('button', { name: 'Send', exact: true }).isEnabled());
    await page.screenshot({ path: path.join(SCREENSHOTS, 'chat-new-conversation-1440.png') });
  } finally {
    await page.context().close();
  }
  const small = await openApp(browser, server.url, { viewport: { width: 375, height: 800 } });
  try {
    const button = chatRegion(small).getByRole('button', { name: 'New conversation', exact: true });
    await button.scrollIntoViewIfNeeded();
    const box = await button.boundingBox();
    assert.ok(box.height >= 40, `New conversation is ${box.height} px high`);
    await small.screenshot({ path: path.join(SCREENSHOTS, 'chat-new-conversation-375.png'), fullPage: true });
  } finally {
    await small.context().close();
  }
});

test('an agent that is down reads "The agent is not answering"', { timeout: 30000 }, async () => {
  const page = await openApp(browser, down.url);
  try {
    await sendChat(page, 'anyone there?');
    const alert = chatRegion(page).getByRole('alert').first();
    await alert.waitFor({ state: 'visible', timeout: 15000 });
    const text = await alert.innerText();
    assert.match(text, /^The agent is not answering/);
    for (const transport of ['tcp', 'connect', 'os error', 'Connection refused', '127.0.0.1']) {
      assert.ok(!text.includes(transport), `the page shows ${transport}: ${text}`);
    }
    assert.ok(!(await chatRegion(page).innerText()).includes('tcp connect'));
    await page.screenshot({ path: path.join(SCREENSHOTS, 'chat-agent-down-1440.png') });
  } finally {
    await page.context().close();
  }
});

test('rendering cost: a long reply streams without the page falling behind', { timeout: 90000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    // The renderer alone on Markdown of 100 KiB and 1 MiB (lists, code, tables, links).
    const timings = await page.evaluate(async () => {
      const { renderMarkdown } = await import('/markdown.js');
      const unit = '## Part\n\nSome **bold** text with `code` and a [link](https://example.com).\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\nlet x = 1;\n```\n\n';
      const out = {};
      for (const kib of [100, 1024]) {
        const text = unit.repeat(Math.ceil((kib * 1024) / unit.length));
        const started = performance.now();
        const fragment = renderMarkdown(text);
        out[`${kib} KiB`] = { ms: Math.round(performance.now() - started), nodes: fragment.childNodes.length };
      }
      return out;
    });
    console.log(`renderMarkdown: ${JSON.stringify(timings)}`);
    // A loose bound: the point is the figure, on a machine that may be busy.
    assert.ok(timings['1024 KiB'].ms < 20000, JSON.stringify(timings));

    // 20,000 tokens streamed with no delay (about 130 KB): the page keeps up and ends
    // with the whole reply rendered.
    const started = Date.now();
    await sendChat(page, 'bench 20000');
    const reply = messages(page, 'assistant').last();
    await waitUntil(async () => (await reply.getAttribute('aria-busy')) === null && (await reply.innerText()).includes('t19999'), {
      timeout: 60000,
      what: 'the long reply to finish',
    });
    console.log(`bench 20000: the whole reply rendered ${Date.now() - started} ms after Send`);
  } finally {
    await page.context().close();
  }
});
