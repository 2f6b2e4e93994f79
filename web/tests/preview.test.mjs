// Look before downloading (M-DAILY): clicking a file row opens the preview panel beside
// the tree (a full-width sheet on a phone) with the picture of an image or of a PDF's
// first page, the head of a text, the rows of a CSV, the members of a zip or docx; the
// panel's texts are text, never markup; Download and Close work, Escape closes it and
// the focus goes back to the row. Every file here is made by the test.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { startFerry, launchBrowser, openApp, entry, download, problems, TESTS_DIR } from './support.mjs';

let server;
let browser;

const SCREENSHOTS = path.join(TESTS_DIR, 'screenshots');

// ---------------------------------------------------------------- files made here

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function u32(n) {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

function pngChunk(type, data) {
  const kind = Buffer.from(type, 'latin1');
  return Buffer.concat([u32(data.length), kind, data, u32(crc32(Buffer.concat([kind, data])))]);
}

/** A `width`×`height` RGB PNG: a sky-to-sea gradient with a sun. */
function picturePng(width, height) {
  const raw = Buffer.alloc((1 + 3 * width) * height);
  for (let y = 0; y < height; y += 1) {
    const row = y * (1 + 3 * width);
    for (let x = 0; x < width; x += 1) {
      const i = row + 1 + 3 * x;
      const sun = (x - width * 0.7) ** 2 + (y - height * 0.3) ** 2 < (height * 0.12) ** 2;
      const sea = y > height * 0.6;
      raw[i] = sun ? 250 : sea ? 20 : 90 + Math.round((100 * y) / height);
      raw[i + 1] = sun ? 200 : sea ? 80 + Math.round((60 * x) / width) : 150;
      raw[i + 2] = sun ? 40 : sea ? 140 : 230;
    }
  }
  const header = Buffer.concat([u32(width), u32(height), Buffer.from([8, 2, 0, 0, 0])]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', header),
    pngChunk('IDAT', zlib.deflateSync(raw)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A PDF with one page per text, each in Helvetica with a rule under it. */
function simplePdf(pages) {
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [${pages.map((_, i) => `${4 + 2 * i} 0 R`).join(' ')}] /Count ${pages.length} >>`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  pages.forEach((text, i) => {
    objects.push(
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${5 + 2 * i} 0 R >>`,
    );
    const content = `BT /F1 28 Tf 72 700 Td (${text}) Tj ET 72 680 m 540 680 l 3 w S BT /F1 14 Tf 72 640 Td (Made by the preview test.) Tj ET`;
    objects.push(`<< /Length ${content.length} >>\nstream\n${content}\nendstream`);
  });
  let pdf = '%PDF-1.4\n';
  const offsets = [];
  objects.forEach((object, i) => {
    offsets.push(pdf.length);
    pdf += `${i + 1} 0 obj\n${object}\nendobj\n`;
  });
  const xref = pdf.length;
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) pdf += `${String(offset).padStart(10, '0')} 00000 n \n`;
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(pdf, 'latin1');
}

