// The console's shell: sign-in, the agent picker, hash routing and keyboard shortcuts.
// Every view has a URL (`#/memories?agent=alice&type=semantic`, `#/memory/<id>?agent=…`),
// so any view can be shared or reloaded. Pages live in pages/*.js and export
// `render(ctx)`, which fills `ctx.main`.

import { get, getKey, setKey, isMissingRoute, isAbort, ApiError } from './lib/api.js';
import { h, replace, errorBox, loading, fmtNum, relTime } from './lib/dom.js';

const PAGES = {
  memories: () => import('./pages/memories.js'),
  memory: () => import('./pages/memory.js'),
  recall: () => import('./pages/recall.js'),
  graph: () => import('./pages/graph.js'),
  context: () => import('./pages/context.js'),
  sleep: () => import('./pages/sleep.js'),
  sessions: () => import('./pages/sessions.js'),
  health: () => import('./pages/health.js'),
};
const NAV_OF = { memory: 'memories' };
const AGENT_STORAGE = 'mnemos.agent';

// What the browser test and the curious can read.
window.__mnemos = { timings: {}, ready: false };

const state = {
  agent: '',
  agents: null, // [{agent_id, memories, active, last_at}] or null when the server cannot list them
  keysRequired: false,
  current: null, // {name, controller}
};

const $ = (id) => document.getElementById(id);

// ---- routing -------------------------------------------------------------------

