// Drives the tracekit explorer page in Chromium and compares what it shows with values the
// CLI computed (written by crates/tracekit/tests/cli/browser.rs).
//
//   node explorer.mjs URL EXPECTED.json [SCREENSHOT.png]
//
// The browser is $CHROMIUM, else `chromium` or `chromium-browser` on PATH (playwright-core
// downloads none). Exits 1 with a message on the first mismatch, 2 on a usage error.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const [url, expectedPath, screenshot] = process.argv.slice(2);
if (!url || !expectedPath) {
  console.error('usage: node explorer.mjs URL EXPECTED.json [SCREENSHOT.png]');
  process.exit(2);
}
const want = JSON.parse(readFileSync(expectedPath, 'utf8'));

function findChromium() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
    } catch {
      // not this one
    }
  }
  console.error('explorer.mjs: no Chromium (set CHROMIUM or put chromium on PATH)');
  process.exit(2);
}

class Mismatch extends Error {}
function check(ok, what) {
  if (!ok) throw new Mismatch(what);
}
function equal(actual, expected, what) {
  check(actual === expected, `${what}: the page shows ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
}

const browser = await chromium.launch({ executablePath: findChromium() });
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
page.setDefaultTimeout(15000);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));

// Waits until step i is the selected row and both panels show it (loaded, not busy).
async function selected(i, what) {
  try {
    await page.waitForSelector(`#list-rows .row.selected[data-i="${i}"]:not(.loading)`);
    await page.waitForSelector(`#regs-panel[data-i="${i}"]:not([aria-busy])`);
    await page.waitForSelector(`#mem-panel[data-i="${i}"]:not([aria-busy])`);
  } catch {
    const now = await page.evaluate(() => {
      const row = document.querySelector('#list-rows .row.selected');
      return row ? row.dataset.i : 'none';
    });
    throw new Mismatch(`${what}: expected step ${i} selected, the page has ${now}` +
      ` (${await page.textContent('#error')}${await page.textContent('#status-note')})`);
  }
}

async function jump(text, i) {
  await page.fill('#jump', text);
  await page.press('#jump', 'Enter');
  await selected(i, `jump box "${text}"`);
}

async function key(k, i) {
  await page.focus('#list');
  await page.keyboard.press(k);
  await selected(i, `key ${k}`);
}

async function checkRow(i, row) {
  const cells = await page.$$eval(`#list-rows .row[data-i="${i}"] > span`, (s) => s.map((c) => c.textContent));
  equal(cells[0], String(i), `row ${i} index`);
  equal(cells[1], String(row.thread), `row ${i} thread`);
  equal(cells[2], row.pc, `row ${i} pc`);
  equal(cells[3], row.asm, `row ${i} disassembly`);
}

async function checkRegs(state, changed) {
  const shown = await page.$$eval('#regs .reg', (cells) =>
    cells.map((c) => [c.dataset.reg, c.querySelector('.reg-val').textContent, c.classList.contains('changed')]));
  const names = Object.keys(state.regs);
  equal(shown.length, names.length, `number of registers at step ${state.i}`);
  const byName = new Map(shown.map(([n, v, c]) => [n, { v, c }]));
  for (const n of names) {
    check(byName.has(n), `register ${n} is missing from the panel at step ${state.i}`);
    equal(byName.get(n).v, state.regs[n], `register ${n} at step ${state.i}`);
  }
  const marked = shown.filter(([, , c]) => c).map(([n]) => n).sort();
  equal(marked.join(','), [...changed].sort().join(','), `registers highlighted as changed at step ${state.i}`);
  equal(await page.getAttribute('#regs-panel', 'data-thread'), String(state.thread), `thread of step ${state.i}`);
}

