// Sessions and projects: an agent's sessions (live window, summary, compactions), its
// projects (isolation, sessions) and the KV namespaces (entries, hit/miss/eviction
// counters).

import { get, enc, isMissingRoute } from '../lib/api.js';
import {
  h, replace, pageHeader, card, emptyState, errorBox, loading, field, fmtNum, timeEl, relTime, truncate, kvList, notAvailable,
} from '../lib/dom.js';
import { hbars } from '../lib/charts.js';

const TABS = [['sessions', 'Sessions'], ['projects', 'Projects'], ['namespaces', 'KV namespaces']];

export async function render(ctx) {
  const { params } = ctx;
  const tab = params.get('tab') || (params.get('ns') ? 'namespaces' : params.get('project') ? 'projects' : 'sessions');
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Sessions, projects, namespaces' },
    TABS.map(([id, label]) => h('button', {
      type: 'button', class: 'tab', role: 'tab', 'aria-selected': String(id === tab), testid: `tab-${id}`,
      onclick: () => ctx.navigate('sessions', { tab: id }),
    }, label)));
  const panel = h('div', { role: 'tabpanel', class: 'stack', testid: `panel-${tab}` });
  replace(ctx.main,
    pageHeader('Sessions & projects', `Agent ${ctx.agent || '(none)'}. Conversations, their summaries and compactions; projects; shared KV namespaces.`),
    tabs, panel);
  if (tab === 'projects') await projects(ctx, panel);
  else if (tab === 'namespaces') await namespaces(ctx, panel);
  else await sessions(ctx, panel);
}

// ---- sessions ----------------------------------------------------------------------

