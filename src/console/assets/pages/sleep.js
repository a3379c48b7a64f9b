// Sleep cycle: the run log as a timeline (scheduled, API, archival). Each run opens to
// its clusters (members and the knowledge made from them) and what was forgotten or
// promoted and why. "Run a cycle now" consolidates the agent and shows the new run.

import { get, post, enc, memoryById } from '../lib/api.js';
import {
  h, replace, pageHeader, card, emptyState, errorBox, loading, fmtNum, fmtMs, timeEl, relTime, truncate,
  typeBadge, statusBadge, select, toast, mapLimit, kvList,
} from '../lib/dom.js';

const TRIGGERS = ['schedule', 'api', 'archival'];
/** The kind of a run's trigger: "schedule:sleep_cycle@… by …" → "schedule". */
const kindOf = (trigger) => String(trigger || '').split(/[:@\s]/)[0] || 'unknown';
// What the last "Run a cycle now" did, shown above the timeline once it reloads.
let lastDone = null;

export async function render(ctx) {
  const { agent, params } = ctx;
  const trigger = params.get('trigger') || '';
  const open = params.get('run') || '';

  const runNow = h('button', { type: 'button', class: 'btn btn-primary', testid: 'run-now', disabled: !agent }, 'Run a cycle now');
  const filter = select('trigger', [['', 'every trigger'], ...TRIGGERS], trigger, { testid: 'trigger-filter', 'aria-label': 'Trigger' });
  filter.addEventListener('change', () => ctx.setParams({ trigger: filter.value }));
  const status = h('div', { testid: 'run-status', 'aria-live': 'polite' });
  if (lastDone && lastDone.id === params.get('fresh')) {
    status.append(h('div', { class: 'note note-ok', testid: 'run-done' }, lastDone.text));
  }
  const list = h('div', { testid: 'runs-host' }, loading('Loading the run log…'));

  replace(ctx.main,
    pageHeader('Sleep cycle', `Agent ${agent || '(none)'}. Each run clusters similar memories into knowledge, forgets what has faded, and promotes what is used.`,
      filter, runNow),
    status,
    card('Runs', list, { testid: 'runs-card' }));

  if (!agent) { replace(list, emptyState('No agent selected', 'Pick an agent above.')); return; }

  runNow.addEventListener('click', async () => {
    runNow.disabled = true;
    replace(status, loading('Running a sleep cycle…'));
    try {
      const run = await post('/tools/consolidate', { agent_id: agent });
      lastDone = {
        id: run.id,
        text: `Cycle finished: ${fmtNum(run.processed)} processed, ${fmtNum(run.consolidated)} consolidated, ${fmtNum(run.forgotten)} forgotten, ${fmtNum(run.new_semantic)} new facts, ${fmtNum(run.new_procedural)} new procedures.`,
      };
      toast('Sleep cycle finished');
      ctx.setParams({ run: run.id, trigger: '', fresh: run.id });
    } catch (err) {
      replace(status, errorBox(err, 'run-error'));
    } finally {
      runNow.disabled = false;
    }
  });

  let runs;
  try {
    runs = (await get('/v1/cognition/runs', { agent_id: agent, limit: 100 }, { signal: ctx.signal })).runs || [];
  } catch (err) {
    if (!ctx.signal.aborted) replace(list, errorBox(err, 'runs-error'));
    return;
  }
  if (ctx.signal.aborted) return;
  const shown = trigger ? runs.filter((r) => kindOf(r.trigger) === trigger) : runs;
  if (!shown.length) {
    replace(list, emptyState(runs.length ? `No ${trigger} runs` : 'No sleep cycle has run for this agent yet',
      runs.length ? 'Choose another trigger.' : 'Press "Run a cycle now", or wait for the scheduled run (see Health for its next firing).', 'runs-empty'));
    return;
  }
  const fresh = params.get('fresh');
  const counts = Object.fromEntries(TRIGGERS.map((t) => [t, runs.filter((r) => kindOf(r.trigger) === t).length]));
  replace(list,
    h('p', { class: 'muted small' }, `${runs.length} runs: `, TRIGGERS.map((t) => h('span', { class: `chip trigger-chip-${t}` }, `${t} ${counts[t]}`))),
    h('ol', { class: 'timeline', testid: 'runs' }, shown.map((r) => runItem(ctx, r, r.id === open, r.id === fresh))));
}

