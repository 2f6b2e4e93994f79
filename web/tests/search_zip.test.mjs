// M-DAILY "Find things" and "Whole folders" in the Files panel: the search box (names
// with accents and case folded, contents on asking, metacharacters literal, Escape back
// to the tree, a result revealed in the tree or downloaded) and "Download as zip" on a
// folder row, the zip's bytes checked by Python's zipfile. Screenshots at 1440 and 375.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { startFerry, launchBrowser, openApp, entry, writeFile, waitUntil, problems, TESTS_DIR } from './support.mjs';

let server;
let browser;
let pub;

const SHOTS = path.join(TESTS_DIR, 'screenshots');

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  pub = server.publicDir('me');
  writeFile(path.join(pub, 'Relatório Final.pdf'), '%PDF-1.4 not really\n');
  writeFile(path.join(pub, 'reports', 'RELATORIO-anual.txt'), 'year\n');
  writeFile(path.join(pub, 'reports', 'notes.md'), '# Notes\n\nThe quarterly Résumé numbers are in.\n');
  writeFile(path.join(pub, 'reports', 'deep', 'a.*b.txt'), 'literal\n');
  writeFile(path.join(pub, 'reports', 'deep', 'axxb.txt'), 'not literal\n');
  fs.mkdirSync(path.join(pub, 'reports', 'vazio'), { recursive: true });
  writeFile(path.join(pub, 'attachments', 'inbox.txt'), 'delivered\n');
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

async function withPage(fn, viewport) {
  const page = await openApp(browser, server.url, viewport ? { viewport } : undefined);
  try {
    await entry(page, 'public/attachments').waitFor({ state: 'visible' });
    await fn(page);
    assert.deepEqual(page.problems, [], problems(page));
  } finally {
    await page.context().close();
  }
}

const results = (page) => page.getByRole('list', { name: 'Search results' });

/** The paths shown as results, once the status says the search is done. */
async function shownPaths(page) {
  const status = page.locator('#search-status');
  await waitUntil(async () => !/Searching/.test((await status.textContent()) || ''), {
    what: 'the search to answer',
  });
  return results(page)
    .locator('button[data-path]')
    .evaluateAll((buttons) => buttons.map((b) => b.dataset.path));
}

async function search(page, text, { content = false } = {}) {
  const box = page.getByRole('searchbox', { name: 'Search files' });
  const inContent = page.getByRole('checkbox', { name: 'in file contents' });
  if ((await inContent.isChecked()) !== content) await inContent.setChecked(content);
  await box.fill(text);
  await waitUntil(async () => (await page.locator('#search-status').textContent()) !== '', {
    what: 'a search status',
  });
}

test('search by name folds accents and case, Escape brings the tree back', { timeout: 40000 }, async () => {
  await withPage(async (page) => {
    await search(page, 'RELATÓRIO');
    await waitUntil(async () => (await shownPaths(page)).length === 2, { what: 'two results' });
    assert.deepEqual(await shownPaths(page), ['public/Relatório Final.pdf', 'public/reports/RELATORIO-anual.txt']);
    assert.ok(await page.locator('#tree-wrap').isHidden(), 'the results replace the tree');
    assert.match(await page.locator('#search-status').textContent(), /2 results in names/);
    await search(page, 'relatorio');
    assert.equal((await shownPaths(page)).length, 2);

    await page.getByRole('searchbox', { name: 'Search files' }).press('Escape');
    assert.equal(await page.getByRole('searchbox', { name: 'Search files' }).inputValue(), '');
    await page.locator('#tree-wrap').waitFor({ state: 'visible' });
    assert.ok(await page.locator('#search-view').isHidden());
  });
});

test('metacharacters are literal', { timeout: 30000 }, async () => {
  await withPage(async (page) => {
    await search(page, '.*');
    await waitUntil(async () => (await shownPaths(page)).length === 1, { what: 'one result' });
    assert.deepEqual(await shownPaths(page), ['public/reports/deep/a.*b.txt']);
    await search(page, 'a.b');
    await waitUntil(async () => /Nothing found/.test(await page.locator('#search-status').textContent()), {
      what: 'nothing found',
    });
    assert.deepEqual(await shownPaths(page), []);
  });
});