async function sessions(ctx, panel) {
  const { agent, params } = ctx;
  if (!agent) { replace(panel, card(null, emptyState('No agent selected', 'Pick an agent above.'))); return; }
  const selected = params.get('session') || '';
  const openForm = h('form', { class: 'form-row', testid: 'session-open-form' },
    h('div', { class: 'grow' }, field('Open a session by id', h('input', { name: 'session', value: selected, placeholder: 'chat-42', 'data-search': '', testid: 'session-id' }))),
    h('button', { type: 'submit', class: 'btn' }, 'Open'));
  openForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = new FormData(openForm).get('session').trim();
    if (v) ctx.setParams({ session: v, tab: 'sessions' }, { replace: false });
  });
  const listHost = h('div', { testid: 'sessions-list' }, loading());
  const detailHost = h('div', { testid: 'session-detail' });
  replace(panel, h('div', { class: 'grid-2-even' },
    card('Sessions', h('div', { class: 'stack' }, openForm, listHost)),
    detailHost));

  get('/v1/sessions', { agent_id: agent }, { signal: ctx.signal }).then((res) => {
    const list = res.sessions || [];
    if (!list.length) {
      replace(listHost, emptyState('No sessions yet', 'A session starts with POST /v1/sessions/{id}/messages (or the proxy\'s X-Mnemos-Session-Id).', 'sessions-empty'));
      return;
    }
    replace(listHost, h('div', { class: 'table-wrap' }, h('table', { class: 'table', testid: 'sessions-table' },
      h('thead', null, h('tr', null, h('th', null, 'Session'), h('th', { class: 'num' }, 'Messages'), h('th', { class: 'num' }, 'Tokens'), h('th', { class: 'num' }, 'Compactions'), h('th', null, 'Last message'))),
      h('tbody', null, list.map((x) => h('tr', { testid: 'session-row', class: x.session_id === selected ? 'selected' : undefined },
        h('td', { class: 'nowrap' }, h('a', { href: ctx.href('sessions', { tab: 'sessions', session: x.session_id }) }, x.session_id),
          x.expired ? h('span', { class: 'badge status-archived' }, ' expired') : null,
          x.summary ? h('div', { class: 'muted small' }, truncate(x.summary, 80)) : null),
        h('td', { class: 'num' }, fmtNum(x.total_messages)),
        h('td', { class: 'num' }, fmtNum(x.tokens)),
        h('td', { class: 'num' }, fmtNum(x.compactions)),
        h('td', { class: 'nowrap' }, relTime(x.last_message_at))))))));
  }).catch((err) => {
    if (ctx.signal.aborted) return;
    replace(listHost, isMissingRoute(err) ? notAvailable('the list of sessions (GET /v1/sessions); open one by id above') : errorBox(err));
  });

  if (!selected) {
    replace(detailHost, card('Session', emptyState('No session open', 'Pick one from the list, or type its id.', 'session-none')));
    return;
  }
  replace(detailHost, card(`Session ${selected}`, loading()));
  try {
    const s = await get(`/v1/sessions/${enc(selected)}/messages`, { agent_id: agent }, { signal: ctx.signal });
    if (ctx.signal.aborted) return;
    const used = s.tokens || 0;
    replace(detailHost, h('div', { class: 'stack' },
      card(`Session ${s.session_id}`, h('div', { class: 'stack' },
        h('div', { class: 'stat-row' },
          stat(fmtNum(s.total_messages), 'messages in all', 'session-total'),
          stat(fmtNum(s.messages ? s.messages.length : 0), 'in the live window'),
          stat(fmtNum(s.compactions), 'compactions', 'session-compactions'),
          stat(fmtNum(s.beyond_window), 'beyond the window')),
        hbars([
          { label: 'window tokens', value: used },
          { label: 'compact at', value: s.compact_at_tokens },
          { label: 'context', value: s.context_tokens },
        ], { testid: 'session-token-bars' }),
        kvList([
          ['Last message', s.last_message_at ? h('span', null, timeEl(s.last_message_at), ' ', h('span', { class: 'muted small' }, relTime(s.last_message_at))) : null],
          ['Compacted through', `message ${fmtNum(s.compacted_through)}`],
          ['Expired', s.expired ? 'yes (idle; archived by the 03:00 job)' : 'no'],
          ['Memories', h('a', { href: ctx.href('memories', { session: s.session_id }) }, 'memories from this session')],
        ])), { testid: 'session-card' }),
      card('Summary', s.summary ? h('p', { class: 'summary', testid: 'session-summary' }, s.summary) : emptyState('No summary yet', 'Compaction writes one when the window passes compact_at tokens.', 'session-summary-empty')),
      card('Live window', (s.messages || []).length
        ? h('div', { class: 'messages', testid: 'session-messages' }, s.messages.map((m) => h('div', { class: `msg msg-${m.role}` },
          h('div', { class: 'msg-head' }, h('strong', null, m.role), h('span', null, `#${m.seq}`), h('span', null, `${m.tokens} tokens`), timeEl(m.at)),
          h('div', { class: 'msg-body' }, m.content))))
        : emptyState('The window is empty', 'Everything was compacted into the summary.'))));
  } catch (err) {
    if (!ctx.signal.aborted) replace(detailHost, card(`Session ${selected}`, errorBox(err, 'session-error')));
  }
}

function stat(value, label, testid) {
  return h('div', { class: 'stat' }, h('div', { class: 'stat-value', testid }, value), h('div', { class: 'stat-label' }, label));
}

// ---- projects --------------------------------------------------------------------------

