// The Nodes panel and node terminals, end to end: a real `ferry serve`, a real
// `ferry node run` (its own state folder and HOME, SHELL=/bin/bash), Debian's Chromium.
// The panel shows the pending node and approves it live; a terminal runs what is typed;
// a file with a hostile name dropped onto it is staged and its quoted path lands at the
// prompt without running anything, and the shell then sees exactly that path. A reload
// reattaches the same shell, two terminals run at once, a resize reaches `stty size`,
// closing a terminal ends its shell, colours render under the page's CSP, and the panel
// does not exist for a token that is not an admin's.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  startFerry,
  startNode,
  waitForNode,
  processRuns,
  launchBrowser,
  openApp,
  waitUntil,
  problems,
  artifact,
  reEscape,
} from './support.mjs';

let server;
let node;
let browser;
/** The token `ferry serve` printed: the admin's. */
let adminToken;
/** A folder the shell works in, where a command that ran by mistake would leave a file. */
let workDir;

before(async () => {
  server = await startFerry();
  adminToken = server.token;
  node = await startNode(server, { name: 'build-box' });
  await waitForNode(server, adminToken, node.id, (n) => n.state === 'pending' && n.connected, 'build-box pending');
  browser = await launchBrowser();
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ferry-term-work-'));
});

after(async () => {
  await browser?.close();
  await node?.stop();
  await server?.stop();
  if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
});

/** build-box, approved (through the API when a test before did not approve it in the panel). */
async function approvedNode() {
  const now = await waitForNode(server, adminToken, node.id, (n) => n.connected, 'build-box connected');
  if (now.state === 'pending') {
    const answer = await server.api(`/v1/nodes/${node.id}/approve`, { token: adminToken, method: 'POST' });
    assert.equal(answer.status, 200, answer.text);
  }
  return waitForNode(server, adminToken, node.id, (n) => n.state === 'approved', 'build-box approved');
}

const nodesRegion = (page) => page.getByRole('region', { name: 'Nodes', exact: true });
const nodeRow = (page, name) => nodesRegion(page).getByRole('row').filter({ hasText: name });
const shownPane = (page) => page.locator('.terminal-pane:not([hidden])');
const shownScreen = (page) => shownPane(page).locator('.terminal-screen');

/**
 * The shown terminal's buffer as logical lines: rows the terminal wrapped are joined
 * back, and trailing blanks dropped. This is what the person sees, scrollback included.
 */
function bufferLines(page) {
  return shownScreen(page).evaluate((screen) => {
    const buffer = screen.terminal.buffer.active;
    const lines = [];
    for (let i = 0; i < buffer.length; i++) {
      const line = buffer.getLine(i);
      const text = line.translateToString(true);
      if (line.isWrapped && lines.length) lines[lines.length - 1] += text;
      else lines.push(text);
    }
    while (lines.length && lines[lines.length - 1] === '') lines.pop();
    return lines;
  });
}

/** Waits until a line of the shown terminal matches `re`; answers its match. */
async function waitForLine(page, re, what) {
  let last = [];
  try {
    return await waitUntil(
      async () => {
        last = await bufferLines(page);
        for (const line of last) {
          const m = re.exec(line);
          if (m) return m;
        }
        return null;
      },
      { timeout: 10000, interval: 50, what },
    );
  } catch (e) {
    throw new Error(`${e.message}\nterminal:\n${last.join('\n')}${problems(page)}`);
  }
}

