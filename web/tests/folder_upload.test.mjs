// M-DAILY "Uploads into a folder": files dropped on a folder row go into that folder (the
// row highlighted while they are over it), a drop on a file goes into the file's folder,
// the "Upload into" button of a folder row does the same from the keyboard, and
// attachments/ takes no uploads. Screenshots of the highlighted row at 1440 and 375 px.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startFerry, launchBrowser, openApp, entry, expand, waitUntil, problems } from './support.mjs';

const SCREENSHOTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'screenshots');
let server;
let browser;

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  for (const folder of ['public/reports', 'public/reports/2026 Q2', 'public/attachments/inbox']) {
    const made = await server.api('/v1/files/mkdir', { json: { path: folder } });
    assert.equal(made.status, 201, made.text);
  }
  fs.writeFileSync(path.join(server.publicDir('me'), 'reports', 'existing.txt'), 'there\n');
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** A DataTransfer in the page holding one text file `name` with `content`. */
function filesTransfer(page, name, content) {
  return page.evaluateHandle(
    ([name, content]) => {
      const dt = new DataTransfer();
      dt.items.add(new File([content], name, { type: 'text/plain' }));
      return dt;
    },
    [name, content],
  );
}

const row = (page, p) => entry(page, p).locator(':scope > .row');
const onDisk = (rel) => path.join(server.publicDir('me'), rel);

test('files dropped on a folder row go into that folder, the row highlighted meanwhile', { timeout: 60000 }, async () => {
  for (const width of [1440, 375]) {
    const page = await openApp(browser, server.url, { viewport: { width, height: 900 } });
    try {
      const name = `dropped-${width}.txt`;
      const content = `into reports at ${width}\n`;
      const dataTransfer = await filesTransfer(page, name, content);
      const target = row(page, 'public/reports');
      await target.waitFor({ state: 'visible' });
      await target.dispatchEvent('dragenter', { dataTransfer });
      await target.dispatchEvent('dragover', { dataTransfer });
      assert.ok(
        await target.evaluate((el) => el.classList.contains('drop-target')),
        'the folder row is highlighted while files are over it',
      );
      assert.ok(
        !(await page.getByRole('region', { name: 'Files', exact: true }).evaluate((el) => el.classList.contains('drop-active'))),
        'the whole panel is not highlighted as well',
      );
      fs.mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SCREENSHOTS, `folder-drop-${width}.png`), fullPage: true });
      await target.dispatchEvent('drop', { dataTransfer });
      await waitUntil(() => fs.existsSync(onDisk(`reports/${name}`)), { timeout: 10000, what: `${name} in reports/` });
      assert.equal(fs.readFileSync(onDisk(`reports/${name}`), 'utf8'), content);
      assert.ok(!fs.existsSync(onDisk(name)), 'not in public/ itself');
      await expand(page, 'public/reports');
      await entry(page, `public/reports/${name}`).waitFor({ state: 'visible' });
      assert.ok(
        !(await target.evaluate((el) => el.classList.contains('drop-target'))),
        'the highlight goes with the drop',
      );
      assert.equal(page.problems.length, 0, problems(page));
    } finally {
      await page.context().close();
    }
  }
});

test("a drop on a file goes into the file's folder, a drop on a nested folder into it", { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    await expand(page, 'public/reports');
    const onFile = await filesTransfer(page, 'beside.txt', 'beside\n');
    const fileRow = row(page, 'public/reports/existing.txt');
    await fileRow.dispatchEvent('dragover', { dataTransfer: onFile });
    assert.ok(await row(page, 'public/reports').evaluate((el) => el.classList.contains('drop-target')));
    await fileRow.dispatchEvent('drop', { dataTransfer: onFile });
    await waitUntil(() => fs.existsSync(onDisk('reports/beside.txt')), { timeout: 10000, what: 'beside.txt' });

    const nested = await filesTransfer(page, 'deep.md', 'deep\n');
    const nestedRow = row(page, 'public/reports/2026 Q2');
    await nestedRow.dispatchEvent('dragover', { dataTransfer: nested });
    await nestedRow.dispatchEvent('drop', { dataTransfer: nested });
    await waitUntil(() => fs.existsSync(onDisk('reports/2026 Q2/deep.md')), { timeout: 10000, what: 'deep.md' });
  } finally {
    await page.context().close();
  }
});

test('attachments/ takes no dropped files and has no Upload into button', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const posts = [];
    page.on('request', (r) => {
      if (new URL(r.url()).pathname === '/v1/media') posts.push(r.url());
    });
    await expand(page, 'public/attachments');
    for (const p of ['public/attachments', 'public/attachments/inbox']) {
      const dataTransfer = await filesTransfer(page, 'nope.txt', 'no\n');
      const target = row(page, p);
      const accepted = await target.evaluate((el, dt) => {
        const over = new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true });
        el.dispatchEvent(over);
        return over.defaultPrevented;
      }, dataTransfer);
      assert.equal(accepted, false, `${p} refuses the drop`);
      assert.ok(!(await target.evaluate((el) => el.classList.contains('drop-target'))), `${p} is not highlighted`);
      await target.dispatchEvent('drop', { dataTransfer });
    }
    assert.equal(
      await page.getByRole('button', { name: 'Upload into inbox', exact: true }).count(),
      0,
      'no Upload into button inside attachments/',
    );
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(posts, [], 'nothing was sent');
    assert.ok(!fs.existsSync(onDisk('attachments/nope.txt')));
    assert.ok(!fs.existsSync(onDisk('nope.txt')));
  } finally {
    await page.context().close();
  }
});

test('the Upload into button of a folder row uploads into it; Upload still goes to public/', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    const into = page.getByRole('button', { name: 'Upload into reports', exact: true });
    const [chooser] = await Promise.all([page.waitForEvent('filechooser', { timeout: 5000 }), into.click()]);
    await chooser.setFiles({ name: 'chosen.txt', mimeType: 'text/plain', buffer: Buffer.from('chosen\n') });
    await waitUntil(() => fs.existsSync(onDisk('reports/chosen.txt')), { timeout: 10000, what: 'chosen.txt' });
    assert.ok(!fs.existsSync(onDisk('chosen.txt')));

    const [rootChooser] = await Promise.all([
      page.waitForEvent('filechooser', { timeout: 5000 }),
      page.getByRole('button', { name: 'Upload', exact: true }).click(),
    ]);
    await rootChooser.setFiles({ name: 'top.txt', mimeType: 'text/plain', buffer: Buffer.from('top\n') });
    await waitUntil(() => fs.existsSync(onDisk('top.txt')), { timeout: 10000, what: 'top.txt in public/' });
    assert.ok(!fs.existsSync(onDisk('reports/top.txt')));
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});
