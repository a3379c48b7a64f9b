// Context builder: what build_context would put in a prompt for a query and a token
// budget, with the tokens of each section as a bar and the stale files left out.

import { post } from '../lib/api.js';
import {
  h, replace, pageHeader, card, emptyState, errorBox, loading, field, fmtNum, showFormError, clearFormErrors, kvList,
} from '../lib/dom.js';
import { stackBar } from '../lib/charts.js';

export async function render(ctx) {
  const { agent, params } = ctx;
  const q = params.get('q') || '';
  const budget = params.get('budget') || '800';
  const root = params.get('root') || '';
  const session = params.get('session') || '';
  const project = params.get('project') || '';

  const form = h('form', { testid: 'context-form', 'aria-label': 'Build a context' },
    h('div', { class: 'form-error', hidden: true }),
    h('div', { class: 'form-row' },
      h('div', { class: 'grow' }, field('Query', h('input', { name: 'query', type: 'search', value: q, required: true, placeholder: 'deploying staging', 'data-search': '', testid: 'context-query' }))),
      field('Budget (tokens)', h('input', { name: 'context_budget', type: 'number', min: '1', value: budget, testid: 'context-budget' })),
      h('button', { type: 'submit', class: 'btn btn-primary', testid: 'context-submit' }, 'Build')),
    h('div', { class: 'form-grid' },
      h('div', { class: 'span-2' }, field('Project root', h('input', { name: 'project_root', value: root, placeholder: '/path/to/repo (must lie under server.project_roots)', testid: 'context-root' }),
        'Memories whose source file changed under this root are left out as stale.')),
      field('Session', h('input', { name: 'session_id', value: session, testid: 'context-session' })),
      field('Project', h('input', { name: 'project_id', value: project, testid: 'context-project' }))));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    ctx.setParams({
      q: f.get('query').trim(), budget: f.get('context_budget'), root: f.get('project_root').trim(),
      session: f.get('session_id').trim(), project: f.get('project_id').trim(),
    }, { replace: false });
  });

  const out = h('div', { testid: 'context-result' });
  replace(ctx.main,
    pageHeader('Context builder', `Agent ${agent || '(none)'}. The block build_context would put in a prompt, within a token budget.`),
    card(null, form), out);

  if (!agent) { replace(out, card(null, emptyState('No agent selected', 'Pick an agent above.'))); return; }
  if (!q) {
    replace(out, card(null, emptyState('Describe the task', 'Type what the agent is about to do and a budget, then Build.', 'context-empty')));
    return;
  }
  const body = { agent_id: agent, query: q, context_budget: Number(budget) || undefined };
  if (root) body.project_root = root;
  if (session) body.session_id = session;
  if (project) body.project_id = project;
  replace(out, loading('Building…'));
  let res;
  try {
    res = await post('/tools/build_context', body, { signal: ctx.signal });
  } catch (err) {
    if (ctx.signal.aborted) return;
    if (!showFormError(form, err)) replace(out, errorBox(err, 'context-error')); else replace(out, '');
    return;
  }
  if (ctx.signal.aborted) return;
  clearFormErrors(form);
  const md = res.metadata || {};
  let sections = md.sections;
  let estimated = false;
  if (!Array.isArray(sections)) {
    sections = estimateSections(res.context || '');
    estimated = true;
  }
  const parts = sections.map((sct) => ({ label: sct.name, value: sct.tokens, extra: sct.memories !== undefined ? `${sct.memories} memor${sct.memories === 1 ? 'y' : 'ies'}` : '' }));
  const stale = md.stale_files || [];

  replace(out, h('div', { class: 'grid-2' },
    h('div', { class: 'stack' },
      card('Tokens by section', h('div', { class: 'stack' },
        h('div', { class: 'stat-row' },
          h('div', { class: 'stat' }, h('div', { class: 'stat-value', testid: 'context-tokens' }, fmtNum(md.tokens_used)), h('div', { class: 'stat-label' }, `of ${fmtNum(Number(budget))} tokens`)),
          h('div', { class: 'stat' }, h('div', { class: 'stat-value' }, fmtNum(md.injected_count)), h('div', { class: 'stat-label' }, 'memories')),
          h('div', { class: `stat ${stale.length ? 'stat-warn' : ''}` }, h('div', { class: 'stat-value' }, fmtNum(stale.length)), h('div', { class: 'stat-label' }, 'stale files'))),
        parts.length ? stackBar(parts, Number(budget), { unit: 'tokens', testid: 'context-token-bar', label: 'tokens by section' }) : emptyState('Empty context', 'No memory fitted this query.'),
        estimated ? h('p', { class: 'muted small', testid: 'context-estimated' }, 'Estimated from the text (about 4 characters a token): this server does not report metadata.sections.') : null),
      { testid: 'context-sections' }),
      card('Context', res.context ? h('pre', { class: 'context-text', testid: 'context-text' }, res.context) : emptyState('Nothing to inject', 'No memory matched within the budget.', 'context-none'))),
    h('div', { class: 'stack' },
      card('Stale files', stale.length
        ? h('ul', { class: 'idlist', testid: 'stale-files' }, stale.map((f) => h('li', null, h('code', null, typeof f === 'string' ? f : (f.path || JSON.stringify(f))))))
        : emptyState('No stale files', root ? 'Every memory with a source file under this root is up to date.' : 'Give a project root to check memories\' source files.', 'stale-empty'), { testid: 'stale-card' }),
      card('Metadata', kvList(Object.entries(md).filter(([k]) => k !== 'sections' && k !== 'stale_files').map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)])))),
  ));
}

/** Sections from the context's "## Heading" lines, tokens ≈ characters / 4. */
function estimateSections(text) {
  const out = [];
  let cur = null;
  for (const line of text.split('\n')) {
    const m = /^##\s+(.*)$/.exec(line);
    if (m) { cur = { name: m[1].trim(), chars: 0, memories: 0 }; out.push(cur); continue; }
    if (!cur) { cur = { name: 'Preamble', chars: 0, memories: 0 }; out.push(cur); }
    cur.chars += line.length + 1;
    if (/^\s*-\s/.test(line)) cur.memories++;
  }
  return out.filter((x) => x.chars > 1).map((x) => ({ name: x.name, tokens: Math.ceil(x.chars / 4), memories: x.memories }));
}
