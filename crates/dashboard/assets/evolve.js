/* statepipe dashboard — evolve.js: the `evolve` page (`statepipe evolve`):
 * steps, the task stream, workers, events.
 * Loaded after app.js, whose namespace (window.statepipe) it reads and whose
 * `renderers` it adds to. */
(function () {
  'use strict';

  const {
    LANE_WINDOW_S, PALETTE, $, SVG_NS, esc, isNum, digits, fmtInt, fmtCompact, fmtBytes, fmtDur, fmtClock,
    setText, setHTML, setShareBar, inView, padRange, Chart, renderers
  } = window.statepipe;

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
})();
