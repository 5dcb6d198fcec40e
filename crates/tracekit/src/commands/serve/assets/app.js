// The tracekit explorer: a virtualised instruction list, the registers and memory at the
// selected step, and "who wrote this" navigation, over the JSON API of `tracekit serve`
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
    wordSize: 8,
    topRow: 0, // the (fractional) row at the top of the viewport
    selected: null,
    memBase: null, // BigInt: the first address of the memory view
    byte: null, // BigInt: the byte clicked last
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
    st.topRow = range > 0 ? (list.scrollTop / range) * maxTop() : 0;
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
        const vb = document.createElement('button');
        vb.type = 'button';
        vb.className = 'reg-val';
        vb.textContent = regs[name];
        vb.title = `Show memory at ${regs[name]}`;
        if (isChanged) vb.setAttribute('aria-description', 'changed');
        cell.append(nb, vb);
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
    followNone(); // keep this byte in view while stepping to its source
    $('next-read').disabled = false;
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
    if (cell) pickByte(cell);
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