async function projects(ctx, panel) {
  const { agent, params } = ctx;
  if (!agent) { replace(panel, card(null, emptyState('No agent selected', 'Pick an agent above.'))); return; }
  const selected = params.get('project') || '';
  const listHost = h('div', { testid: 'projects-list' }, loading());
  const detailHost = h('div', { testid: 'project-detail' });
  replace(panel, h('div', { class: 'grid-2-even' }, card('Projects', listHost), detailHost));
  try {
    const res = await get('/v1/projects', { agent_id: agent }, { signal: ctx.signal });
    const list = res.projects || [];
    replace(listHost, list.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'table', testid: 'projects-table' },
      h('thead', null, h('tr', null, h('th', null, 'Project'), h('th', null, 'Name'), h('th', null, 'Isolation'), h('th', null, 'Updated'))),
      h('tbody', null, list.map((p) => h('tr', { testid: 'project-row', class: p.project_id === selected ? 'selected' : undefined },
        h('td', null, h('a', { href: ctx.href('sessions', { tab: 'projects', project: p.project_id }) }, p.project_id)),
        h('td', null, p.name),
        h('td', null, p.isolated ? h('span', { class: 'badge status-stale', title: 'only a recall naming this project sees its memories' }, 'isolated') : h('span', { class: 'badge' }, 'shared')),
        h('td', { class: 'nowrap' }, relTime(p.updated_at)))))))
      : emptyState('No projects', 'Create one with PUT /v1/projects/{id} (see the README).', 'projects-empty'));
  } catch (err) {
    if (!ctx.signal.aborted) replace(listHost, errorBox(err));
  }
  if (!selected) { replace(detailHost, card('Project', emptyState('No project open', 'Pick one from the list.'))); return; }
  try {
    const p = await get(`/v1/projects/${enc(selected)}`, { agent_id: agent }, { signal: ctx.signal });
    if (ctx.signal.aborted) return;
    replace(detailHost, card(`Project ${p.project_id}`, h('div', { class: 'stack' },
      kvList([
        ['Name', p.name],
        ['Isolation', p.isolated ? 'isolated: its memories are recalled only when a recall names this project' : 'not isolated: its memories are ranked first when in focus, and visible to every recall'],
        ['Created', timeEl(p.created_at)],
        ['Updated', timeEl(p.updated_at)],
        ['Memories', h('a', { href: ctx.href('memories', { project: p.project_id }) }, 'browse this project\'s memories')],
      ], 'project-meta'),
      h('div', null, h('h3', null, `Sessions (${(p.sessions || []).length})`),
        (p.sessions || []).length ? h('ul', { class: 'idlist', testid: 'project-sessions' }, p.sessions.map((sid) => h('li', null,
          h('a', { href: ctx.href('sessions', { tab: 'sessions', session: sid }) }, sid))))
          : h('p', { class: 'muted' }, 'No session is attached (PUT /v1/projects/{id}/sessions/{session}).'))), { testid: 'project-card' }));
  } catch (err) {
    if (!ctx.signal.aborted) replace(detailHost, card(`Project ${selected}`, errorBox(err)));
  }
}

// ---- namespaces ------------------------------------------------------------------------

