// Graph: the association neighbourhood of a memory, laid out by a small force
// simulation and drawn in SVG. Drag nodes, drag the background to pan, wheel to zoom;
// click a node to see it (open / recenter), double-click to recenter. "Spread
// activation" colours and sizes each node by the activation reaching it from the seed.

import { get, post, enc, isMissingRoute } from '../lib/api.js';
import {
  h, s, replace, pageHeader, card, emptyState, errorBox, loading, field, select, fmtNum, truncate,
  typeBadge, statusBadge, meter, notAvailable, showFormError,
} from '../lib/dom.js';
import { ForceLayout } from '../lib/force.js';

export async function render(ctx) {
  const { agent, params } = ctx;
  const seed = params.get('id') || '';
  const depth = params.get('depth') || '2';
  const limit = params.get('limit') || '200';
  const showActivation = params.get('act') === '1';

  const pickForm = h('form', { class: 'form-row', testid: 'graph-form', 'aria-label': 'Choose the centre memory' },
    h('div', { class: 'form-error', hidden: true }),
    h('div', { class: 'grow' }, field('Centre memory (id, or words to find it)', h('input', { name: 'id', value: seed, placeholder: 'memory id or full-text search', 'data-search': '', testid: 'graph-seed' }))),
    field('Depth', select('depth', ['1', '2', '3'], depth, { testid: 'graph-depth' })),
    field('Max nodes', select('limit', ['50', '100', '200', '500'], limit, { testid: 'graph-limit' })),
    h('button', { type: 'submit', class: 'btn btn-primary', testid: 'graph-submit' }, 'Show'));
  const pickResults = h('div', { testid: 'graph-pick' });
  pickForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = new FormData(pickForm);
    const value = f.get('id').trim();
    if (!value) return;
    if (/^[0-9a-f]{8}-[0-9a-f]{4}-/i.test(value) || value === seed) {
      ctx.setParams({ id: value, depth: f.get('depth'), limit: f.get('limit') }, { replace: false });
      return;
    }
    await findSeed(ctx, value, pickResults, pickForm);
  });

  const host = h('div', { testid: 'graph-host' });
  replace(ctx.main,
    pageHeader('Graph', `Agent ${agent || '(none)'}. The associations around one memory, and how activation spreads from it.`),
    card(null, h('div', { class: 'stack' }, pickForm, pickResults)),
    host);

  if (!agent) { replace(host, card(null, emptyState('No agent selected', 'Pick an agent above.'))); return; }
  if (!seed) {
    replace(host, card(null, emptyState('Choose a memory to centre the graph on',
      'Paste its id, or type words to find it; a memory\'s page has a "Graph" button too.', 'graph-empty')));
    recent(ctx, pickResults);
    return;
  }

  replace(host, loading('Loading the neighbourhood…'));
  let graph;
  let derived = false;
  try {
    graph = await get(`/v1/memories/${enc(seed)}/graph`, { agent_id: agent, depth, limit }, { signal: ctx.signal });
  } catch (err) {
    if (ctx.signal.aborted) return;
    if (!isMissingRoute(err)) { replace(host, errorBox(err, 'graph-error')); return; }
    try {
      graph = await graphFromActivation(agent, seed, Number(depth), Number(limit), ctx.signal);
      derived = true;
    } catch (err2) {
      if (!ctx.signal.aborted) replace(host, errorBox(err2, 'graph-error'));
      return;
    }
  }
  if (ctx.signal.aborted) return;
  if (!graph.nodes || !graph.nodes.length) {
    replace(host, card(null, emptyState('Nothing to draw', 'This memory was not found in the graph.', 'graph-empty')));
    return;
  }
  const view = new GraphView(ctx, graph, seed);
  replace(host,
    derived ? notAvailable('GET /v1/memories/{id}/graph; this drawing is rebuilt from spreading activation paths, so it shows only what activation reaches', 'graph-derived') : null,
    view.element);
  view.draw();
  // Time to a drawn neighbourhood, from the route's start (fetch + layout + DOM), after paint.
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const ms = performance.now() - ctx.started;
  view.svg.setAttribute('data-ready', 'true');
  view.svg.setAttribute('data-render-ms', ms.toFixed(1));
  window.__mnemos.timings.graph = { nodes: graph.nodes.length, edges: graph.edges.length, render_ms: ms, layout_ms: view.layoutMs };
  if (showActivation) view.spread();
}

