// The Files panel against a host-mode gateway: the gateway runs as the service user
// `ferry`, which cannot read the person's folders, and every upload, folder, rename and
// delete the page asks for is done by the person's own worker. Must run as root (CI
// does): `ferry site init --mode host` makes the users; they are removed at the end.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  FERRY_BIN,
  launchBrowser,
  openApp,
  entry,
  download,
  lastLine,
  problems,
  withTimeout,
  waitUntil,
} from './support.mjs';

const PERSON = 'hwa';
const USER = `fy_person_${PERSON}`;
let tmp;
let data;
let gateway;
let base;
let token;
let browser;
const madeAccounts = [];

const getent = (db, name) => {
  try {
    execFileSync('getent', [db, name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const sbin = (tool) => ['/usr/sbin', '/sbin', '/usr/bin', '/bin'].map((d) => path.join(d, tool)).find((p) => fs.existsSync(p));
const ferry = (...args) => execFileSync(path.join(tmp, 'ferry'), [...args, '--data', data], { encoding: 'utf8' });
const ownerOf = (p) => fs.statSync(p).uid;
const uidOf = (user) => Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim());
const pub = (...parts) => path.join(data, 'home', PERSON, 'public', ...parts);

/** Removes the person's account (after killing what still runs as it) and what we made. */
function removeAccounts() {
  if (getent('passwd', USER)) {
    const uid = uidOf(USER);
    for (const line of execFileSync('ps', ['-e', '-o', 'pid=,uid='], { encoding: 'utf8' }).split('\n')) {
      const [pid, owner] = line.trim().split(/\s+/).map(Number);
      if (owner === uid) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
    }
    try {
      execFileSync(sbin('userdel'), [USER], { stdio: 'ignore' });
    } catch {}
  }
  if (getent('group', USER)) execFileSync(sbin('groupdel'), [USER], { stdio: 'ignore' });
  for (const name of madeAccounts) {
    try {
      if (getent('passwd', name)) execFileSync(sbin('userdel'), [name], { stdio: 'ignore' });
      if (getent('group', name)) execFileSync(sbin('groupdel'), [name], { stdio: 'ignore' });
    } catch {}
  }
}

before(async () => {
  assert.equal(process.getuid(), 0, 'the host-mode browser test makes users: run it as root (CI does)');
  removeAccounts();
  for (const name of ['ferry', 'fy_shared']) if (!getent('passwd', name) && !getent('group', name)) madeAccounts.push(name);
  // The helper, built beside the binary under test as the host tests build it.
  const targetDir = path.dirname(path.dirname(FERRY_BIN));
  execFileSync(process.env.CARGO || 'cargo', ['build', '--quiet', '-p', 'ferry-posix-helper', '--target-dir', targetDir], {
    stdio: 'inherit',
  });
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ferry-web-host-'));
  fs.chmodSync(tmp, 0o755);
  fs.copyFileSync(FERRY_BIN, path.join(tmp, 'ferry'));
  fs.chmodSync(path.join(tmp, 'ferry'), 0o755);
  // `site init` installs the helper found beside the binary at --helper-path.
  fs.copyFileSync(path.join(path.dirname(FERRY_BIN), 'ferry-posix-helper'), path.join(tmp, 'ferry-posix-helper'));
  data = path.join(tmp, 'site');
  fs.mkdirSync(data);
  ferry('site', 'init', '--mode', 'local');
  token = lastLine(ferry('person', 'add', PERSON));
  ferry('site', 'init', '--mode', 'host', '--helper-path', path.join(tmp, 'lib', 'ferry-posix-helper'));

  const logFd = fs.openSync(path.join(tmp, 'server.log'), 'w');
  gateway = spawn(
    'setpriv',
    ['--reuid=ferry', '--regid=ferry', '--init-groups', '--', path.join(tmp, 'ferry'), 'serve', '--data', data, '--listen', '127.0.0.1:0'],
    { cwd: '/', env: { PATH: '/usr/bin:/bin' }, stdio: ['ignore', 'pipe', logFd] },
  );
  fs.closeSync(logFd);
  let out = '';
  const first = await withTimeout(
    new Promise((resolve, reject) => {
      gateway.stdout.setEncoding('utf8');
      gateway.stdout.on('data', (chunk) => {
        out += chunk;
        if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')).trim());
      });
      gateway.on('exit', (code) => reject(new Error(`ferry serve exited (${code}): ${fs.readFileSync(path.join(tmp, 'server.log'), 'utf8')}`)));
    }),
    20000,
    'the host-mode gateway to print its address',
  );
  base = /^(http:\/\/127\.0\.0\.1:\d+)/.exec(first)[1];
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  if (gateway && gateway.exitCode === null) {
    const exited = new Promise((r) => gateway.once('exit', r));
    gateway.kill('SIGKILL');
    await withTimeout(exited, 5000, 'the gateway to exit');
  }
  removeAccounts();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** Fills the one open dialog's text field `label` and presses OK. */
async function answerDialog(page, label, value) {
  const dialog = page.getByRole('dialog');
  await dialog.waitFor({ state: 'visible' });
  await dialog.getByLabel(label, { exact: true }).fill(value);
  await dialog.getByRole('button', { name: 'OK', exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
}

test('the Files panel works in host mode, and everything is the person\'s', { timeout: 90000 }, async () => {
  const page = await openApp(browser, `${base}/#token=${token}`);
  const person = uidOf(USER);
  try {
    // Upload with the button; it is listed, and it belongs to the person.
    const content = 'made in host mode\n';
    const [chooser] = await Promise.all([
      page.waitForEvent('filechooser', { timeout: 5000 }),
      page.getByRole('button', { name: 'Upload', exact: true }).click(),
    ]);
    await chooser.setFiles({ name: 'host.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
    await entry(page, 'public/host.txt').waitFor({ state: 'visible' });
    assert.equal(fs.readFileSync(pub('host.txt'), 'utf8'), content);
    assert.equal(ownerOf(pub('host.txt')), person);

    // Download it back.
    const got = await download(page, () => page.getByRole('button', { name: 'Download host.txt', exact: true }).click());
    assert.equal(got.failure, null);
    assert.equal(got.text, content);

    // A new folder, then a rename and a delete.
    await page.getByRole('button', { name: 'New folder', exact: true }).click();
    await answerDialog(page, 'Folder name', 'made-here');
    await entry(page, 'public/made-here').waitFor({ state: 'visible' });
    assert.equal(ownerOf(pub('made-here')), person);

    await page.getByRole('button', { name: 'Rename host.txt', exact: true }).click();
    await answerDialog(page, 'New name', 'renamed.txt');
    await entry(page, 'public/renamed.txt').waitFor({ state: 'visible' });
    await entry(page, 'public/host.txt').waitFor({ state: 'detached' });
    assert.ok(fs.existsSync(pub('renamed.txt')) && !fs.existsSync(pub('host.txt')));

    await page.getByRole('button', { name: 'Delete renamed.txt', exact: true }).click();
    await page.getByRole('dialog', { name: 'Delete renamed.txt?' }).getByRole('button', { name: 'Delete', exact: true }).click();
    await entry(page, 'public/renamed.txt').waitFor({ state: 'detached' });
    await waitUntil(() => !fs.existsSync(pub('renamed.txt')), { timeout: 5000, what: 'renamed.txt removed on disk' });
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
  // The service itself still cannot read the person's folder.
  assert.throws(() => execFileSync('setpriv', ['--reuid=ferry', '--regid=ferry', '--init-groups', '--', 'ls', pub()], { stdio: 'ignore' }));
});