async function checkMem(mem) {
  equal(await page.getAttribute('#mem-panel', 'data-addr'), mem.addr, `memory view address at step ${mem.i}`);
  const cells = await page.$$eval('#mem .b', (bs) =>
    bs.map((b) => [b.dataset.addr, b.textContent, b.dataset.source ?? null, b.dataset.inferred === 'true']));
  equal(cells.length, mem.len, `bytes in the memory view at step ${mem.i}`);
  const base = BigInt(mem.addr);
  for (let k = 0; k < mem.len; k++) {
    const [addr, text, source, inferred] = cells[k];
    const what = `memory byte ${mem.addr}+${k} at step ${mem.i}`;
    equal(addr, `0x${(base + BigInt(k)).toString(16)}`, `${what} address`);
    const b = mem.bytes[k];
    equal(text, b === null ? '??' : b.toString(16).padStart(2, '0'), what);
    equal(source, mem.source[k] === null ? null : String(mem.source[k]), `${what} source`);
    equal(inferred, mem.inferred[k] === true, `${what} inferred mark`);
  }
}

async function mainChecks() {
  // The known row, by the jump box (hex), with its registers and memory.
  await jump(`0x${want.at.toString(16)}`, want.at);
  await checkRow(want.at, want.row);
  await checkRegs(want.state, want.changed);
  await checkMem(want.mem);

  // The same row reached by scrolling the list: back to the top, then wheel down to it.
  await jump('0', 0);
  const box = await page.locator('#list').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  // Big wheel steps while far away (100 rows each), then single notches (5 rows).
  for (let k = 0; ; k++) {
    check(k < 200, `row ${want.at} not reached by scrolling the list`);
    const topRow = Number(await page.getAttribute('#list', 'data-top'));
    const el = await page.$(`#list-rows .row[data-i="${want.at}"]:not(.loading)`);
    const r = el && (await el.boundingBox());
    if (r && r.y > box.y + 40 && r.y + r.height < box.y + box.height - 40) break;
    await page.mouse.wheel(0, want.at - topRow > 120 ? 2000 : 100);
    await page.waitForTimeout(20);
  }
  await page.click(`#list-rows .row[data-i="${want.at}"]`);
  await selected(want.at, 'clicking the row scrolled to with the wheel');
  await checkRegs(want.state, want.changed);
  await checkMem(want.mem);

  // Dragging the scrollbar: the top row follows scrollTop (unscaled for a small trace).
  const top = await page.evaluate(() => {
    const list = document.querySelector('#list');
    list.scrollTop = 20 * 100;
    return new Promise((resolve) => setTimeout(() => requestAnimationFrame(() => resolve(list.dataset.top)), 100));
  });
  equal(top, '100', 'top row after setting the scrollbar to 100 rows');
  await page.waitForSelector('#list-rows .row[data-i="100"]:not(.loading)');

  // Keyboard stepping.
  await key('j', want.at + 1);
  await key('k', want.at);
  await key('ArrowDown', want.at + 1);
  await key('ArrowUp', want.at);
  await key('n', want.next_same_pc);
  await key('p', want.at);
  await key('p', want.prev_same_pc);
  await jump(`pc=${want.row.pc}`, want.at);

  // Clicking a register goes to its writer.
  await jump(String(want.at), want.at);
  await page.click(`#regs [data-reg="${want.reg}"] .reg-name`);
  await selected(want.reg_writer, `clicking register ${want.reg}`);

  // Shift+clicking a register goes to the next step that reads it, where /api/reader says
  // (its answers are checked against the instructions' operands in tests/cli/serve.rs);
  // without one, the selection stays.
  await jump(String(want.at), want.at);
  const token = new URL(url).searchParams.get('token');
  const reader = await page.evaluate(async ([i, reg, t]) => {
    const r = await fetch(`/api/reader?i=${i}&reg=${reg}`, { headers: { Authorization: `Bearer ${t}` } });
    return (await r.json()).reader;
  }, [want.at, want.reg, token]);
  await page.click(`#regs [data-reg="${want.reg}"] .reg-name`, { modifiers: ['Shift'] });
  console.log(`explorer: ${want.reg} at step ${want.at} is next read by step ${reader}`);
  await selected(reader ?? want.at, `shift-clicking register ${want.reg}`);

  // Clicking a byte goes to its source; "Next read" to the next read of it.
  await jump(String(want.at), want.at);
  await page.click(`#mem .b[data-addr="${want.byte}"]`);
  await selected(want.byte_source, `clicking byte ${want.byte}`);
  await page.click('#next-read');
  await selected(want.byte_next_read, `"Next read" of byte ${want.byte} from step ${want.byte_source}`);

  // Back on the known row for the screenshot (the CI artifact).
  await jump(String(want.at), want.at);
}