/** A drawable neighbourhood made from spreading-activation paths (servers without /graph). */
async function graphFromActivation(agent, seed, depth, limit, signal) {
  const [seedMemory, act] = await Promise.all([
    get(`/v1/memories/${enc(seed)}`, { agent_id: agent }, { signal }),
    post('/tools/spreading_activation', { agent_id: agent, seed_id: seed, depth, limit }, { signal }),
  ]);
  const nodes = new Map([[seed, { ...pick(seedMemory), depth: 0 }]]);
  const edges = new Map();
  for (const r of act.results || []) {
    const path = r.path || [];
    if (!nodes.has(r.memory.id)) nodes.set(r.memory.id, { ...pick(r.memory), depth: Math.max(1, path.length - 1) });
    for (let i = 0; i + 1 < path.length; i++) {
      const key = `${path[i]}>${path[i + 1]}`;
      if (!edges.has(key)) edges.set(key, { from_id: path[i], to_id: path[i + 1], relation: 'related', weight: 0.5 });
    }
  }
  return { nodes: [...nodes.values()], edges: [...edges.values()].filter((e) => nodes.has(e.from_id) && nodes.has(e.to_id)) };
}

function pick(m) {
  return { id: m.id, type: m.type, content: m.content, importance: m.importance, status: m.status };
}

async function findSeed(ctx, text, host, form) {
  replace(host, loading('Searching…'));
  try {
    let memories;
    try {
      memories = (await get('/v1/memories', { agent_id: ctx.agent, q: text, limit: 10 })).memories || [];
    } catch (err) {
      if (!(err.status === 400 && err.field === 'q')) throw err;
      memories = ((await post('/tools/recall', { agent_id: ctx.agent, query: text, limit: 10 })).results || []).map((r) => r.memory);
    }
    replace(host, memories.length ? pickList(ctx, memories, `Memories matching “${text}”`) : emptyState('No memory matches', 'Try other words.'));
  } catch (err) {
    replace(host, '');
    showFormError(form, err);
  }
}

async function recent(ctx, host) {
  try {
    const res = await get('/v1/memories', { agent_id: ctx.agent, limit: 8 }, { signal: ctx.signal });
    if ((res.memories || []).length) replace(host, pickList(ctx, res.memories, 'Recent memories'));
  } catch { /* the hint above is enough */ }
}

function pickList(ctx, memories, title) {
  return h('div', null, h('h3', { class: 'muted small' }, title),
    h('ul', { class: 'idlist' }, memories.map((m) => h('li', null, typeBadge(m.type), ' ',
      h('a', { href: ctx.href('graph', { id: m.id, depth: ctx.params.get('depth'), limit: ctx.params.get('limit') }), testid: 'graph-pick-link' }, truncate(m.content, 100))))));
}

const ACT_BUCKETS = 7;

class GraphView {
  constructor(ctx, graph, seed) {
    this.ctx = ctx;
    this.seed = seed;
    this.W = 900;
    this.H = 620;
    this.index = new Map();
    this.nodes = graph.nodes.map((n, i) => {
      this.index.set(n.id, i);
      const big = graph.nodes.length > 80;
      const r = n.id === seed ? 11 : (big ? 3.5 : 5) + (big ? 4 : 7) * Math.max(0, Math.min(1, n.importance ?? 0.5));
      return { ...n, depth: n.id === seed ? 0 : (n.depth ?? 1), r, baseR: r };
    });
    this.edges = graph.edges
      .filter((e) => this.index.has(e.from_id) && this.index.has(e.to_id) && e.from_id !== e.to_id)
      .map((e) => ({ ...e, source: this.index.get(e.from_id), target: this.index.get(e.to_id) }));
    this.selected = null;
    this.activation = null;

    const t0 = performance.now();
    this.layout = new ForceLayout(this.nodes, this.edges, { width: this.W, height: this.H, linkDistance: this.nodes.length > 100 ? 55 : 80 });
    this.layout.run(this.nodes.length > 300 ? 180 : 300);
    this.layoutMs = performance.now() - t0;

    this.svg = s('svg', { class: 'graph-svg', role: 'img', 'aria-label': `Association graph of ${this.nodes.length} memories`, testid: 'graph-svg', 'data-nodes': this.nodes.length, 'data-edges': this.edges.length });
    this.viewport = s('g', { class: 'viewport' });
    this.edgeLayer = s('g', { class: 'edges' });
    this.nodeLayer = s('g', { class: 'nodes' });
    this.labelLayer = s('g', { class: 'labels' });
    this.viewport.append(this.edgeLayer, this.nodeLayer, this.labelLayer);
    this.svg.append(this.viewport);

    this.panel = h('div', { testid: 'graph-panel' });
    this.actHost = h('div', { testid: 'activation-host' });
    this.actButton = h('button', { type: 'button', class: 'btn btn-primary', testid: 'spread-activation', onclick: () => this.spread() }, 'Spread activation');
    const fit = h('button', { type: 'button', class: 'btn btn-small', onclick: () => this.fit(), title: 'Fit the graph to the view' }, 'Fit');
    const zin = h('button', { type: 'button', class: 'btn btn-small', onclick: () => this.zoom(1.25), 'aria-label': 'Zoom in' }, '+');
    const zout = h('button', { type: 'button', class: 'btn btn-small', onclick: () => this.zoom(0.8), 'aria-label': 'Zoom out' }, '−');
    this.legend = h('div', { class: 'graph-overlay', testid: 'graph-legend' },
      h('span', null, `${this.nodes.length} memories · ${this.edges.length} links`));
    const box = h('div', { class: 'graph-box' }, this.svg, h('div', { class: 'graph-controls' }, zin, zout, fit), this.legend);

    this.element = h('div', { class: 'graph-layout' },
      box,
      h('div', { class: 'stack' },
        card('Selected', this.panel, { testid: 'graph-selected' }),
        card('Spreading activation', h('div', { class: 'stack' },
          h('p', { class: 'muted small' }, 'Starts at the centre with activation 1 and spreads along links, weakened by each link\'s weight.'),
          this.actButton, this.actHost), { testid: 'graph-activation' })));
    this.renderPanel();
    this.wire();
  }

