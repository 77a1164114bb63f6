/* statepipe dashboard — app.js
 *
 * Plain JS, no build step, no framework. Connects to `api/stream` (Server-Sent
 * Events, one snapshot per event), falls back to polling `api/snapshot` every
 * 500 ms when the stream fails, and renders the snapshot by its `kind`
 * (evolve | pipeline | service; see crates/dashboard/README.md). Charts are
 * uPlot (global `uPlot`, vendored); the task stream and the pipeline graph are
 * SVG drawn here. Rates come from counter differences between snapshots; the
 * client keeps at most HISTORY points per chart.
 *
 * Stable DOM hooks (browser tests rely on these; keep them exact):
 *   body[data-kind]            the snapshot's kind, after the first snapshot
 *   #title                     the snapshot's title
 *   #status                    text contains "live" while the stream is connected
 *   evolve:   #lanes > .lane[data-worker=ID] (one per worker; lost ones also have .lost,
 *             ones that asked to leave and left .left)
 *             #step (digits), #events > li.event[data-kind=KIND] (newest first),
 *             #totals-losses (digits)
 *   pipeline: #checkpoint-count (digits), svg .unit[data-name=NAME] (one per unit),
 *             #members tr.member (remote runs)
 *   service:  #request-count (digits, sum of requests[].count), #p99 (latest p99, ms)
 *   window.statepipeTimings    { firstRender, updates: [{ at, work, frame }] } (ms)
 */
