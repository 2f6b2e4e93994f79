// (h) 375 px wide: no horizontal scroll, both panels visible. Keyboard: Tab reaches
// "Upload" and the tree, and focus is visible. (i) Full-page screenshots as artifacts.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startFerry, launchBrowser, openApp, entry, writeFile, artifact, problems } from './support.mjs';

let server;
let browser;

before(async () => {
  server = await startFerry();
  browser = await launchBrowser();
  const pub = server.publicDir('me');
  writeFile(path.join(pub, 'quarterly-financial-report-final-version-2024-revised.txt'), 'x'.repeat(123456));
  writeFile(path.join(pub, 'reports', '2024', 'q1.txt'), 'q1\n');
  writeFile(path.join(pub, 'notes.md'), '# notes\n');
  writeFile(path.join(pub, 'attachments', 'summary.txt'), 'summary\n');
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('375 px wide: no horizontal scroll, both panels visible', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url, { viewport: { width: 375, height: 812 } });
  try {
    await entry(page, 'public/quarterly-financial-report-final-version-2024-revised.txt').waitFor({ state: 'visible' });
    const widths = await page.evaluate(() => ({
      doc: document.documentElement.scrollWidth,
      body: document.body.scrollWidth,
    }));
    assert.ok(widths.doc <= 375, `document scrollWidth ${widths.doc} > 375`);
    assert.ok(widths.body <= 375, `body scrollWidth ${widths.body} > 375`);
    for (const name of ['Files', 'Chat']) {
      const region = page.getByRole('region', { name, exact: true });
      assert.ok(await region.isVisible(), `the ${name} region is visible`);
      const box = await region.boundingBox();
      assert.ok(box.width > 300 && box.x >= 0 && box.x + box.width <= 375.5, `${name} fits: ${JSON.stringify(box)}`);
    }
    assert.ok(await page.getByRole('button', { name: 'Upload', exact: true }).isVisible());
    assert.ok(await page.getByRole('textbox', { name: 'Message', exact: true }).isVisible());
    assert.ok(await page.getByRole('button', { name: 'Send', exact: true }).isVisible());
    // Every control a finger may need is at least 40 px each way (M-DAILY looks).
    const small = await page.evaluate(() =>
      [...document.querySelectorAll('#files button, #files input, #files select, #chat button, #chat textarea')]
        .filter((el) => el.offsetParent !== null && el.getClientRects().length > 0)
        .map((el) => {
          // A checkbox is pressed through its label, which is the target that counts.
          const target = el.type === 'checkbox' && el.closest('label') ? el.closest('label') : el;
          const r = target.getBoundingClientRect();
          const label = (el.getAttribute('aria-label') || el.textContent || el.id || el.className).trim();
          return { label: label.slice(0, 40), width: Math.round(r.width), height: Math.round(r.height) };
        })
        .filter((b) => b.width < 39.5 || b.height < 39.5),
    );
    assert.deepEqual(small, [], `touch targets under 40 px at 375 px: ${JSON.stringify(small)}`);
    await page.screenshot({ path: artifact('mobile-375.png'), fullPage: true });
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('keyboard: Tab reaches Upload and the tree entries, with visible focus', { timeout: 30000 }, async (t) => {
  const page = await openApp(browser, server.url);
  try {
    await entry(page, 'public/notes.md').waitFor({ state: 'visible' });
    const upload = page.getByRole('button', { name: 'Upload', exact: true });
    const seen = [];
    let uploadFocus = null;
    let treeFocus = null;
    for (let i = 0; i < 80 && !(uploadFocus && treeFocus); i++) {
      await page.keyboard.press('Tab');
      const isUpload = await upload.evaluate((el) => el === document.activeElement);
      const info = await page.evaluate(() => {
        const el = document.activeElement;
        const cs = getComputedStyle(el);
        const item = el.closest('[role="treeitem"]');
        // The indicator may be drawn on the element or on its own row (a direct child).
        const shows = (e) => {
          const s = getComputedStyle(e);
          return (s.outlineStyle !== 'none' && s.outlineWidth !== '0px') || s.boxShadow !== 'none';
        };
        return {
          tag: el.tagName,
          role: el.getAttribute('role'),
          name: (el.getAttribute('aria-label') || el.textContent || '').trim().slice(0, 40),
          treeitem: el.getAttribute('role') === 'treeitem' ? el.getAttribute('data-path') : null,
          inItem: item ? item.getAttribute('data-path') : null,
          outline: `${cs.outlineStyle} ${cs.outlineWidth}`,
          visible: shows(el) || [...el.children].some(shows),
        };
      });
      seen.push(info);
      if (isUpload && !uploadFocus) uploadFocus = info;
      if ((info.treeitem || info.inItem) && !treeFocus) treeFocus = info;
    }
    const trail = seen.map((s) => `${s.tag}[${s.role ?? ''}] ${JSON.stringify(s.name)} ${s.outline}`).join('\n  ');
    t.diagnostic(`focus order:\n  ${trail}`);
    assert.ok(uploadFocus, `Tab reaches the Upload button; focus went:\n  ${trail}`);
    assert.ok(treeFocus, `Tab reaches the tree entries; focus went:\n  ${trail}`);
    t.diagnostic(`first tree focus: ${JSON.stringify(treeFocus)}`);
    assert.ok(uploadFocus.visible, `focus on Upload is visible: ${JSON.stringify(uploadFocus)}`);
    assert.ok(treeFocus.visible, `focus on the tree entry is visible: ${JSON.stringify(treeFocus)}`);
  } finally {
    await page.context().close();
  }
});

test('full-page screenshot', { timeout: 30000 }, async () => {
  const page = await openApp(browser, server.url);
  try {
    await entry(page, 'public/notes.md').waitFor({ state: 'visible' });
    await page.screenshot({ path: artifact('files-and-chat.png'), fullPage: true });
  } finally {
    await page.context().close();
  }
});