  draw() {
    const lines = [];
    for (const e of this.edges) {
      const line = s('line', { class: 'edge', 'stroke-width': (0.6 + 2.4 * Math.max(0, Math.min(1, e.weight ?? 0.5))).toFixed(2) },
        s('title', null, `${e.relation} (${fmtNum(e.weight, 2)})`));
      e.el = line;
      lines.push(line);
    }
    this.edgeLayer.append(...lines);
    const circles = [];
    this.nodes.forEach((n, i) => {
      const c = s('circle', {
        class: this.nodeClass(n), r: n.r, tabindex: '0', role: 'button', 'data-id': n.id, 'data-index': i, testid: 'graph-node',
        'aria-label': `${n.type} memory: ${truncate(n.content, 80)}`,
      }, s('title', null, `${n.type} · ${truncate(n.content, 160)}`));
      n.el = c;
      circles.push(c);
    });
    this.nodeLayer.append(...circles);
    this.updateLabels();
    this.positions();
    this.fit();
  }

  nodeClass(n) {
    const cls = ['node'];
    if (this.activation) {
      const a = this.activation.get(n.id);
      if (n.id === this.seed) cls.push(`act-${ACT_BUCKETS - 1}`);
      else if (a === undefined) cls.push('unreached');
      else cls.push(`act-${Math.min(ACT_BUCKETS - 1, Math.floor(a * ACT_BUCKETS))}`);
    } else {
      cls.push(n.status && n.status !== 'active' ? 'n-archived' : `n-${n.type}`);
    }
    if (n.id === this.seed) cls.push('seed');
    if (this.selected === n) cls.push('selected');
    return cls.join(' ');
  }

  positions() {
    for (const e of this.edges) {
      const a = this.nodes[e.source];
      const b = this.nodes[e.target];
      e.el.setAttribute('x1', a.x.toFixed(1)); e.el.setAttribute('y1', a.y.toFixed(1));
      e.el.setAttribute('x2', b.x.toFixed(1)); e.el.setAttribute('y2', b.y.toFixed(1));
    }
    for (const n of this.nodes) {
      n.el.setAttribute('cx', n.x.toFixed(1));
      n.el.setAttribute('cy', n.y.toFixed(1));
      if (n.label) { n.label.setAttribute('x', (n.x + n.r + 3).toFixed(1)); n.label.setAttribute('y', (n.y + 4).toFixed(1)); }
    }
  }

  updateLabels() {
    for (const n of this.nodes) { if (n.label) { n.label.remove(); n.label = null; } }
    const few = this.nodes.length <= 30;
    for (const n of this.nodes) {
      if (n.id === this.seed || n === this.selected || (few && n.depth <= 1)) {
        n.label = s('text', { class: 'label' }, truncate(n.content, 36));
        this.labelLayer.append(n.label);
      }
    }
  }

  restyle() {
    for (const n of this.nodes) {
      n.el.setAttribute('class', this.nodeClass(n));
      n.el.setAttribute('r', n.r.toFixed(1));
    }
    const sel = this.selected;
    for (const e of this.edges) {
      const hot = sel && (this.nodes[e.source] === sel || this.nodes[e.target] === sel);
      e.el.setAttribute('class', hot ? 'edge hot' : 'edge');
    }
    this.updateLabels();
    this.positions();
  }

