// Memory detail: content and metadata, provenance, the version history as word diffs
// with each change's reason, associations, the retention curve; edit, forget, restore.

import { get, post, patch, enc, isMissingRoute, forgetCached } from '../lib/api.js';
import {
  h, replace, pageHeader, card, emptyState, errorBox, loading, field, select, fmtNum, timeEl, relTime,
  truncate, typeBadge, statusBadge, meter, kvList, showFormError, clearFormErrors, toast, notAvailable, MEMORY_TYPES,
} from '../lib/dom.js';
import { diffView } from '../lib/diff.js';
import { lineChart } from '../lib/charts.js';

export async function render(ctx) {
  const id = ctx.rest[0];
  const { agent } = ctx;
  const main = ctx.main;
  if (!id) { ctx.navigate('memories', {}, { replace: true }); return; }
  if (!agent) {
    replace(main, pageHeader('Memory'), card(null, emptyState('No agent selected', 'Every memory belongs to one agent: pick it in the Agent box above.')));
    return;
  }
  const q = { agent_id: agent };
  const base = `/v1/memories/${enc(id)}`;
  const opts = { signal: ctx.signal };
  const memoryP = get(base, q, opts);
  const historyP = get(`${base}/history`, q, opts);
  const assocP = get(`${base}/associations`, q, opts);
  const retentionP = get(`${base}/retention`, { ...q, days: 30, points: 31 }, opts);
  // Unhandled rejections are handled where each is awaited.
  [historyP, assocP, retentionP].forEach((p) => p.catch(() => {}));

  let memory;
  try {
    memory = await memoryP;
  } catch (err) {
    if (ctx.signal.aborted) return;
    replace(main, pageHeader('Memory', `Agent ${agent}`),
      card(null, h('div', { class: 'stack' }, errorBox(err, 'memory-error'),
        err.status === 404 ? h('p', { class: 'muted' }, `No memory ${id} for agent ${agent}. It may belong to another agent, or have been deleted. `,
          h('a', { href: ctx.href('memories', {}) }, 'Back to the memories')) : null)));
    return;
  }
  if (ctx.signal.aborted) return;
  forgetCached(agent, id);

  const m = memory;
  const actions = [];
  const editBtn = h('button', { type: 'button', class: 'btn btn-primary', testid: 'edit-open' }, 'Edit');
  actions.push(editBtn);
  if (m.status === 'active') {
    actions.push(h('button', { type: 'button', class: 'btn btn-danger', testid: 'forget', onclick: forget }, 'Forget'));
  } else {
    actions.push(h('button', { type: 'button', class: 'btn', testid: 'restore', onclick: restore }, 'Restore'));
  }
  actions.push(h('a', { class: 'btn', href: ctx.href('graph', { id: m.id }), testid: 'open-graph' }, 'Graph'));
  const actionError = h('div', { testid: 'action-error' });

  // ---- content + edit ----
  const contentBody = h('div', { class: 'stack' },
    h('div', { class: 'version-head' }, typeBadge(m.type), statusBadge(m.status),
      h('span', { class: 'chip', testid: 'memory-version' }, `version ${m.version ?? '?'}`),
      m.shared ? h('span', { class: 'chip chip-accent' }, 'shared') : null,
      m.suspicious ? h('span', { class: 'badge status-stale', title: (m.suspicious_reasons || []).join('; ') }, 'suspicious') : null,
      (m.redacted || []).length ? h('span', { class: 'chip' }, `redacted: ${m.redacted.join(', ')}`) : null),
    m.title ? h('h2', null, m.title) : null,
    h('p', { class: 'content-block', testid: 'memory-content' }, m.content),
    (m.tags || []).length ? h('div', null, m.tags.map((t) => h('span', { class: 'chip' }, t))) : null);

  const editForm = buildEditForm(m, async (changes, form) => {
    clearFormErrors(form);
    if (!Object.keys(changes).length) { showFormError(form, { message: 'Nothing changed.' }); return; }
    try {
      const updated = await patch(base, changes, { query: q });
      toast(`Saved: now version ${updated.version ?? ''}`);
      ctx.setParams({}, { replace: true });
    } catch (err) {
      showFormError(form, err);
    }
  }, () => { editForm.hidden = true; contentBody.hidden = false; editBtn.disabled = false; });
  editForm.hidden = true;
  editBtn.addEventListener('click', () => {
    editForm.hidden = false; contentBody.hidden = true; editBtn.disabled = true;
    editForm.querySelector('textarea').focus();
  });

  const metaPairs = [
    ['Id', h('code', { testid: 'memory-id' }, m.id)],
    ['Agent', m.agent_id],
    ['Importance', meter(m.importance, { label: 'importance' })],
    ['Occurred', h('span', null, timeEl(m.occurred_at), ' ', h('span', { class: 'muted small' }, relTime(m.occurred_at)))],
    ['Created', timeEl(m.created_at)],
    ['Updated', timeEl(m.updated_at)],
    ['Last accessed', timeEl(m.last_accessed_at)],
    ['Access count', fmtNum(m.access_count)],
    ['Consolidation', fmtNum(m.consolidation_level, 2)],
    ['Session', m.session_id ? h('a', { href: ctx.href('sessions', { session: m.session_id }) }, m.session_id) : null],
    ['Project', m.project_id ? h('a', { href: ctx.href('memories', { project: m.project_id }) }, m.project_id) : null],
    m.valence !== null && m.valence !== undefined ? ['Valence / arousal', `${fmtNum(m.valence)} / ${fmtNum(m.arousal)}`] : [undefined, undefined],
    ['Source', m.source ? h('span', null, h('code', null, m.source.path || ''), m.source.hash ? h('span', { class: 'muted small' }, ` ${String(m.source.hash).slice(0, 12)}`) : '') : null],
    ['Metadata', m.metadata && Object.keys(m.metadata).length ? h('pre', { class: 'json' }, JSON.stringify(m.metadata, null, 2)) : null],
  ].filter(([k]) => k !== undefined);
  if (m.suspicious) metaPairs.push(['Suspicious because', (m.suspicious_reasons || []).join('; ')]);

  const pv = m.provenance || {};
  const provenance = kvList([
    ['Surface', pv.surface ? h('span', { class: 'chip chip-accent' }, pv.surface) : null],
    ['Key', pv.key_id ? h('code', null, pv.key_id) : h('span', { class: 'muted' }, 'none (open server or CLI)')],
    ['Session', pv.session_id || null],
    ['Request', pv.request_id ? h('code', null, pv.request_id) : null],
  ], 'provenance');

  const historyHost = h('div', { testid: 'history' }, loading('Loading the history…'));
  const assocHost = h('div', { testid: 'associations' }, loading('Loading associations…'));
  const retentionHost = h('div', { testid: 'retention' }, loading('Loading the retention curve…'));

  replace(main,
    pageHeader(h('span', null, 'Memory ', h('span', { class: 'muted' }, truncate(m.content, 48))),
      h('span', null, h('a', { href: ctx.href('memories', {}) }, '← Memories'), ` · agent ${agent}`), ...actions),
    actionError,
    h('div', { class: 'grid-2' },
      h('div', { class: 'stack' },
        card('Content', h('div', null, contentBody, editForm), { testid: 'memory-card' }),
        card('Version history', historyHost, { testid: 'history-card' }),
        card('Associations', assocHost, { testid: 'associations-card', actions: h('a', { href: ctx.href('graph', { id: m.id }), class: 'btn btn-small' }, 'Open in graph') })),
      h('div', { class: 'stack' },
        card('Details', kvList(metaPairs, 'memory-meta')),
        card('Provenance', provenance),
        card('Retention over time', retentionHost, { testid: 'retention-card' }))));

  // ---- history ----
  historyP.then((hist) => {
    if (ctx.signal.aborted) return;
    replace(historyHost, renderHistory(hist.versions || [], m));
  }).catch((err) => { if (!ctx.signal.aborted) replace(historyHost, errorBox(err, 'history-error')); });

  // ---- associations ----
  assocP.then((res) => {
    if (ctx.signal.aborted) return;
    const list = res.associations || [];
    if (!list.length) {
      replace(assocHost, emptyState('No associations', 'Link memories with POST /tools/associate; the sleep cycle links a cluster to the knowledge made from it.', 'associations-empty'));
      return;
    }
    const tbody = h('tbody');
    for (const a of list) {
      const outgoing = a.from_id === m.id;
      const o = a.other || { id: outgoing ? a.to_id : a.from_id };
      tbody.append(h('tr', { testid: 'association-row' },
        h('td', { class: 'nowrap', title: outgoing ? 'from this memory' : 'to this memory' }, outgoing ? '→ to' : '← from'),
        h('td', null, h('span', { class: 'chip chip-accent' }, a.relation)),
        h('td', null, meter(a.weight, { label: 'weight' })),
        h('td', null, o.type ? typeBadge(o.type) : null, ' ',
          h('a', { href: ctx.href(`memory/${enc(o.id)}`, {}) }, o.content ? truncate(o.content, 90) : o.id),
          o.status && o.status !== 'active' ? h('span', null, ' ', statusBadge(o.status)) : null)));
    }
    replace(assocHost, h('div', { class: 'table-wrap' }, h('table', { class: 'table' },
      h('thead', null, h('tr', null, h('th', null, 'Direction'), h('th', null, 'Relation'), h('th', null, 'Weight'), h('th', null, 'Other memory'))), tbody)));
  }).catch((err) => {
    if (ctx.signal.aborted) return;
    replace(assocHost, isMissingRoute(err) ? notAvailable('the associations of a memory (GET /v1/memories/{id}/associations)') : errorBox(err));
  });

  // ---- retention ----
  retentionP.then((res) => {
    if (ctx.signal.aborted) return;
    const pts = (res.points || []).map((p) => ({ x: new Date(p.at), y: p.retention }));
    if (!pts.length) { replace(retentionHost, emptyState('No retention points', '')); return; }
    replace(retentionHost,
      h('p', { class: 'muted small' }, 'Now ', h('strong', { testid: 'retention-now' }, Number(res.retention).toFixed(3)),
        '; the curve shows how recall strength decays, and each access or consolidation restores it.'),
      lineChart(pts, { yMin: 0, yMax: 1, testid: 'retention-chart', label: 'retention over time', marker: Date.now(), markerLabel: 'now' }));
  }).catch((err) => {
    if (ctx.signal.aborted) return;
    replace(retentionHost, isMissingRoute(err) ? notAvailable('the retention curve (GET /v1/memories/{id}/retention)') : errorBox(err));
  });

  async function forget() {
    try {
      await post('/tools/forget', { agent_id: agent, id: m.id });
      toast('Forgotten (archived; restore brings it back)');
      ctx.setParams({}, { replace: true });
    } catch (err) { replace(actionError, errorBox(err)); }
  }
  async function restore() {
    try {
      await patch(base, { status: 'active' }, { query: q });
      toast('Restored');
      ctx.setParams({}, { replace: true });
    } catch (err) { replace(actionError, errorBox(err)); }
  }
}