/** The current route: {name, rest: [...], params: URLSearchParams}. */
export function parseRoute(hash = location.hash) {
  const raw = hash.replace(/^#\/?/, '');
  const [path, q = ''] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { name: parts[0] || 'memories', rest: parts.slice(1), params: new URLSearchParams(q) };
}

/** A hash URL for `path` with `params`, carrying the current agent. */
export function href(path, params = {}) {
  const q = new URLSearchParams();
  const agent = params.agent !== undefined ? params.agent : state.agent;
  if (agent) q.set('agent', agent);
  for (const [k, v] of Object.entries(params)) {
    if (k === 'agent' || v === undefined || v === null || v === '' || v === false) continue;
    if (Array.isArray(v)) { if (v.length) q.set(k, v.join(',')); } else q.set(k, String(v));
  }
  const text = q.toString();
  return `#/${path}${text ? `?${text}` : ''}`;
}

export function navigate(path, params = {}, { replace: rep = false } = {}) {
  const url = href(path, params);
  if (url === location.hash) { route(); return; }
  if (rep) { history.replaceState(null, '', url); route(); } else location.hash = url;
}

async function route() {
  const r = parseRoute();
  if (!PAGES[r.name]) { navigate('memories', {}, { replace: true }); return; }
  // The agent: from the URL, else the last one used, else the first the server lists.
  let agent = r.params.get('agent') || '';
  if (!agent) {
    agent = state.agent || sessionStorage.getItem(AGENT_STORAGE) || (state.agents && state.agents[0] ? state.agents[0].agent_id : '');
    if (agent) {
      r.params.set('agent', agent);
      history.replaceState(null, '', `#/${[r.name, ...r.rest].map(encodeURIComponent).join('/')}?${r.params.toString()}`);
    }
  }
  setAgent(agent);

  const navName = NAV_OF[r.name] || r.name;
  document.querySelectorAll('#nav a').forEach((a) => {
    if (a.dataset.route === navName) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    a.setAttribute('href', href(a.dataset.route, {}));
  });

  const samePage = state.current && state.current.name === r.name && state.current.rest === r.rest.join('/');
  if (state.current) state.current.controller.abort();
  const controller = new AbortController();
  state.current = { name: r.name, rest: r.rest.join('/'), controller };
  const main = $('main');
  main.setAttribute('aria-busy', 'true');
  if (!samePage) replace(main, loading());
  const started = performance.now();
  try {
    const mod = await PAGES[r.name]();
    if (controller.signal.aborted) return;
    const ctx = {
      name: r.name,
      rest: r.rest,
      params: r.params,
      agent: state.agent,
      agents: state.agents,
      main,
      signal: controller.signal,
      started,
      samePage,
      href,
      navigate,
      setParams(params, opts = { replace: true }) {
        const merged = Object.fromEntries(r.params.entries());
        for (const [k, v] of Object.entries(params)) {
          if (v === undefined || v === null || v === '' || v === false || (Array.isArray(v) && !v.length)) delete merged[k];
          else merged[k] = Array.isArray(v) ? v.join(',') : v;
        }
        navigate([r.name, ...r.rest].map(encodeURIComponent).join('/'), merged, opts);
      },
      refreshAgents: loadAgents,
    };
    await mod.render(ctx);
    if (!samePage && !controller.signal.aborted) {
      const title = main.querySelector('h1');
      if (title && document.activeElement === document.body) title.focus({ preventScroll: true });
      document.title = `${title ? title.textContent : r.name} · mnemos console`;
    }
  } catch (err) {
    if (isAbort(err) || controller.signal.aborted) return;
    console.error(err);
    replace(main, errorBox(err));
  } finally {
    if (!controller.signal.aborted) {
      main.removeAttribute('aria-busy');
      window.__mnemos.route = r.name;
      window.__mnemos.routes = (window.__mnemos.routes || 0) + 1;
    }
  }
}

// ---- agents ----------------------------------------------------------------------

function setAgent(agent) {
  state.agent = agent;
  if (agent) sessionStorage.setItem(AGENT_STORAGE, agent);
  const input = $('agent-input');
  if (document.activeElement !== input) input.value = agent;
  const meta = $('agent-meta');
  const info = state.agents && state.agents.find((a) => a.agent_id === agent);
  if (info) {
    meta.textContent = `${fmtNum(info.memories)} memories · ${fmtNum(info.active)} active${info.last_at ? ` · last ${relTime(info.last_at)}` : ''}`;
  } else if (state.agents && agent) {
    meta.textContent = 'no memories yet';
  } else {
    meta.textContent = agent ? '' : 'Pick the agent whose memory to look at';
  }
}

async function loadAgents() {
  try {
    const data = await get('/v1/agents');
    state.agents = data.agents || [];
  } catch (err) {
    if (!isMissingRoute(err)) throw err;
    state.agents = null;
  }
  const list = $('agent-list');
  replace(list, ...(state.agents || []).map((a) => h('option', { value: a.agent_id }, `${a.agent_id} (${a.memories})`)));
  setAgent(state.agent);
  return state.agents;
}

// ---- sign-in -----------------------------------------------------------------------

/**
 * Whether the server answers the console with the current key (or without one):
 * 'ok', or throws the ApiError (401 when a key is needed or refused).
 */
async function probe() {
  try {
    const data = await get('/v1/agents', null, { quiet401: true });
    state.agents = data.agents || [];
    return 'ok';
  } catch (err) {
    if (!isMissingRoute(err)) throw err;
  }
  // An older server without /v1/agents: any agent-scoped read tells whether a key works
  // (403: a valid key bound to another agent).
  try {
    await get('/v1/cognition/runs', { agent_id: 'console-probe', limit: 1 }, { quiet401: true });
  } catch (err) {
    if (err.status !== 403) throw err;
  }
  state.agents = null;
  return 'ok';
}

function showSignin(message) {
  $('shell').hidden = true;
  $('signin').hidden = false;
  const box = $('signin-error');
  if (message) { box.hidden = false; box.textContent = message; } else { box.hidden = true; box.textContent = ''; }
  $('signin-key').value = '';
  $('signin-key').focus();
  window.__mnemos.ready = true;
  window.__mnemos.screen = 'signin';
}

async function showShell() {
  $('signin').hidden = true;
  $('shell').hidden = false;
  const signedIn = Boolean(getKey());
  $('signout').hidden = !signedIn;
  $('auth-state').textContent = signedIn ? 'Signed in with an API key' : 'Open server (no API keys)';
  $('auth-state').className = `auth-state small ${signedIn ? 'auth-key' : 'auth-open'}`;
  const list = $('agent-list');
  replace(list, ...(state.agents || []).map((a) => h('option', { value: a.agent_id }, `${a.agent_id} (${a.memories})`)));
  get('/health').then((hv) => {
    $('server-info').textContent = `mnemos ${hv.version} · ${hv.status}`;
  }).catch(() => {});
  window.__mnemos.screen = 'console';
  await route();
  window.__mnemos.ready = true;
}

async function boot() {
  try {
    await probe();
    state.keysRequired = Boolean(getKey());
    await showShell();
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      state.keysRequired = true;
      if (getKey()) { setKey(''); showSignin(err.message); } else showSignin('');
    } else {
      showSignin(`The server did not answer: ${err.message || err}`);
    }
  }
}