  // ---- view box: pan and zoom ----
  fit() {
    const b = this.layout.bounds(30);
    // Never zoom in past ~1.3×: a small neighbourhood stays small and its labels readable.
    const w = Math.max(b.x1 - b.x0, this.W * 0.75);
    const hgt = Math.max(b.y1 - b.y0, this.H * 0.75);
    const aspect = this.W / this.H;
    let vw = w; let vh = hgt;
    if (vw / vh > aspect) vh = vw / aspect; else vw = vh * aspect;
    this.vb = { x: (b.x0 + b.x1) / 2 - vw / 2, y: (b.y0 + b.y1) / 2 - vh / 2, w: vw, h: vh };
    this.applyViewBox();
  }

  zoom(f, cx, cy) {
    const vb = this.vb;
    const px = cx ?? vb.x + vb.w / 2;
    const py = cy ?? vb.y + vb.h / 2;
    this.vb = { x: px - (px - vb.x) / f, y: py - (py - vb.y) / f, w: vb.w / f, h: vb.h / f };
    this.applyViewBox();
  }

  applyViewBox() {
    const { x, y, w, h: vh } = this.vb;
    this.svg.setAttribute('viewBox', `${x.toFixed(1)} ${y.toFixed(1)} ${w.toFixed(1)} ${vh.toFixed(1)}`);
  }

  toGraph(ev) {
    const rect = this.svg.getBoundingClientRect();
    // preserveAspectRatio xMidYMid meet: one scale, centred.
    const scale = Math.min(rect.width / this.vb.w, rect.height / this.vb.h);
    const offX = (rect.width - this.vb.w * scale) / 2;
    const offY = (rect.height - this.vb.h * scale) / 2;
    return { x: this.vb.x + (ev.clientX - rect.left - offX) / scale, y: this.vb.y + (ev.clientY - rect.top - offY) / scale, scale };
  }