function buildEditForm(m, onSave, onCancel) {
  const form = h('form', { class: 'edit-form', testid: 'edit-form', 'aria-label': 'Edit memory' },
    h('div', { class: 'form-error', hidden: true }),
    field('Content', h('textarea', { name: 'content', rows: 5, testid: 'edit-content' }, m.content)),
    h('div', { class: 'form-grid' },
      field('Importance (0–1)', h('input', { name: 'importance', type: 'number', min: '0', max: '1', step: '0.05', value: m.importance, testid: 'edit-importance' })),
      field('Type', select('type', MEMORY_TYPES, m.type, { testid: 'edit-type' })),
      h('div', { class: 'span-2' }, field('Tags', h('input', { name: 'tags', value: (m.tags || []).join(', '), placeholder: 'comma separated', testid: 'edit-tags' })))),
    h('div', { class: 'form-actions' },
      h('button', { type: 'submit', class: 'btn btn-primary', testid: 'edit-save' }, 'Save'),
      h('button', { type: 'button', class: 'btn btn-ghost', testid: 'edit-cancel', onclick: onCancel }, 'Cancel'),
      h('span', { class: 'muted small' }, 'Saving keeps the current text as a version in the history.')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const changes = {};
    const content = f.get('content');
    if (content !== m.content) changes.content = content;
    const imp = f.get('importance');
    if (imp !== '' && Number(imp) !== m.importance) changes.importance = Number(imp);
    if (f.get('type') !== m.type) changes.type = f.get('type');
    const tags = String(f.get('tags')).split(',').map((t) => t.trim()).filter(Boolean);
    if (JSON.stringify(tags) !== JSON.stringify(m.tags || [])) changes.tags = tags;
    const button = form.querySelector('[type=submit]');
    button.disabled = true;
    try { await onSave(changes, form); } finally { button.disabled = false; }
  });
  return form;
}

