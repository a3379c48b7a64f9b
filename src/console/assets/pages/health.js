// Health: every backend's state, the projections' lag and the outbox depth, recall
// latency percentiles, the supervised actors, and the next firing of the scheduled
// jobs (the 03:00 archival, the sleep cycle). Refreshes every 10 s while open.

import { get, getKey } from '../lib/api.js';
import {
  h, replace, pageHeader, card, emptyState, errorBox, loading, fmtNum, fmtMs, timeEl, relTime, kvList,
} from '../lib/dom.js';
import { hbars } from '../lib/charts.js';

export async function render(ctx) {
  const host = h('div', { class: 'stack', testid: 'health-host' }, loading());
  const refresh = h('button', { type: 'button', class: 'btn', testid: 'health-refresh' }, 'Refresh');
  const stamp = h('span', { class: 'muted small', 'aria-live': 'polite' });
  replace(ctx.main, pageHeader('Health', 'The server\'s backends, projections, actors, latency and schedule.', stamp, refresh), host);
  const load = async () => {
    try {
      const hv = await get('/health', null, { signal: ctx.signal });
      if (ctx.signal.aborted) return;
      draw(host, hv);
      stamp.textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      if (!ctx.signal.aborted) replace(host, errorBox(err, 'health-error'));
    }
  };
  refresh.addEventListener('click', load);
  await load();
  const timer = setInterval(() => { if (!document.hidden) load(); }, 10000);
  ctx.signal.addEventListener('abort', () => clearInterval(timer));
}

function stateEl(state, testid) {
  const st = String(state || 'unknown');
  return h('span', { class: `state state-${st}`, testid }, h('span', { class: 'dot', 'aria-hidden': 'true' }), st);
}

function stat(value, label, cls, testid) {
  return h('div', { class: `stat ${cls || ''}` }, h('div', { class: 'stat-value', testid }, value), h('div', { class: 'stat-label' }, label));
}