// Waits until step i is selected and the call panel shows its frames.
async function selectedWithCalls(i, what) {
  await selected(i, what);
  try {
    await page.waitForSelector(`#calls-panel[data-i="${i}"]:not([aria-busy])`);
  } catch {
    throw new Mismatch(`${what}: the call panel does not show step ${i} (${await page.textContent('#frames')})`);
  }
}

// The timeline's lane (0 pc, 1 writes, 2 reads) clicked at the mark of step i: one of
// `marks` more than 3 px from its neighbours, so that the click (wherever the browser
// rounds the pointer to) is nearest to it and snaps to it.
async function clickMark(lane, marks, what) {
  const r = await page.locator('#timeline').boundingBox();
  const x = (i) => ((i + 0.5) / want.steps) * r.width;
  const now = Number(await page.getAttribute('#timeline', 'data-selected'));
  const alone = marks.filter((i, k) => (k === 0 || x(i) - x(marks[k - 1]) > 3) &&
    (k === marks.length - 1 || x(marks[k + 1]) - x(i) > 3));
  // Another step than the one selected, where there is one: the click must move.
  const lone = alone.find((i) => i !== now) ?? alone[0];
  if (lone === undefined) {
    console.log(`explorer: ${what}: no mark stands alone on the strip; not clicked`);
    return;
  }
  await page.mouse.click(r.x + x(lone), r.y + 10 * lane + 5);
  await selectedWithCalls(lone, `clicking the timeline's ${what} mark of step ${lone}`);
}

async function timelineCount(lane, attr, n, what) {
  await page.waitForSelector(`#timeline${attr}:not([data-pc-loading]):not([data-mem-loading])`);
  const shown = await page.getAttribute('#timeline', `data-${lane}-marks`);
  equal(shown, String(n), `timeline: ${what}`);
}