function wire() {
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const key = $('signin-key').value.trim();
    const box = $('signin-error');
    if (!key) { box.hidden = false; box.textContent = 'Paste an API key first.'; return; }
    const button = ev.submitter || $('signin-form').querySelector('button');
    button.disabled = true;
    setKey(key);
    try {
      await probe();
      await showShell();
    } catch (err) {
      setKey('');
      box.hidden = false;
      box.textContent = err.message || String(err);
    } finally {
      button.disabled = false;
    }
  });

  window.addEventListener('mnemos:unauthenticated', (ev) => {
    if (state.current) state.current.controller.abort();
    state.current = null;
    setKey('');
    showSignin(ev.detail && ev.detail.message ? ev.detail.message : 'Your key was refused; sign in again.');
  });

  $('signout').addEventListener('click', () => {
    setKey('');
    if (state.current) state.current.controller.abort();
    state.current = null;
    showSignin('Signed out.');
  });

  $('agent-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const agent = $('agent-input').value.trim();
    if (!agent) return;
    const r = parseRoute();
    // A memory belongs to one agent: switching agents leaves its page.
    const name = r.name === 'memory' ? 'memories' : r.name;
    const params = r.name === 'memory' ? {} : Object.fromEntries(r.params.entries());
    // Ids, cursors and runs name one agent's things: they do not carry over.
    for (const k of ['cursor', 'id', 'run', 'fresh', 'session', 'project']) delete params[k];
    navigate(name, { ...params, agent });
  });
  $('agent-input').addEventListener('change', () => $('agent-form').requestSubmit());

  window.addEventListener('hashchange', () => { if (!$('shell').hidden) route(); });

  // Theme: light by default, dark on request (remembered) or by the system's choice.
  const toggle = $('theme-toggle');
  const applyTheme = (theme) => {
    document.documentElement.dataset.theme = theme;
    toggle.textContent = theme === 'dark' ? 'Light theme' : 'Dark theme';
    toggle.setAttribute('aria-pressed', String(theme === 'dark'));
  };
  let saved = null;
  try { saved = localStorage.getItem('mnemos.theme'); } catch { /* ignore */ }
  applyTheme(saved || (window.matchMedia && matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'));
  toggle.addEventListener('click', () => {
    const next = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
    applyTheme(next);
    try { localStorage.setItem('mnemos.theme', next); } catch { /* ignore */ }
  });

  $('shortcuts-open').addEventListener('click', () => $('shortcuts').showModal());

  // Keyboard: "g" then a letter goes to a page, "/" focuses the search, "?" shows help.
  const GO = { m: 'memories', r: 'recall', g: 'graph', c: 'context', y: 'sleep', s: 'sessions', h: 'health' };
  let pendingG = 0;
  document.addEventListener('keydown', (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || $('shell').hidden) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) {
      if (ev.key === 'Escape') t.blur();
      return;
    }
    if (pendingG && Date.now() - pendingG < 1500 && GO[ev.key]) {
      pendingG = 0;
      ev.preventDefault();
      navigate(GO[ev.key]);
      return;
    }
    pendingG = 0;
    if (ev.key === 'g') { pendingG = Date.now(); return; }
    if (ev.key === '/') {
      const search = document.querySelector('#main [data-search]');
      if (search) { ev.preventDefault(); search.focus(); search.select && search.select(); }
      return;
    }
    if (ev.key === '?') { ev.preventDefault(); $('shortcuts').showModal(); }
  });
}

wire();
boot();