/** A zip (stored, no compression) of [name, content] members. */
function zipOf(members) {
  const locals = [];
  const centrals = [];
  let offset = 0;
  for (const [name, content] of members) {
    const nameBytes = Buffer.from(name, 'utf8');
    const data = Buffer.from(content);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(nameBytes.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(nameBytes.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, nameBytes, data);
    centrals.push(central, nameBytes);
    offset += local.length + nameBytes.length + data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(members.length, 8);
  end.writeUInt16LE(members.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

const DOCX_TYPES =
  '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">' +
  '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>';
const DOCX_BODY = '<w:document><w:body><w:p><w:r><w:t>Dear reader</w:t></w:r></w:p></w:body></w:document>';

/** Text that would run if it were ever put in as HTML. */
const HOSTILE = '<img src=x onerror="window.__owned=1"><script>window.__owned=2</script>';

before(async () => {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  server = await startFerry();
  browser = await launchBrowser();
  const pub = server.publicDir('me');
  fs.mkdirSync(path.join(pub, 'docs'), { recursive: true });
  fs.writeFileSync(path.join(pub, 'harbour.png'), picturePng(1200, 600));
  fs.writeFileSync(path.join(pub, 'docs', 'report.pdf'), simplePdf(['Hello preview', 'Second page']));
  fs.writeFileSync(path.join(pub, 'notes.md'), `# Notes\n\n${HOSTILE}\nline three\n`);
  fs.writeFileSync(path.join(pub, 'people.csv'), `name,city,note\nAda,London,"says ""hi"", twice"\nGrace,Arlington,${HOSTILE}\n`);
  fs.writeFileSync(
    path.join(pub, 'bundle.zip'),
    zipOf([['readme.txt', 'hello'], ['data/', ''], ['data/table.csv', 'a,b\n1,2\n'], [`${HOSTILE}.txt`, 'x']]),
  );
  fs.writeFileSync(path.join(pub, 'letter.docx'), zipOf([['[Content_Types].xml', DOCX_TYPES], ['word/document.xml', DOCX_BODY]]));
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

const panel = (page) => page.locator('#preview');
const heading = (page) => page.locator('#preview-title');

/** Clicks the row of `p` (its name) and waits for the panel to show that file. */
async function openPreview(page, p) {
  await entry(page, p).locator(':scope > .row > .name').click();
  await panel(page).waitFor({ state: 'visible' });
  await page.waitForFunction((name) => document.getElementById('preview-name').textContent === name, path.basename(p));
  await page.waitForFunction(() => !document.getElementById('preview').hasAttribute('aria-busy'));
}

/** Waits until the panel's picture has loaded; returns its natural size. */
async function pictureSize(page, alt) {
  const img = panel(page).getByRole('img', { name: alt, exact: true });
  await img.waitFor({ state: 'visible', timeout: 20000 });
  await page.waitForFunction((el) => el.complete && el.naturalWidth > 0, await img.elementHandle());
  return img.evaluate((el) => ({ width: el.naturalWidth, height: el.naturalHeight, src: el.src }));
}

async function notOwned(page) {
  assert.equal(await page.evaluate(() => window.__owned), undefined, 'markup from a file ran');
  assert.deepEqual(await page.evaluate(() => window.__cspViolations), []);
}

test('an image opens beside the tree, scaled, and closes with Escape onto its row', { timeout: 60000 }, async () => {
  const page = await openApp(browser, server.url, { viewport: { width: 1440, height: 900 } });
  try {
    await openPreview(page, 'public/harbour.png');
    const size = await pictureSize(page, 'Picture in harbour.png');
    assert.deepEqual([size.width, size.height], [1024, 512]);
    assert.ok(size.src.startsWith('blob:'), `the picture comes through an object URL: ${size.src}`);
    const meta = await page.locator('#preview-meta').textContent();
    assert.match(meta, /1200 × 600 px/);
    assert.match(await panel(page).textContent(), /SHA-256 [0-9a-f]{64}/);

    // Beside the tree: to the right of the Files panel, same row.
    const files = await page.locator('#files').boundingBox();
    const box = await panel(page).boundingBox();
    assert.ok(box.x >= files.x + files.width - 1, `the panel is right of the tree: ${JSON.stringify({ files, box })}`);
    assert.ok(Math.abs(box.y - files.y) < 2, 'the panel is level with the tree');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'preview-image-1440.png') });

    // The focus went to the panel's heading; Escape closes it and returns to the row.
    assert.equal(await page.evaluate(() => document.activeElement.id), 'preview-title');
    await page.keyboard.press('Escape');
    await panel(page).waitFor({ state: 'hidden' });
    assert.equal(await page.evaluate(() => document.activeElement.dataset.path), 'public/harbour.png');
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('a PDF shows its first page drawn, its page count and its text', { timeout: 60000 }, async () => {
  const page = await openApp(browser, server.url, { viewport: { width: 1440, height: 900 } });
  try {
    await entry(page, 'public/docs').waitFor({ state: 'visible' });
    await openPreview(page, 'public/docs/report.pdf');
    const size = await pictureSize(page, 'First page of report.pdf');
    assert.equal(size.height, 1024);
    assert.match(await page.locator('#preview-meta').textContent(), /PDF document · .* · 2 pages/);
    const text = panel(page).getByRole('region', { name: 'File text' }).or(panel(page).locator('pre'));
    assert.match(await text.first().textContent(), /Hello preview/);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'preview-pdf-1440.png') });
    // Download from the panel gives the very file.
    const got = await download(page, () => page.locator('#preview-download').click());
    assert.equal(got.name, 'report.pdf');
    assert.equal(got.failure, null);
    await panel(page).getByRole('button', { name: 'Close', exact: true }).click();
    await panel(page).waitFor({ state: 'hidden' });
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('text and CSV are shown as text, never as markup', { timeout: 60000 }, async () => {
  const page = await openApp(browser, server.url, { viewport: { width: 1440, height: 900 } });
  try {
    // From the keyboard: the row focused, Enter opens the preview.
    const row = entry(page, 'public/notes.md');
    await row.waitFor({ state: 'visible' });
    await row.focus();
    await page.keyboard.press('Enter');
    await panel(page).waitFor({ state: 'visible' });
    await page.waitForFunction(() => document.querySelector('#preview pre') !== null);
    const pre = await panel(page).locator('pre').textContent();
    assert.equal(pre, `# Notes\n\n${HOSTILE}\nline three\n`);
    assert.equal(await panel(page).locator('pre img, pre script').count(), 0);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'preview-text-1440.png') });

    await openPreview(page, 'public/people.csv');
    const table = panel(page).locator('table');
    await table.waitFor({ state: 'visible' });
    const headers = await table.locator('th').allTextContents();
    assert.deepEqual(headers, ['name', 'city', 'note']);
    const cells = await table.locator('tbody tr').first().locator('td').allTextContents();
    assert.deepEqual(cells, ['Ada', 'London', 'says "hi", twice']);
    assert.equal(await table.locator('tbody tr').nth(1).locator('td').nth(2).textContent(), HOSTILE);
    assert.equal(await table.locator('img, script').count(), 0);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'preview-csv-1440.png') });
    await notOwned(page);
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('zip and docx list their members', { timeout: 60000 }, async () => {
  const page = await openApp(browser, server.url, { viewport: { width: 1440, height: 900 } });
  try {
    await openPreview(page, 'public/bundle.zip');
    const list = panel(page).getByRole('list', { name: 'Items in the archive' });
    await list.waitFor({ state: 'visible' });
    const names = await list.locator('.shown-name').allTextContents();
    assert.deepEqual(names, ['readme.txt', 'data/', 'data/table.csv', `${HOSTILE}.txt`]);
    assert.match(await page.locator('#preview-meta').textContent(), /Archive · .* · 4 items/);
    assert.equal(await list.locator('img, script').count(), 0);

    await openPreview(page, 'public/letter.docx');
    const docx = panel(page).getByRole('list', { name: 'Items in the archive' });
    await page.waitForFunction(() => document.querySelectorAll('#preview .member').length === 2);
    assert.deepEqual(await docx.locator('.shown-name').allTextContents(), ['[Content_Types].xml', 'word/document.xml']);
    await page.screenshot({ path: path.join(SCREENSHOTS, 'preview-docx-1440.png') });
    await notOwned(page);
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});

test('on a phone the preview is a full-width sheet with large controls', { timeout: 60000 }, async () => {
  const page = await openApp(browser, server.url, { viewport: { width: 375, height: 812 } });
  try {
    await openPreview(page, 'public/harbour.png');
    await pictureSize(page, 'Picture in harbour.png');
    const box = await panel(page).boundingBox();
    assert.equal(Math.round(box.width), 375);
    assert.equal(Math.round(box.x), 0);
    for (const control of [
      page.getByRole('button', { name: 'Close preview', exact: true }),
      page.locator('#preview-download'),
      panel(page).getByRole('button', { name: 'Close', exact: true }),
    ]) {
      const b = await control.boundingBox();
      assert.ok(b.width >= 40 && b.height >= 40, `a control under 40 px: ${JSON.stringify(b)}`);
    }
    // Nothing wider than the screen.
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 375));
    await page.screenshot({ path: path.join(SCREENSHOTS, 'preview-image-375.png') });

    await page.getByRole('button', { name: 'Close preview', exact: true }).click();
    await panel(page).waitFor({ state: 'hidden' });
    await openPreview(page, 'public/people.csv');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'preview-csv-375.png') });
    await page.keyboard.press('Escape');
    await panel(page).waitFor({ state: 'hidden' });

    await entry(page, 'public/docs').waitFor({ state: 'visible' });
    await openPreview(page, 'public/docs/report.pdf');
    await pictureSize(page, 'First page of report.pdf');
    await page.screenshot({ path: path.join(SCREENSHOTS, 'preview-pdf-375.png') });
    assert.equal(page.problems.length, 0, problems(page));
  } finally {
    await page.context().close();
  }
});