async function callChecks(c) {
  await jump(String(c.at), c.at);
  await selectedWithCalls(c.at, `jump to ${c.at}`);
  const frames = await page.$$eval('#frames .frame', (fs) => fs.map((f) => ({
    i: f.dataset.call,
    entry: f.dataset.entry,
    ret: f.dataset.ret,
    name: f.querySelector('.frame-name').textContent,
    depth: f.style.getPropertyValue('--depth'),
  })));
  equal(frames.length, c.frames.length, `frames open at step ${c.at}`);
  c.frames.forEach((f, k) => {
    const what = `frame ${k} at step ${c.at}`;
    equal(frames[k].i, String(f.i), `${what}: call step`);
    equal(frames[k].entry, String(f.entry_i), `${what}: entry`);
    equal(frames[k].ret, f.ret_i === null ? '' : String(f.ret_i), `${what}: return`);
    equal(frames[k].name, f.symbol, `${what}: name`);
    equal(frames[k].depth, String(f.depth), `${what}: depth`);
  });
  console.log(`explorer: ${frames.length} frames open at step ${c.at}`);

  // The innermost frame's entry and return buttons.
  const top = c.frames[c.frames.length - 1];
  await page.click('#frames .frame:last-child .frame-entry');
  await selectedWithCalls(top.entry_i, 'clicking the innermost frame\'s entry');
  await jump(String(c.at), c.at);
  await selectedWithCalls(c.at, `back to ${c.at}`);
  await page.click('#frames .frame:last-child .frame-ret');
  await selectedWithCalls(top.ret_i, 'clicking the innermost frame\'s return');

  // f and F.
  await jump(String(c.at), c.at);
  await selectedWithCalls(c.at, `back to ${c.at}`);
  await key('f', c.finish);
  await selectedWithCalls(c.finish, 'f (finish)');
  await jump(String(c.at), c.at);
  await selectedWithCalls(c.at, `back to ${c.at}`);
  await key('F', c.reverse_finish);
  await selectedWithCalls(c.reverse_finish, 'F (reverse-finish)');
  await key('F', c.reverse_finish2);
  await selectedWithCalls(c.reverse_finish2, 'F again');

  // The timeline: the executions of the pc run most, then a click on one.
  await jump(String(c.pc_at), c.pc_at);
  await selectedWithCalls(c.pc_at, `jump to ${c.pc_at}`);
  await timelineCount('pc', `[data-pc="${c.pc}"]`, c.pc_steps.length, `marks of pc ${c.pc}`);
  equal(await page.getAttribute('#timeline', 'data-pc-capped'), String(c.pc_capped), 'timeline: pc marks capped');
  console.log(`explorer: ${c.pc_steps.length} marks of pc ${c.pc}`);
  await clickMark(0, c.pc_steps, `pc ${c.pc}`);
  // A click away from every mark: the step under the pointer.
  const r = await page.locator('#timeline').boundingBox();
  const marks = new Set(c.pc_steps);
  const free = [...Array(want.steps).keys()].find((i) => i > want.steps / 4 &&
    c.pc_steps.every((m) => Math.abs(((m - i) / want.steps) * r.width) > 12));
  if (free !== undefined && !marks.has(free)) {
    const x = ((free + 0.5) / want.steps) * r.width;
    await page.mouse.click(r.x + x, r.y + 5);
    const got = Number(await page.evaluate(() =>
      new Promise((res) => setTimeout(() => res(document.querySelector('#timeline').dataset.selected), 100))));
    check(Math.abs(got - free) <= Math.ceil(want.steps / r.width) + 1,
      `clicking the timeline at step ${free} away from the marks selects step ${got}`);
    await selectedWithCalls(got, 'clicking the timeline away from the marks');
  }

  // The writes and reads of a byte clicked in the memory view.
  if (c.byte) {
    await jump(String(c.at), c.at);
    await selectedWithCalls(c.at, `back to ${c.at}`);
    await page.click(`#mem .b[data-addr="${c.byte.addr}"]`);
    await selectedWithCalls(c.byte.source, `clicking byte ${c.byte.addr}`);
    await timelineCount('write', `[data-addr="${c.byte.addr}"]`, c.byte.writes.length, `writes of ${c.byte.addr}`);
    await timelineCount('read', `[data-addr="${c.byte.addr}"]`, c.byte.reads.length, `reads of ${c.byte.addr}`);
    await clickMark(1, c.byte.writes, `write of ${c.byte.addr}`);
    await clickMark(2, c.byte.reads, `read of ${c.byte.addr}`);
  } else {
    console.log('explorer: no byte of the memory view is both written and read; not checked');
  }
  await jump(String(c.at), c.at);
  await selectedWithCalls(c.at, `back to ${c.at}`);
}

// Waits until the origin panel shows `target` before step `at`, and returns its hops.
async function originShown(at, target, what) {
  try {
    await page.waitForSelector(`#origin-panel[data-i="${at}"][data-target="${target}"]:not([hidden]):not([aria-busy])`);
    await page.waitForSelector('#origin-stop[data-kind]:not([data-kind=""])');
  } catch {
    throw new Mismatch(`${what}: the origin panel does not show ${target} before step ${at}` +
      ` (${await page.textContent('#origin-title')}: ${await page.textContent('#origin-stop')})`);
  }
  return page.$$eval('#origin-hops .hop', (hs) => hs.map((h) => ({
    i: h.dataset.step === undefined ? null : Number(h.dataset.step),
    kind: h.dataset.kind,
    loc: h.dataset.loc,
  })));
}

function sameHops(shown, hops, what) {
  equal(shown.length, hops.length, `${what}: number of hops`);
  hops.forEach((h, k) => {
    equal(shown[k].i, h.i, `${what}: hop ${k}'s step`);
    equal(shown[k].kind, h.kind, `${what}: hop ${k}'s kind`);
    equal(shown[k].loc, h.loc, `${what}: hop ${k}'s location`);
  });
}