function draw(host, hv) {
  const detail = Boolean(hv.backends || hv.actors);
  const backends = hv.backends || {};
  const projections = Array.isArray(backends.projections) ? backends.projections : (Array.isArray(hv.projections) ? hv.projections : []);
  const outboxDepth = hv.outbox && typeof hv.outbox.depth === 'number' ? hv.outbox.depth
    : projections.length ? Math.max(...projections.map((p) => p.lag_entries || 0)) : 0;
  const lat = hv.recall_latency_ms;
  const sched = hv.schedule || null;

  const top = h('div', { class: 'stat-row' },
    stat(stateEl(hv.status, 'health-status'), 'status', ''),
    stat(hv.version || '—', 'version'),
    stat(uptime(hv.uptime_seconds), 'uptime'),
    detail ? stat(fmtNum(outboxDepth), 'outbox depth', outboxDepth > 0 ? 'stat-warn' : '', 'outbox-depth') : null,
    lat ? stat(fmtMs(lat.p95), 'recall p95', '', 'recall-p95') : null);

  const parts = [top];
  if (!detail) {
    parts.push(h('div', { class: 'note note-warn', testid: 'health-needs-admin' },
      getKey() ? 'This key is not an admin key: backends, actors, latency and schedule are shown to admin keys only.'
        : 'Backend detail is shown to admin keys only (or with auth.public_metrics).'));
  }

  if (detail) {
    const rows = Object.entries(backends).filter(([k]) => k !== 'projections');
    parts.push(h('div', { class: 'grid-2' },
      card('Backends', h('div', { class: 'table-wrap' }, h('table', { class: 'table', testid: 'backends-table' },
        h('thead', null, h('tr', null, h('th', null, 'Store'), h('th', null, 'State'), h('th', null, 'Backend'), h('th', null, 'Detail'))),
        h('tbody', null, rows.map(([name, b]) => h('tr', { testid: 'backend-row', 'data-backend': name },
          h('td', null, h('strong', null, name)),
          h('td', null, stateEl(b && b.state)),
          h('td', null, b && (b.backend || b.provider) ? h('code', null, String(b.backend || b.provider)) : '—'),
          h('td', { class: 'small' }, backendDetail(b)))))))),
      h('div', { class: 'stack' },
        card('Schedule', sched ? kvList(Object.entries(sched).map(([name, j]) => [name.replace(/_/g, ' '),
          h('span', { testid: `schedule-${name}` }, j && j.enabled === false ? h('span', { class: 'muted' }, 'disabled')
            : j && j.next_at ? h('span', null, timeEl(j.next_at), ' ', h('span', { class: 'muted small' }, relTime(j.next_at))) : 'not scheduled',
            j && j.cron ? h('div', { class: 'muted small' }, h('code', null, j.cron)) : null)]), 'schedule')
          : h('p', { class: 'muted', testid: 'schedule-missing' }, 'This server does not report its schedule (health.schedule).'), { testid: 'schedule-card' }),
        card('Recall latency', lat ? h('div', { class: 'stack' },
          hbars([{ label: 'p50', value: lat.p50 }, { label: 'p95', value: lat.p95 }, { label: 'p99', value: lat.p99 }], { format: fmtMs, testid: 'latency-bars' }),
          h('p', { class: 'muted small' }, `over the last ${fmtNum(lat.window ?? lat.count)} of ${fmtNum(lat.count)} recalls since start`))
          : 'recall_latency_ms' in hv
            ? emptyState('No recall yet', 'Percentiles appear after the first recall since the server started.', 'latency-empty')
            : h('p', { class: 'muted', testid: 'latency-missing' }, 'This server does not report recall latency (health.recall_latency_ms).'), { testid: 'latency-card' }))));

    parts.push(card('Projections and outbox', projections.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'table', testid: 'projections-table' },
      h('thead', null, h('tr', null, h('th', null, 'Projection'), h('th', null, 'State'), h('th', { class: 'num' }, 'Lag (entries)'), h('th', { class: 'num' }, 'Lag (s)'),
        h('th', { class: 'num' }, 'Applied / head'), h('th', null, 'Serves'), h('th', { class: 'num' }, 'Reads served / fallback'), h('th', { class: 'num' }, 'Failures'), h('th', null, 'Last error'))),
      h('tbody', null, projections.map((p) => h('tr', { testid: 'projection-row' },
        h('td', null, h('strong', null, p.name)),
        h('td', null, stateEl(p.state)),
        h('td', { class: 'num' }, fmtNum(p.lag_entries)),
        h('td', { class: 'num' }, fmtNum(p.lag_seconds, 1)),
        h('td', { class: 'num' }, `${p.applied ?? '—'} / ${p.head ?? '—'}`),
        h('td', null, p.serves || '—'),
        h('td', { class: 'num' }, `${fmtNum(p.reads_served)} / ${fmtNum(p.reads_fallback)}`),
        h('td', { class: 'num' }, fmtNum(p.failures)),
        h('td', { class: 'small' }, p.last_error || '—'))))))
      : emptyState('No external projections', 'This server keeps everything in its embedded stores; with Qdrant, FalkorDB or Neo4j configured, their lag shows here.', 'projections-empty'),
    { testid: 'projections-card' }));

    if (hv.actors) {
      parts.push(card('Actors', h('div', { class: 'table-wrap' }, h('table', { class: 'table', testid: 'actors-table' },
        h('thead', null, h('tr', null, h('th', null, 'Actor'), h('th', null, 'State'), h('th', { class: 'num' }, 'Restarts'), h('th', null, 'Last error'))),
        h('tbody', null, hv.actors.map((a) => h('tr', { testid: 'actor-row' },
          h('td', null, h('strong', null, a.name)),
          h('td', null, stateEl(a.state)),
          h('td', { class: 'num' }, fmtNum(a.restarts)),
          h('td', { class: 'small' }, a.last_error || '—'))))))));
    }
  }
  replace(host, ...parts);
}

function backendDetail(b) {
  if (!b || typeof b !== 'object') return '';
  const skip = new Set(['state', 'backend', 'provider']);
  const bits = Object.entries(b).filter(([k, v]) => !skip.has(k) && v !== null && v !== undefined && !(Array.isArray(v) && !v.length));
  if (!bits.length) return h('span', { class: 'muted' }, '—');
  return bits.map(([k, v]) => h('span', { class: 'chip' }, `${k.replace(/_/g, ' ')}: ${typeof v === 'object' ? JSON.stringify(v) : v}`));
}

function uptime(seconds) {
  if (seconds === undefined || seconds === null) return '—';
  const d = Math.floor(seconds / 86400);
  const hh = Math.floor((seconds % 86400) / 3600);
  const mm = Math.floor((seconds % 3600) / 60);
  if (d) return `${d} d ${hh} h`;
  if (hh) return `${hh} h ${mm} min`;
  if (mm) return `${mm} min`;
  return `${seconds} s`;
}
