/* statepipe dashboard — service.js: the `service` page (`statepipe serve`): requests,
 * latency, refusals, the journal.
 * Loaded after app.js, whose namespace (window.statepipe) it reads and whose
 * `renderers` it adds to. */
(function () {
  'use strict';

  const {
    PALETTE, $, esc, isNum, digits, fmtInt, fmtNum, fmtCompact, fmtMs, setText, setHTML, Chart, rates, hist,
    renderers
  } = window.statepipe;

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
})();