/** The history, newest change first: each step from one version to the next with its reason. */
function renderHistory(versions, current) {
  const sorted = [...versions].sort((a, b) => a.version - b.version);
  if (!sorted.length) {
    return emptyState('No earlier versions', 'Editing, forgetting or superseding this memory keeps the old text here.', 'history-empty');
  }
  const chain = [...sorted, {
    version: current.version, content: current.content, importance: current.importance, tags: current.tags, status: current.status, current: true,
  }];
  const list = h('div', { class: 'versions' });
  for (let i = chain.length - 2; i >= 0; i--) {
    const from = chain[i];
    const to = chain[i + 1];
    const changes = [];
    if (from.importance !== to.importance) changes.push(`importance ${fmtNum(from.importance)} → ${fmtNum(to.importance)}`);
    if (JSON.stringify(from.tags || []) !== JSON.stringify(to.tags || [])) changes.push(`tags [${(from.tags || []).join(', ')}] → [${(to.tags || []).join(', ')}]`);
    if (from.status !== to.status) changes.push(`status ${from.status} → ${to.status}`);
    list.append(h('div', { class: 'version', testid: 'history-version', 'data-version': to.version },
      h('div', { class: 'version-head' },
        h('strong', null, `v${from.version} → v${to.version}${to.current ? ' (current)' : ''}`),
        h('span', { class: 'chip chip-accent', testid: 'history-reason' }, from.reason || 'change'),
        h('span', { class: 'muted small' }, timeEl(from.archived_at))),
      diffView(from.content, to.content, 'history-diff'),
      changes.length ? h('div', { class: 'diff-meta' }, changes.join(' · ')) : null));
  }
  list.append(h('div', { class: 'version', 'data-version': chain[0].version },
    h('div', { class: 'version-head' }, h('strong', null, `v${chain[0].version}`), h('span', { class: 'muted small' }, 'first version'))));
  return list;
}