  wire() {
    let drag = null;
    this.svg.addEventListener('pointerdown', (ev) => {
      const target = ev.target.closest('circle.node');
      const p = this.toGraph(ev);
      if (target) {
        const n = this.nodes[Number(target.dataset.index)];
        drag = { kind: 'node', n, start: p, moved: false, ox: n.x - p.x, oy: n.y - p.y };
        n.fixed = true;
      } else {
        drag = { kind: 'pan', start: { x: ev.clientX, y: ev.clientY }, vb: { ...this.vb }, scale: p.scale, moved: false };
        this.svg.classList.add('panning');
      }
      this.svg.setPointerCapture(ev.pointerId);
    });
    this.svg.addEventListener('pointermove', (ev) => {
      if (!drag) return;
      if (drag.kind === 'node') {
        const p = this.toGraph(ev);
        if (!drag.moved && Math.hypot(p.x - drag.start.x, p.y - drag.start.y) * p.scale < 3) return;
        drag.moved = true;
        drag.n.x = p.x + drag.ox;
        drag.n.y = p.y + drag.oy;
        this.animate(0.25);
      } else {
        const dx = (ev.clientX - drag.start.x) / drag.scale;
        const dy = (ev.clientY - drag.start.y) / drag.scale;
        if (Math.abs(dx) + Math.abs(dy) > 2) drag.moved = true;
        this.vb = { ...drag.vb, x: drag.vb.x - dx, y: drag.vb.y - dy };
        this.applyViewBox();
      }
    });
    const end = () => {
      if (!drag) return;
      if (drag.kind === 'node') {
        drag.n.fixed = false;
        if (!drag.moved) this.select(drag.n);
      } else if (!drag.moved) {
        this.select(null);
      }
      this.svg.classList.remove('panning');
      drag = null;
    };
    this.svg.addEventListener('pointerup', end);
    this.svg.addEventListener('pointercancel', end);
    this.svg.addEventListener('dblclick', (ev) => {
      const target = ev.target.closest('circle.node');
      if (target) this.recenter(this.nodes[Number(target.dataset.index)]);
    });
    this.svg.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      const p = this.toGraph(ev);
      this.zoom(ev.deltaY < 0 ? 1.15 : 1 / 1.15, p.x, p.y);
    }, { passive: false });
    this.svg.addEventListener('keydown', (ev) => {
      const target = ev.target.closest && ev.target.closest('circle.node');
      if (!target) return;
      const n = this.nodes[Number(target.dataset.index)];
      if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); this.select(n); }
      if (ev.key === 'o') this.open(n);
      if (ev.key === 'c') this.recenter(n);
    });
  }

  animate(alpha) {
    this.layout.alpha = Math.max(this.layout.alpha, alpha);
    if (this.raf) return;
    const frame = () => {
      if (this.ctx.signal.aborted) return;
      this.layout.step();
      this.positions();
      if (this.layout.alpha > 0.02) this.raf = requestAnimationFrame(frame); else this.raf = null;
    };
    this.raf = requestAnimationFrame(frame);
  }

  select(n) {
    this.selected = n;
    this.restyle();
    this.renderPanel();
  }

  open(n) { location.hash = this.ctx.href(`memory/${enc(n.id)}`, {}); }

  recenter(n) {
    this.ctx.setParams({ id: n.id }, { replace: false });
  }

  renderPanel() {
    const n = this.selected || this.nodes[this.index.get(this.seed)];
    if (!n) { replace(this.panel, emptyState('Nothing selected', 'Click a node.')); return; }
    const act = this.activation ? this.activation.get(n.id) : undefined;
    replace(this.panel, h('div', { class: 'stack' },
      h('div', { class: 'version-head' }, typeBadge(n.type), n.status && n.status !== 'active' ? statusBadge(n.status) : null,
        n.id === this.seed ? h('span', { class: 'chip chip-accent' }, 'centre') : h('span', { class: 'chip' }, `depth ${n.depth}`)),
      h('p', { class: 'result-content', testid: 'graph-selected-content' }, truncate(n.content, 400)),
      h('div', { class: 'muted small' }, 'importance ', meter(n.importance, { label: 'importance' })),
      act !== undefined ? h('div', { class: 'muted small' }, 'activation ', meter(act, { label: 'activation' })) : null,
      h('div', { class: 'form-actions' },
        h('button', { type: 'button', class: 'btn btn-small btn-primary', testid: 'graph-open', onclick: () => this.open(n) }, 'Open'),
        n.id !== this.seed ? h('button', { type: 'button', class: 'btn btn-small', testid: 'graph-recenter', onclick: () => this.recenter(n) }, 'Recenter here') : null),
      h('p', { class: 'muted small' }, 'Click a node to select it, double-click to recenter; drag to move nodes or pan; wheel to zoom.')));
  }

  async spread() {
    this.actButton.disabled = true;
    replace(this.actHost, loading('Spreading…'));
    try {
      const res = await post('/tools/spreading_activation', {
        agent_id: this.ctx.agent, seed_id: this.seed, depth: Number(this.ctx.params.get('depth') || 2), limit: Math.min(200, Math.max(50, this.nodes.length)),
      }, { signal: this.ctx.signal });
      const results = res.results || [];
      this.activation = new Map(results.map((r) => [r.memory.id, r.activation]));
      for (const n of this.nodes) {
        const a = n.id === this.seed ? 1 : this.activation.get(n.id);
        const big = this.nodes.length > 80;
        n.r = a === undefined ? 3 : (big ? 3.5 : 5) + (big ? 8 : 12) * Math.max(0, Math.min(1, a));
      }
      this.restyle();
      this.renderPanel();
      const reached = results.filter((r) => this.index.has(r.memory.id)).length;
      replace(this.legend, h('span', null, 'activation '), h('span', { class: 'act-scale', 'aria-hidden': 'true' }), h('span', null, `0 → 1 · ${reached} of ${this.nodes.length - 1} reached`));
      const top = [...results].sort((a, b) => b.activation - a.activation).slice(0, 25);
      replace(this.actHost, results.length
        ? h('div', null,
          h('p', { class: 'small', testid: 'activation-summary' }, `${results.length} memories reached (${reached} drawn here).`),
          h('ol', { class: 'act-list', testid: 'activation-list' }, top.map((r) => h('li', { testid: 'activation-row', title: `${fmtNum(r.activation, 3)} after ${Math.max(0, (r.path || []).length - 1)} hop(s)` },
            meter(r.activation, { label: 'activation' }),
            h('a', { href: this.ctx.href(`memory/${enc(r.memory.id)}`, {}) }, truncate(r.memory.content, 70))))))
        : emptyState('Activation reached nothing', 'This memory has no links yet.', 'activation-empty'));
      this.svg.setAttribute('data-activation', 'true');
    } catch (err) {
      if (!this.ctx.signal.aborted) replace(this.actHost, errorBox(err, 'activation-error'));
    } finally {
      this.actButton.disabled = false;
    }
  }
}
