// Recall playground: one query with every recall option; each result with its score,
// each retriever's component, how it matched; the stage timings and what answered.

import { post, enc } from '../lib/api.js';
import {
  h, replace, pageHeader, card, emptyState, errorBox, loading, field, fmtNum, fmtMs, truncate,
  typeBadge, statusBadge, meter, showFormError, clearFormErrors, kvList, MEMORY_TYPES,
  localToRfc3339, rfc3339ToLocal,
} from '../lib/dom.js';
import { msBars } from '../lib/charts.js';

const KEYS = ['q', 'limit', 'types', 'tags', 'time', 'session', 'project', 'shared', 'min', 'now'];

export async function render(ctx) {
  const { agent, params } = ctx;
  const p = Object.fromEntries(KEYS.map((k) => [k, params.get(k) || '']));
  const types = p.types ? p.types.split(',') : [];

  const form = h('form', { testid: 'recall-form', role: 'search', 'aria-label': 'Recall' },
    h('div', { class: 'form-error', hidden: true }),
    h('div', { class: 'form-row' },
      h('div', { class: 'grow' }, field('Query', h('input', { name: 'query', type: 'search', value: p.q, required: true, placeholder: 'which port does staging use?', 'data-search': '', testid: 'recall-query' }))),
      h('button', { type: 'submit', class: 'btn btn-primary', testid: 'recall-submit' }, 'Recall')),
    h('div', { class: 'form-grid', role: 'group', 'aria-label': 'Options' },
      field('Limit', h('input', { name: 'limit', type: 'number', min: '1', max: '200', value: p.limit || '10', testid: 'recall-limit' })),
      field('Min score', h('input', { name: 'min_score', type: 'number', min: '0', max: '1', step: '0.05', value: p.min, placeholder: '0', testid: 'recall-min-score' })),
      field('Time query', h('input', { name: 'time_query', value: p.time, placeholder: 'last week, in May 2023…', testid: 'recall-time' })),
      field('Now (for time queries)', h('input', { name: 'now', type: 'datetime-local', value: rfc3339ToLocal(p.now), testid: 'recall-now' })),
      field('Tags', h('input', { name: 'tags', value: p.tags, placeholder: 'comma separated', testid: 'recall-tags' })),
      field('Session', h('input', { name: 'session_id', value: p.session, testid: 'recall-session' })),
      field('Project', h('input', { name: 'project_id', value: p.project, testid: 'recall-project' })),
      h('div', { class: 'field field-inline' },
        h('input', { type: 'checkbox', id: 'recall-shared', name: 'include_shared', checked: p.shared !== 'no', testid: 'recall-shared' }),
        h('label', { for: 'recall-shared' }, 'Include shared memories'))),
    h('fieldset', { 'data-field': 'type' },
      h('legend', null, 'Types (none = all)'),
      h('div', { class: 'checks' }, MEMORY_TYPES.map((t) => h('label', null,
        h('input', { type: 'checkbox', name: 'type', value: t, checked: types.includes(t), testid: `recall-type-${t}` }), t)))));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    ctx.setParams({
      q: f.get('query').trim(), limit: f.get('limit') === '10' ? '' : f.get('limit'), min: f.get('min_score'),
      time: f.get('time_query').trim(), now: localToRfc3339(f.get('now')), tags: f.get('tags').trim(),
      session: f.get('session_id').trim(), project: f.get('project_id').trim(),
      shared: f.get('include_shared') ? '' : 'no', types: f.getAll('type'),
    }, { replace: false });
  });

  const results = h('div', { testid: 'recall-results' });
  replace(ctx.main,
    pageHeader('Recall playground', `Agent ${agent || '(none)'}. Every recall option; debug on, so each result shows its retrievers' scores.`),
    card(null, form),
    results);

  if (!agent) { replace(results, card(null, emptyState('No agent selected', 'Pick an agent above, then ask a question.'))); return; }
  if (!p.q) {
    replace(results, card(null, emptyState('Ask something', 'Type a question the agent\'s memories might answer, and press Recall. The URL keeps the query, so it can be shared.', 'recall-empty')));
    return;
  }

  const body = { agent_id: agent, query: p.q, debug: true, include_shared: p.shared !== 'no' };
  if (p.limit) body.limit = Number(p.limit);
  if (p.min) body.min_score = Number(p.min);
  if (p.time) body.time_query = p.time;
  if (p.now) body.now = p.now;
  if (p.tags) body.tags = p.tags.split(',').map((t) => t.trim()).filter(Boolean);
  if (p.session) body.session_id = p.session;
  if (p.project) body.project_id = p.project;
  if (types.length) body.type = types;

  replace(results, loading('Recalling…'));
  const t0 = performance.now();
  let res;
  try {
    res = await post('/tools/recall', body, { signal: ctx.signal });
  } catch (err) {
    if (ctx.signal.aborted) return;
    if (!showFormError(form, err)) replace(results, errorBox(err, 'recall-error'));
    else replace(results, '');
    return;
  }
  if (ctx.signal.aborted) return;
  clearFormErrors(form);
  const roundTrip = performance.now() - t0;
  window.__mnemos.timings.recall_round_trip_ms = roundTrip;

  const list = res.results || [];
  // Each retriever scores on its own scale (BM25 is unbounded): bars compare a result
  // with the best result of the same retriever.
  const maxComponent = {};
  for (const r of list) {
    for (const [name, v] of Object.entries(r.components || {})) maxComponent[name] = Math.max(maxComponent[name] || 0, Number(v) || 0);
  }
  const resultBody = list.length ? h('div', null, list.map((r, i) => resultRow(ctx, r, i, maxComponent))) :
    emptyState('Nothing recalled', 'No memory had evidence for this query with these options. Loosen the filters, lower min score, or check the agent.', 'recall-none');
  const resultCard = card(`${list.length} result${list.length === 1 ? '' : 's'}`, resultBody, { testid: 'recall-results-card' });
  resultCard.querySelector('.card-body').classList.add('card-body-flush');

  const sources = res.sources || {};
  const side = h('div', { class: 'stack' },
    card('Timings', h('div', { class: 'stack' },
      h('div', { class: 'stat-row' },
        h('div', { class: 'stat' }, h('div', { class: 'stat-value', testid: 'recall-took' }, fmtMs(res.took_ms)), h('div', { class: 'stat-label' }, 'server (took_ms)')),
        h('div', { class: 'stat' }, h('div', { class: 'stat-value' }, fmtMs(roundTrip)), h('div', { class: 'stat-label' }, 'round trip'))),
      res.timings_ms ? msBars(res.timings_ms, 'recall-timings') : h('p', { class: 'muted' }, 'This server reports no stage timings.')),
    { testid: 'recall-timings-card' }),
    card('What answered', Object.keys(sources).length
      ? kvList(Object.entries(sources).map(([k, v]) => [k, h('span', { class: 'chip chip-accent', testid: `source-${k}` }, typeof v === 'object' ? JSON.stringify(v) : String(v))]), 'recall-sources')
      : h('p', { class: 'muted' }, 'No source information.'), { testid: 'recall-sources-card' }),
    card('Request', h('pre', { class: 'json' }, JSON.stringify(body, null, 2))));

  replace(results, h('div', { class: 'grid-2' }, resultCard, side));
}

