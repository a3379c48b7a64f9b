// Memories: the agent's memories, filtered and paged on the server (cursor paging),
// full-text (`q`) or semantic (recall) search, bulk forget/restore.

import { get, post, isMissingRoute } from '../lib/api.js';
import {
  h, replace, pageHeader, card, emptyState, errorBox, loading, field, select, fmtNum, timeEl,
  truncate, typeBadge, statusBadge, meter, showFormError, clearFormErrors, toast,
  MEMORY_TYPES, MEMORY_STATUSES, localToRfc3339, rfc3339ToLocal,
} from '../lib/dom.js';

const FILTERS = ['q', 'type', 'status', 'tag', 'project', 'session', 'after', 'before', 'limit'];
// Previous cursors of the current filter, for "Previous page" (the URL holds only the current one).
let cursorStack = { key: '', stack: [] };
let withTotalSupported = true;

export async function render(ctx) {
  const { params, agent } = ctx;
  const p = Object.fromEntries(FILTERS.map((k) => [k, params.get(k) || '']));
  const cursor = params.get('cursor') || '';
  const sem = params.get('sem') || '';
  const limit = Number(p.limit) || 50;

  const main = ctx.main;
  if (!agent) {
    replace(main, pageHeader('Memories'), card(null, emptyState('No agent selected',
      'Type an agent id in the Agent box above (the agents this server knows are offered as you type).', 'memories-empty')));
    return;
  }

  // ---- the filter form ----
  const filterForm = h('form', { class: 'filters', testid: 'memories-filters', role: 'search', 'aria-label': 'Filter memories' },
    h('div', { class: 'form-error', hidden: true }),
    h('div', { class: 'form-grid' },
      h('div', { class: 'span-2' }, field('Full text', h('input', { name: 'q', type: 'search', value: p.q, placeholder: 'every word must appear', 'data-search': '', testid: 'filter-q', 'data-field': 'q' }))),
      field('Type', select('type', [['', 'any type'], ...MEMORY_TYPES], p.type, { testid: 'filter-type' })),
      field('Status', select('status', [['', 'any status'], ...MEMORY_STATUSES], p.status, { testid: 'filter-status' })),
      field('Tag', h('input', { name: 'tag', value: p.tag, placeholder: 'e.g. db', testid: 'filter-tag' })),
      field('Project', h('input', { name: 'project_id', value: p.project, list: 'dl-projects', placeholder: 'project id', testid: 'filter-project' })),
      field('Session', h('input', { name: 'session_id', value: p.session, list: 'dl-sessions', placeholder: 'session id', testid: 'filter-session' })),
      field('Occurred after', h('input', { name: 'occurred_after', type: 'datetime-local', value: rfc3339ToLocal(p.after), testid: 'filter-after' })),
      field('Occurred before', h('input', { name: 'occurred_before', type: 'datetime-local', value: rfc3339ToLocal(p.before), testid: 'filter-before' })),
      field('Per page', select('limit', ['25', '50', '100', '200'], String(limit), { testid: 'filter-limit' })),
    ),
    h('datalist', { id: 'dl-projects' }),
    h('datalist', { id: 'dl-sessions' }),
    h('div', { class: 'form-actions' },
      h('button', { type: 'submit', class: 'btn btn-primary', testid: 'filter-apply' }, 'Apply filters'),
      h('button', { type: 'button', class: 'btn btn-ghost', testid: 'filter-reset', onclick: () => ctx.navigate('memories', {}) }, 'Reset')));
  filterForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = new FormData(filterForm);
    ctx.navigate('memories', {
      q: f.get('q').trim(), type: f.get('type'), status: f.get('status'), tag: f.get('tag').trim(),
      project: f.get('project_id').trim(), session: f.get('session_id').trim(),
      after: localToRfc3339(f.get('occurred_after')), before: localToRfc3339(f.get('occurred_before')),
      limit: f.get('limit') === '50' ? '' : f.get('limit'),
    });
  });

  const semForm = h('form', { class: 'form-row', testid: 'semantic-form', role: 'search', 'aria-label': 'Semantic search' },
    h('div', { class: 'grow' }, field('Search by meaning', h('input', { name: 'query', type: 'search', value: sem, placeholder: 'which port does staging use?', testid: 'semantic-query', 'data-field': 'query' }),
      'Ranks memories by the recall pipeline (vector + keyword + graph), with the filters above.')),
    h('button', { type: 'submit', class: 'btn', testid: 'semantic-submit' }, 'Search'),
    sem ? h('button', { type: 'button', class: 'btn btn-ghost', testid: 'semantic-clear', onclick: () => ctx.setParams({ sem: '' }, { replace: false }) }, 'Back to browsing') : null);
  semForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new FormData(semForm).get('query').trim();
    ctx.setParams({ sem: q, cursor: '' }, { replace: false });
  });

  const tableHost = h('div', { testid: 'memories-table-host' }, loading('Loading memories…'));
  const listCard = card(sem ? `Closest to “${truncate(sem, 60)}”` : 'Memories', tableHost, { testid: 'memories-card', cls: 'card-flush' });
  listCard.querySelector('.card-body').classList.add('card-body-flush');

  replace(main,
    pageHeader('Memories', `Agent ${agent}. Filter, search, open a memory, or select rows to forget or restore them.`),
    card(null, h('div', { class: 'stack' }, filterForm, semForm)),
    listCard);

  // Datalists for project and session filters (best effort).
  get('/v1/projects', { agent_id: agent }, { signal: ctx.signal }).then((d) => {
    replace(filterForm.querySelector('#dl-projects'), ...(d.projects || []).map((x) => h('option', { value: x.project_id }, x.name)));
  }).catch(() => {});
  get('/v1/sessions', { agent_id: agent }, { signal: ctx.signal }).then((d) => {
    replace(filterForm.querySelector('#dl-sessions'), ...(d.sessions || []).map((x) => h('option', { value: x.session_id })));
  }).catch(() => {});

  // ---- load ----
  const filterKey = JSON.stringify([agent, p, sem]);
  if (cursorStack.key !== filterKey) cursorStack = { key: filterKey, stack: [] };

  let rows;
  let nextCursor = null;
  let total = null;
  try {
    if (sem) {
      const body = { agent_id: agent, query: sem, limit: Math.min(limit, 200), include_shared: false };
      if (p.type) body.type = [p.type];
      if (p.tag) body.tags = [p.tag];
      if (p.session) body.session_id = p.session;
      if (p.project) body.project_id = p.project;
      const res = await post('/tools/recall', body, { signal: ctx.signal });
      rows = (res.results || []).map((r) => ({ memory: r.memory, score: r.score, retention: r.retention, matched_by: r.matched_by }));
    } else {
      const q = {
        agent_id: agent, type: p.type, status: p.status, tag: p.tag, project_id: p.project, session_id: p.session,
        occurred_after: p.after, occurred_before: p.before, q: p.q, limit, cursor,
      };
      if (withTotalSupported) q.with_total = 'true';
      let res;
      try {
        res = await get('/v1/memories', q, { signal: ctx.signal });
      } catch (err) {
        if (err.status === 400 && err.field === 'with_total') {
          withTotalSupported = false;
          delete q.with_total;
          res = await get('/v1/memories', q, { signal: ctx.signal });
        } else throw err;
      }
      rows = (res.memories || []).map((m) => ({ memory: m, retention: m.retention }));
      nextCursor = res.next_cursor || null;
      total = typeof res.total === 'number' ? res.total : null;
    }
  } catch (err) {
    if (ctx.signal.aborted) return;
    const form = sem ? semForm : filterForm;
    const placed = err.field && err.status === 400 ? showFormError(form, err) : false;
    replace(tableHost, placed
      ? emptyState('The filters were refused', 'Fix the highlighted field and apply again.', 'memories-error')
      : h('div', { class: 'card-body' }, errorBox(err, 'memories-error')));
    return;
  }
  if (ctx.signal.aborted) return;
  clearFormErrors(filterForm);
  renderTable(ctx, tableHost, rows, { sem, nextCursor, total, cursor, limit, p });
  window.__mnemos.timings.memories_first_screen_ms = performance.now() - ctx.started;
  window.__mnemos.timings.memories_since_load_ms = performance.now();
}

