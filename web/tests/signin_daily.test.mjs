// M-DAILY "Sign-in that survives a new tab": "Keep me signed in on this device" (off by
// default) keeps the token in local storage, so a new tab of the same browser is signed
// in; without it a new tab asks again; Sign out forgets both. The whole printed address
// pasted into the token field signs in, and so does a changed `#token=` fragment.
// Screenshots of the sign-in page at 1440 and 375 px.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFerry, launchBrowser, problems, waitUntil } from './support.mjs';

const SCREENSHOTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'screenshots');
let server;
let browser;

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const signInHeading = (page) => page.getByRole('heading', { name: 'Sign in to ferry' });
const filesRegion = (page) => page.getByRole('region', { name: 'Files', exact: true });

/** A page of `context` at the gateway's address without a token. */
async function bare(context) {
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (e) => page.problems.push(`pageerror: ${e.message}`));
  await page.goto(server.base);
  return page;
}

async function stored(page) {
  return page.evaluate(() => ({
    session: sessionStorage.getItem('ferry.token'),
    local: localStorage.getItem('ferry.token'),
  }));
}

async function signIn(page, text, { remember }) {
  await page.getByLabel('Token', { exact: true }).fill(text);
  const box = page.getByRole('checkbox', { name: 'Keep me signed in on this device' });
  assert.equal(await box.isChecked(), false, 'off by default');
  if (remember) await box.check();
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await filesRegion(page).waitFor({ state: 'visible' });
}

test('a new tab stays signed in only when asked, and Sign out forgets the token', { timeout: 60000 }, async () => {
  for (const width of [1440, 375]) {
    const context = await browser.newContext({ viewport: { width, height: 800 } });
    try {
      const page = await bare(context);
      await signInHeading(page).waitFor();
      await page.screenshot({ path: path.join(SCREENSHOTS, `signin-${width}.png`), fullPage: true });
      const box = page.getByRole('checkbox', { name: 'Keep me signed in on this device' });
      const target = await page.locator('label.check').boundingBox();
      assert.ok(target.height >= 40, `the checkbox's label is ${target.height} px high`);
      assert.equal(await box.isChecked(), false);
      assert.equal(page.problems.length, 0, problems(page));
    } finally {
      await context.close();
    }
  }

  // Not kept: a new tab asks again.
  let context = await browser.newContext();
  try {
    const first = await bare(context);
    await signIn(first, server.token, { remember: false });
    assert.deepEqual(await stored(first), { session: server.token, local: null });
    const second = await bare(context);
    await signInHeading(second).waitFor();
    assert.equal(await filesRegion(second).isVisible(), false);
  } finally {
    await context.close();
  }

  // Kept: a new tab of the same browser is signed in; Sign out forgets it everywhere.
  context = await browser.newContext();
  try {
    const first = await bare(context);
    await signIn(first, server.token, { remember: true });
    assert.deepEqual(await stored(first), { session: server.token, local: server.token });
    const second = await bare(context);
    await filesRegion(second).waitFor({ state: 'visible' });
    assert.equal(await signInHeading(second).isVisible(), false);
    await second.getByRole('button', { name: 'Sign out', exact: true }).click();
    await signInHeading(second).waitFor();
    assert.deepEqual(await stored(second), { session: null, local: null });
    const third = await bare(context);
    await signInHeading(third).waitFor();
    // The first tab held the same token: it is signed out too, and says why.
    await signInHeading(first).waitFor();
    await first.getByRole('alert').filter({ hasText: 'another tab' }).waitFor();
    assert.deepEqual(await stored(first), { session: null, local: null });
  } finally {
    await context.close();
  }

  // Signing in again without the box drops a token kept before.
  context = await browser.newContext();
  try {
    const first = await bare(context);
    await signIn(first, server.token, { remember: true });
    await first.getByRole('button', { name: 'Sign out', exact: true }).click();
    await signIn(first, server.token, { remember: false });
    assert.deepEqual(await stored(first), { session: server.token, local: null });
  } finally {
    await context.close();
  }
});

test('the whole printed address pasted into the token field signs in', { timeout: 30000 }, async () => {
  const context = await browser.newContext();
  try {
    const page = await bare(context);
    await signIn(page, `  ${server.url}  `, { remember: false });
    assert.deepEqual(await stored(page), { session: server.token, local: null });
    assert.equal(new URL(page.url()).hash, '', 'no token left in the address');

    // An address without a token is said so, and nothing is sent.
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await page.getByLabel('Token', { exact: true }).fill(`${server.base}/#view=files`);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('alert').filter({ hasText: '#token=' }).waitFor();
    assert.equal(await filesRegion(page).isVisible(), false);
  } finally {
    await context.close();
  }
});

test('a changed #token= fragment signs in, on the sign-in page and while signed in', { timeout: 30000 }, async () => {
  const context = await browser.newContext();
  try {
    const page = await bare(context);
    await signInHeading(page).waitFor();
    await page.evaluate((t) => {
      window.location.hash = `token=${t}`;
    }, server.token);
    await filesRegion(page).waitFor({ state: 'visible' });
    await waitUntil(async () => new URL(page.url()).hash === '', { what: 'the fragment to be dropped' });
    assert.deepEqual(await stored(page), { session: server.token, local: null });

    // Another person's address pasted into the signed-in tab: that person now.
    const bob = await server.addPerson('bob');
    await page.evaluate((t) => {
      window.location.hash = `token=${t}`;
    }, bob);
    await waitUntil(async () => (await stored(page)).session === bob, { what: "bob's token" });
    await filesRegion(page).waitFor({ state: 'visible' });

    // A token the server does not take: the sign-in page says so.
    await page.evaluate(() => {
      window.location.hash = 'token=fy_not-a-real-token';
    });
    await page.getByRole('alert').filter({ hasText: 'not accepted' }).waitFor();
    assert.deepEqual(await stored(page), { session: null, local: null });
  } finally {
    await context.close();
  }
});