(function () {
  'use strict';

  const HISTORY = 600;          // points kept per time chart
  const POLL_MS = 500;          // polling period when the stream is down
  const STREAM_RETRY_MS = 5000; // how often to try the stream again while polling
  const STALL_MS = 5000;        // a stream silent this long counts as broken
  const RATE_WINDOW_S = 1.0;    // rates are taken over at least this span
  const LANE_WINDOW_S = 60;     // task-stream time axis
  const PALETTE = ['#2f6fde', '#e0883a', '#2e9d5b', '#8e5cd9', '#d64545', '#1fa2a8', '#b8860b', '#c2478f', '#6b7687'];

  const $ = (id) => document.getElementById(id);
  const SVG_NS = 'http://www.w3.org/2000/svg';

  // ------------------------------------------------------------------ formatting
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  const isNum = (v) => typeof v === 'number' && isFinite(v);
  const digits = (v) => String(isNum(v) ? Math.round(v) : 0);
  // Thousands separated by commas (toLocaleString is slow enough to show on a
  // page of 200 workers).
  const withCommas = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  function fmtInt(v) { return isNum(v) ? withCommas(Math.round(v)) : '—'; }
  function fmtNum(v) {
    if (!isNum(v)) return '—';
    const a = Math.abs(v);
    if (a >= 100) return withCommas(Math.round(v));
    if (a >= 10) return v.toFixed(1);
    return v.toFixed(2);
  }
  function fmtCompact(v) {
    if (!isNum(v)) return '';
    const a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toFixed(1) + 'G';
    if (a >= 1e6) return +(v / 1e6).toFixed(1) + 'M';
    if (a >= 1e4) return +(v / 1e3).toFixed(1) + 'k';
    if (a >= 100) return String(Math.round(v));
    return String(+v.toFixed(a >= 10 ? 1 : a >= 1 ? 2 : 3));
  }
  function fmtBytes(v) {
    if (!isNum(v)) return '—';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i === 0 ? String(Math.round(v)) : v.toFixed(v >= 100 ? 0 : 1)) + ' ' + u[i];
  }
  function fmtDur(s) {
    if (!isNum(s)) return '—';
    if (s < 0) s = 0;
    if (s < 1) return Math.round(s * 1000) + ' ms';
    if (s < 60) return s.toFixed(1) + ' s';
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
    if (h > 0) return h + 'h ' + String(m).padStart(2, '0') + 'm';
    return m + 'm ' + String(sec).padStart(2, '0') + 's';
  }
  function fmtSmallDur(s) {
    if (!isNum(s)) return '—';
    if (s < 1e-5) return Math.round(s * 1e9) + ' ns';
    if (s < 0.001) return Math.round(s * 1e6) + ' µs';
    if (s < 1) return (s * 1000).toFixed(s < 0.01 ? 2 : 1) + ' ms';
    return s.toFixed(2) + ' s';
  }
  function fmtClock(t) {
    if (!isNum(t)) return '—';
    const neg = t < 0; t = Math.abs(t);
    const h = Math.floor(t / 3600), m = Math.floor((t % 3600) / 60), s = Math.floor(t % 60);
    const body = h > 0 ? h + ':' + String(m).padStart(2, '0') + ':' + String(s).padStart(2, '0') : m + ':' + String(s).padStart(2, '0');
    return (neg ? '-' : '') + body;
  }
  function fmtMs(v) {
    if (!isNum(v)) return '—';
    if (v < 1) return v.toFixed(3);
    if (v < 10) return v.toFixed(2);
    if (v < 100) return v.toFixed(1);
    return String(Math.round(v));
  }
  function pct(x) { return isNum(x) ? Math.round(x * 100) + '%' : '—'; }

  function setText(id, text) {
    const el = typeof id === 'string' ? $(id) : id;
    if (!el) return;
    const t = el.firstChild;
    // Change a lone text node's data rather than replace the node: the
    // browser then lays out the text again but rebuilds nothing.
    if (t && t === el.lastChild && t.nodeType === 3 && text) { if (t.data !== text) t.data = text; } else if (el.textContent !== text) el.textContent = text;
  }
  function setHTML(el, html) {
    if (el && el._html !== html) { el.innerHTML = html; el._html = html; }
  }

  // --------------------------------------------------------------- rates/history
  /** Rates of counters, each over at least RATE_WINDOW_S of snapshots. */
  class Rates {
    constructor(win) { this.win = win; this.m = new Map(); }
    rate(key, t, v) {
      if (!isNum(v) || !isNum(t)) return null;
      let h = this.m.get(key);
      if (!h) { h = []; this.m.set(key, h); }
      const last = h[h.length - 1];
      if (last && (v < last[1] || t < last[0])) h.length = 0; // counter or clock restarted
      if (!h.length || t > h[h.length - 1][0]) h.push([t, v]);
      while (h.length > 2 && t - h[1][0] >= this.win) h.shift();
      if (h.length < 2) return null;
      const t0 = h[0][0], v0 = h[0][1];
      return t > t0 ? (v - v0) / (t - t0) : null;
    }
    clear() { this.m.clear(); }
  }

  /** A bounded table of time-stamped columns for the uPlot charts. */
  class History {
    constructor(max) { this.max = max; this.clear(); }
    clear() { this.x = []; this.cols = new Map(); }
    push(t, values) {
      const n = this.x.length;
      this.x.push(t);
      for (const k of Object.keys(values)) {
        if (!this.cols.has(k)) this.cols.set(k, new Array(n).fill(null));
      }
      for (const [k, arr] of this.cols) arr.push(k in values && isNum(values[k]) ? values[k] : null);
      if (this.x.length > this.max) {
        this.x.shift();
        for (const arr of this.cols.values()) arr.shift();
      }
    }
    data(keys) {
      return [this.x.slice()].concat(keys.map((k) => (this.cols.has(k) ? this.cols.get(k).slice() : this.x.map(() => null))));
    }
  }

  // ------------------------------------------------------------------ in view
  /* Rows and charts out of view (out of the window, or scrolled out of their
     box: the lanes and the workers' table each scroll at some 20 rows) are
     not redrawn on updates; one that comes into view is drawn at once from
     the latest snapshot. So a page of 200 workers costs what a page of 20
     does, and only what is on screen is redrawn. */
  class Visible {
    constructor() {
      // In view means in the window and in every box that scrolls around it.
      this.io = window.IntersectionObserver
        ? new IntersectionObserver((es) => {
          for (const e of es) {
            e.target._visible = e.isIntersecting;
            if (e.isIntersecting && e.target._redraw) { const f = e.target._redraw; e.target._redraw = null; f(); }
          }
        }, { rootMargin: '40px 0px', scrollMargin: '40px 0px' })
        : null;
    }
    /** Calls `draw` now if `el` is (or may be) in view, else when it scrolls in. */
    draw(el, draw) {
      if (!this.io || el._visible !== false) { el._redraw = null; draw(); } else el._redraw = draw;
    }
    watch(el) { if (this.io) this.io.observe(el); }
  }
  const inView = new Visible();
  // -------------------------------------------------------------------- charts
  const charts = [];
  const TIME_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400];
  const padRange = (u, min, max) => {
    if (!isNum(min) || !isNum(max)) return [0, 1];
    const pad = (max - min) * 0.08 || Math.abs(max) * 0.1 || 1;
    return [min - pad, max + pad];
  };
  const zeroRange = (u, min, max) => [0, isNum(max) && max > 0 ? max * 1.12 : 1];

  const sameData = (a, b) => a.length === b.length && a.every((col, i) =>
    col.length === b[i].length && col.every((v, j) => v === b[i][j]));

  /** One uPlot chart in element `id`, created once the element has a width. */
  class Chart {
    constructor(id, cfg) {
      this.el = $(id);
      this.cfg = Object.assign({ height: 190, x: 'time', y: fmtCompact, range: zeroRange }, cfg);
      this.u = null; this.key = null; this.series = []; this.data = null; this.width = 0;
      // The width comes from the observer, so that an update never reads
      // layout (which would force it in the middle of the update's writes).
      this.seen = null;
      if (window.ResizeObserver) {
        new ResizeObserver((es) => { this.seen = Math.floor(es[es.length - 1].contentRect.width); this.fit(); }).observe(this.el);
      }
      inView.watch(this.el);
      charts.push(this);
    }
    /** series: [{label, color, scale?, dash?, fill?}], data: [xs, ys...]. */
    set(series, data) {
      const key = series.map((s) => s.label + '|' + (s.scale || 'y')).join('\n');
      if (this.u && key !== this.key) this.destroy();
      else if (this.u && sameData(this.data, data)) return; // nothing new to draw
      this.key = key; this.series = series; this.data = data;
      inView.draw(this.el, () => this.fit());
    }
    fit() {
      if (!this.data) return;
      const w = this.seen != null ? this.seen : Math.floor(this.el.clientWidth);
      if (w < 60) return; // hidden: create or resize when it shows
      if (!this.u) {
        this.width = w;
        this.u = new uPlot(this.options(w), this.data, this.el);
        return;
      }
      if (w !== this.width) { this.width = w; this.u.setSize({ width: w, height: this.cfg.height }); }
      this.u.setData(this.data);
    }
    destroy() { if (this.u) { this.u.destroy(); this.u = null; this.width = 0; } }
    reset() { this.destroy(); this.data = null; this.key = null; }
    options(width) {
      const c = this.cfg;
      const fx = c.x === 'time' ? fmtClock : (v) => String(v);
      const axis = (o) => Object.assign({
        stroke: '#6b7687', font: '11px system-ui, sans-serif',
        grid: { stroke: '#eef1f5', width: 1 }, ticks: { stroke: '#e3e7ee', width: 1, size: 4 },
      }, o);
      const scales = { x: { time: false }, y: c.range ? { range: c.range } : {} };
      const axes = [
        axis(Object.assign({ values: (u, vals) => vals.map(fx), space: 70 }, c.x === 'time' ? { incrs: TIME_INCRS } : {})),
        axis({ values: (u, vals) => vals.map(c.yAxis || fmtCompact), size: 54 }),
      ];
      if (c.y2) {
        scales.y2 = { range: c.range2 || zeroRange };
        axes.push(axis({ scale: 'y2', side: 1, grid: { show: false }, values: (u, vals) => vals.map(fmtCompact), size: 54 }));
      }
      const series = [{ label: c.x === 'time' ? 'at' : c.x, value: (u, v) => (v == null ? '—' : fx(v)) }];
      for (const s of this.series) {
        const fy = s.scale === 'y2' && c.y2 ? c.y2 : c.y;
        series.push({
          label: s.label, stroke: s.color, width: s.width || 1.6, scale: s.scale || 'y', dash: s.dash,
          fill: s.fill ? s.color + '1f' : undefined, spanGaps: false,
          points: c.x === 'time' ? { show: false } : { size: 4 },
          value: (u, v) => (v == null ? '—' : fy(v)),
        });
      }
      return {
        width, height: c.height, scales, axes, series,
        legend: { show: true, live: true },
        cursor: { drag: { x: false, y: false, setScale: false }, points: { size: 6 } },
      };
    }
  }

  // ---------------------------------------------------------------- connection
  const conn = { es: null, mode: 'connecting', pollTimer: null, retryTimer: null, lastMsg: 0, polling: false };

  function setStatus(mode) {
    conn.mode = mode;
    const el = $('status');
    el.className = 'status ' + mode;
    setText(el.querySelector('.status-text'),
      mode === 'live' ? 'live' : mode === 'polling' ? 'polling' : mode === 'connecting' ? 'connecting…' : 'disconnected — retrying');
  }

  function openStream() {
    if (conn.es || !window.EventSource) { if (!window.EventSource) startPolling(); return; }
    let es;
    try { es = new EventSource('api/stream'); } catch (e) { startPolling(); return; }
    conn.es = es;
    es.onopen = () => { if (conn.es === es) { conn.lastMsg = Date.now(); stopPolling(); setStatus('live'); } };
    es.onmessage = (ev) => {
      if (conn.es !== es) return;
      conn.lastMsg = Date.now();
      const t0 = performance.now();
      let snap;
      try { snap = JSON.parse(ev.data); } catch (e) { return; }
      if (conn.mode !== 'live') { stopPolling(); setStatus('live'); }
      accept(snap, t0);
    };
    es.onerror = () => { if (conn.es === es) streamFailed(); else es.close(); };
  }

  function streamFailed() {
    if (conn.es) { conn.es.close(); conn.es = null; }
    startPolling();
    if (!conn.retryTimer) {
      conn.retryTimer = setTimeout(() => { conn.retryTimer = null; openStream(); }, STREAM_RETRY_MS);
    }
  }

  function startPolling() {
    if (conn.pollTimer) return;
    if (conn.mode === 'live') setStatus('polling');
    poll();
    conn.pollTimer = setInterval(poll, POLL_MS);
  }
  function stopPolling() {
    if (conn.pollTimer) { clearInterval(conn.pollTimer); conn.pollTimer = null; }
  }

  function poll() {
    if (conn.polling) return;
    conn.polling = true;
    const ctl = window.AbortController ? new AbortController() : null;
    const timer = setTimeout(() => ctl && ctl.abort(), 2000);
    fetch('api/snapshot', { cache: 'no-store', signal: ctl ? ctl.signal : undefined })
      .then((r) => { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); })
      .then((snap) => {
        if (!conn.pollTimer) return; // the stream came back meanwhile
        if (conn.mode !== 'polling') setStatus('polling');
        accept(snap);
      })
      .catch(() => { if (conn.pollTimer) setStatus('down'); })
      .finally(() => { clearTimeout(timer); conn.polling = false; });
  }

  setInterval(() => {
    if (conn.es && conn.mode === 'live' && Date.now() - conn.lastMsg > STALL_MS) streamFailed();
  }, 1000);

  // ------------------------------------------------------------------ dispatch
  const rates = new Rates(RATE_WINDOW_S);
  const hist = new History(HISTORY);
  let current = { kind: null, uptime: null };
  const renderers = {};

  // Render timings, read by the page benchmark (tests/browser/page_bench.py):
  // per update, the script's time (the stream's JSON parsed, the page
  // updated) with the style and layout it causes (`work`), and the time to the end of the frame that paints it (`frame`,
  // which includes the wait for that frame); the last TIMINGS of them in
  // window.statepipeTimings, the latest as `statepipe update` on the
  // performance timeline.
  const TIMINGS = 600;
  const timings = { updates: [], firstRender: null };
  window.statepipeTimings = timings;

  function accept(snap, parsedFrom) {
    const t0 = parsedFrom != null ? parsedFrom : performance.now();
    applySnapshot(snap);
    const dot = $('status').firstElementChild; // the live dot's beat: dim on odd seconds
    dot.classList.toggle('dim', (Math.floor(t0 / 1000) & 1) === 1);
    void document.body.offsetHeight; // style and layout now, inside `work`
    const t1 = performance.now();
    requestAnimationFrame(() => setTimeout(() => {
      const t2 = performance.now();
      if (timings.firstRender == null) timings.firstRender = t2;
      timings.updates.push({ at: t0, work: t1 - t0, frame: t2 - t0 });
      if (timings.updates.length > TIMINGS) timings.updates.shift();
      if (performance.measure && performance.clearMeasures) {
        performance.clearMeasures('statepipe update');
        try { performance.measure('statepipe update', { start: t0, end: t2 }); } catch (e) { /* older browsers */ }
      }
    }, 0));
  }

  function applySnapshot(snap) {
    if (!snap || typeof snap !== 'object' || typeof snap.kind !== 'string' || !snap.data) return;
    const kind = snap.kind;
    if (kind !== current.kind) switchKind(kind);
    const up = isNum(snap.uptime_s) ? snap.uptime_s : null;
    if (current.uptime != null && up != null && up < current.uptime - 0.5) resetHistory(); // process restarted
    const fresh = current.uptime == null || (up != null && up > current.uptime);
    if (up != null) current.uptime = fresh ? up : current.uptime;

    document.body.dataset.kind = kind;
    const title = typeof snap.title === 'string' && snap.title ? snap.title : 'statepipe';
    setText('title', title);
    if (document.title !== title + ' · statepipe') document.title = title + ' · statepipe';
    setText('kind', kind);
    setText('uptime', fmtDur(up));
    const render = renderers[kind];
    if (!render) { setText('waiting', 'Unknown snapshot kind: ' + kind); return; }
    render(snap, snap.data, up == null ? 0 : up, fresh);
  }

  function switchKind(kind) {
    current = { kind, uptime: null };
    resetHistory();
    for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + kind;
    $('waiting').hidden = !!renderers[kind];
  }

  function resetHistory() {
    hist.clear();
    rates.clear();
    for (const c of charts) c.reset();
  }

  // --------------------------------------------------------------------- evolve
  const evolveCharts = {
    steps: new Chart('chart-steps', { x: 'step', y: fmtDur, yAxis: (v) => fmtCompact(v) + ' s' }),
    loglik: new Chart('chart-loglik', { x: 'step', range: padRange }),
    ess: new Chart('chart-ess', { x: 'step' }),
  };

  renderers.evolve = function (snap, d, now) {
    const step = isNum(d.step) ? d.step : 0;
    const total = isNum(d.total_steps) ? d.total_steps : null;
    setText('step', digits(step));
    setText('step-of', total != null ? ' of ' + total : '');
    const fill = $('progress-fill');
    fill.classList.toggle('indeterminate', total == null && !d.finished);
    fill.classList.toggle('done', !!d.finished);
    const scale = d.finished || !total ? '' : 'scaleX(' + Math.min(1, step / total).toFixed(4) + ')';
    if (fill.style.transform !== scale) fill.style.transform = scale;
    setText('elapsed', fmtDur(d.elapsed_s));

    const times = Array.isArray(d.step_times) ? d.step_times.filter((p) => Array.isArray(p) && isNum(p[1])) : [];
    const mean = times.length ? times.reduce((a, p) => a + p[1], 0) / times.length : null;
    setText('mean-step', mean == null ? '—' : fmtDur(mean));
    let eta = '—';
    if (d.finished) eta = 'done';
    else if (total != null && mean != null) eta = fmtDur(mean * Math.max(0, total - step));
    setText('eta', eta);
    $('eta-wrap').hidden = total == null && !d.finished; // no step limit: nothing to estimate

    const t = d.totals || {};
    setText('totals-states', fmtInt(t.states));
    setText('totals-bytes', fmtBytes(t.bytes));
    setText('totals-steals', digits(t.steals));
    setText('totals-losses', digits(t.losses));
    setText('totals-promotions', digits(t.promotions));
    setText('totals-rollbacks', digits(t.rollbacks));
    setText('totals-stragglers', digits(t.stragglers_rerun));
    $('totals-losses').parentElement.classList.toggle('hot', (t.losses || 0) > 0);

    const workers = (Array.isArray(d.workers) ? d.workers.slice() : []).sort((a, b) => a.id - b.id);
    renderLanes(workers, Array.isArray(d.lanes) ? d.lanes : [], now);
    renderWorkers(workers);
    renderEvents(Array.isArray(d.events) ? d.events : []);

    evolveCharts.steps.set([{ label: 'step time', color: PALETTE[0], fill: true }],
      [times.map((p) => p[0]), times.map((p) => p[1])]);

    const pf = d.pf;
    $('pf').hidden = !pf;
    if (pf) {
      const ll = (pf.loglik || []).filter((p) => Array.isArray(p));
      const ess = (pf.ess || []).filter((p) => Array.isArray(p));
      setText('pf-particles', fmtInt(pf.particles) + ' particles');
      evolveCharts.loglik.set([{ label: 'log-likelihood', color: PALETTE[3] }],
        [ll.map((p) => p[0]), ll.map((p) => p[1])]);
      evolveCharts.ess.set([{ label: 'ESS', color: PALETTE[2], fill: true }, { label: 'particles', color: '#9aa5b4', dash: [5, 4], width: 1.2 }],
        [ess.map((p) => p[0]), ess.map((p) => p[1]), ess.map(() => (isNum(pf.particles) ? pf.particles : null))]);
    }
  };


  /* The task stream: one SVG strip per worker whose rects sit at absolute
     times (10 units per second); sliding the viewBox moves the 60 s window, and
     only the segments that appear or vanish touch the DOM. */
  function renderLanes(workers, lanes, now) {
    const wrap = $('lanes');
    const t0 = now - LANE_WINDOW_S;
    const scale = 10; // viewBox units per second
    const byWorker = new Map();
    for (const s of lanes) {
      if (!Array.isArray(s) || s.length < 4) continue;
      const a = s[2], b = s[3];
      if (!isNum(a) || !isNum(b) || b < t0 || a > now || b < a) continue;
      if (!byWorker.has(s[0])) byWorker.set(s[0], []);
      byWorker.get(s[0]).push([s[1] === 'transfer' ? 'transfer' : 'busy', a, b]);
    }
    const existing = new Map();
    for (const el of wrap.querySelectorAll(':scope > .lane')) existing.set(el.dataset.worker, el);
    const seen = new Set();
    let prev = null;
    for (const w of workers) {
      const key = String(w.id);
      seen.add(key);
      let el = existing.get(key);
      if (!el) {
        el = document.createElement('div');
        el.className = 'lane';
        el.dataset.worker = key;
        el.innerHTML = '<div class="lane-label"></div><svg preserveAspectRatio="none" xmlns="' + SVG_NS + '"><g></g><g></g></svg>';
        el._rects = new Map();
        inView.watch(el);
      }
      const before = prev ? prev.nextElementSibling : wrap.firstElementChild;
      if (el !== before) wrap.insertBefore(el, before); // keeps lanes in id order
      prev = el;
      el.classList.toggle('lost', !w.alive && !w.left);
      el.classList.toggle('left', !!w.left);
      inView.draw(el, () => drawLane(el, w, byWorker.get(w.id) || [], t0, scale));
    }
    for (const [key, el] of existing) if (!seen.has(key)) el.remove();
    let note = wrap.querySelector(':scope > .lanes-empty');
    if (!workers.length && !note) {
      note = document.createElement('div');
      note.className = 'lanes-empty';
      note.textContent = 'no workers yet';
      wrap.appendChild(note);
    } else if (workers.length && note) note.remove();

    const axis = $('lanes-axis');
    if (!axis.childElementCount) {
      axis.innerHTML = [-60, -45, -30, -15, 0].map((s) =>
        '<span style="left:' + (((s + 60) / 60) * 100) + '%">' + (s === 0 ? 'now' : s + ' s') + '</span>').join('');
    }
  }

  /** One worker's lane: its label and its segments in the window from t0. */
  function drawLane(el, w, segs, t0, scale) {
    const label = el.firstChild;
    const name = String(w.name || 'worker ' + w.id), m = /^(.*?)\s*\((.*)\)$/.exec(name);
    setHTML(label, m ? '<span class="wid">' + esc(m[1]) + '</span> <span class="addr">' + esc(m[2]) + '</span>' : '<span class="wid">' + esc(name) + '</span>');
    const tip = (w.name || 'worker ' + w.id) + (w.alive ? '' : w.left ? ' — left' : ' — lost');
    if (label.title !== tip) label.title = tip;
    const svg = el.lastChild;
    svg.setAttribute('viewBox', (t0 * scale).toFixed(2) + ' 0 ' + LANE_WINDOW_S * scale + ' 20');
    const live = new Set();
    for (const [kind, a, b] of segs) {
      const k = kind[0] + a;
      live.add(k);
      const width = Math.max(kind === 'busy' ? 0.2 : 1, (b - a) * scale).toFixed(2);
      let r = el._rects.get(k);
      if (!r) {
        r = document.createElementNS(SVG_NS, 'rect');
        r.setAttribute('class', kind);
        r.setAttribute('x', (a * scale).toFixed(2));
        r.setAttribute('y', kind === 'busy' ? '2' : '5');
        r.setAttribute('height', kind === 'busy' ? '16' : '10');
        (kind === 'busy' ? svg.firstChild : svg.lastChild).appendChild(r);
        el._rects.set(k, r);
      }
      if (r._w !== width) { r.setAttribute('width', width); r._w = width; }
    }
    for (const [k, r] of el._rects) if (!live.has(k)) { r.remove(); el._rects.delete(k); }
  }

  /** shareBar's bar in `el`, made once and then changed in place. */
  function setShareBar(el, parts) {
    if (!el._bar) {
      setHTML(el, shareBar(parts));
      el._bar = Array.from(el.querySelectorAll('i'));
      el._pct = el.querySelector('.pct');
      return;
    }
    const fr = shares(parts);
    fr.forEach((f, i) => { const wd = (f * 100).toFixed(1) + '%'; if (el._bar[i].style.width !== wd) el._bar[i].style.width = wd; });
    setText(el._pct, fr.map((f) => Math.round(f * 100)).join(' / ') + ' %');
  }
  function shares(parts) {
    const total = parts.reduce((a, p) => a + (isNum(p[1]) ? Math.max(0, p[1]) : 0), 0);
    return parts.map((p) => (total > 0 && isNum(p[1]) ? Math.max(0, p[1]) / total : 0));
  }

  function shareBar(parts) {
    const total = parts.reduce((a, p) => a + (isNum(p[1]) ? Math.max(0, p[1]) : 0), 0);
    const fr = parts.map((p) => (total > 0 && isNum(p[1]) ? Math.max(0, p[1]) / total : 0));
    const bar = parts.map((p, i) => '<i class="s-' + p[0] + '" style="width:' + (fr[i] * 100).toFixed(1) + '%"></i>').join('');
    return '<div class="share-wrap"><div class="share">' + bar + '</div><span class="pct">' +
      fr.map((f) => Math.round(f * 100)).join(' / ') + ' %</span></div>';
  }

  /* The workers' table, updated in place: a row per worker, made once, whose
     cells change only where their text does. */
  const WORKER_COLS = 11;
  const workerRows = new Map();
  function renderWorkers(workers) {
    const body = $('workers').tBodies[0];
    const seen = new Set();
    let prev = null;
    for (const w of workers) {
      const key = String(w.id);
      seen.add(key);
      let tr = workerRows.get(key);
      if (!tr) {
        tr = document.createElement('tr');
        tr.dataset.worker = key;
        for (let i = 0; i < WORKER_COLS; i++) {
          const td = document.createElement('td');
          if (i === 2 || i >= 4) td.className = 'n';
          tr.appendChild(td);
        }
        workerRows.set(key, tr);
        inView.watch(tr);
      }
      const before = prev ? prev.nextElementSibling : body.firstElementChild;
      if (tr !== before) body.insertBefore(tr, before);
      prev = tr;
      inView.draw(tr, () => drawWorkerRow(tr, w));
    }
    for (const [key, tr] of workerRows) if (!seen.has(key)) { tr.remove(); workerRows.delete(key); }
    let empty = body.querySelector('td.empty');
    if (!workers.length && !empty) {
      body.insertAdjacentHTML('beforeend', '<tr><td class="empty" colspan="11">no workers yet</td></tr>');
    } else if (workers.length && empty) empty.parentElement.remove();
  }

  function drawWorkerRow(tr, w) {
    tr.classList.toggle('is-lost', !w.alive);
    const c = tr.cells;
    setText(c[0], String(w.name || 'worker ' + w.id));
    setHTML(c[1], w.alive ? '<span class="badge ok">alive</span>'
      : w.left ? '<span class="badge">left</span>' : '<span class="badge bad">lost</span>');
    setText(c[2], fmtInt(w.states));
    setShareBar(c[3], [['busy', w.busy_s], ['transfer', w.transfer_s], ['wait', w.wait_s]]);
    setText(c[4], fmtBytes(w.bytes_in));
    setText(c[5], fmtBytes(w.bytes_out));
    setText(c[6], fmtInt(w.evolved));
    setText(c[7], fmtInt(w.batches));
    setText(c[8], fmtInt(w.steals_in));
    setText(c[9], fmtInt(w.steals_out));
    setText(c[10], fmtInt(w.recovered_states));
  }

  /* The events list, newest first, updated in place: an item per event, made
     once (keyed by its time, kind, worker and detail) and moved, so a new
     event adds one item instead of rebuilding the list. */
  const eventItems = new Map();
  function renderEvents(events) {
    const ul = $('events');
    const list = events.slice().sort((a, b) => (b.t || 0) - (a.t || 0));
    const keyed = [], seen = new Set();
    for (const e of list) {
      const kind = String(e.kind || 'event');
      const who = e.worker == null ? '' : 'worker ' + e.worker + (e.detail ? ': ' : '');
      const text = who + (e.detail || '');
      let key = e.t + '\n' + kind + '\n' + text;
      while (seen.has(key)) key += '\n'; // the same event twice: two items
      seen.add(key);
      keyed.push([key, e, kind, text]);
    }
    // Gone ones first, so that the ones kept need not move.
    for (const [key, li] of eventItems) if (!seen.has(key)) { li.remove(); eventItems.delete(key); }
    let prev = null;
    for (const [key, e, kind, text] of keyed) {
      let li = eventItems.get(key);
      if (!li) {
        li = document.createElement('li');
        li.className = 'event';
        li.dataset.kind = kind;
        li.innerHTML = '<span class="t">' + fmtClock(e.t) + '</span><span class="k">' + esc(kind.replace(/_/g, ' ')) +
          '</span><span class="d" title="' + esc(text) + '">' + esc(text) + '</span>';
        eventItems.set(key, li);
      }
      const before = prev ? prev.nextElementSibling : ul.firstElementChild;
      if (li !== before) ul.insertBefore(li, before);
      prev = li;
    }
    const empty = ul.querySelector(':scope > li.empty');
    if (!list.length && !empty) ul.insertAdjacentHTML('beforeend', '<li class="empty">no events yet</li>');
    else if (list.length && empty) empty.remove();
  }

  // ------------------------------------------------------------------- pipeline
  const pipelineCharts = { out: new Chart('chart-out', {}) };
  const graphState = { key: null, refs: new Map() };

  renderers.pipeline = function (snap, d, now, fresh) {
    const units = Array.isArray(d.units) ? d.units : [];
    const edges = (Array.isArray(d.edges) ? d.edges : []).filter((e) => Array.isArray(e) && e.length >= 2);
    const remote = d.remote && typeof d.remote === 'object' ? d.remote : null;
    const cps = Array.isArray(d.checkpoints) ? d.checkpoints : [];

    setText('pl-elapsed', fmtDur(d.elapsed_s));
    setText('pl-workers', digits(d.workers));
    setText('pl-state', d.finished ? 'finished' : 'running');

    // Per-unit rates and the pipeline's input and output rates.
    const unitRate = new Map();
    for (const u of units) {
      unitRate.set(u.name, {
        out: rates.rate('u:' + u.name + ':out', now, u.items_out),
        in: rates.rate('u:' + u.name + ':in', now, u.items_in),
      });
    }
    const names = new Set(units.map((u) => u.name));
    let sources = edges.filter((e) => e[0] === 'input' && names.has(e[1])).map((e) => e[1]);
    let sinks = edges.filter((e) => e[1] === 'output' && names.has(e[0])).map((e) => e[0]);
    if (!sources.length) sources = units.filter((u) => !edges.some((e) => e[1] === u.name && names.has(e[0]))).map((u) => u.name);
    if (!sinks.length) sinks = units.filter((u) => !edges.some((e) => e[0] === u.name && names.has(e[1]))).map((u) => u.name);
    const sum = (list, f) => { let s = null; for (const n of list) { const v = f(unitRate.get(n)); if (isNum(v)) s = (s || 0) + v; } return s; };
    let inRate = sum(sources, (r) => r && r.in);
    let outRate = sum(sinks, (r) => r && r.out);

    const cut = remote && Array.isArray(remote.cut_edges) ? remote.cut_edges : [];
    const cutRates = cut.map((e) => ({
      items: rates.rate('c:' + e.name + ':items', now, e.items),
      bytes: rates.rate('c:' + e.name + ':bytes', now, e.bytes),
    }));
    const cutOnly = !units.length && cut.length > 0;
    if (cutOnly) {
      inRate = null;
      outRate = cutRates.reduce((a, r) => (isNum(r.items) ? (a || 0) + r.items : a), null);
    }
    setText('pl-in-rate', fmtNum(inRate));
    setText('pl-out-rate', fmtNum(outRate));
    setText('rate-title', cutOnly ? 'Cut-edge throughput' : 'Throughput');
    setText('pl-out-label', cutOnly ? 'cut-edge items/s' : 'output items/s');
    $('pl-in-tile').hidden = cutOnly;
    if (fresh) hist.push(now, { in: inRate, out: outRate });
    pipelineCharts.out.set(cutOnly ? [{ label: 'cut edges items/s', color: PALETTE[0], fill: true }]
      : [{ label: 'output items/s', color: PALETTE[0], fill: true }, { label: 'input items/s', color: PALETTE[1] }],
    hist.data(cutOnly ? ['out'] : ['out', 'in']));

    // Checkpoints.
    const cpCount = Math.max(cps.length, remote && isNum(remote.checkpoints) ? remote.checkpoints : 0);
    setText('checkpoint-count', String(cpCount));
    setText('cp-hint', cps.length ? 'newest first · ' + cps.length + ' listed' : '');
    const cpRows = cps.slice(-100).reverse().map((c) =>
      '<tr><td class="n">' + esc(c.id) + '</td><td class="n">' + fmtClock(c.t) + '</td><td class="n">' + fmtInt(c.position) +
      '</td><td class="n">' + fmtSmallDur(c.duration_s) + '</td><td class="n">' + fmtBytes(c.bytes) +
      '</td><td class="n">' + fmtSmallDur(c.max_stall_s) + '</td></tr>').join('');
    setHTML($('checkpoints').tBodies[0], cpRows || '<tr><td class="empty" colspan="6">' +
      (cpCount ? cpCount + ' taken; no history kept on this process' : 'no checkpoint yet') + '</td></tr>');

    renderGraph(units, edges, remote);
    $('units-card').hidden = !units.length && !!remote;
    const unitRows = units.map((u) => {
      const r = unitRate.get(u.name) || {};
      const cap = isNum(u.ring_capacity) && u.ring_capacity > 0 ? u.ring_capacity : null;
      const rateIn = isNum(r.in) ? r.in : r.out;
      return '<tr data-name="' + esc(u.name) + '"><td>' + esc(u.name) + '</td><td class="n">' + esc(u.worker) + '</td>' +
        '<td class="n">' + fmtInt(u.items_in) + '</td><td class="n">' + fmtInt(u.items_out) + '</td>' +
        '<td class="n">' + fmtNum(r.out) + '</td>' +
        // Latencies from the counters (no per-item clock): work per item
        // is the busy share over the rate, the ring's wait by Little's law.
        '<td class="n">' + (rateIn > 0 ? fmtSmallDur((u.busy || 0) / rateIn) : '—') + '</td>' +
        '<td class="n">' + (rateIn > 0 ? fmtSmallDur((u.queue_depth || 0) / rateIn) : '—') + '</td>' +
        '<td class="n"' + (u.errors > 0 ? ' style="color:var(--bad)"' : '') + '>' + fmtInt(u.errors) + '</td>' +
        '<td>' + shareBar([['busy', u.busy], ['blocked', u.blocked], ['wait', u.idle]]) + '</td>' +
        '<td class="n">' + fmtInt(u.queue_depth) + (cap ? ' / ' + fmtInt(cap) : '') + '</td></tr>';
    }).join('');
    setHTML($('units').tBodies[0], unitRows || '<tr><td class="empty" colspan="10">no units on this process</td></tr>');

    const ups = Array.isArray(d.upgrades) ? d.upgrades : [];
    setHTML($('upgrades'), ups.slice().reverse().map((u) =>
      '<li class="item ' + (u.ok ? 'good' : 'bad') + '"><span class="t">' + fmtClock(u.t) + '</span><span class="k">' +
      (u.ok ? 'upgraded' : 'failed') + '</span><span class="d">stage ' + esc(u.stage) + '</span></li>').join('') ||
      '<li class="empty">no upgrades</li>');

    $('remote').hidden = !remote;
    if (remote) renderRemote(remote, cut, cutRates);
  };

  function renderRemote(remote, cut, cutRates) {
    const members = Array.isArray(remote.members) ? remote.members : [];
    setText('remote-parts', (isNum(remote.parts) ? remote.parts : 0) + ' parts · ' + members.filter((m) => m.alive).length + ' of ' + members.length + ' alive');
    setHTML($('members').tBodies[0], members.map((m) =>
      '<tr class="member' + (m.alive ? '' : ' is-lost') + '" data-id="' + esc(m.id) + '"><td class="n">' + esc(m.id) + '</td><td>' + esc(m.addr) + '</td><td>' +
      (m.alive ? '<span class="badge ok">alive</span>' : '<span class="badge bad">lost</span>') + '</td><td>' +
      (Array.isArray(m.parts) && m.parts.length ? m.parts.map(esc).join(', ') : '—') + '</td></tr>').join('') ||
      '<tr><td class="empty" colspan="4">no members</td></tr>');
    setHTML($('cut-edges').tBodies[0], cut.map((e, i) =>
      '<tr><td>' + esc(e.name) + '</td><td class="n">' + fmtNum(cutRates[i].items) + '</td><td class="n">' +
      (isNum(cutRates[i].bytes) ? fmtBytes(cutRates[i].bytes) + '/s' : '—') + '</td><td class="n">' + fmtInt(e.items) +
      '</td><td class="n">' + fmtInt(e.frames) + '</td><td class="n">' + fmtInt(e.credits) + '</td><td class="n"' +
      (e.stalls > 0 ? ' style="color:var(--bad)"' : '') + '>' + fmtInt(e.stalls) + '</td></tr>').join('') ||
      '<tr><td class="empty" colspan="7">no cut edges</td></tr>');
    setText('remote-checkpoints', digits(remote.checkpoints));
    setText('remote-skipped', digits(remote.skipped_checkpoints));
    setText('remote-last-cp', fmtSmallDur(remote.last_checkpoint_s));
    const rs = Array.isArray(remote.restores) ? remote.restores : [];
    setHTML($('restores'), rs.slice().reverse().map(restoreItem).join('') || '<li class="empty">no restores</li>');
  }

  /** A restore's line: why by its kind (a member lost, a part failed, a member left or joined), then where from. */
  function restoreItem(r) {
    const rescale = r.kind === 'left' || r.kind === 'joined';
    let why;
    if (r.kind === 'lost') why = 'after member ' + (r.member == null ? '?' : esc(r.member)) + ' was lost';
    else if (r.kind === 'failed') why = 'after a part failed' + (r.why ? ': ' + esc(r.why) : '');
    else if (rescale) why = r.why ? esc(r.why) : 'a member ' + r.kind;
    const from = r.checkpoint == null ? 'from the start' : 'from checkpoint ' + esc(r.checkpoint);
    return '<li class="item ' + (rescale ? 'rescale' : 'bad') + '" data-kind="' + esc(r.kind || '') + '"><span class="t">' + fmtClock(r.t) +
      '</span><span class="k">' + (rescale ? 'rescaled' : 'restored') + '</span><span class="d">' + (why ? why + ' · ' : '') + from + ' · ' +
      esc(r.members) + ' member' + (r.members === 1 ? '' : 's') + '</span></li>';
  }

  /** White → orange → red for a busy share in [0, 1]. */
  function heat(v) {
    v = Math.max(0, Math.min(1, isNum(v) ? v : 0));
    const stops = [[0, [255, 255, 255]], [0.5, [253, 180, 90]], [1, [224, 64, 42]]];
    let i = v <= 0.5 ? 0 : 1;
    const [p0, c0] = stops[i], [p1, c1] = stops[i + 1];
    const f = (v - p0) / (p1 - p0);
    return 'rgb(' + c0.map((c, k) => Math.round(c + (c1[k] - c) * f)).join(',') + ')';
  }

  function renderGraph(units, edges, remote) {
    const box = $('graph');
    const key = JSON.stringify([units.map((u) => [u.name, u.worker]), edges]);
    if (key !== graphState.key) {
      graphState.key = key;
      graphState.refs = new Map();
      if (!units.length) {
        box.innerHTML = '<div class="empty-note">' + (remote ? 'This coordinator runs no units itself: see members and cut edges below.' : 'No units deployed yet.') + '</div>';
        return;
      }
      box.innerHTML = buildGraph(units, edges);
      for (const g of box.querySelectorAll('g.unit')) {
        graphState.refs.set(g.dataset.name, {
          g, box: g.querySelector('.box'), sm: g.querySelector('.sm'), fill: g.querySelector('.ring-fill'), title: g.querySelector('title'),
        });
      }
    }
    for (const u of units) {
      const r = graphState.refs.get(u.name);
      if (!r) continue;
      const cap = isNum(u.ring_capacity) && u.ring_capacity > 0 ? u.ring_capacity : 1;
      const frac = Math.max(0, Math.min(1, (u.queue_depth || 0) / cap));
      r.box.setAttribute('fill', heat(u.busy));
      r.g.classList.toggle('hot', (u.busy || 0) > 0.8);
      r.fill.setAttribute('width', (frac * (GRAPH.W - 16)).toFixed(1));
      r.fill.classList.toggle('full', frac > 0.8);
      setText(r.sm, 'busy ' + pct(u.busy) + ' · queue ' + fmtInt(u.queue_depth));
      setText(r.title, u.name + ' (worker ' + u.worker + ')\nbusy ' + pct(u.busy) + ', blocked ' + pct(u.blocked) + ', idle ' + pct(u.idle) +
        '\nqueue ' + fmtInt(u.queue_depth) + ' / ' + fmtInt(u.ring_capacity) + '\nin ' + fmtInt(u.items_in) + ', out ' + fmtInt(u.items_out) +
        (u.errors ? ', errors ' + fmtInt(u.errors) : ''));
    }
  }

  const GRAPH = { W: 150, H: 54, EW: 70, EH: 28, GX: 56, GY: 12, PAD: 14, BAND_HEAD: 22, BAND_GAP: 12 };

  /** SVG for the deployed graph: longest-path layers left to right, one band per worker. */
  function buildGraph(units, edges) {
    const G = GRAPH;
    const names = new Set(units.map((u) => u.name));
    const ends = [];
    for (const e of edges) for (const n of [e[0], e[1]]) if (!names.has(n) && !ends.includes(n)) ends.push(n);
    const all = [...names, ...ends];
    // Drop back edges (found by depth-first search) so that a cycle cannot stretch the layering.
    const out = new Map(all.map((n) => [n, []]));
    edges.forEach((e, i) => out.get(e[0]).push([e[1], i]));
    const back = new Set(), mark = new Map();
    const visit = (n) => {
      mark.set(n, 1);
      for (const [m, i] of out.get(n)) {
        if (mark.get(m) === 1) back.add(i);
        else if (!mark.has(m)) visit(m);
      }
      mark.set(n, 2);
    };
    const hasIn = new Set(edges.map((e) => e[1]));
    for (const n of all) if (!hasIn.has(n) && !mark.has(n)) visit(n);
    for (const n of all) if (!mark.has(n)) visit(n);
    const layer = new Map(all.map((n) => [n, 0]));
    for (let it = 0; it <= all.length; it++) { // longest path over the remaining (acyclic) edges
      let changed = false;
      for (let i = 0; i < edges.length; i++) {
        const [a, b] = edges[i];
        if (back.has(i) || a === b || b === 'input') continue;
        const l = layer.get(a) + 1;
        if (l > layer.get(b)) { layer.set(b, l); changed = true; }
      }
      if (!changed) break;
    }
    let maxL = 0;
    for (const v of layer.values()) maxL = Math.max(maxL, v);
    if (layer.has('output')) layer.set('output', maxL);
    // Column widths: a column with only endpoints is narrow.
    const colW = [];
    for (let l = 0; l <= maxL; l++) colW.push(units.some((u) => layer.get(u.name) === l) ? G.W : G.EW);
    const colX = [];
    let x = G.PAD;
    for (let l = 0; l <= maxL; l++) { colX.push(x); x += colW[l] + G.GX; }
    const width = x - G.GX + G.PAD;

    const pos = new Map();
    const clusters = [];
    const workers = [...new Set(units.map((u) => u.worker))].sort((a, b) => a - b);
    let y = G.PAD;
    for (const w of workers) {
      const cols = new Map();
      for (const u of units) {
        if (u.worker !== w) continue;
        const l = layer.get(u.name);
        if (!cols.has(l)) cols.set(l, []);
        cols.get(l).push(u);
      }
      let rows = 0, lo = Infinity, hi = -Infinity;
      for (const [l, list] of cols) {
        rows = Math.max(rows, list.length); lo = Math.min(lo, l); hi = Math.max(hi, l);
        list.forEach((u, i) => pos.set(u.name, { x: colX[l], y: y + G.BAND_HEAD + i * (G.H + G.GY), w: G.W, h: G.H }));
      }
      const h = G.BAND_HEAD + rows * (G.H + G.GY) - G.GY + 10;
      clusters.push({ w, x: colX[lo] - 8, y, width: colX[hi] + G.W + 8 - (colX[lo] - 8), h });
      y += h + G.BAND_GAP;
    }
    let endRows = 1;
    for (let l = 0; l <= maxL; l++) endRows = Math.max(endRows, ends.filter((n) => layer.get(n) === l).length);
    const height = Math.max(y - G.BAND_GAP + G.PAD, endRows * (G.EH + 10) - 10 + 2 * G.PAD);
    for (let l = 0; l <= maxL; l++) { // endpoints of one column stack around the middle
      const col = ends.filter((n) => layer.get(n) === l);
      const top = (height - (col.length * (G.EH + 10) - 10)) / 2;
      col.forEach((n, i) => pos.set(n, { x: colX[l] + (colW[l] - G.EW) / 2, y: top + i * (G.EH + 10), w: G.EW, h: G.EH }));
    }

    let svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ' + width + ' ' + height + '" width="' + width + '" height="' + height + '">' +
      '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">' +
      '<path d="M0,0 L10,5 L0,10 z" fill="#9aa5b4"/></marker></defs>';
    for (const c of clusters) {
      svg += '<g class="cluster" data-worker="' + esc(c.w) + '"><rect x="' + c.x + '" y="' + c.y + '" width="' + c.width + '" height="' + c.h +
        '" rx="8"/><text x="' + (c.x + 8) + '" y="' + (c.y + 15) + '">worker ' + esc(c.w) + '</text></g>';
    }
    for (const [a, b] of edges) {
      const p = pos.get(a), q = pos.get(b);
      if (!p || !q) continue;
      const x1 = p.x + p.w, y1 = p.y + p.h / 2, x2 = q.x - 1, y2 = q.y + q.h / 2;
      const dx = Math.max(30, Math.abs(x2 - x1) / 2);
      svg += '<path class="edge" d="M' + x1 + ',' + y1 + ' C' + (x1 + dx) + ',' + y1 + ' ' + (x2 - dx) + ',' + y2 + ' ' + x2 + ',' + y2 + '" marker-end="url(#arrow)"/>';
    }
    for (const n of ends) {
      const p = pos.get(n);
      svg += '<g class="endpoint" data-name="' + esc(n) + '"><rect x="' + p.x + '" y="' + p.y + '" width="' + p.w + '" height="' + p.h + '" rx="14"/>' +
        '<text x="' + (p.x + p.w / 2) + '" y="' + (p.y + p.h / 2 + 4) + '" text-anchor="middle">' + esc(n) + '</text></g>';
    }
    for (const u of units) {
      const p = pos.get(u.name);
      const label = u.name.length > 20 ? u.name.slice(0, 19) + '…' : u.name;
      svg += '<g class="unit" data-name="' + esc(u.name) + '"><title></title>' +
        '<rect class="box" x="' + p.x + '" y="' + p.y + '" width="' + p.w + '" height="' + p.h + '" rx="6" fill="#fff"/>' +
        '<text class="nm" x="' + (p.x + 8) + '" y="' + (p.y + 17) + '">' + esc(label) + '</text>' +
        '<text class="sm" x="' + (p.x + 8) + '" y="' + (p.y + 32) + '"></text>' +
        '<rect class="ring-bg" x="' + (p.x + 8) + '" y="' + (p.y + p.h - 13) + '" width="' + (p.w - 16) + '" height="5" rx="2"/>' +
        '<rect class="ring-fill" x="' + (p.x + 8) + '" y="' + (p.y + p.h - 13) + '" width="0" height="5" rx="2"/></g>';
    }
    return svg + '</svg>';
  }

  // -------------------------------------------------------------------- service
  const serviceCharts = {
    rps: new Chart('chart-rps', {}),
    latency: new Chart('chart-latency', { y: (v) => fmtMs(v) }),
    refusals: new Chart('chart-refusals', {}),
    journal: new Chart('chart-journal', { y: fmtCompact, y2: (v) => fmtCompact(v) }),
    conns: new Chart('chart-conns', {}),
  };
  const svc = { p50: null, p99: null };
  const REFUSALS = [['queue_delay', 'queue delay'], ['ring_full', 'ring full'], ['connections', 'connections']];

  renderers.service = function (snap, d, now, fresh) {
    const reqs = (Array.isArray(d.requests) ? d.requests : []).slice()
      .sort((a, b) => String(a.route).localeCompare(String(b.route)) || a.status - b.status);
    const total = reqs.reduce((a, r) => a + (isNum(r.count) ? r.count : 0), 0);
    setText('request-count', String(total));
    const totalRate = rates.rate('req:total', now, total);
    setText('rps', fmtNum(totalRate));
    const point = { total: totalRate };
    const routeRows = reqs.map((r) => {
      const k = r.route + ' ' + r.status;
      const v = rates.rate('req:' + k, now, r.count);
      point['r:' + k] = v;
      return '<tr><td>' + esc(r.route) + '</td><td class="n"' + (r.status >= 400 ? ' style="color:' + (r.status === 429 ? 'var(--warn)' : 'var(--bad)') + '"' : '') + '>' +
        esc(r.status) + '</td><td class="n">' + fmtInt(r.count) + '</td><td class="n">' + fmtNum(v) + '</td></tr>';
    }).join('');
    setHTML($('routes').tBodies[0], routeRows || '<tr><td class="empty" colspan="4">no requests yet</td></tr>');

    const lat = d.latency || {};
    if (isNum(lat.count) && lat.count > 0) {
      if (isNum(lat.p50_s)) svc.p50 = lat.p50_s * 1000;
      if (isNum(lat.p99_s)) svc.p99 = lat.p99_s * 1000;
      point.p50 = isNum(lat.p50_s) ? lat.p50_s * 1000 : null;
      point.p99 = isNum(lat.p99_s) ? lat.p99_s * 1000 : null;
    }
    setText('p50', svc.p50 == null ? '—' : fmtMs(svc.p50));
    setText('p99', svc.p99 == null ? '—' : fmtMs(svc.p99));

    const ref = d.refusals || {};
    const refHTML = [];
    for (const [k, label] of REFUSALS) {
      const v = rates.rate('ref:' + k, now, ref[k]);
      point['ref:' + k] = v;
      refHTML.push('<span>' + label + ' <b>' + fmtInt(ref[k]) + '</b> (' + fmtNum(v) + '/s)</span>');
    }
    setHTML($('refusal-counts'), refHTML.join(''));

    const j = d.journal || {};
    const fs = rates.rate('j:fsyncs', now, j.fsyncs);
    const ev = rates.rate('j:events', now, j.events);
    const perFsync = isNum(fs) && isNum(ev) && fs > 0 ? ev / fs : null;
    point.fsyncs = fs; point.perFsync = perFsync;
    setText('fsync-rate', fmtNum(fs));
    setText('writes-per-fsync', fmtNum(perFsync));
    setText('published', fmtInt(d.published));
    setText('fsyncs', fmtInt(j.fsyncs));
    setText('journal-events', fmtInt(j.events));
    setText('connections', digits(d.connections));
    setText('ring-depth', digits(d.ring_depth));
    point.connections = d.connections; point.ring = d.ring_depth;

    if (fresh) hist.push(now, point);

    // Requests per second: the total and the busiest route/status pairs.
    const keys = reqs.slice().sort((a, b) => b.count - a.count).slice(0, 7).map((r) => r.route + ' ' + r.status)
      .sort();
    serviceCharts.rps.set([{ label: 'total', color: '#1f2733', width: 2 }].concat(keys.map((k, i) => ({ label: k, color: PALETTE[i % PALETTE.length], width: 1.2 }))),
      hist.data(['total'].concat(keys.map((k) => 'r:' + k))));
    serviceCharts.latency.set([{ label: 'p50', color: PALETTE[0], fill: true }, { label: 'p99', color: PALETTE[4] }], hist.data(['p50', 'p99']));
    serviceCharts.refusals.set(REFUSALS.map(([k, label], i) => ({ label: label, color: [PALETTE[1], PALETTE[4], PALETTE[3]][i] })),
      hist.data(REFUSALS.map(([k]) => 'ref:' + k)));
    serviceCharts.journal.set([{ label: 'fsyncs/s', color: PALETTE[0], fill: true }, { label: 'writes per fsync', color: PALETTE[1], scale: 'y2' }],
      hist.data(['fsyncs', 'perFsync']));
    serviceCharts.conns.set([{ label: 'open connections', color: PALETTE[0] }, { label: 'ring depth', color: PALETTE[2] }], hist.data(['connections', 'ring']));
  };

  // ---------------------------------------------------------------------- start
  setStatus('connecting');
  openStream();
})();