function renderTable(ctx, host, rows, { sem, nextCursor, total, cursor, limit, p }) {
  const { agent } = ctx;
  const selected = new Set();
  const hasFilters = FILTERS.some((k) => k !== 'limit' && p[k]);

  if (!rows.length) {
    replace(host, sem
      ? emptyState('Nothing matches that search', 'Try other words, or clear the filters above.', 'memories-empty')
      : hasFilters || cursor
        ? emptyState('No memories match these filters', 'Loosen or reset the filters.', 'memories-empty')
        : emptyState(`Agent ${agent} has no memories yet`,
          'Store one with POST /tools/remember (see the README\'s API tour), or pick another agent above.', 'memories-empty'));
    return;
  }

  const count = h('span', { testid: 'bulk-count' }, '0 selected');
  const bulkResult = h('span', { class: 'muted small', testid: 'bulk-result', 'aria-live': 'polite' });
  const forgetBtn = h('button', { type: 'button', class: 'btn btn-small btn-danger', testid: 'bulk-forget', onclick: () => bulk('forget') }, 'Forget selected');
  const restoreBtn = h('button', { type: 'button', class: 'btn btn-small', testid: 'bulk-restore', onclick: () => bulk('restore') }, 'Restore selected');
  const clearBtn = h('button', { type: 'button', class: 'btn btn-small btn-ghost', onclick: () => setAll(false) }, 'Clear selection');
  const bulkbar = h('div', { class: 'bulkbar', testid: 'bulkbar', hidden: true }, count, forgetBtn, restoreBtn, clearBtn, bulkResult);

  const all = h('input', { type: 'checkbox', 'aria-label': 'Select every row on this page', testid: 'select-all' });
  all.addEventListener('change', () => setAll(all.checked));

  const tbody = h('tbody');
  const trs = [];
  for (const row of rows) {
    const m = row.memory;
    const box = h('input', { type: 'checkbox', 'aria-label': `Select memory ${truncate(m.content, 40)}`, testid: 'row-check', value: m.id });
    box.addEventListener('change', () => { toggle(m.id, box.checked); });
    const open = ctx.href(`memory/${encodeURIComponent(m.id)}`, {});
    const tr = h('tr', { 'data-id': m.id, testid: 'memory-row', tabindex: '0', class: m.status !== 'active' ? `row-${m.status}` : undefined },
      h('td', { class: 'col-check' }, box),
      h('td', null, typeBadge(m.type)),
      h('td', { class: 'content-cell' },
        h('a', { href: open, testid: 'memory-link', title: m.content }, truncate(m.content, 160)),
        m.tags && m.tags.length ? h('div', null, m.tags.map((t) => h('span', { class: 'chip' }, t))) : null),
      sem ? h('td', { class: 'num', testid: 'row-score' }, fmtNum(row.score, 3)) : null,
      h('td', null, meter(m.importance, { label: 'importance' })),
      h('td', null, typeof row.retention === 'number' ? meter(row.retention, { label: 'retention' }) : h('span', { class: 'muted', title: 'this server does not report retention in lists' }, '—')),
      h('td', { class: 'nowrap' }, timeEl(m.occurred_at)),
      h('td', { class: 'nowrap' }, timeEl(m.updated_at)),
      h('td', null, statusBadge(m.status)));
    tr.addEventListener('keydown', (ev) => {
      if (ev.target !== tr) return;
      if (ev.key === 'Enter') { ev.preventDefault(); location.hash = open; } else if (ev.key === 'x' || ev.key === ' ') { ev.preventDefault(); box.checked = !box.checked; toggle(m.id, box.checked); } else if (ev.key === 'j' || ev.key === 'ArrowDown') { ev.preventDefault(); (tr.nextElementSibling || tr).focus(); } else if (ev.key === 'k' || ev.key === 'ArrowUp') { ev.preventDefault(); (tr.previousElementSibling || tr).focus(); }
    });
    trs.push({ tr, box, id: m.id });
    tbody.append(tr);
  }
  // "j" from anywhere on the page enters the table.
  const enter = (ev) => {
    if (ev.key !== 'j' || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (/^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) || t.closest('tbody'))) return;
    ev.preventDefault();
    trs[0].tr.focus();
  };
  document.addEventListener('keydown', enter);
  ctx.signal.addEventListener('abort', () => document.removeEventListener('keydown', enter));

  const table = h('table', { class: 'table', testid: 'memories-table' },
    h('caption', { class: 'muted small', hidden: true }, 'Memories'),
    h('thead', null, h('tr', null,
      h('th', { class: 'col-check', scope: 'col' }, all),
      h('th', { scope: 'col' }, 'Type'),
      h('th', { scope: 'col' }, 'Content'),
      sem ? h('th', { scope: 'col', class: 'num' }, 'Score') : null,
      h('th', { scope: 'col' }, 'Importance'),
      h('th', { scope: 'col' }, 'Retention'),
      h('th', { scope: 'col' }, 'Occurred'),
      h('th', { scope: 'col' }, 'Updated'),
      h('th', { scope: 'col' }, 'Status'))),
    tbody);

  const start = cursorStack.stack.length * limit;
  const info = sem
    ? `${rows.length} closest memories`
    : `Showing ${fmtNum(start + 1)}–${fmtNum(start + rows.length)}${total !== null ? ` of ${fmtNum(total)}` : ''}`;
  const pager = h('div', { class: 'pager', testid: 'pager' },
    h('span', { class: 'muted', testid: 'pager-info' }, info),
    sem ? null : h('div', { class: 'pager-buttons' },
      h('button', {
        type: 'button', class: 'btn btn-small', testid: 'page-prev', disabled: !cursor,
        onclick: () => {
          const prev = cursorStack.stack.pop();
          ctx.setParams({ cursor: prev || '' }, { replace: false });
        },
      }, cursorStack.stack.length || !cursor ? 'Previous page' : 'First page'),
      h('button', {
        type: 'button', class: 'btn btn-small', testid: 'page-next', disabled: !nextCursor,
        onclick: () => {
          cursorStack.stack.push(cursor);
          ctx.setParams({ cursor: nextCursor }, { replace: false });
        },
      }, 'Next page')));

  replace(host, bulkbar, h('div', { class: 'table-wrap' }, table), pager);

  function toggle(id, on) {
    if (on) selected.add(id); else selected.delete(id);
    const t = trs.find((x) => x.id === id);
    if (t) t.tr.classList.toggle('selected', on);
    count.textContent = `${selected.size} selected`;
    bulkbar.hidden = selected.size === 0;
    all.checked = selected.size === trs.length;
    all.indeterminate = selected.size > 0 && selected.size < trs.length;
  }
  function setAll(on) {
    for (const t of trs) { t.box.checked = on; toggle(t.id, on); }
  }
  async function bulk(action) {
    const ids = [...selected];
    forgetBtn.disabled = true; restoreBtn.disabled = true;
    bulkResult.textContent = action === 'forget' ? 'Forgetting…' : 'Restoring…';
    try {
      const res = await post('/v1/memories/bulk', { agent_id: agent, ids, action });
      const changed = (res.changed || []).length;
      const text = `${changed} ${action === 'forget' ? 'forgotten' : 'restored'}, ${(res.unchanged || []).length} unchanged, ${(res.missing || []).length} missing`;
      toast(text);
      ctx.setParams({}, { replace: true });
      ctx.refreshAgents && ctx.refreshAgents().catch(() => {});
    } catch (err) {
      forgetBtn.disabled = false; restoreBtn.disabled = false;
      replace(bulkResult, isMissingRoute(err) ? errorBox(err, 'bulk-error') : errorBox(err, 'bulk-error'));
    }
  }
}
