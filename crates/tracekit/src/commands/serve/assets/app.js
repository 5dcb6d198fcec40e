// The tracekit explorer: a virtualised instruction list, the registers, memory and open
// call frames at the selected step, a timeline strip of the whole trace, "who wrote
// this" navigation and the origin of a value hop by hop, over the JSON API of `tracekit serve`
// (documented in crates/tracekit/src/commands/serve/mod.rs). Plain ES2020, no build step.
'use strict';

(() => {
  const ROW_H = 20; // px, the height of one list row (`.row` in style.css)
  // Browsers cap an element's height (about 33 M px in Chromium, 17 M px in Firefox), so a
  // list taller than this maps its scrollbar onto the rows with a scale factor.
  const MAX_SCROLL_H = 8_000_000;
  const PAGE = 500; // rows per /api/rows request (the API allows up to 1,000)
  const MAX_PAGES = 64; // pages kept in the LRU cache (32,000 rows)
  const MAX_FETCHES = 4; // row pages fetched at once
  const MARGIN = 10; // rows rendered above and below the viewport
  const MEM_LEN = 256; // bytes in the memory view
  const MAX_STATES = 32; // register states kept in the LRU cache
  const READ_PAGES = 20; // xref pages searched for "next read" before giving up
  const READ_PAGE = 1000; // hits per xref page

  const $ = (id) => document.getElementById(id);
  // The token travels only in the Authorization header, never in a URL the page builds;
  // it is kept in memory and taken out of the address bar (and so out of the history).
  const token = new URLSearchParams(location.search).get('token') || '';
  if (token) history.replaceState(null, '', location.pathname + location.hash);

  // ---- API ---------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(message, status) {
      super(message);
      this.status = status;
    }
  }

  async function api(path, params = {}, signal = undefined) {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) query.set(k, String(v));
    const res = await fetch(`/api/${path}?${query}`, {
      headers: { Authorization: `Bearer ${token}` },
      cache: 'no-store',
      signal,
    });
    let body = null;
    try {
      body = await res.json();
    } catch {
      // An answer that is not JSON: reported by its status below.
    }
    if (!res.ok) {
      const what = body && body.error ? body.error : `${res.status} ${res.statusText}`;
      throw new ApiError(`${path}: ${what}`, res.status);
    }
    return body;
  }

  const isAbort = (e) => e && e.name === 'AbortError';

  let errorTimer = 0;
  function showError(e) {
    if (isAbort(e)) return;
    const box = $('error');
    box.textContent = String(e && e.message ? e.message : e);
    box.hidden = false;
    clearTimeout(errorTimer);
    errorTimer = setTimeout(() => { box.hidden = true; }, 8000);
  }

  function note(text) {
    $('status-note').textContent = text;
  }

  // ---- numbers ------------------------------------------------------------------------

  // A step number or address typed by the user: decimal or 0x hex, as the API takes them.
  function parseNumber(text) {
    const t = text.trim();
    if (!/^(0x[0-9a-f]+|[0-9]+)$/i.test(t)) return null;
    return BigInt(t);
  }

  const hex = (n) => `0x${n.toString(16)}`;
  const hex2 = (b) => b.toString(16).padStart(2, '0');
  const clamp = (x, lo, hi) => Math.min(Math.max(x, lo), hi);

  // ---- model --------------------------------------------------------------------------

  const st = {
    steps: null, // the step count from /api/status, null until known
    provisional: 0, // a lower bound on the count while `steps` is null
    noun: 'instruction',
    format: '', // from /api/status: how rows record registers (see writtenText)
    isa: '', // from /api/status: x64, x86, ppc or other (calls are found in x86 and x64)
    index: '', // from /api/status: the index's state (the strip waits while it is built)
    wordSize: 8,
    topRow: 0, // the (fractional) row at the top of the viewport
    selected: null,
    memBase: null, // BigInt: the first address of the memory view
    byte: null, // BigInt: the byte clicked last
    byteAt: null, // the step selected when it was clicked (its origin is asked before it)
    followTouched: false,
  };
  const count = () => (st.steps === null ? st.provisional : st.steps);

  // A Map used as an LRU cache: `get` moves the entry to the back.
  class Lru {
    constructor(max) {
      this.max = max;
      this.map = new Map();
    }
    get(k) {
      const v = this.map.get(k);
      if (v !== undefined) {
        this.map.delete(k);
        this.map.set(k, v);
      }
      return v;
    }
    set(k, v) {
      this.map.delete(k);
      this.map.set(k, v);
      while (this.map.size > this.max) this.map.delete(this.map.keys().next().value);
    }
  }

  const pages = new Lru(MAX_PAGES);
  const inflight = new Map(); // page number -> AbortController
  const failed = new Map(); // page number -> time of the failure (retried after 5 s)
  const states = new Lru(MAX_STATES);

  function rowAt(i) {
    const page = pages.get(Math.floor(i / PAGE));
    return page ? page[i % PAGE] : undefined;
  }

  function fetchPage(p) {
    const ctl = new AbortController();
    inflight.set(p, ctl);
    api('rows', { from: p * PAGE, count: PAGE }, ctl.signal)
      .then((ans) => {
        pages.set(p, ans.rows);
        failed.delete(p);
        if (ans.error) showError(new Error(`rows from ${ans.from + ans.rows.length}: ${ans.error}`));
        const end = ans.from + ans.rows.length;
        if (st.steps === null) {
          if (ans.end) setSteps(end);
          else st.provisional = Math.max(st.provisional, end + PAGE);
          layout();
        }
      })
      .catch((e) => {
        if (!isAbort(e)) {
          failed.set(p, Date.now());
          showError(e);
          setTimeout(scheduleRender, 5100); // retried if still in view
        }
      })
      .finally(() => {
        if (inflight.get(p) === ctl) inflight.delete(p);
        scheduleRender();
      });
  }

  // Fetches the pages covering rows [first, last); drops fetches no longer in view.
  function wantRows(first, last) {
    const want = new Set();
    if (last > first) {
      for (let p = Math.floor(first / PAGE); p <= Math.floor((last - 1) / PAGE); p++) want.add(p);
    }
    for (const [p, ctl] of inflight) {
      if (!want.has(p)) {
        ctl.abort();
        inflight.delete(p);
      }
    }
    for (const p of want) {
      if (inflight.size >= MAX_FETCHES) break;
      const failedAt = failed.get(p);
      if (pages.map.has(p) || inflight.has(p) || (failedAt && Date.now() - failedAt < 5000)) continue;
      fetchPage(p);
    }
  }

  async function getState(i, signal) {
    const hit = states.get(i);
    if (hit) return hit;
    const s = await api('state', { i }, signal);
    states.set(i, s);
    return s;
  }

  // ---- the virtualised list -------------------------------------------------------------

  const list = $('list');
  const view = $('list-view');
  const rowsEl = $('list-rows');
  const spacer = $('list-spacer');
  let viewH = 0;
  let expectedScrollTop = -1; // the scrollTop we set ourselves (its scroll event is ignored)

  const visible = () => viewH / ROW_H; // rows in the viewport (fractional)
  const maxTop = () => Math.max(0, count() - visible());
  const scrollRange = () => Math.max(0, list.scrollHeight - list.clientHeight);

  function setSteps(n) {
    if (st.steps === n) return;
    st.steps = n;
    list.setAttribute('aria-rowcount', String(n));
    $('list-panel').style.setProperty('--c-i', `${Math.max(4, String(Math.max(0, n - 1)).length)}ch`);
    layout();
    drawTimeline();
  }

  function layout() {
    viewH = list.clientHeight;
    view.style.height = `${viewH}px`;
    const total = Math.max(viewH, Math.min(count() * ROW_H, MAX_SCROLL_H));
    spacer.style.height = `${Math.max(0, total - viewH)}px`;
    st.topRow = clamp(st.topRow, 0, maxTop());
    syncScrollbar();
    scheduleRender();
  }

  // Puts the scrollbar where `topRow` is. Below MAX_SCROLL_H this is exact (topRow × ROW_H).
  function syncScrollbar() {
    const mt = maxTop();
    const target = mt > 0 ? Math.round((st.topRow / mt) * scrollRange()) : 0;
    if (Math.abs(list.scrollTop - target) >= 1) list.scrollTop = target;
    expectedScrollTop = list.scrollTop;
  }

  function scrollToRow(top) {
    st.topRow = clamp(top, 0, maxTop());
    syncScrollbar();
    scheduleRender();
  }

  function ensureVisible(i, center) {
    const vis = visible();
    if (center) scrollToRow(i - vis / 2 + 0.5);
    else if (i < st.topRow) scrollToRow(i);
    else if (i + 1 > st.topRow + vis) scrollToRow(i + 1 - vis);
  }

  // The scrollbar dragged (or scrolled by the browser): the row follows it, scaled.
  list.addEventListener('scroll', () => {
    if (Math.abs(list.scrollTop - expectedScrollTop) < 1) return;
    const range = scrollRange();
    if (count() * ROW_H <= MAX_SCROLL_H) {
      // Unscaled, a row is ROW_H px of scrollbar: exact (the ratio below can round down).
      st.topRow = clamp(list.scrollTop / ROW_H, 0, maxTop());
    } else {
      st.topRow = range > 0 ? (list.scrollTop / range) * maxTop() : 0;
    }
    expectedScrollTop = list.scrollTop;
    scheduleRender();
  });

  // The wheel moves by rows whatever the scale, so fine scrolling stays exact.
  list.addEventListener('wheel', (e) => {
    if (e.ctrlKey || e.deltaY === 0) return;
    e.preventDefault();
    let dy = e.deltaY;
    if (e.deltaMode === 1) dy *= ROW_H;
    else if (e.deltaMode === 2) dy *= viewH;
    scrollToRow(st.topRow + dy / ROW_H);
  }, { passive: false });

  new ResizeObserver(() => layout()).observe(list);

  let renderPending = false;
  function scheduleRender() {
    if (renderPending) return;
    renderPending = true;
    requestAnimationFrame(render);
  }

  const rowEls = [];

  function makeRow() {
    const el = document.createElement('div');
    el.className = 'row';
    el.setAttribute('role', 'row');
    for (const c of ['c-i', 'c-t', 'c-pc', 'c-asm', 'c-regs', 'c-mem']) {
      const cell = document.createElement('span');
      cell.className = c;
      cell.setAttribute('role', 'gridcell');
      el.append(cell);
    }
    return el;
  }

  const ACCESS = { read: 'R', write: 'W', readwrite: 'RW', unknown: '?' };

  const PC_NAMES = new Set(['rip', 'eip', 'pc', 'nip']);
  const LOOKAHEAD = 256; // rows searched for the previous step of the same thread

  // The registers step i set. A row holds register values as they were before its step,
  // so step i's results are in row i+1, when that is the same thread and loaded. x64dbg
  // records a register in a row when it differs from the row before OR after, so there a
  // register step i changed is in both rows with different values (full dumps included);
  // Tenet rows list only changes, tfile and amber FULL rows every register, so there a
  // register of row i+1 that row i lacks or has with another value. The pc, which every
  // step changes, is left out.
  function writtenText(i, row) {
    const next = rowAt(i + 1);
    if (!next) return i + 1 < count() ? '…' : '';
    if (next.thread !== row.thread || !row.regs || !next.regs) return '';
    const bothRows = st.format === 'x64dbg';
    return Object.entries(next.regs)
      .filter(([k, v]) => !PC_NAMES.has(k) && row.regs[k] !== v && (k in row.regs || !bothRows))
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
  }

  // Each access as ACCESS ADDR:SIZE=VALUE: the value written (new), else the value read,
  // else the bytes recorded (hex as the row gives them).
  function memText(mem) {
    if (!Array.isArray(mem)) return '';
    return mem
      .map((m) => {
        const acc = m.access ? `${ACCESS[m.access] || m.access} ` : '';
        const n = m.size ?? m.len; // x64dbg, amber: size; tfile blocks: len
        const size = n ? `:${n}` : '';
        const v = m.new ?? m.old ?? (m.data ? `0x${m.data}` : null); // Tenet, tfile: data
        return `${acc}${m.addr}${size}${v === undefined || v === null ? '' : `=${v}`}`;
      })
      .join('  ');
  }

  function setText(cell, text, title = '') {
    if (cell.textContent !== text) cell.textContent = text;
    if (cell.title !== title) cell.title = title;
  }

  function fillRow(el, i) {
    const row = rowAt(i);
    const sel = st.selected === i;
    if (el.dataset.i !== String(i) || el.classList.contains('selected') !== sel) {
      el.dataset.i = String(i);
      el.setAttribute('aria-rowindex', String(i + 1));
      el.setAttribute('aria-selected', String(sel));
      el.classList.toggle('selected', sel);
    }
    el.classList.toggle('loading', !row);
    const [ci, ct, cpc, casm, cregs, cmem] = el.children;
    setText(ci, String(i));
    if (row) {
      setText(ct, String(row.thread ?? ''));
      setText(cpc, row.pc ?? '');
      setText(casm, row.asm ?? (row.opcode ? `(${row.opcode})` : ''));
      const r = writtenText(i, row);
      const m = memText(row.mem);
      setText(cregs, r, r.length > 30 ? r : '');
      setText(cmem, m, m.length > 30 ? m : '');
    } else {
      for (const c of [ct, cpc, cregs, cmem]) setText(c, '');
      setText(casm, 'loading…');
    }
  }

  function render() {
    renderPending = false;
    const n = count();
    const first = Math.max(0, Math.floor(st.topRow) - MARGIN);
    const last = Math.min(n, Math.ceil(st.topRow + visible()) + MARGIN);
    const want = Math.max(0, last - first);
    while (rowEls.length < want) {
      const el = makeRow();
      rowEls.push(el);
      rowsEl.append(el);
    }
    while (rowEls.length > want) rowEls.pop().remove();
    rowsEl.style.transform = `translateY(${(first - st.topRow) * ROW_H}px)`;
    for (let k = 0; k < want; k++) fillRow(rowEls[k], first + k);
    wantRows(first, last);
    list.dataset.top = String(Math.floor(st.topRow));
  }

  rowsEl.addEventListener('click', (e) => {
    const row = e.target.closest('.row');
    if (row && row.dataset.i !== undefined) select(Number(row.dataset.i));
  });

  // ---- selection ------------------------------------------------------------------------

  let detailCtl = null;

  function select(i, center = false) {
    const n = count();
    if (n === 0) return;
    i = clamp(Math.floor(i), 0, n - 1);
    st.selected = i;
    ensureVisible(i, center);
    scheduleRender();
    loadDetails(i);
    loadStack(i);
    drawTimeline();
    scheduleTimeline();
  }

  async function loadDetails(i) {
    if (detailCtl) detailCtl.abort();
    const ctl = new AbortController();
    detailCtl = ctl;
    $('regs-at').textContent = `before step ${i}`;
    $('mem-at').textContent = `before step ${i}`;
    $('regs-panel').setAttribute('aria-busy', 'true');
    $('mem-panel').setAttribute('aria-busy', 'true');
    try {
      // The previous step of this thread, found in the cached rows; i-1 when step i's row is
      // not loaded (renderRegs compares only states of the same thread).
      const row = rowAt(i);
      let p = i - 1;
      if (row) {
        const lo = Math.max(0, i - LOOKAHEAD);
        while (p >= lo && rowAt(p) && rowAt(p).thread !== row.thread) p--;
        if (p < lo || !rowAt(p)) p = -1;
      }
      // A format without registers (amber TT6) answers state with an error: the panel says
      // so and the memory view still works.
      const noState = (e) => (isAbort(e) ? Promise.reject(e) : null);
      let stateError = null;
      const [cur, prev] = await Promise.all([
        getState(i, ctl.signal).catch((e) => {
          stateError = e;
          return noState(e);
        }),
        p >= 0 ? getState(p, ctl.signal).catch(noState) : null,
      ]);
      if (ctl.signal.aborted) return;
      if (cur) renderRegs(i, cur, prev);
      else {
        $('regs').textContent = `no registers: ${stateError && stateError.message}`;
        $('regs-panel').dataset.i = String(i);
      }
      const follow = $('mem-follow').value;
      if (cur && follow && cur.regs[follow] !== undefined) {
        const v = BigInt(cur.regs[follow]);
        st.memBase = v - (v % 16n);
      }
      if (st.memBase === null) st.memBase = 0n;
      await loadMem(i, ctl.signal);
    } catch (e) {
      showError(e);
    } finally {
      if (detailCtl === ctl) {
        $('regs-panel').removeAttribute('aria-busy');
        $('mem-panel').removeAttribute('aria-busy');
      }
    }
  }

  // ---- registers --------------------------------------------------------------------------

  // Groups by name, first match wins; the state's own order is kept inside a group.
  const GROUPS = [
    ['general', /^([re]?(ax|bx|cx|dx|si|di|sp|bp|ip)|r\d+[dwb]?|[re]?flags|pc|lr|ctr|msr|cr|xer|eip|rip)$/i, true],
    ['flags', /^(flags\.|eflags\.)/i, true],
    ['segments', /^[cdefgs]s(_base)?$/i, true],
    ['debug', /^dr\d+$/i, false],
    ['x87', /^(x87|RegisterArea|st\d|mmx|f(ctrl|stat|tag|iseg|ioff|oseg|ooff|op)$)/i, false],
    ['SSE', /^(xmm|mxcsr)/i, false],
    ['AVX', /^(ymm|zmm|k\d$)/i, false],
    ['float', /^f\d+$/i, false],
    ['vector', /^(v\d+|vscr|vrsave)$/i, false],
    ['other', /./, true],
  ];
  const groupOpen = new Map(GROUPS.map(([name, , open]) => [name, open]));
  const STACK_POINTERS = ['rsp', 'esp', 'sp', 'r1'];

  function groupOf(name) {
    for (const [g, re] of GROUPS) if (re.test(name)) return g;
    return 'other';
  }

  function renderRegs(i, cur, prev) {
    const regs = cur.regs || {};
    // Changed by the previous step of this thread: its state against this one.
    const changed = prev && prev.thread === cur.thread ? (k) => prev.regs[k] !== regs[k] : () => false;
    const byGroup = new Map(GROUPS.map(([g]) => [g, []]));
    for (const name of Object.keys(regs)) byGroup.get(groupOf(name)).push(name);

    const box = $('regs');
    const frag = document.createDocumentFragment();
    for (const [g, names] of byGroup) {
      if (names.length === 0) continue;
      const det = document.createElement('details');
      det.className = 'reg-group';
      det.dataset.group = g;
      det.open = groupOpen.get(g);
      det.addEventListener('toggle', () => groupOpen.set(g, det.open));
      const sum = document.createElement('summary');
      const nChanged = names.filter(changed).length;
      sum.textContent = nChanged ? `${g} (${names.length}, ${nChanged} changed)` : `${g} (${names.length})`;
      det.append(sum);
      const grid = document.createElement('div');
      grid.className = 'reg-grid';
      for (const name of names) {
        const cell = document.createElement('div');
        cell.className = 'reg';
        cell.dataset.reg = name;
        const isChanged = changed(name);
        if (isChanged) cell.classList.add('changed');
        const nb = document.createElement('button');
        nb.type = 'button';
        nb.className = 'reg-name';
        nb.textContent = name;
        nb.title = `Go to the step that last wrote ${name}`;
        cell.append(nb);
        if (hasOrigin() && ORIGIN_REG.test(name)) {
          const ob = document.createElement('button');
          ob.type = 'button';
          ob.className = 'reg-origin';
          ob.textContent = '⤺';
          ob.title = `Where the value of ${name} came from (origin)`;
          ob.setAttribute('aria-label', `origin of ${name}`);
          cell.append(ob);
        }
        const vb = document.createElement('button');
        vb.type = 'button';
        vb.className = 'reg-val';
        vb.textContent = regs[name];
        vb.title = `Show memory at ${regs[name]}`;
        if (isChanged) vb.setAttribute('aria-description', 'changed');
        cell.append(vb);
        grid.append(cell);
      }
      det.append(grid);
      frag.append(det);
    }
    box.replaceChildren(frag);
    $('regs-panel').dataset.i = String(i);
    $('regs-panel').dataset.thread = String(cur.thread);
    $('regs-at').textContent = `before step ${i} (thread ${cur.thread})`;
    fillFollow(byGroup.get('general'));
  }

  function fillFollow(names) {
    const sel = $('mem-follow');
    const have = [...sel.options].map((o) => o.value).slice(1).join(',');
    if (have === names.join(',')) return;
    const keep = sel.value;
    sel.replaceChildren(new Option('(none)', ''), ...names.map((n) => new Option(n, n)));
    if (!st.followTouched) {
      const sp = STACK_POINTERS.find((n) => names.includes(n));
      sel.value = sp || '';
      if (sp && st.selected !== null) {
        const cur = states.get(st.selected);
        if (cur && cur.regs[sp]) {
          const v = BigInt(cur.regs[sp]);
          st.memBase = v - (v % 16n);
        }
      }
    } else {
      sel.value = names.includes(keep) ? keep : '';
    }
  }

  $('regs').addEventListener('click', async (e) => {
    const btn = e.target.closest('button');
    const cell = e.target.closest('.reg');
    if (!btn || !cell || st.selected === null) return;
    const name = cell.dataset.reg;
    if (btn.classList.contains('reg-origin') || (e.altKey && btn.classList.contains('reg-name'))) {
      showOrigin(st.selected, name);
      return;
    }
    if (btn.classList.contains('reg-val')) {
      const v = parseNumber(btn.textContent);
      if (v === null) return;
      followNone();
      showMemAt(v - (v % 16n));
      return;
    }
    try {
      const from = st.selected;
      if (e.shiftKey) {
        const ans = await api('reader', { i: from, reg: name });
        if (ans.reader === null || ans.reader === undefined) {
          note(`${name}: no read from step ${from} on` + (ans.searched ? ` (searched ${ans.searched} steps)` : ''));
        } else {
          note(`${name} before step ${from} is next read by step ${ans.reader}`);
          select(ans.reader, true);
        }
        return;
      }
      const ans = await api('writer', { i: from, reg: name });
      if (ans.writer === null || ans.writer === undefined) {
        note(`${name}: no writer before step ${from}` + (ans.searched ? ` (searched ${ans.searched} steps)` : ''));
      } else {
        note(`${name} at step ${from} was written by step ${ans.writer}`);
        select(ans.writer, true);
      }
    } catch (err) {
      showError(err);
    }
  });

  // ---- memory -------------------------------------------------------------------------

  function followNone() {
    st.followTouched = true;
    $('mem-follow').value = '';
  }

  async function loadMem(i, signal) {
    const base = st.memBase;
    $('mem-addr').value = hex(base);
    if (!$('mem').firstChild) $('mem').textContent = 'loading…';
    const ans = await api('mem', { i, addr: hex(base), len: MEM_LEN }, signal);
    if (signal && signal.aborted) return;
    renderMem(ans, base);
    scheduleTimeline(); // the strip's address may be the view's
  }

  function renderMem(ans, base) {
    $('mem-addr').value = hex(base);
    // One address width for the whole view, so the columns line up.
    const digits = Math.max(st.wordSize > 4 ? 12 : 8, (base + BigInt(ans.len)).toString(16).length);
    const frag = document.createDocumentFragment();
    for (let line = 0; line < ans.len; line += 16) {
      const row = document.createElement('div');
      row.className = 'mline';
      row.setAttribute('role', 'row');
      const a = document.createElement('span');
      a.className = 'maddr';
      a.textContent = (base + BigInt(line)).toString(16).padStart(digits, '0');
      row.append(a);
      let ascii = '';
      for (let k = line; k < Math.min(line + 16, ans.len); k++) {
        const b = ans.bytes[k];
        const addr = base + BigInt(k);
        const cell = document.createElement('span');
        cell.className = 'b';
        cell.setAttribute('role', 'gridcell');
        cell.dataset.addr = hex(addr);
        if (k % 8 === 0) cell.classList.add('gap');
        if (b === null || b === undefined) {
          cell.classList.add('unknown');
          cell.textContent = '??';
          cell.title = `${hex(addr)}: unknown (no recorded access covers it)`;
          ascii += '?';
        } else {
          cell.textContent = hex2(b);
          const src = ans.source[k];
          cell.dataset.source = String(src);
          if (ans.inferred[k]) {
            cell.classList.add('inferred');
            cell.dataset.inferred = 'true';
            cell.title = `${hex(addr)} = 0x${hex2(b)}, inferred from step ${src} (a later access); click to go there`;
          } else {
            cell.title = `${hex(addr)} = 0x${hex2(b)}, from step ${src}; click to go there`;
          }
          ascii += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.';
        }
        if (st.byte !== null && addr === st.byte) cell.classList.add('picked');
        row.append(cell);
      }
      const asc = document.createElement('span');
      asc.className = 'ascii';
      asc.textContent = ascii;
      row.append(asc);
      frag.append(row);
    }
    $('mem').replaceChildren(frag);
    $('mem-panel').dataset.i = String(ans.i);
    $('mem-panel').dataset.addr = ans.addr;
  }

  async function showMemAt(base) {
    st.memBase = base < 0n ? 0n : base;
    if (st.selected === null) return;
    try {
      await loadMem(st.selected);
    } catch (e) {
      showError(e);
    }
  }

  $('mem-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const v = parseNumber($('mem-addr').value);
    if (v === null) {
      showError(new Error(`address: "${$('mem-addr').value}" is not a number (decimal or 0x hex)`));
      return;
    }
    followNone();
    showMemAt(v);
  });
  $('mem-follow').addEventListener('change', () => {
    st.followTouched = true;
    if (st.selected !== null) loadDetails(st.selected);
  });
  $('mem-up').addEventListener('click', () => { followNone(); showMemAt(st.memBase - BigInt(MEM_LEN)); });
  $('mem-down').addEventListener('click', () => { followNone(); showMemAt(st.memBase + BigInt(MEM_LEN)); });

  function pickByte(cell) {
    const addr = BigInt(cell.dataset.addr);
    st.byte = addr;
    st.byteAt = st.selected;
    followNone(); // keep this byte in view while stepping to its source
    $('next-read').disabled = false;
    $('byte-origin').disabled = st.byteAt === null || !hasOrigin();
    $('byte-origin').title = `Where the value of ${hex(addr)} before step ${st.byteAt} came from (origin)`;
    const src = cell.dataset.source;
    const how = cell.classList.contains('unknown')
      ? 'unknown'
      : `0x${cell.textContent}, from step ${src}${cell.dataset.inferred ? ' (inferred)' : ''}`;
    $('byte-desc').textContent = `${hex(addr)}: ${how}`;
    if (src !== undefined) select(Number(src), true);
    else {
      for (const c of document.querySelectorAll('#mem .picked')) c.classList.remove('picked');
      cell.classList.add('picked');
    }
  }

  $('mem').addEventListener('click', (e) => {
    const cell = e.target.closest('.b');
    if (!cell) return;
    // Alt+click: where the byte's value came from, without leaving the step.
    if (e.altKey && st.selected !== null) showOrigin(st.selected, `${cell.dataset.addr}:1`);
    else pickByte(cell);
  });

  const MAX_ROW_CHECKS = 200; // rows looked up per "next read" to classify writes

  // Whether xref hit `h` reads the byte at `addr`. Without `access` in the hit, a hit with
  // no new value is a read; one with a new value may be a read-modify-write, which only
  // the row's own accesses (with operand sizes) tell.
  async function readsByte(h, addr, budget) {
    if (h.access) return h.access !== 'write';
    if (h.new === null || h.new === undefined) return true;
    if (budget.left-- <= 0) return false;
    const row = rowAt(h.i) || (await api('rows', { from: h.i, count: 1 })).rows[0];
    return (row.mem || []).some((m) => {
      const a = BigInt(m.addr);
      return a <= addr && addr < a + BigInt(m.size || m.len || 1) && m.access && m.access !== 'write';
    });
  }

  $('next-read').addEventListener('click', async () => {
    if (st.byte === null || st.selected === null) return;
    const addr = st.byte;
    let from = st.selected + 1;
    const budget = { left: MAX_ROW_CHECKS };
    try {
      for (let k = 0; k < READ_PAGES && from !== null && from < count(); k++) {
        const ans = await api('xref', { addr: hex(addr), len: 1, from, count: READ_PAGE });
        for (const h of ans.hits) {
          if (await readsByte(h, addr, budget)) {
            note(`next read of ${hex(addr)}: step ${h.i}`);
            select(h.i, true);
            return;
          }
        }
        from = ans.next;
      }
      note(from === null || from >= count() ? `no read of ${hex(addr)} after step ${st.selected}`
        : `no read of ${hex(addr)} in the next ${READ_PAGES * READ_PAGE} accesses`);
    } catch (e) {
      showError(e);
    }
  });

  // ---- the call tree -------------------------------------------------------------------

  const MAX_STACKS = 64; // stacks (/api/stack answers) kept in the LRU cache
  const STACK_RETRY = 500; // ms between asks while the server finds the calls (503)
  const stacks = new Lru(MAX_STACKS);
  let stackCtl = null;

  // Calls are found in x86 and x64 streams only (/api/stack refuses the others).
  const hasCalls = () => st.isa === 'x64' || st.isa === 'x86';

  async function getStack(i, signal) {
    const hit = stacks.get(i);
    if (hit) return hit;
    const s = await api('stack', { i }, signal);
    stacks.set(i, s);
    return s;
  }

  // What a frame is called: its symbol, else its target (the API gives `0x<target>`).
  const frameName = (f) => f.symbol || f.target || '(unknown target)';

  function frameButton(cls, step, text, title) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = cls;
    b.dataset.step = String(step);
    b.textContent = text;
    b.title = title;
    return b;
  }

  function renderStack(i, stack) {
    const frag = document.createDocumentFragment();
    for (const f of stack.frames) {
      const li = document.createElement('li');
      li.className = 'frame';
      li.dataset.call = String(f.i);
      li.dataset.entry = String(f.entry_i);
      li.dataset.ret = f.ret_i === null ? '' : String(f.ret_i);
      li.style.setProperty('--depth', String(f.depth));
      const name = document.createElement('span');
      name.className = 'frame-name';
      name.textContent = frameName(f);
      name.title = `${frameName(f)}, called at step ${f.i}${f.unwound ? ' (closed by an unwinding return)' : ''}`;
      li.append(name, frameButton('frame-entry', f.entry_i, `entry ${f.entry_i}`, `Go to the entry, step ${f.entry_i}`));
      if (f.ret_i === null) {
        const open = document.createElement('span');
        open.className = 'frame-open';
        open.textContent = 'open';
        open.title = 'It does not return in the trace';
        li.append(open);
      } else {
        li.append(frameButton('frame-ret', f.ret_i, `ret ${f.ret_i}`, `Go to the return, step ${f.ret_i}`));
      }
      frag.append(li);
    }
    if (stack.frames.length === 0) {
      const li = document.createElement('li');
      li.className = 'frame-none';
      li.textContent = 'no frame open (outside every call seen)';
      frag.append(li);
    }
    $('frames').replaceChildren(frag);
    $('calls-at').textContent = `at step ${i} (thread ${stack.thread})`;
    $('calls-panel').dataset.i = String(i);
  }

  async function loadStack(i) {
    const panel = $('calls-panel');
    if (!hasCalls()) {
      panel.classList.add('unavailable');
      $('frames').textContent = 'No call tree: calls are found in x86 and x64 instruction streams only.';
      panel.dataset.i = String(i);
      return;
    }
    panel.classList.remove('unavailable');
    if (stackCtl) stackCtl.abort();
    const ctl = new AbortController();
    stackCtl = ctl;
    panel.setAttribute('aria-busy', 'true');
    try {
      const stack = await getStack(i, ctl.signal);
      if (!ctl.signal.aborted) renderStack(i, stack);
    } catch (e) {
      if (isAbort(e)) return;
      if (e.status === 503) {
        // The server's first pass over the calls is under way: ask again while step i is
        // still the one selected.
        $('frames').textContent = 'finding the calls…';
        setTimeout(() => { if (st.selected === i && stackCtl === ctl) loadStack(i); }, STACK_RETRY);
        return;
      }
      $('frames').textContent = `no call tree: ${e.message}`;
      panel.dataset.i = String(i);
    } finally {
      if (stackCtl === ctl) panel.removeAttribute('aria-busy');
    }
  }

  $('frames').addEventListener('click', (e) => {
    const b = e.target.closest('button');
    if (b && b.dataset.step !== undefined) select(Number(b.dataset.step), true);
  });

  // The thread's step after a frame's ret: a matched ret closes its frame where the thread
  // next executes the return address; else (an unwound frame, or not found on the first
  // page) the step after the ret, or the ret itself when that is the last step.
  async function afterReturn(frame, thread) {
    if (!frame.unwound && frame.ret_i + 1 < count()) {
      const ans = await api('find', { pc: frame.return_address, from: frame.ret_i + 1, count: 100 });
      const hit = ans.hits.find((h) => h.thread === thread);
      if (hit) return hit.i;
    }
    return frame.ret_i + 1 < count() ? frame.ret_i + 1 : frame.ret_i;
  }

  // `f` (finish): the thread's step after the innermost frame's ret (GDB's `finish`);
  // `F` (reverse-finish): the innermost frame's call.
  async function finish(reverse) {
    if (st.selected === null) return;
    const i = st.selected;
    if (!hasCalls()) {
      note('no call tree in this trace (x86 and x64 only)');
      return;
    }
    try {
      const stack = await getStack(i);
      const top = stack.frames[stack.frames.length - 1];
      if (!top) {
        note(`no frame open at step ${i}`);
        return;
      }
      if (reverse) {
        note(`reverse-finish: ${frameName(top)} was called at step ${top.i}`);
        select(top.i, true);
      } else if (top.ret_i === null) {
        note(`${frameName(top)} (called at step ${top.i}) does not return in the trace`);
      } else {
        note(`finish: ${frameName(top)} returns at step ${top.ret_i}`);
        select(await afterReturn(top, stack.thread), true);
      }
    } catch (e) {
      if (e.status === 503) note('the calls are still being found: try again in a moment');
      else showError(e);
    }
  }

  // ---- origin ------------------------------------------------------------------------
  // Where the value of a register or a byte before the selected step came from, hop by hop
  // (/api/origin, `tracekit origin`): the register's origin button or an Alt+click on a
  // register name or a byte shows the chain in the origin panel; each hop goes to its step.

  // `tracekit origin` decodes x86 and x64 instructions.
  const hasOrigin = () => st.isa === 'x64' || st.isa === 'x86';
  // The registers origin follows: general (and their parts), segment and vector registers.
  const ORIGIN_REG = /^([re]?(ax|bx|cx|dx|si|di|sp|bp)|[abcd][lh]|(si|di|sp|bp)l|r\d+[dwb]?|[cdefgs]s|[xyz]mm\d+)$/i;
  // What each stop kind means, as the panel says it (the module docs of origin.rs).
  const STOPS = {
    compute: 'computed here (not a copy): the chain stops',
    syscall: 'made by a system call or interrupt',
    partial: 'only part of it written here: the rest came from elsewhere',
    start: 'there when the trace began (nothing before wrote it)',
    unknown: 'the writer\'s instruction or source address is not known',
    copy: 'cut: the hop limit was reached',
  };
  let originCtl = null;

  function originHop(hop) {
    const li = document.createElement('li');
    li.className = 'hop';
    li.dataset.kind = hop.kind;
    li.dataset.loc = hop.loc;
    if (hop.i === null) {
      const none = document.createElement('span');
      none.className = 'hop-step';
      none.textContent = 'start';
      none.title = 'No step before wrote it';
      li.append(none);
    } else {
      li.dataset.step = String(hop.i);
      li.append(frameButton('hop-step', hop.i, `step ${hop.i}`, `Go to step ${hop.i}, the writer of ${hop.loc}`));
    }
    const cell = (cls, text, title = '') => {
      const c = document.createElement('span');
      c.className = cls;
      c.textContent = text;
      if (title) c.title = title;
      return c;
    };
    li.append(
      cell('hop-pc', hop.pc || ''),
      cell('hop-asm', hop.asm || (hop.i === null ? '' : '(bytes unknown)')),
      cell('hop-kind', hop.kind, hop.kind === 'copy' ? `a pure copy of ${hop.from}` : STOPS[hop.kind]),
      cell('hop-flow', hop.from ? `${hop.from} → ${hop.loc}` : hop.loc,
        hop.from ? `${hop.loc} is a copy of ${hop.from}` : `the location resolved: ${hop.loc}`),
    );
    return li;
  }

  function renderOrigin(ans) {
    const hops = ans.hops || [];
    const frag = document.createDocumentFragment();
    for (const hop of hops) frag.append(originHop(hop));
    $('origin-hops').replaceChildren(frag);
    const last = hops[hops.length - 1];
    const stop = $('origin-stop');
    stop.dataset.kind = last ? last.kind : '';
    stop.textContent = last
      ? `${last.kind === 'copy' ? 'cut' : last.kind}: ${STOPS[last.kind] || ''} (${hops.length} hop${hops.length === 1 ? '' : 's'})`
      : 'no hops';
  }

  // Shows the origin of `target` (a register name or `0x…:LEN`) before step `i`.
  async function showOrigin(i, target) {
    const panel = $('origin-panel');
    panel.hidden = false;
    $('origin-title-target').textContent = `${target} before step ${i}`;
    panel.dataset.i = String(i);
    panel.dataset.target = target;
    if (!hasOrigin()) {
      $('origin-hops').replaceChildren();
      $('origin-stop').dataset.kind = '';
      $('origin-stop').textContent = 'No origin: it is found in x86 and x64 instruction streams only.';
      return;
    }
    if (originCtl) originCtl.abort();
    const ctl = new AbortController();
    originCtl = ctl;
    panel.setAttribute('aria-busy', 'true');
    $('origin-stop').dataset.kind = '';
    $('origin-stop').textContent = 'following the writers…';
    try {
      const ans = await api('origin', { i, target }, ctl.signal);
      if (!ctl.signal.aborted) renderOrigin(ans);
    } catch (e) {
      if (isAbort(e)) return;
      $('origin-hops').replaceChildren();
      $('origin-stop').textContent = `no origin: ${e.message}`;
    } finally {
      if (originCtl === ctl) panel.removeAttribute('aria-busy');
    }
  }

  // The byte clicked last, before the step it was clicked at (not the source step the click
  // went to, where the byte still held its older value): the button for those whose
  // Alt+click the desktop takes.
  $('byte-origin').addEventListener('click', () => {
    if (st.byte !== null && st.byteAt !== null) showOrigin(st.byteAt, `${hex(st.byte)}:1`);
  });
  $('origin-hops').addEventListener('click', (e) => {
    const b = e.target.closest('button');
    if (b && b.dataset.step !== undefined) select(Number(b.dataset.step), true);
  });
  $('origin-close').addEventListener('click', () => {
    if (originCtl) originCtl.abort();
    $('origin-panel').hidden = true;
  });

  // ---- the timeline strip ------------------------------------------------------------------

  const MAX_MARKS = 10_000; // marks per lane (a note says when a lane is cut there)
  const MARK_PAGE = 10_000; // hits per /api/find or /api/xref request
  const TL_LANE = 10; // px, the height of one lane (#timeline in style.css)
  const SNAP_PX = 4; // a click this close to a mark goes to its step
  const TL_DELAY = 150; // ms the selection must rest before the marks are fetched
  const LANES = ['pc', 'write', 'read'];

  const tl = {
    pc: null, // the pc marked (a 0x… string)
    loadingPc: null, // the pc whose marks are being fetched
    addr: null, // { addr: BigInt, len } marked
    marks: { pc: [], write: [], read: [] }, // sorted step numbers per lane
    capped: { pc: false, write: false, read: false },
  };
  const timeline = $('timeline');
  let tlTimer = 0;
  let tlPcCtl = null;
  let tlMemCtl = null;

  // Every hit of `path` (find or xref) with `params`, page after page, up to MAX_MARKS + 1
  // (one more than kept tells that there are more).
  async function allHits(path, params, signal) {
    const hits = [];
    let from = 0;
    for (;;) {
      const ans = await api(path, { ...params, from, count: MARK_PAGE }, signal);
      hits.push(...ans.hits);
      if (ans.next === null || ans.next === undefined || hits.length > MAX_MARKS) break;
      from = ans.next;
    }
    return hits;
  }

  // Distinct steps, sorted, at most MAX_MARKS; and whether some were left out.
  function stepsOf(hits) {
    const all = [...new Set(hits.map((h) => h.i))].sort((a, b) => a - b);
    return [all.slice(0, MAX_MARKS), all.length > MAX_MARKS];
  }

  // Whether an xref hit (with `access`: xref --disasm) writes, or reads, the range; a hit
  // of unknown access writes when it has a new value, else reads.
  const hitWrites = (h) => (h.access && h.access !== 'unknown' ? h.access !== 'read' : h.new !== null && h.new !== undefined);
  const hitReads = (h) => (h.access && h.access !== 'unknown' ? h.access !== 'write' : h.new === null || h.new === undefined);

  function tlNote() {
    const capped = LANES.filter((l) => tl.capped[l]);
    $('tl-note').textContent = capped.length
      ? `(${capped.join(', ')}: the first ${MAX_MARKS.toLocaleString('en')} steps only)`
      : '';
    const n = (lane) => `(${tl.marks[lane].length.toLocaleString('en')})`;
    $('tl-pc').textContent = tl.pc === null ? '' : `${tl.pc} ${n('pc')}`;
    $('tl-writes').textContent = tl.addr === null ? '' : n('write');
    $('tl-reads').textContent = tl.addr === null ? '' : n('read');
    $('tl-addr').textContent = tl.addr === null ? ''
      : `of ${hex(tl.addr.addr)}${tl.addr.len > 1 ? `:${tl.addr.len}` : ''}`;
    for (const l of LANES) {
      timeline.dataset[`${l}Marks`] = String(tl.marks[l].length);
      timeline.dataset[`${l}Capped`] = String(tl.capped[l]);
    }
    timeline.dataset.pc = tl.pc ?? '';
    timeline.dataset.addr = tl.addr === null ? '' : hex(tl.addr.addr);
  }

  async function loadPcMarks(pc) {
    if (tlPcCtl) tlPcCtl.abort();
    const ctl = new AbortController();
    tlPcCtl = ctl;
    tl.loadingPc = pc;
    timeline.dataset.pcLoading = 'true';
    try {
      const hits = await allHits('find', { pc }, ctl.signal);
      if (ctl.signal.aborted) return;
      [tl.marks.pc, tl.capped.pc] = stepsOf(hits);
      tl.pc = pc;
    } catch (e) {
      showError(e);
    } finally {
      if (tlPcCtl === ctl) {
        delete timeline.dataset.pcLoading;
        tl.loadingPc = null;
      }
    }
    tlNote();
    drawTimeline();
  }

  async function loadMemMarks(addr, len) {
    if (tlMemCtl) tlMemCtl.abort();
    const ctl = new AbortController();
    tlMemCtl = ctl;
    timeline.dataset.memLoading = 'true';
    try {
      const hits = await allHits('xref', { addr: hex(addr), len, disasm: 1 }, ctl.signal);
      if (ctl.signal.aborted) return;
      [tl.marks.write, tl.capped.write] = stepsOf(hits.filter(hitWrites));
      [tl.marks.read, tl.capped.read] = stepsOf(hits.filter(hitReads));
      tl.addr = { addr, len };
    } catch (e) {
      showError(e);
    } finally {
      if (tlMemCtl === ctl) delete timeline.dataset.memLoading;
    }
    tlNote();
    drawTimeline();
  }

  // The marks follow the selection once it rests: the selected step's pc, and the byte
  // clicked last (else the word at the top of the memory view).
  function scheduleTimeline() {
    clearTimeout(tlTimer);
    tlTimer = setTimeout(async () => {
      if (st.selected === null) return;
      // Without the index every search is a pass over the trace, on a worker the rows
      // need: the marks wait for it (a failed index leaves the passes).
      if (st.index === '' || st.index === 'building') {
        $('tl-note').textContent = '(the marks come once the index is built)';
        return;
      }
      tlNote();
      try {
        const pc = await pcOf(st.selected);
        if (pc && pc !== tl.pc && pc !== tl.loadingPc) loadPcMarks(pc);
      } catch (e) {
        showError(e);
      }
      const [addr, len] = st.byte !== null ? [st.byte, 1] : [st.memBase, st.wordSize];
      if (addr !== null && (tl.addr === null || tl.addr.addr !== addr || tl.addr.len !== len)) {
        loadMemMarks(addr, len);
      }
    }, TL_DELAY);
  }

  // The x (CSS px) of the middle of step i on a strip `width` wide.
  const stepX = (i, width) => ((i + 0.5) / Math.max(1, count())) * width;

  function drawTimeline() {
    const dpr = window.devicePixelRatio || 1;
    const width = timeline.clientWidth;
    const height = TL_LANE * LANES.length;
    if (timeline.width !== Math.round(width * dpr)) timeline.width = Math.round(width * dpr);
    if (timeline.height !== Math.round(height * dpr)) timeline.height = Math.round(height * dpr);
    const g = timeline.getContext('2d');
    if (!g) return;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, height);
    const css = getComputedStyle(document.documentElement);
    const n = Math.max(1, count());
    // A mark is one step wide, and at least one device pixel.
    const w = Math.max(1 / dpr, width / n);
    LANES.forEach((lane, k) => {
      g.fillStyle = css.getPropertyValue(`--tl-${lane}`).trim() || '#888';
      for (const i of tl.marks[lane]) g.fillRect(stepX(i, width) - w / 2, k * TL_LANE + 1, w, TL_LANE - 2);
    });
    if (st.selected !== null) {
      g.fillStyle = css.getPropertyValue('--fg').trim() || '#000';
      g.fillRect(stepX(st.selected, width) - 1, 0, 2, height);
    }
    timeline.dataset.selected = st.selected === null ? '' : String(st.selected);
  }

  // The mark of `marks` (sorted) nearest to x, and its distance in px.
  function nearestMark(marks, x, width) {
    if (marks.length === 0) return null;
    const want = (x / width) * count() - 0.5;
    let lo = 0;
    let hi = marks.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (marks[mid] < want) lo = mid + 1;
      else hi = mid;
    }
    let best = null;
    for (const k of [lo - 1, lo]) {
      if (k < 0 || k >= marks.length) continue;
      const d = Math.abs(stepX(marks[k], width) - x);
      if (best === null || d < best.d) best = { i: marks[k], d };
    }
    return best;
  }

  // A click seeks: to the nearest mark of the lane clicked when within SNAP_PX, else to the
  // step under the pointer.
  timeline.addEventListener('click', (e) => {
    const n = count();
    if (n === 0) return;
    const r = timeline.getBoundingClientRect();
    const x = e.clientX - r.left;
    const lane = LANES[clamp(Math.floor(((e.clientY - r.top) / r.height) * LANES.length), 0, LANES.length - 1)];
    const near = nearestMark(tl.marks[lane], x, r.width);
    if (near && near.d <= SNAP_PX) select(near.i, true);
    else select(clamp(Math.floor((x / r.width) * n), 0, n - 1), true);
  });

  new ResizeObserver(() => drawTimeline()).observe(timeline);

  // ---- jumps --------------------------------------------------------------------------

  async function pcOf(i) {
    const row = rowAt(i);
    if (row) return row.pc;
    const ans = await api('rows', { from: i, count: 1 });
    return ans.rows[0].pc;
  }

  // The next (dir 1) or previous (dir -1) execution of the selected step's pc.
  async function samePc(dir) {
    if (st.selected === null) return;
    const i = st.selected;
    try {
      const pc = await pcOf(i);
      if (pc === null || pc === undefined) {
        note(`step ${i} has no pc`);
        return;
      }
      const params = dir > 0 ? { pc, from: i + 1, count: 1 } : { pc, before: i, count: 1 };
      if (dir > 0 && i + 1 >= count()) {
        note(`no later execution of ${pc}`);
        return;
      }
      const ans = await api('find', params);
      if (ans.hits.length === 0) note(`no ${dir > 0 ? 'later' : 'earlier'} execution of ${pc}`);
      else {
        note(`${dir > 0 ? 'next' : 'previous'} execution of ${pc}: step ${ans.hits[0].i}`);
        select(ans.hits[0].i, true);
      }
    } catch (e) {
      showError(e);
    }
  }

  $('jump-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = $('jump').value.trim();
    const m = /^pc\s*=\s*(.+)$/i.exec(text);
    try {
      if (m) {
        const pc = parseNumber(m[1]);
        if (pc === null) throw new Error(`jump: "${m[1]}" is not an address (decimal or 0x hex)`);
        const from = st.selected === null ? 0 : st.selected + 1;
        let ans = from < count() ? await api('find', { pc: hex(pc), from, count: 1 }) : { hits: [] };
        if (ans.hits.length === 0 && from > 0) {
          ans = await api('find', { pc: hex(pc), from: 0, count: 1 });
          if (ans.hits.length) note(`pc ${hex(pc)}: wrapped to the first execution`);
        }
        if (ans.hits.length === 0) note(`pc ${hex(pc)} is never executed`);
        else select(ans.hits[0].i, true);
      } else {
        const n = parseNumber(text);
        if (n === null) throw new Error(`jump: "${text}" is not a step number or pc=ADDRESS`);
        if (n >= BigInt(count())) throw new Error(`jump: step ${n} is past the end (${count()} steps)`);
        select(Number(n), true);
      }
      list.focus({ preventScroll: true });
    } catch (err) {
      showError(err);
    }
  });

  // ---- keyboard and help ----------------------------------------------------------------

  function toggleHelp(show) {
    const help = $('help');
    const on = show === undefined ? help.hidden : show;
    help.hidden = !on;
    $('help-button').setAttribute('aria-expanded', String(on));
  }
  $('help-button').addEventListener('click', () => toggleHelp());

  document.addEventListener('keydown', (e) => {
    const t = e.target;
    if (t && t.closest && t.closest('input, select, textarea')) {
      if (e.key === 'Escape') t.blur();
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const sel = st.selected === null ? -1 : st.selected;
    const page = Math.max(1, Math.floor(visible()) - 1);
    let handled = true;
    switch (e.key) {
      case 'j': case 'ArrowDown': select(sel + 1); break;
      case 'k': case 'ArrowUp': select(Math.max(0, sel - 1)); break;
      case 'n': samePc(1); break;
      case 'p': samePc(-1); break;
      case 'f': finish(false); break;
      case 'F': finish(true); break;
      case 'PageDown': select(sel + page); break;
      case 'PageUp': select(Math.max(0, sel - page)); break;
      case 'Home': select(0); break;
      case 'End': select(count() - 1); break;
      case 'g': case '/': $('jump').focus(); $('jump').select(); break;
      case '?': toggleHelp(); break;
      case 'Escape': toggleHelp(false); break;
      default: handled = false;
    }
    if (handled) e.preventDefault();
  });

  // ---- status -------------------------------------------------------------------------

  function showStatus(s) {
    const parts = [];
    if (s.steps !== null && s.steps !== undefined) parts.push(`${s.steps.toLocaleString('en')} ${s.step_noun || 'step'}s`);
    else parts.push('counting…');
    const ix = s.index || {};
    if (ix.state === 'building') {
      const pct = ix.total ? Math.floor((100 * ix.done) / ix.total) : 0;
      parts.push(`indexing ${pct}%`);
    } else if (ix.state === 'failed') {
      parts.push(`index failed${ix.error ? `: ${ix.error}` : ''} (answers by a pass)`);
    } else if (ix.state === 'ready') {
      parts.push('indexed');
    }
    $('status-text').textContent = parts.join(' · ');
  }

  async function pollStatus() {
    let again = true;
    try {
      const s = await api('status');
      st.noun = s.step_noun || st.noun;
      st.format = s.format || st.format;
      st.isa = s.isa || st.isa;
      const indexBefore = st.index;
      st.index = (s.index && s.index.state) || st.index;
      if (indexBefore === 'building' && st.index !== 'building') scheduleTimeline();
      if (s.word_size) st.wordSize = s.word_size;
      if (s.steps !== null && s.steps !== undefined) setSteps(s.steps);
      showStatus(s);
      again = s.steps === null || s.steps === undefined || (s.index && s.index.state === 'building');
      if (st.selected === null && count() > 0) select(0);
    } catch (e) {
      showError(e);
    }
    if (again) setTimeout(pollStatus, 500);
  }

  async function start() {
    if (!token) showError(new Error('no token in the page address: open the URL tracekit serve printed'));
    layout();
    try {
      const info = await api('info');
      const name = info.header && info.header.path ? info.header.path : info.format || '';
      $('file').textContent = `${info.format || ''}${name && name !== info.format ? ` · ${name}` : ''}`;
    } catch (e) {
      showError(e);
    }
    await pollStatus();
    if (st.selected === null) {
      // The count is not known yet: show the first page meanwhile.
      st.provisional = Math.max(st.provisional, PAGE);
      layout();
      select(0);
    }
  }

  start();
})();
