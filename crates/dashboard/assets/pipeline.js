/* statepipe dashboard — pipeline.js: the `pipeline` page (`statepipe run`): rates,
 * checkpoints, the graph, units, a distributed run's members and restores.
 * Loaded after app.js, whose namespace (window.statepipe) it reads and whose
 * `renderers` it adds to. */
(function () {
  'use strict';

  const {
    PALETTE, $, esc, isNum, digits, fmtInt, fmtNum, fmtBytes, fmtDur, fmtSmallDur, fmtClock, pct, setText,
    setHTML, shareBar, Chart, rates, hist, renderers
  } = window.statepipe;

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
      '<tr class="member' + (m.alive || m.left ? '' : ' is-lost') + '" data-id="' + esc(m.id) + '"><td class="n">' + esc(m.id) + '</td><td>' + esc(m.addr) + '</td><td>' +
      (m.alive ? '<span class="badge ok">alive</span>' : m.left ? '<span class="badge">left</span>' : '<span class="badge bad">lost</span>') + '</td><td>' +
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
})();