async function namespaces(ctx, panel) {
  const { params } = ctx;
  const selected = params.get('ns') || '';
  const openForm = h('form', { class: 'form-row', testid: 'ns-open-form' },
    h('div', { class: 'grow' }, field('Open a namespace', h('input', { name: 'ns', value: selected, placeholder: 'crew', 'data-search': '', testid: 'ns-name' }))),
    h('button', { type: 'submit', class: 'btn' }, 'Open'));
  openForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = new FormData(openForm).get('ns').trim();
    if (v) ctx.setParams({ ns: v, tab: 'namespaces' }, { replace: false });
  });
  const listHost = h('div', { testid: 'namespaces-list' }, loading());
  const detailHost = h('div', { testid: 'namespace-detail' });
  replace(panel, h('div', { class: 'grid-2-even' }, card('Namespaces', h('div', { class: 'stack' }, openForm, listHost)), detailHost));

  get('/v1/namespaces', null, { signal: ctx.signal }).then((res) => {
    const list = res.namespaces || [];
    replace(listHost, list.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'table', testid: 'namespaces-table' },
      h('thead', null, h('tr', null, h('th', null, 'Namespace'), h('th', { class: 'num' }, 'Entries'), h('th', { class: 'num' }, 'Hits'), h('th', { class: 'num' }, 'Misses'), h('th', { class: 'num' }, 'Evictions'))),
      h('tbody', null, list.map((n) => h('tr', { testid: 'namespace-row', class: n.namespace === selected ? 'selected' : undefined },
        h('td', null, h('a', { href: ctx.href('sessions', { tab: 'namespaces', ns: n.namespace }) }, n.namespace)),
        h('td', { class: 'num' }, `${fmtNum(n.entries)}${n.max_entries ? ` / ${fmtNum(n.max_entries)}` : ''}`),
        h('td', { class: 'num' }, fmtNum(n.hits)),
        h('td', { class: 'num' }, fmtNum(n.misses)),
        h('td', { class: 'num' }, fmtNum(n.evictions)))))))
      : emptyState('No namespaces', 'Create one with PUT /v1/namespaces/{ns} (see the README).', 'namespaces-empty'));
  }).catch((err) => {
    if (ctx.signal.aborted) return;
    replace(listHost, isMissingRoute(err) ? notAvailable('the list of namespaces (GET /v1/namespaces); open one by name above') : errorBox(err));
  });

  if (!selected) { replace(detailHost, card('Namespace', emptyState('No namespace open', 'Pick one from the list, or type its name.'))); return; }
  replace(detailHost, card(`Namespace ${selected}`, loading()));
  const base = `/v1/namespaces/${enc(selected)}`;
  try {
    const [stats, entries] = await Promise.all([
      get(`${base}/stats`, null, { signal: ctx.signal }),
      get(`${base}/entries`, { limit: 100 }, { signal: ctx.signal }),
    ]);
    if (ctx.signal.aborted) return;
    const lookups = (stats.hits || 0) + (stats.misses || 0);
    const list = entries.entries || [];
    replace(detailHost, h('div', { class: 'stack' },
      card(`Namespace ${stats.namespace || selected}`, h('div', { class: 'stack' },
        h('div', { class: 'stat-row', testid: 'ns-stats' },
          stat(`${fmtNum(stats.entries)}${stats.max_entries ? ` / ${fmtNum(stats.max_entries)}` : ''}`, 'entries', 'ns-entries'),
          stat(fmtNum(stats.hits), 'hits', 'ns-hits'),
          stat(fmtNum(stats.misses), 'misses', 'ns-misses'),
          stat(fmtNum(stats.evictions), 'evictions', 'ns-evictions'),
          stat(fmtNum(stats.puts), 'puts')),
        lookups ? h('p', { class: 'muted small' }, `Hit rate ${((stats.hits / lookups) * 100).toFixed(1)}% of ${fmtNum(lookups)} lookups.`) : h('p', { class: 'muted small' }, 'No lookups yet.'),
        stats.created_at ? h('p', { class: 'muted small' }, 'Created ', timeEl(stats.created_at)) : null), { testid: 'ns-card' }),
      card(`Entries (${list.length}, most recently used first)`, list.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'table', testid: 'ns-entries-table' },
        h('thead', null, h('tr', null, h('th', null, 'Key'), h('th', null, 'Value'), h('th', null, 'Tags'), h('th', null, 'Written by'), h('th', null, 'Expires'))),
        h('tbody', null, list.map((e) => h('tr', { testid: 'ns-entry-row' },
          h('td', null, h('code', null, e.key)),
          h('td', null, h('pre', { class: 'json' }, truncate(JSON.stringify(e.value), 200))),
          h('td', null, (e.tags || []).map((t) => h('span', { class: 'chip' }, t))),
          h('td', null, e.written_by),
          h('td', { class: 'nowrap' }, e.expires_at ? relTime(e.expires_at) : h('span', { class: 'muted' }, 'never')))))))
        : emptyState('No entries', 'PUT /v1/namespaces/{ns}/entries/{key} stores one.', 'ns-entries-empty'))));
  } catch (err) {
    if (!ctx.signal.aborted) replace(detailHost, card(`Namespace ${selected}`, errorBox(err, 'ns-error')));
  }
}