test('search in contents shows the line; a result reveals the file or downloads it', { timeout: 40000 }, async () => {
  for (const width of [1440, 375]) {
    await withPage(
      async (page) => {
        await search(page, 'resume');
        await waitUntil(async () => /Nothing found/.test(await page.locator('#search-status').textContent()), {
          what: 'no name match',
        });
        await search(page, 'résumé', { content: true });
        await waitUntil(async () => (await shownPaths(page)).length === 1, { what: 'a content match' });
        const row = results(page).locator('li').first();
        assert.match(await row.textContent(), /3: The quarterly Résumé numbers are in\./);
        assert.match(await row.textContent(), /public\/reports/);
        fs.mkdirSync(SHOTS, { recursive: true });
        await page.screenshot({ path: path.join(SHOTS, `search-${width}.png`), fullPage: true });
        if (width === 375) {
          const widths = await page.evaluate(() => ({
            doc: document.documentElement.scrollWidth,
            body: document.body.scrollWidth,
          }));
          assert.ok(widths.doc <= 375 && widths.body <= 375, `no horizontal scroll: ${JSON.stringify(widths)}`);
          for (const target of [
            page.getByRole('searchbox', { name: 'Search files' }),
            row.getByRole('button', { name: /Show in the tree/ }),
            row.getByRole('button', { name: 'Download notes.md' }),
          ]) {
            const box = await target.boundingBox();
            assert.ok(box.height >= 40, `touch target ${box.height}px tall`);
          }
        }

        const [dl] = await Promise.all([
          page.waitForEvent('download'),
          row.getByRole('button', { name: 'Download notes.md' }).click(),
        ]);
        assert.equal(dl.suggestedFilename(), 'notes.md');
        assert.match(fs.readFileSync(await dl.path(), 'utf8'), /quarterly Résumé/);

        await row.getByRole('button', { name: /Show in the tree/ }).click();
        await page.locator('#tree-wrap').waitFor({ state: 'visible' });
        const item = entry(page, 'public/reports/notes.md');
        await item.waitFor({ state: 'visible' });
        await waitUntil(async () => page.evaluate(() => document.activeElement?.dataset?.path), {
          what: 'the revealed row to take the focus',
        });
        assert.equal(await page.evaluate(() => document.activeElement.dataset.path), 'public/reports/notes.md');
      },
      { width, height: 900 },
    );
  }
});

test('Download as zip on a folder row gives the folder whole', { timeout: 40000 }, async () => {
  for (const width of [1440, 375]) {
    await withPage(
      async (page) => {
        const folder = entry(page, 'public/reports');
        await folder.waitFor({ state: 'visible' });
        fs.mkdirSync(SHOTS, { recursive: true });
        await page.screenshot({ path: path.join(SHOTS, `zip-row-${width}.png`), fullPage: true });
        const button = page.getByRole('button', { name: 'Download as zip reports', exact: true });
        if (width === 375) {
          const box = await button.boundingBox();
          assert.ok(box.width > 0 && box.x + box.width <= 375.5, `the button fits: ${JSON.stringify(box)}`);
        }
        const [dl] = await Promise.all([page.waitForEvent('download'), button.click()]);
        assert.equal(dl.suggestedFilename(), 'reports.zip');
        assert.equal(await dl.failure(), null);
        const saved = await dl.path();
        const listing = JSON.parse(
          execFileSync('python3', [
            '-c',
            `import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
print(json.dumps({i.filename: z.read(i).decode() for i in z.infolist()}))`,
            saved,
          ]).toString(),
        );
        assert.deepEqual(listing, {
          'reports/': '',
          'reports/RELATORIO-anual.txt': 'year\n',
          'reports/deep/': '',
          'reports/deep/a.*b.txt': 'literal\n',
          'reports/deep/axxb.txt': 'not literal\n',
          'reports/notes.md': '# Notes\n\nThe quarterly Résumé numbers are in.\n',
          'reports/vazio/': '',
        });
        // The system's folder keeps no controls.
        assert.equal(await page.getByRole('button', { name: 'Download as zip attachments' }).count(), 0);
      },
      { width, height: 900 },
    );
  }
});