async function originChecks(o) {
  // A register's origin button: the chain of `tracekit origin --json`, its stop kind shown.
  await jump(String(o.at), o.at);
  await page.click(`#regs [data-reg="${o.reg}"] .reg-origin`);
  const what = `origin of ${o.reg} before step ${o.at}`;
  sameHops(await originShown(o.at, o.reg, what), o.reg_hops, what);
  const last = o.reg_hops[o.reg_hops.length - 1];
  equal(await page.getAttribute('#origin-stop', 'data-kind'), last.kind, `${what}: the stop kind`);
  const stopText = await page.textContent('#origin-stop');
  check(stopText.startsWith(last.kind === 'copy' ? 'cut' : last.kind), `${what}: the stop says "${stopText}"`);
  console.log(`explorer: ${what}: ${o.reg_hops.length} hops, ${stopText}`);
  // Clicking a hop goes to its step; the panel stays.
  const hop = o.reg_hops.filter((h) => h.i !== null && h.i !== o.at).pop();
  await page.click(`#origin-hops .hop[data-step="${hop.i}"] .hop-step`);
  await selected(hop.i, `clicking the hop of step ${hop.i} in the ${what}`);
  equal(await page.getAttribute('#origin-panel', 'data-i'), String(o.at), 'the origin panel after a hop click');

  // Alt+click on a byte: its origin, the step unchanged.
  if (o.byte) {
    await jump(String(o.at), o.at);
    await page.click(`#mem .b[data-addr="${o.byte}"]`, { modifiers: ['Alt'] });
    const target = `${o.byte}:1`;
    const bwhat = `origin of byte ${o.byte} before step ${o.at}`;
    sameHops(await originShown(o.at, target, bwhat), o.byte_hops, bwhat);
    await selected(o.at, `Alt+clicking byte ${o.byte}`);
    console.log(`explorer: ${bwhat}: ${o.byte_hops.length} hops`);
    // A plain click goes to the byte's source; "Origin" then asks before the step it was
    // clicked at, not the source step.
    await page.click(`#mem .b[data-addr="${o.byte}"]`);
    await selected(o.byte_source, `clicking byte ${o.byte}`);
    await page.click('#origin-close');
    await page.click('#byte-origin');
    sameHops(await originShown(o.at, target, `"Origin" of ${bwhat}`), o.byte_hops, `"Origin" of ${bwhat}`);
  }
  await page.click('#origin-close');
  await page.waitForSelector('#origin-panel[hidden]', { state: 'attached' });
  await jump(String(o.at), o.at);
}

let failed = false;
try {
  const t0 = Date.now();
  await page.goto(url);
  await page.waitForSelector('#list-rows .row[data-i="0"]:not(.loading)');
  await selected(0, 'the first step after loading');
  console.log(`explorer: first rows after ${Date.now() - t0} ms`);
  await page.waitForFunction((n) => document.querySelector('#status-text').textContent.includes(n),
    want.steps.toLocaleString('en'));
  equal(await page.getAttribute('#list', 'aria-rowcount'), String(want.steps), 'row count');

  if (want.row) await mainChecks();
  if (want.calls) await callChecks(want.calls);
  if (want.origin) await originChecks(want.origin);
  if (want.no_calls) {
    // Not an x86 stream: no call tree, and `f` says so.
    await page.waitForSelector('#calls-panel.unavailable[data-i="0"]');
    const text = await page.textContent('#frames');
    check(text.includes('x86'), `the call panel of a stream that is not x86 says "${text}"`);
    await page.focus('#list');
    await page.keyboard.press('f');
    await page.waitForFunction(() => document.querySelector('#status-note').textContent.includes('no call tree'));
    await selected(0, 'f without a call tree');
  }
  check(pageErrors.length === 0, `errors in the page: ${pageErrors.join('; ')}`);
  if (screenshot) await page.screenshot({ path: screenshot });
  console.log('explorer: all checks passed');
} catch (e) {
  failed = true;
  if (screenshot) await page.screenshot({ path: screenshot }).catch(() => {});
  console.error(`explorer: ${e instanceof Mismatch ? 'MISMATCH' : 'ERROR'}: ${e.message}`);
  if (pageErrors.length) console.error(`explorer: errors in the page: ${pageErrors.join('; ')}`);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