/** What follows the kind: the job and its firing ("sleep_cycle at 16:30"). */
function detailOf(trigger) {
  const m = /^[a-z_]+:([a-z_]+)(?:@(\S+))?/i.exec(String(trigger || ''));
  if (!m) return '';
  return m[2] ? `${m[1].replace(/_/g, ' ')}, fired for ${new Date(m[2]).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}` : m[1].replace(/_/g, ' ');
}

function runItem(ctx, run, expanded, fresh) {
  const body = h('div', { class: 'run-body', testid: 'run-body', id: `run-${run.id}`, hidden: !expanded });
  const started = new Date(run.started_at);
  const took = run.finished_at ? new Date(run.finished_at) - started : null;
  const toggle = h('button', { type: 'button', class: 'run-toggle', 'aria-expanded': String(expanded), 'aria-controls': `run-${run.id}`, testid: 'run-toggle' },
    h('span', { class: 'caret', 'aria-hidden': 'true' }, '▸'),
    h('span', { class: 'trigger', title: run.trigger }, kindOf(run.trigger)),
    detailOf(run.trigger) ? h('span', { class: 'muted small' }, detailOf(run.trigger)) : null,
    h('span', null, timeEl(run.started_at), ' ', h('span', { class: 'muted small' }, relTime(run.started_at))),
    h('span', { class: 'muted small' }, took !== null ? fmtMs(took) : ''),
    h('span', { class: 'small' },
      h('span', { class: 'chip' }, `${fmtNum(run.processed)} processed`),
      h('span', { class: 'chip' }, `${fmtNum(run.consolidated)} consolidated`),
      h('span', { class: 'chip' }, `${fmtNum(run.forgotten)} forgotten`),
      run.new_semantic ? h('span', { class: 'chip chip-accent' }, `+${run.new_semantic} facts`) : null,
      run.new_procedural ? h('span', { class: 'chip chip-accent' }, `+${run.new_procedural} procedures`) : null));
  let loaded = false;
  const load = () => {
    if (loaded) return;
    loaded = true;
    fillRun(ctx, run, body);
  };
  toggle.addEventListener('click', () => {
    const on = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(on));
    body.hidden = !on;
    if (on) load();
  });
  if (expanded) load();
  return h('li', { class: `run trigger-${kindOf(run.trigger)}`, testid: 'run', 'data-run-id': run.id, 'data-trigger': kindOf(run.trigger) },
    h('span', { class: 'run-dot', 'aria-hidden': 'true' }),
    h('div', { class: `run-card ${fresh ? 'fresh' : ''}` }, toggle, body));
}