function resultRow(ctx, r, i, maxComponent) {
  const m = r.memory || {};
  const comps = Object.entries(r.components || {});
  return h('div', { class: 'result', testid: 'recall-result', 'data-id': m.id },
    h('div', null, h('div', { class: 'score-big', testid: 'recall-score' }, fmtNum(r.score, 3)), h('div', { class: 'score-label' }, `#${i + 1} score`)),
    h('div', null,
      h('div', { class: 'version-head' }, typeBadge(m.type), m.status !== 'active' ? statusBadge(m.status) : null,
        (r.matched_by || []).map((x) => h('span', { class: 'chip chip-accent', testid: 'matched-by' }, x)),
        h('span', { class: 'muted small' }, 'retention '), meter(r.retention, { label: 'retention' })),
      h('p', { class: 'result-content' }, h('a', { href: ctx.href(`memory/${enc(m.id)}`, {}), testid: 'recall-result-link' }, truncate(m.content, 400))),
      comps.length ? h('div', { class: 'components', testid: 'recall-components', 'aria-label': 'retriever scores' },
        comps.map(([name, v]) => {
          const fill = h('span', { class: 'bar-fill' });
          fill.style.width = `${Math.max(0, Math.min(100, (Number(v) / (maxComponent[name] || 1)) * 100)).toFixed(1)}%`;
          return h('div', { class: 'component', 'data-component': name, title: `${name}: ${v} (bar: relative to the best ${name} score here)` },
            h('span', { class: 'component-name' }, name),
            h('span', { class: 'bar-track' }, fill),
            h('span', { class: 'component-val' }, fmtNum(Number(v), 3)));
        })) : null));
}
