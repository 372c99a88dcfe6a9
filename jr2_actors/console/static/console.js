// The jr2 Console (console/http.py serves it): three pages over the orchestrator's own API.
// Every text that comes from a run (names, the scheduler's words, what an agent said) is written with
// textContent or as a text node: never parsed as markup. The Instance token lives in this tab's
// sessionStorage and goes out only as an Authorization header; the feed is read with fetch() because
// EventSource cannot send that header.
'use strict';
(() => {
  const KEY = 'jr2.instanceToken';
  const SVG = 'http://www.w3.org/2000/svg';
  const POLL_MS = 2000;
  const LIVE = new Set(['running']);
  const main = document.getElementById('main');
  const liveNote = document.getElementById('live');
  let leave = null; // the open page's clean-up

  class Unauthorized extends Error {}

  // -- small helpers -----------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') node.className = v;
      else node.setAttribute(k, v);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child); // a string becomes a text node
    }
    return node;
  }
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    return node;
  }
  const text = (v) => (v === null || v === undefined ? '' : String(v));
  const runHref = (id) => '#/run/' + encodeURIComponent(id);
  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
    });
  }
  function ago(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return '–';
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return s + 's';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm' + String(s % 60).padStart(2, '0') + 's';
    const h = Math.floor(m / 60);
    if (h < 48) return h + 'h' + String(m % 60).padStart(2, '0') + 'm';
    return Math.floor(h / 24) + 'd' + String(h % 24).padStart(2, '0') + 'h';
  }
  const since = (iso) => (iso ? (Date.now() - Date.parse(iso)) / 1000 : null);
  const clock = (iso) => (iso ? new Date(Date.parse(iso)).toLocaleTimeString() : '');

  // -- the token -----------------------------------------------------------------------------------
  const token = () => sessionStorage.getItem(KEY) || '';
  function askToken(why) {
    if (leave) { leave(); leave = null; }
    main.replaceChildren();
    document.getElementById('forget').hidden = true;
    document.getElementById('login-error').textContent = why || '';
    document.getElementById('login').hidden = false;
    document.getElementById('token').focus();
  }
  document.getElementById('login').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = document.getElementById('token');
    const value = input.value.trim();
    input.value = '';
    if (!value) return;
    sessionStorage.setItem(KEY, value);
    document.getElementById('login').hidden = true;
    route();
  });
  document.getElementById('forget').addEventListener('click', () => {
    sessionStorage.removeItem(KEY);
    askToken('');
  });

  async function call(path, options) {
    const opts = Object.assign({ cache: 'no-store', credentials: 'omit', redirect: 'error' }, options || {});
    opts.headers = Object.assign({ Authorization: 'Bearer ' + token() }, opts.headers || {});
    const resp = await fetch(path, opts);
    if (resp.status === 401) {
      sessionStorage.removeItem(KEY);
      askToken('The orchestrator refused that token.');
      throw new Unauthorized();
    }
    return resp;
  }
  async function json(path, options) {
    const resp = await call(path, options);
    let doc = null;
    try { doc = await resp.json(); } catch (e) { doc = null; }
    if (!resp.ok) throw new Error((doc && doc.error) ? doc.error : 'HTTP ' + resp.status);
    return doc;
  }
  // Calls `step` now and every POLL_MS until the page is left; `step` failing shows in the header.
  function every(step, signal) {
    (async () => {
      while (!signal.aborted) {
        try {
          await step();
          liveNote.textContent = 'live · ' + new Date().toLocaleTimeString();
        } catch (e) {
          if (e instanceof Unauthorized) return;
          liveNote.textContent = 'cannot reach the orchestrator: ' + text(e.message) + ' (trying again)';
        }
        await sleep(POLL_MS, signal);
      }
    })();
  }

  // -- routing -------------------------------------------------------------------------------------
  function route() {
    if (leave) { leave(); leave = null; }
    if (!token()) { askToken(''); return; }
    document.getElementById('login').hidden = true;
    document.getElementById('forget').hidden = false;
    const controller = new AbortController();
    leave = () => controller.abort();
    const hash = location.hash;
    const run = /^#\/run\/(.+)$/.exec(hash);
    document.getElementById('nav-runs').className = run || hash !== '#/orchestrator' ? 'here' : '';
    document.getElementById('nav-orchestrator').className = hash === '#/orchestrator' ? 'here' : '';
    main.replaceChildren();
    if (run) runPage(decodeURIComponent(run[1]), controller.signal);
    else if (hash === '#/orchestrator') orchestratorPage(controller.signal);
    else runsPage(controller.signal);
  }
  window.addEventListener('hashchange', route);

  // -- the runs ------------------------------------------------------------------------------------
  function runsPage(signal) {
    document.title = 'Runs · jr2 Console';
    const byStatus = el('select', { id: 'filter-status' }, el('option', { value: '' }, 'every status'));
    const byWorkflow = el('select', { id: 'filter-workflow' }, el('option', { value: '' }, 'every workflow'));
    const body = el('tbody');
    const count = el('span', { class: 'muted', id: 'runs-count' });
    main.append(el('h1', {}, 'Runs'),
      el('div', { class: 'filters' }, el('label', {}, 'Status ', byStatus), el('label', {}, 'Workflow ', byWorkflow), count),
      el('table', { id: 'runs' },
        el('thead', {}, el('tr', {}, ...['run', 'workflow', 'status', 'state', 'placing', 'age', 'duration']
          .map((h) => el('th', { class: h === 'age' || h === 'duration' ? 'num' : '' }, h)))),
        body));
    let runs = [];
    const options = (select, values) => {
      const have = new Set([...select.options].map((o) => o.value));
      for (const v of [...values].sort()) if (!have.has(v)) select.append(el('option', { value: v }, v));
    };
    const draw = () => {
      const status = byStatus.value;
      const workflow = byWorkflow.value;
      const shown = runs.filter((r) => (!status || r.status === status) && (!workflow || r.workflow === workflow));
      count.textContent = shown.length + ' of ' + runs.length;
      body.replaceChildren(...shown.map((r) => {
        const placing = Array.isArray(r.placing) ? r.placing : [];
        const duration = r.durationSeconds !== undefined ? r.durationSeconds : (LIVE.has(r.status) ? since(r.startedAt) : null);
        return el('tr', { 'data-run': text(r.runId), class: placing.length ? 'placing' : '' },
          el('td', { class: 'id' }, el('a', { href: runHref(text(r.runId)) }, text(r.runId))),
          el('td', {}, text(r.workflow)),
          el('td', {}, el('span', { class: 'badge ' + text(r.status).replace(/[^a-z]/g, '') }, text(r.status))),
          el('td', {}, text(r.state)),
          el('td', {}, placing.length ? el('span', { class: 'badge placing' }, 'placing ' + placing.map(text).join(', ')) : ''),
          el('td', { class: 'num' }, ago(since(r.startedAt))),
          el('td', { class: 'num' }, ago(duration)));
      }));
      if (!shown.length) body.append(el('tr', {}, el('td', { colspan: '7', class: 'muted' }, 'no runs')));
    };
    byStatus.addEventListener('change', draw);
    byWorkflow.addEventListener('change', draw);
    every(async () => {
      const doc = await json('/runs?all=true', { signal });
      runs = (doc.runs || []).filter((r) => r && typeof r === 'object');
      runs.sort((a, b) => text(b.startedAt).localeCompare(text(a.startedAt)));
      options(byStatus, new Set(['running', 'done', 'failed', 'error', 'cancelled', 'lost', ...runs.map((r) => text(r.status))]));
      options(byWorkflow, new Set(runs.map((r) => text(r.workflow))));
      draw();
    }, signal);
  }

  // -- a run ---------------------------------------------------------------------------------------
  function runPage(runId, signal) {
    document.title = runId + ' · jr2 Console';
    const path = '/runs/' + encodeURIComponent(runId);
    const head = el('div', { class: 'runhead' });
    const note = el('p', { class: 'status-line', id: 'run-note' });
    const graphBox = el('div', { class: 'panel graph', id: 'graph' }, el('span', { class: 'muted' }, 'drawing the graph…'));
    const workspaces = el('tbody');
    const turns = el('tbody');
    const feed = el('div', { class: 'panel feed', id: 'feed' });
    const feedState = el('span', { class: 'muted', id: 'feed-state' });
    main.append(head, note, el('h2', {}, 'Graph'), graphBox,
      el('div', { class: 'grid' },
        el('div', {}, el('h2', {}, 'Workspaces'), el('table', { id: 'workspaces' },
          el('thead', {}, el('tr', {}, ...['Workspace', 'phase', 'waiting on', 'the scheduler\'s words', 'since'].map((h) => el('th', {}, h)))), workspaces),
        el('h2', {}, 'Turns'), el('table', { id: 'turns' },
          el('thead', {}, el('tr', {}, ...['Turn', 'Agent', 'state', 'admitted', 'notices told', 'pick'].map((h) => el('th', {}, h)))), turns)),
        el('div', {}, el('h2', {}, 'Feed ', feedState), feed)));
    let status = null;
    let graph = null;
    const turnRows = new Map();
    const cancel = el('button', { class: 'danger', id: 'cancel', type: 'button' }, 'Cancel');
    const resubmit = el('button', { id: 'resubmit', type: 'button' }, 'Resubmit');
    cancel.addEventListener('click', async () => {
      cancel.disabled = true;
      try {
        await json(path + '/cancel', { method: 'POST', signal });
        await refresh();
      } catch (e) {
        if (!(e instanceof Unauthorized)) note.textContent = 'cancel failed: ' + text(e.message);
      }
    });
    resubmit.addEventListener('click', async () => {
      resubmit.disabled = true;
      try {
        const doc = await json(path + '/workflow', { signal });
        const made = await json('/runs', { method: 'POST', signal, headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ workflow: doc.workflow }) });
        location.hash = runHref(text(made.runId));
      } catch (e) {
        resubmit.disabled = false;
        if (!(e instanceof Unauthorized)) note.textContent = 'resubmit failed: ' + text(e.message);
      }
    });

    const drawHead = () => {
      const s = status;
      head.replaceChildren(el('h1', {}, 'Run ', el('span', { class: 'mono' }, text(s.runId))),
        el('span', {}, 'workflow ', el('b', { id: 'run-workflow' }, text(s.workflow))),
        el('span', { class: 'badge ' + text(s.status).replace(/[^a-z]/g, ''), id: 'run-status' }, text(s.status)),
        el('span', {}, 'state ', el('b', { id: 'run-state' }, text(s.state))),
        el('span', { class: 'muted' }, 'started ' + ago(since(s.startedAt)) + ' ago' +
          (s.durationSeconds !== undefined ? ', took ' + ago(s.durationSeconds) : '')),
        el('span', { class: 'actions' }, cancel, resubmit));
      cancel.disabled = !LIVE.has(s.status);
      note.textContent = s.fault ? 'fault: ' + text(s.fault) : '';
    };
    const drawWorkspaces = () => {
      const waits = new Map((status.waiting || []).map((w) => [text(w.child), w]));
      const rows = (status.children || []).map((c) => {
        const w = waits.get(text(c.child));
        return el('tr', { 'data-child': text(c.child), class: c.phase === 'placing' ? 'placing' : '' },
          el('td', { class: 'mono' }, text(c.child)),
          el('td', {}, el('span', { class: 'badge ' + (c.phase === 'placing' ? 'placing' : '') }, text(c.phase))),
          el('td', { class: 'wait' }, w ? text(w.on) + (w.reason ? ' (' + text(w.reason) + ')' : '') : ''),
          el('td', { class: 'wait' }, w ? text(w.message) : ''),
          el('td', {}, w ? clock(w.since) + ' (' + ago(since(w.since)) + ')' : ''));
      });
      workspaces.replaceChildren(...rows);
      if (!rows.length) workspaces.append(el('tr', {}, el('td', { colspan: '5', class: 'muted' }, 'none')));
    };
    const lightGraph = () => {
      if (!graph || !status) return;
      const visited = new Set((status.path || []).map(text));
      const taken = new Set();
      const p = (status.path || []).map(text);
      for (let i = 1; i < p.length; i++) taken.add(p[i - 1] + '\u0000' + p[i]);
      const placing = new Set((status.children || []).filter((c) => c.phase === 'placing').map((c) => text(c.child)));
      for (const [name, g] of graph.nodes) {
        const here = name === text(status.state);
        const waits = here && g.holds.some((h) => placing.has(h));
        g.node.setAttribute('class', 'node' + (visited.has(name) ? ' visited' : '') + (here && !waits ? ' current' : '') + (waits ? ' placing' : ''));
      }
      for (const e of graph.edges) {
        const on = taken.has(e.from + '\u0000' + e.to);
        e.path.setAttribute('class', 'way' + (on ? ' taken' : ''));
        e.label.setAttribute('class', 'label' + (on ? ' taken' : ''));
      }
    };
    const refresh = async () => {
      status = await json(path, { signal });
      drawHead();
      drawWorkspaces();
      lightGraph();
    };
    every(refresh, signal);
    json('/console/graph/' + encodeURIComponent(runId), { signal })
      .then((doc) => { graph = drawGraph(graphBox, doc); lightGraph(); })
      .catch((e) => { if (!(e instanceof Unauthorized)) graphBox.replaceChildren(el('span', { class: 'error' }, 'cannot draw the graph: ' + text(e.message))); });

    const turnRow = (doc) => {
      const key = text(doc.agent) + '#' + text(doc.turn);
      let row = turnRows.get(key);
      if (!row) {
        row = { tr: el('tr', { 'data-turn': key }), cells: ['', text(doc.agent), '', '', '', ''] };
        turnRows.set(key, row);
        turns.append(row.tr);
      }
      row.cells[0] = text(doc.turn);
      return row;
    };
    const onLine = (doc) => {
      const kind = text(doc.kind);
      const line = el('div', { 'data-id': text(doc.id), class: kind === 'gap' ? 'gap' : '' },
        el('span', { class: 'id' }, doc.id !== undefined ? '#' + text(doc.id) : ''),
        el('span', { class: 'muted' }, clock(doc.at) + ' '),
        el('span', { class: 'kind' }, kind), ' ', describe(doc));
      const atEnd = feed.scrollTop + feed.clientHeight >= feed.scrollHeight - 4;
      feed.append(line);
      if (atEnd) feed.scrollTop = feed.scrollHeight;
      if (['turn', 'admitted', 'pick', 'turn-fault'].includes(kind)) {
        const row = turnRow(doc);
        if (kind === 'turn') row.cells[2] = text(doc.state);
        if (kind === 'admitted') {
          row.cells[3] = clock(doc.at) + (doc.kept ? ' (kept)' : '') + (doc.nudge ? ' (nudge)' : '');
          row.cells[4] = (doc.notices || []).map((n) => text(n && n.kind)).join(', ') || 'none';
        }
        if (kind === 'pick') row.cells[5] = text(doc.pick) + ' → ' + text(doc.to);
        if (kind === 'turn-fault') row.cells[5] = 'fault: ' + text(doc.reason);
        row.tr.replaceChildren(...row.cells.map((c) => el('td', {}, c)));
      }
      if (kind !== 'said') refresh().catch(() => {});
    };
    follow(path + '/events', onLine, (s) => { feedState.textContent = s; }, signal);
  }

  // A feed line's own words, as text.
  function describe(doc) {
    const skip = new Set(['id', 'at', 'kind']);
    if (doc.kind === 'said') return text(doc.agent) + ': ' + text(doc.text);
    if (doc.kind === 'gap') return 'lines after #' + text(doc.after) + ' before #' + text(doc.first) + ' are no longer kept';
    return Object.entries(doc).filter(([k]) => !skip.has(k))
      .map(([k, v]) => k + '=' + (typeof v === 'object' ? JSON.stringify(v) : text(v))).join('  ');
  }

  // The SSE feed over fetch(): resumed with Last-Event-ID after a drop, until the run has ended.
  async function follow(url, onLine, onState, signal) {
    let last = 0;
    let delay = 500;
    let ended = false;
    while (!signal.aborted && !ended) {
      let got = 0;
      try {
        onState(last ? 'resuming after #' + last + '…' : 'connecting…');
        const headers = { Accept: 'text/event-stream' };
        if (last) headers['Last-Event-ID'] = String(last);
        const resp = await call(url, { headers, signal });
        if (resp.status === 404) { onState('no such run'); return; }
        if (!resp.ok || !resp.body) throw new Error('HTTP ' + resp.status);
        onState('live');
        delay = 500;
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value.replace(/\r\n?/g, '\n');
          let cut;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(l.startsWith('data: ') ? 6 : 5)).join('\n');
            if (!data) continue; // a comment: the keepalive
            let doc;
            try { doc = JSON.parse(data); } catch (e) { continue; }
            if (!doc || typeof doc !== 'object') continue;
            if (typeof doc.id === 'number') {
              if (doc.id <= last) continue; // said again after a resume
              last = doc.id;
            }
            got += 1;
            if (doc.kind === 'ended') ended = true;
            onLine(doc);
          }
        }
        if (!ended && got === 0) { // a clean end with nothing new: has the run ended before we came?
          const s = await (await call(url.replace(/\/events$/, ''), { signal })).json();
          if (s && !LIVE.has(s.status)) ended = true;
        }
      } catch (e) {
        if (e instanceof Unauthorized || signal.aborted) return;
      }
      if (ended) break;
      onState('reconnecting…');
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 5000);
    }
    if (ended) onState('ended');
  }

  // The workflow's graph, drawn from the layout console/core.py made; each name as an SVG text node.
  function drawGraph(box, doc) {
    const root = svg('svg', { class: 'graph', width: doc.width, height: doc.height, viewBox: '0 0 ' + doc.width + ' ' + doc.height, role: 'img' });
    root.append(svg('title'));
    root.firstChild.textContent = 'The states of ' + text(doc.workflow);
    const defs = svg('defs');
    for (const id of ['arrow', 'arrow-taken']) {
      const marker = svg('marker', { id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
      marker.append(svg('path', { d: 'M0,0 L10,5 L0,10 z' }));
      defs.append(marker);
    }
    root.append(defs);
    const edges = [];
    for (const e of doc.edges) {
      const path = svg('path', { d: e.path, class: 'way' });
      const label = svg('text', { x: e.labelX, y: e.labelY, 'text-anchor': 'middle', class: 'label' });
      label.textContent = text(e.label);
      root.append(path, label);
      edges.push({ from: text(e.from), to: text(e.to), path, label });
    }
    const nodes = new Map();
    for (const n of doc.nodes) {
      const g = svg('g', { class: 'node', 'data-state': text(n.name) });
      g.append(svg('rect', { class: 'state', x: n.x, y: n.y, width: n.width, height: n.height, rx: 8 }));
      if (n.final) g.append(svg('rect', { class: 'final-ring', x: n.x + 3, y: n.y + 3, width: n.width - 6, height: n.height - 6, rx: 6 }));
      const t = svg('text', { x: n.x + n.width / 2, y: n.y + n.height / 2 + 4.5, 'text-anchor': 'middle' });
      t.textContent = text(n.name);
      g.append(t);
      if (n.start) {
        root.append(svg('circle', { class: 'start', cx: n.x - 22, cy: n.y + n.height / 2, r: 5 }),
          svg('path', { class: 'way', d: 'M' + (n.x - 17) + ',' + (n.y + n.height / 2) + ' L' + n.x + ',' + (n.y + n.height / 2) }));
      }
      root.append(g);
      nodes.set(text(n.name), { node: g, holds: (n.holds || []).map(text) });
    }
    box.replaceChildren(root);
    return { nodes, edges };
  }

  // -- the orchestrator ----------------------------------------------------------------------------
  function orchestratorPage(signal) {
    document.title = 'Orchestrator · jr2 Console';
    const box = el('div', { id: 'top' });
    main.append(el('h1', {}, 'The orchestrator'),
      el('p', { class: 'muted' }, 'What jr2-actors top shows, read off /metrics every ' + POLL_MS / 1000 + ' s.'), box);
    every(async () => {
      const doc = await json('/console/top', { signal });
      box.replaceChildren(...(doc.sections || []).map((s) => {
        const headers = (s.headers || []).map(text);
        const table = el('table', { 'data-section': text(s.title), class: headers.length ? '' : 'kv' });
        if (headers.length) table.append(el('thead', {}, el('tr', {}, ...headers.map((h, i) => el('th', { class: i ? 'num' : '' }, h)))));
        table.append(el('tbody', {}, ...(s.rows || []).map((r) => {
          const cells = (r.cells || []).map(text);
          if (headers.length) return el('tr', { class: r.alert ? 'alert' : '' }, ...cells.map((c, i) => el('td', { class: i ? 'num' : '' }, c)));
          return el('tr', {}, el('th', {}, cells[0] || ''), el('td', { class: r.alert ? 'alert' : (r.good ? 'good' : '') }, cells[1] || ''));
        })));
        return el('div', {}, el('div', { class: 'section-title' }, text(s.title)), table);
      }));
    }, signal);
  }

  route();
})();