async function fillRun(ctx, run, body) {
  const { agent } = ctx;
  const rep = run.report || {};
  const clusters = rep.clusters || [];
  const forgotten = rep.forgotten_ids || [];
  const promoted = rep.promoted_ids || [];
  const purged = rep.purged_ids || [];
  // Why: a per-memory log when the server gives one, else the counts.
  const log = Array.isArray(rep.decision_log) ? rep.decision_log : Array.isArray(rep.decisions) ? rep.decisions : [];
  const why = new Map(log.filter((d) => d && d.id).map((d) => [d.id, d]));
  const decisionCounts = rep.decisions && !Array.isArray(rep.decisions) ? rep.decisions : null;
  replace(body, loading('Loading the memories of this run…'));

  const ids = [...new Set([...clusters.flatMap((c) => [...(c.sources || []), c.derived_id].filter(Boolean)), ...forgotten.slice(0, 50), ...promoted.slice(0, 50)])];
  const found = new Map();
  await mapLimit(ids, 6, async (id) => {
    try { found.set(id, await memoryById(agent, id)); } catch { /* purged or gone: shown by id */ }
  });

  const mem = (id, extra) => {
    const m = found.get(id);
    return h('li', { 'data-id': id },
      m ? typeBadge(m.type) : h('span', { class: 'badge' }, 'gone'), ' ',
      h('a', { href: ctx.href(`memory/${enc(id)}`, {}) }, m ? truncate(m.content, 120) : id),
      m && m.status !== 'active' ? h('span', null, ' ', statusBadge(m.status)) : null,
      extra ? h('span', { class: 'muted small' }, ` — ${extra}`) : null);
  };
  const reasonOf = (id) => {
    const d = why.get(id);
    return d ? (d.reason || d.why || d.action || '') : '';
  };

  const parts = [];
  parts.push(h('div', null, h('h3', null, 'Decisions'),
    decisionCounts
      ? h('p', { testid: 'run-decisions' }, Object.entries(decisionCounts).map(([k, v]) => h('span', { class: 'chip' }, `${k}: ${fmtNum(v)}`)))
      : h('p', { class: 'muted' }, 'No decision counts.'),
    rep.clustering ? h('p', { class: 'muted small' }, `Clustering: similarity ≥ ${rep.clustering.threshold}, ${rep.clustering.min_size}–${rep.clustering.max_size} members.`) : null));

  parts.push(h('div', { testid: 'run-clusters' }, h('h3', null, `Clusters (${clusters.length})`),
    clusters.length ? clusters.map((c, i) => h('div', { class: 'cluster', testid: 'run-cluster' },
      h('div', { class: 'version-head' }, h('strong', null, `Cluster ${i + 1}`), h('span', { class: 'muted small' }, `${(c.sources || []).length} members`),
        c.provider ? h('span', { class: 'chip' }, `summary by ${c.provider}`) : null, c.fallback ? h('span', { class: 'chip' }, `fallback: ${c.fallback}`) : null,
        c.skipped ? h('span', { class: 'badge status-stale' }, `skipped: ${c.skipped}`) : null),
      h('ul', null, (c.sources || []).map((id) => mem(id))),
      c.derived_id ? h('p', { class: 'small' }, h('span', { class: 'arrow-made' }, `→ made ${c.memory_type || 'knowledge'}: `),
        h('ul', { class: 'idlist' }, mem(c.derived_id))) : null))
      : h('p', { class: 'muted' }, 'No cluster was large or similar enough.')));

  const idSection = (title, list, testid, explain) => h('div', { testid },
    h('h3', null, `${title} (${list.length})`),
    list.length ? h('ul', { class: 'idlist' }, list.slice(0, 50).map((id) => mem(id, reasonOf(id) || explain))) : h('p', { class: 'muted' }, 'None.'),
    list.length > 50 ? h('p', { class: 'muted small' }, `…and ${list.length - 50} more.`) : null);
  parts.push(idSection('Forgotten', forgotten, 'run-forgotten', 'retention fell below the forgetting threshold'));
  parts.push(idSection('Promoted', promoted, 'run-promoted', 'recalled often enough to be promoted'));
  if (purged.length) parts.push(idSection('Purged', purged, 'run-purged', 'archived long enough to be removed'));
  if (rep.stats) {
    const st = rep.stats;
    parts.push(h('div', null, h('h3', null, 'The agent after this run'), kvList([
      ['Total', fmtNum(st.total)],
      ['By type', st.by_type ? Object.entries(st.by_type).map(([k, v]) => h('span', { class: 'chip' }, `${k} ${v}`)) : null],
      ['By status', st.by_status ? Object.entries(st.by_status).map(([k, v]) => h('span', { class: 'chip' }, `${k} ${v}`)) : null],
      ['Mean retention', fmtNum(st.mean_retention, 3)],
      ['Consolidation ratio', fmtNum(st.consolidation_ratio, 3)],
    ])));
  }
  replace(body, ...parts);
}