/** Waits for the shown terminal to be connected and its shell to show a prompt. */
async function waitForPrompt(page) {
  await shownPane(page).locator('.terminal-status', { hasText: 'Connected' }).waitFor({ timeout: 10000 });
  await waitForLine(page, /[#$] ?$/, 'a shell prompt');
}

/** Types `text` into the shown terminal (then Enter, unless `enter` is false). */
async function type(page, text, { enter = true } = {}) {
  await shownScreen(page).click();
  await page.keyboard.type(text);
  if (enter) await page.keyboard.press('Enter');
}

/** The shell's pid, asked with `echo $$` (a marker around it, so the command never matches). */
async function shellPid(page, tag) {
  await type(page, `echo ${tag}-$$-pid`);
  const m = await waitForLine(page, new RegExp(`^${tag}-(\\d+)-pid$`), `the pid (${tag})`);
  return Number(m[1]);
}

test('the Nodes panel does not exist for a token that is not an admin', { timeout: 30000 }, async () => {
  // The same person, with a token of the everyday kind.
  const personToken = await server.createToken('me', 'person');
  const harnessToken = await server.createToken('me', 'harness');
  // What the page asks: whose token it holds, and whether it is an admin's.
  const asked = async (token) => {
    const answer = await server.api('/v1/me', { token });
    return [answer.status, answer.json];
  };
  assert.deepEqual(await asked(adminToken), [200, { person: 'me', admin: true }]);
  assert.deepEqual(await asked(personToken), [200, { person: 'me', admin: false }]);
  assert.equal((await asked(harnessToken))[0], 401);
  assert.equal((await asked(null))[0], 401);
  assert.equal((await server.api('/v1/nodes', { token: personToken })).status, 404);

  const seen = [];
  let answered;
  const page = await openApp(browser, server.urlFor(personToken), {
    beforeGoto: (p) => {
      p.on('request', (r) => seen.push(new URL(r.url()).pathname));
      answered = p.waitForResponse((r) => new URL(r.url()).pathname === '/v1/me', { timeout: 10000 });
    },
  });
  try {
    assert.equal((await answered).status(), 200);
    await page.waitForTimeout(300);
    assert.equal(await page.getByRole('button', { name: 'Nodes' }).isVisible(), false, 'no Nodes button');
    assert.equal(await nodesRegion(page).isVisible(), false, 'no Nodes panel');
    assert.equal(await page.getByText('build-box').count(), 0, 'no node named anywhere');
    assert.ok(!seen.some((p) => p.startsWith('/v1/nodes')), `no node route asked: ${seen.join(' ')}`);
    // The Files and Chat panels are there as always, and nothing went wrong.
    assert.ok(await page.getByRole('region', { name: 'Files', exact: true }).isVisible());
    assert.deepEqual(page.problems, [], problems(page));
  } finally {
    await page.context().close();
  }
});

test('an admin approves the node, types in its terminal and drops a hostile file name onto it', { timeout: 120000 }, async (t) => {
  const page = await openApp(browser, server.urlFor(adminToken));
  try {
    // The pending node, as the panel shows it.
    await page.getByRole('button', { name: 'Nodes' }).click();
    await nodesRegion(page).waitFor({ state: 'visible' });
    const row = nodeRow(page, 'build-box');
    await row.waitFor();
    const cells = await row.getByRole('cell').allInnerTexts();
    t.diagnostic(`row: ${JSON.stringify(cells)}`);
    assert.equal(cells[0], 'linux');
    assert.equal(cells[1], 'bash');
    assert.match(cells[2], /^Pending/);
    assert.equal(cells[3], 'Connected');
    assert.match(cells[4], /terminal\.open/);
    assert.equal(await row.getByRole('button', { name: 'Open a terminal on build-box' }).count(), 0, 'no terminal before approval');

    // Approved there; the row changes without a reload.
    await row.getByRole('button', { name: 'Approve build-box', exact: true }).click();
    await row.getByText('Approved', { exact: true }).waitFor();
    const approved = await waitForNode(server, adminToken, node.id, (n) => n.state === 'approved', 'approved');
    assert.ok(approved.approvedCommands.includes('terminal.upload'), JSON.stringify(approved));

    // Its terminal runs what is typed.
    await row.getByRole('button', { name: 'Open a terminal on build-box' }).click();
    await page.getByRole('tab', { name: /build-box/ }).waitFor();
    await waitForPrompt(page);
    await type(page, `cd ${workDir}`);
    await type(page, 'echo hi');
    await waitForLine(page, /^hi$/, 'the output of echo hi');

    // Colours: 256-colour and truecolor red render red (the renderer's styles are allowed).
    await type(page, "printf '\\033[38;5;196mPALETTE\\033[0m \\033[38;2;0;128;255mTRUECOLOR\\033[0m\\n'");
    await waitForLine(page, /^PALETTE TRUECOLOR$/, 'the coloured line');
    // The buffer holds the line before the renderer draws it (on the next animation
    // frame), so the rows are asked until both words are drawn.
    const colours = await waitUntil(
      () =>
        shownScreen(page).evaluate((screen) => {
          const colour = (word) => {
            const span = [...screen.querySelectorAll('.xterm-rows span')].find((s) => s.textContent === word);
            return span ? getComputedStyle(span).color : null;
          };
          const drawn = { palette: colour('PALETTE'), truecolor: colour('TRUECOLOR') };
          return drawn.palette && drawn.truecolor ? drawn : null;
        }),
      { timeout: 10000, interval: 50, what: 'the coloured words to be drawn' },
    );
    assert.deepEqual(colours, { palette: 'rgb(255, 0, 0)', truecolor: 'rgb(0, 128, 255)' });

    // A file whose name would run commands if it were pasted unquoted, or executed.
    const hostile = "a'b \"c\" $(touch CANARY) `touch CANARY2`;  ünïcødé→.txt";
    const bytes = Buffer.from('dropped bytes \u0000\u00ff\n', 'latin1');
    await type(page, "printf '%s\\n' ", { enter: false });
    const answered = page.waitForResponse((r) => r.url().endsWith(`/v1/nodes/${node.id}/terminal/upload`));
    const dataTransfer = await page.evaluateHandle(
      ({ name, content }) => {
        const dt = new DataTransfer();
        dt.items.add(new File([Uint8Array.from(content)], name, { type: 'application/octet-stream' }));
        return dt;
      },
      { name: hostile, content: [...bytes] },
    );
    const screen = shownScreen(page);
    await screen.dispatchEvent('dragenter', { dataTransfer });
    await screen.dispatchEvent('dragover', { dataTransfer });
    await screen.dispatchEvent('drop', { dataTransfer });
    const response = await answered;
    assert.equal(response.status(), 200, await response.text());
    const { files } = await response.json();
    t.diagnostic(`upload answered: ${JSON.stringify(files)}`);
    assert.equal(files.length, 1);
    const [staged] = files;
    assert.equal(typeof staged.path, 'string', JSON.stringify(staged));
    assert.ok(path.isAbsolute(staged.path));
    assert.equal(staged.size, bytes.length);

    // The quoted path is at the prompt, after what was typed, and nothing ran.
    const prompt = await waitForLine(page, /printf '%s\\n' (.+)$/, 'the pasted path');
    assert.equal(prompt[1], staged.quoted, 'exactly the quoted path, pasted');
    await shownPane(page).getByText('1 of 1 staged, paths pasted').waitFor();
    await page.waitForTimeout(500);
    for (const canary of ['CANARY', 'CANARY2']) {
      assert.equal(fs.existsSync(path.join(workDir, canary)), false, `${canary} was not created`);
    }
    // The staged file holds the dropped bytes.
    assert.deepEqual(fs.readFileSync(staged.path), bytes);

    // Enter, pressed by the test: the shell gets exactly the staged path, as one word.
    await type(page, ` | tee ${workDir}/seen.txt`);
    await waitUntil(() => fs.existsSync(path.join(workDir, 'seen.txt')) && fs.readFileSync(path.join(workDir, 'seen.txt'), 'utf8').endsWith('\n'), {
      what: 'printf to write seen.txt',
    });
    assert.equal(fs.readFileSync(path.join(workDir, 'seen.txt'), 'utf8'), `${staged.path}\n`);
    await waitForLine(page, new RegExp(`^${reEscape(staged.path)}$`), 'the path printed');
    for (const canary of ['CANARY', 'CANARY2']) {
      assert.equal(fs.existsSync(path.join(workDir, canary)), false, `${canary} was not created`);
    }

    // A batch where some files fail: the page refuses one over 16 MiB itself, the node
    // refuses a name that is no file name, and only the good file's path is pasted.
    await type(page, 'echo batch ', { enter: false });
    const batchAnswered = page.waitForResponse((r) => r.url().endsWith(`/v1/nodes/${node.id}/terminal/upload`));
    const batch = await page.evaluateHandle((limit) => {
      const dt = new DataTransfer();
      dt.items.add(new File(['fine\n'], 'fine.txt'));
      dt.items.add(new File([new Uint8Array(limit + 1)], 'too-big.bin'));
      dt.items.add(new File(['dots\n'], '..'));
      return dt;
    }, 16 * 1024 * 1024);
    await screen.dispatchEvent('dragover', { dataTransfer: batch });
    await screen.dispatchEvent('drop', { dataTransfer: batch });
    const batchResponse = await batchAnswered;
    assert.equal(batchResponse.status(), 200, await batchResponse.text());
    const batchFiles = (await batchResponse.json()).files;
    t.diagnostic(`batch answered: ${JSON.stringify(batchFiles)}`);
    assert.deepEqual(batchFiles.map((f) => f.name), ['fine.txt', '..'], 'the page did not send the big one');
    assert.ok(batchFiles[0].quoted && !batchFiles[0].error);
    assert.ok(batchFiles[1].error && !batchFiles[1].quoted);
    const batchItem = shownPane(page).locator('.terminal-upload').last();
    await batchItem.getByText('1 of 3 staged, paths pasted').waitFor();
    const errors = await batchItem.getByRole('alert').allInnerTexts();
    assert.equal(errors.length, 2, JSON.stringify(errors));
    assert.equal(errors[0], 'too-big.bin: 16777217 bytes, over the 16 MiB (16777216 bytes) a terminal upload takes per file');
    assert.equal(errors[1], `..: ${batchFiles[1].error.message}`);
    const batchLine = await waitForLine(page, /echo batch (.*)$/, 'the batch paste');
    assert.equal(batchLine[1], batchFiles[0].quoted, 'only the good path, pasted');
    // Not run: the line is wiped with Ctrl+U instead.
    await page.keyboard.press('Control+U');

    await page.screenshot({ path: artifact('nodes-terminal.png') });
    assert.deepEqual(await page.evaluate(() => window.__cspViolations), [], 'no CSP violation');
    assert.deepEqual(page.problems, [], problems(page));
  } finally {
    await page.context().close();
  }
});

test('a reload reattaches the same shell; two terminals at once; resize; closing ends the shell', { timeout: 120000 }, async () => {
  await approvedNode();
  const page = await openApp(browser, server.urlFor(adminToken));
  try {
    await page.getByRole('button', { name: 'Nodes' }).click();
    await nodeRow(page, 'build-box').getByRole('button', { name: 'Open a terminal on build-box' }).click();
    await waitForPrompt(page);
    const first = await shellPid(page, 'before');
    assert.ok(processRuns(first), `shell ${first} runs`);
    await type(page, 'echo kept-across-the-reload');

    // A reload: the page reattaches, the screen is replayed, and it is the same shell.
    await page.reload();
    await nodesRegion(page).waitFor({ state: 'visible' });
    await shownPane(page).locator('.terminal-status', { hasText: 'Connected' }).waitFor({ timeout: 10000 });
    await waitForLine(page, /^kept-across-the-reload$/, 'the replayed output');
    assert.equal(await shellPid(page, 'after'), first, 'the same shell after the reload');

    // A second terminal runs beside it, with a shell of its own.
    await nodeRow(page, 'build-box').getByRole('button', { name: 'Open a terminal on build-box' }).click();
    await page.getByRole('tab', { name: /build-box \(2\)/ }).waitFor();
    await waitForPrompt(page);
    const second = await shellPid(page, 'second');
    assert.notEqual(second, first);
    // The tabs follow the ARIA tabs pattern: arrow keys move between them.
    const tabs = page.getByRole('tablist', { name: 'Terminals' }).getByRole('tab');
    assert.equal(await tabs.count(), 2);
    await tabs.nth(1).focus();
    await page.keyboard.press('ArrowRight');
    assert.equal(await tabs.nth(0).getAttribute('aria-selected'), 'true');
    assert.equal(await tabs.nth(0).evaluate((el) => el === document.activeElement), true);
    assert.equal(await tabs.nth(1).getAttribute('aria-selected'), 'false');
    await type(page, 'echo first-still-here');
    await waitForLine(page, /^first-still-here$/, 'the first terminal answering');

    // A resize of the page reaches the shell.
    const sizeOf = async (tag) => {
      await type(page, `echo ${tag}-$(stty size | tr ' ' x)-size`);
      const m = await waitForLine(page, new RegExp(`^${tag}-(\\d+)x(\\d+)-size$`), `stty size (${tag})`);
      return { rows: Number(m[1]), cols: Number(m[2]) };
    };
    const wide = await sizeOf('wide');
    const shown = await shownScreen(page).evaluate((s) => ({ rows: s.terminal.rows, cols: s.terminal.cols }));
    assert.deepEqual(wide, shown, 'the shell has the size the page shows');
    await page.setViewportSize({ width: 1000, height: 760 });
    const narrow = await waitUntil(
      async () => {
        const size = await sizeOf(`narrow${Date.now()}`);
        return size.cols < wide.cols && size.rows < wide.rows ? size : null;
      },
      { timeout: 10000, interval: 200, what: 'a smaller stty size' },
    );
    const shownNow = await shownScreen(page).evaluate((s) => ({ rows: s.terminal.rows, cols: s.terminal.cols }));
    assert.deepEqual(narrow, shownNow);

    // Closing the tab ends that shell on the node; the other one keeps running.
    await page.getByRole('button', { name: 'Close the terminal on build-box', exact: true }).click();
    await waitUntil(() => !processRuns(first), { timeout: 5000, what: `shell ${first} to end` });
    assert.ok(processRuns(second), 'the second shell still runs');
    await page.getByRole('tab', { name: /build-box \(2\)/ }).waitFor();
    assert.equal(await page.getByRole('tab').count(), 1);
    await type(page, 'echo second-still-here');
    await waitForLine(page, /^second-still-here$/, 'the second terminal answering');
    await page.getByRole('button', { name: 'Close the terminal on build-box (2)', exact: true }).click();
    await waitUntil(() => !processRuns(second), { timeout: 5000, what: `shell ${second} to end` });
    assert.equal(await page.evaluate(() => sessionStorage.getItem('ferry.terminals')), null, 'nothing left to reattach');
    assert.deepEqual(await page.evaluate(() => window.__cspViolations), [], 'no CSP violation');
    assert.deepEqual(page.problems, [], problems(page));
  } finally {
    await page.context().close();
  }
});

test('the panel updates live, approves a pairing upgrade and refuses a pairing', { timeout: 90000 }, async (t) => {
  const page = await openApp(browser, server.urlFor(adminToken));
  const spare = await startNode(server, { name: 'spare-box' });
  let stranger = null;
  try {
    await page.getByRole('button', { name: 'Nodes' }).click();
    await nodeRow(page, 'spare-box').waitFor();
    // Approved for one command of those it advertises: the rest wait, an upgrade.
    const pending = await waitForNode(server, adminToken, spare.id, (n) => n.state === 'pending', 'spare-box pending');
    const first = pending.advertisedCommands[0];
    const approved = await server.api(`/v1/nodes/${spare.id}/approve`, { token: adminToken, json: { commands: [first] } });
    assert.equal(approved.status, 200, approved.text);
    const row = nodeRow(page, 'spare-box');
    // The approval made through the API shows without a reload (the nodes event).
    const upgrade = row.getByRole('button', { name: 'Approve upgrade of spare-box', exact: true });
    await upgrade.waitFor();
    const waiting = pending.advertisedCommands.slice(1);
    assert.ok(waiting.length > 0, JSON.stringify(pending));
    await row.getByText(`Waiting for approval: ${waiting.join(', ')}`).waitFor();
    await row.getByText('Upgrade', { exact: true }).waitFor();
    await upgrade.click();
    await upgrade.waitFor({ state: 'detached' });
    const upgraded = await waitForNode(server, adminToken, spare.id, (n) => n.pendingCommands.length === 0, 'upgraded');
    assert.deepEqual(upgraded.approvedCommands, upgraded.advertisedCommands);

    // A node that drops shows offline, live, and its open terminal says why it ended.
    await row.getByRole('button', { name: 'Open a terminal on spare-box' }).click();
    await waitForPrompt(page);
    await spare.stop();
    await row.getByText('Offline', { exact: true }).waitFor();
    await shownPane(page).locator('.terminal-status', { hasText: /^Failed: / }).waitFor();
    const failure = await shownPane(page).getByRole('alert').innerText();
    t.diagnostic(`the terminal ended with: ${failure}`);
    assert.ok(failure.length > 0);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('ferry.terminals')), null, 'nothing to reattach');
    assert.equal(await row.getByRole('button', { name: 'Open a terminal on spare-box' }).isDisabled(), true);

    // A stranger's pairing, refused: asked first, then revoked for good.
    stranger = await startNode(server, { name: 'stranger' });
    const strangerRow = nodeRow(page, 'stranger');
    await strangerRow.waitFor();
    await strangerRow.getByRole('button', { name: 'Refuse stranger', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Refuse stranger?' });
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Refuse', exact: true }).click();
    await strangerRow.getByText('Revoked', { exact: true }).waitFor();
    const revoked = await waitForNode(server, adminToken, stranger.id, (n) => n.state === 'revoked', 'stranger revoked');
    t.diagnostic(`revoked: ${JSON.stringify(revoked)}`);
    assert.equal(await strangerRow.getByRole('button').count(), 0, 'nothing to do with a revoked node');
    assert.deepEqual(page.problems, [], problems(page));
  } finally {
    await spare.stop();
    await stranger?.stop();
    await page.context().close();
  }
});

test('the page never pastes a line break or a control character, whatever the answer says', { timeout: 60000 }, async () => {
  await approvedNode();
  const page = await openApp(browser, server.urlFor(adminToken));
  try {
    // The check itself, on every kind of character that could end the line or drive the terminal.
    const refused = await page.evaluate(async () => {
      const { checkPastable } = await import('/terminal.js');
      const cases = ['', "'a'\r", "'a'\n", "'a'\r\n", "'a'\u001b[201~", "'a'\u0003", "'a'\u007f", "'a'\u0085", "'a'\u2028", "'a'\u2029", "'a'\u0000"];
      const out = {};
      for (const c of cases) {
        try {
          checkPastable(c);
          out[JSON.stringify(c)] = 'pasted';
        } catch {
          out[JSON.stringify(c)] = 'refused';
        }
      }
      out.plain = checkPastable("'/tmp/a  b' '/tmp/ü'") === "'/tmp/a  b' '/tmp/ü'" ? 'pasted' : 'changed';
      return out;
    });
    for (const [text, verdict] of Object.entries(refused)) {
      assert.equal(verdict, text === 'plain' ? 'pasted' : 'refused', text);
    }

    // A forged answer with a newline in one `quoted`: that file is named with why it was
    // not pasted, the other file's path is pasted, and nothing runs.
    await page.getByRole('button', { name: 'Nodes' }).click();
    await nodeRow(page, 'build-box').getByRole('button', { name: 'Open a terminal on build-box' }).click();
    await waitForPrompt(page);
    await type(page, `cd ${workDir}`);
    await page.route('**/terminal/upload', (route) =>
      route.fulfill({
        status: 200,
        contentType: 'application/json',
        body: JSON.stringify({
          files: [
            { name: 'evil.txt', path: '/tmp/evil.txt', size: 1, quoted: "'/tmp/evil.txt'\ntouch FORGED\n" },
            { name: 'good.txt', path: '/tmp/good.txt', size: 1, quoted: "'/tmp/good.txt'" },
          ],
        }),
      }),
    );
    await type(page, 'echo forged ', { enter: false });
    const dt = await page.evaluateHandle(() => {
      const d = new DataTransfer();
      d.items.add(new File(['x'], 'evil.txt'));
      d.items.add(new File(['y'], 'good.txt'));
      return d;
    });
    await shownScreen(page).dispatchEvent('dragover', { dataTransfer: dt });
    await shownScreen(page).dispatchEvent('drop', { dataTransfer: dt });
    const item = shownPane(page).locator('.terminal-upload').last();
    await item.getByText('1 of 2 staged, paths pasted').waitFor();
    assert.equal(
      await item.getByRole('alert').innerText(),
      'evil.txt: staged, but its quoted path was not pasted: refused to paste text holding a line break or a control character',
    );
    const line = await waitForLine(page, /echo forged (.*)$/, 'the good path pasted');
    assert.equal(line[1], "'/tmp/good.txt'");
    await page.waitForTimeout(500);
    assert.equal(fs.existsSync(path.join(workDir, 'FORGED')), false, 'nothing ran');
    await page.keyboard.press('Control+U');
    await page.getByRole('button', { name: 'Close the terminal on build-box', exact: true }).click();
    assert.deepEqual(page.problems, [], problems(page));
  } finally {
    await page.context().close();
  }
});

test('a link a program prints opens only when it is http(s)', { timeout: 60000 }, async () => {
  await approvedNode();
  const page = await openApp(browser, server.urlFor(adminToken));
  try {
    await page.evaluate(() => sessionStorage.setItem('ferry.view', 'nodes'));
    await page.reload();
    await nodeRow(page, node.name).getByRole('button', { name: `Open a terminal on ${node.name}` }).click();
    await waitForPrompt(page);
    // What xterm.js does with a printed OSC 8 link when it is clicked: the page's handler.
    const opened = await shownScreen(page).evaluate((screen) => {
      const calls = [];
      const realOpen = window.open;
      window.open = (...args) => {
        calls.push(args);
        return null;
      };
      try {
        const { activate } = screen.terminal.options.linkHandler;
        for (const uri of ['javascript:alert(1)', 'JAVASCRIPT:alert(1)', 'data:text/html,<script>1</script>',
          'file:///etc/passwd', 'vbscript:x', 'not a url', 'https://example.test/a?b#c', 'http://example.test/']) {
          activate(new MouseEvent('click'), uri);
        }
      } finally {
        window.open = realOpen;
      }
      return calls;
    });
    assert.deepEqual(opened, [
      ['https://example.test/a?b#c', '_blank', 'noopener,noreferrer'],
      ['http://example.test/', '_blank', 'noopener,noreferrer'],
    ]);
  } finally {
    await page.context().close();
  }
});

test('a terminal that cannot be reattached starts anew; an exited shell keeps its screen', { timeout: 60000 }, async () => {
  await approvedNode();
  const page = await openApp(browser, server.urlFor(adminToken));
  try {
    // What a reload long after the grace finds: a session the gateway no longer has.
    await page.evaluate((id) => {
      sessionStorage.setItem('ferry.terminals', JSON.stringify([{ node: id, session: 'gone0000000000000000000000' }]));
      sessionStorage.setItem('ferry.view', 'nodes');
    }, node.id);
    await page.reload();
    await waitForPrompt(page);
    const session = await page.evaluate(() => JSON.parse(sessionStorage.getItem('ferry.terminals'))[0].session);
    assert.notEqual(session, 'gone0000000000000000000000', 'a new terminal, with a session of its own');
    const pid = await shellPid(page, 'fresh');
    assert.ok(processRuns(pid));

    // The shell exits: the tab says so with its status, and the screen stays.
    await type(page, 'echo last-words; exit 3');
    await shownPane(page).locator('.terminal-status', { hasText: 'Exited: exited with 3' }).waitFor();
    await waitForLine(page, /^last-words$/, 'the output before the exit');
    await waitUntil(() => !processRuns(pid), { timeout: 5000, what: `shell ${pid} to end` });
    assert.equal(await page.evaluate(() => sessionStorage.getItem('ferry.terminals')), null, 'nothing to reattach');
    await page.getByRole('button', { name: 'Close the terminal on build-box', exact: true }).click();
    assert.equal(await page.getByRole('tab').count(), 0);
    // Chromium logs the refused reattach (404 unknown_terminal); nothing else went wrong.
    const others = page.problems.filter((p) => !/WebSocket handshake: Unexpected response code: 404$/.test(p));
    assert.deepEqual(others, [], problems(page));
  } finally {
    await page.context().close();
  }
});

test('a terminal the gateway refuses says so; one on an offline node says why', { timeout: 60000 }, async () => {
  const capped = await startFerry({ env: { FERRY_NODES__TERMINALS_MAX: '1' } });
  const box = await startNode(capped, { name: 'capped-box' });
  const page = await openApp(browser, capped.url);
  try {
    await waitForNode(capped, capped.token, box.id, (n) => n.state === 'pending', 'capped-box pending');
    const approved = await capped.api(`/v1/nodes/${box.id}/approve`, { method: 'POST' });
    assert.equal(approved.status, 200, approved.text);
    await page.getByRole('button', { name: 'Nodes' }).click();
    const open = nodeRow(page, 'capped-box').getByRole('button', { name: 'Open a terminal on capped-box' });
    await open.click();
    await waitForPrompt(page);
    // One more than the gateway keeps: the page asks the same URL over plain HTTP and
    // shows the gateway's own reason.
    await open.click();
    await page.getByRole('tab', { name: /capped-box \(2\)/ }).waitFor();
    await shownPane(page).locator('.terminal-status', { hasText: /^Failed: / }).waitFor();
    const capWhy = await shownPane(page).getByRole('alert').innerText();
    const capped429 = await capped.api(`/v1/nodes/${box.id}/terminal?cols=80&rows=24`);
    assert.equal(capped429.status, 429, capped429.text);
    assert.equal(capped429.json.error.code, 'too_many_terminals');
    assert.equal(capWhy, capped429.json.error.message);
    // The first one still works.
    await page.getByRole('tab', { name: /capped-box/ }).first().click();
    await type(page, 'echo still-one');
    await waitForLine(page, /^still-one$/, 'the first terminal');

    // A reload finds the node gone: the gateway's own reason is shown.
    await box.stop();
    await waitForNode(capped, capped.token, box.id, (n) => !n.connected, 'capped-box offline');
    await shownPane(page).locator('.terminal-status', { hasText: /^Failed: / }).waitFor();
    // As a reload within the grace would find it, had the node stayed.
    await page.evaluate((id) => {
      sessionStorage.setItem('ferry.terminals', JSON.stringify([{ node: id, session: 'gone0000000000000000000000' }]));
    }, box.id);
    await page.reload();
    await shownPane(page).locator('.terminal-status', { hasText: /^Failed: / }).waitFor();
    const why = await shownPane(page).getByRole('alert').innerText();
    const offline = await capped.api(`/v1/nodes/${box.id}/terminal?cols=80&rows=24`);
    assert.equal(offline.status, 503, offline.text);
    assert.equal(why, offline.json.error.message);
    // Chromium logs the refusals: the sockets' (429, 503) and the page's plain asking why
    // (429, 503); nothing else.
    const others = page.problems.filter((p) => !/(status of (429|503) \(|response code: (429|503)$)/.test(p));
    assert.deepEqual(others, [], problems(page));
  } finally {
    await page.context().close();
    await box.stop();
    await capped.stop();
  }
});
