/* statepipe dashboard — app.js, the page's core, loaded first
 *
 * Plain JS, no build step, no framework. Connects to `api/stream` (Server-Sent
 * Events, one snapshot per event), falls back to polling `api/snapshot` every
 * 500 ms when the stream fails, and renders the snapshot by its `kind`
 * (evolve | pipeline | service; see crates/dashboard/README.md). Charts are
 * uPlot (global `uPlot`, vendored); the task stream and the pipeline graph are
 * SVG drawn by evolve.js and pipeline.js. Rates come from counter differences between snapshots; the
 * client keeps at most HISTORY points per chart.
 *
 * The page is four plain scripts, loaded in order by index.html: this one
 * (formatting, rates and history, charts, the connection, the dispatch), then
 * the renderers, evolve.js, pipeline.js and service.js, each adding its
 * `renderers[kind]` through the namespace this one defines, window.statepipe.
 * The connection opens once all four have run (DOMContentLoaded).
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
 *             #members tr.member, #restores > li.item[data-kind=lost|failed|left|joined]
 *             (remote runs)
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

  // ---------------------------------------------------------------- share bars
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

  // ------------------------------------------------------------ the namespace
  // What the renderers (evolve.js, pipeline.js, service.js) use.
  window.statepipe = {
    LANE_WINDOW_S, PALETTE, $, SVG_NS, esc, isNum, digits, fmtInt, fmtNum, fmtCompact, fmtBytes, fmtDur,
    fmtSmallDur, fmtClock, fmtMs, pct, setText, setHTML, setShareBar, shareBar, inView, padRange, Chart,
    rates, hist, renderers
  };

  // ---------------------------------------------------------------------- start
  // The renderers are in the scripts after this one: connect once they have run.
  function start() {
    setStatus('connecting');
    openStream();
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
