// The REST client of the console: every call carries the API key kept in this tab's
// session storage, and every failure becomes an ApiError carrying the contract's
// {"error": {"code", "message", "field"}}. A 401 signs the console out (app.js listens
// for the `mnemos:unauthenticated` event and shows the sign-in screen with the message).

const KEY_STORAGE = 'mnemos.apiKey';

export class ApiError extends Error {
  constructor(status, code, message, field, route) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field || null;
    this.route = route || null;
  }
}

/**
 * Whether `err` says this server lacks the route (a feature of a newer mnemos): 404
 * "no such route", or 405 when the path exists for other methods only.
 */
export function isMissingRoute(err) {
  return Boolean(err && ((err.status === 404 && /no such route/i.test(err.message || '')) || err.status === 405));
}

export function isAbort(err) {
  return Boolean(err && err.name === 'AbortError');
}

export function getKey() {
  try { return sessionStorage.getItem(KEY_STORAGE) || ''; } catch { return ''; }
}

export function setKey(key) {
  try {
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
  } catch { /* storage disabled: the key lives for this page only */ }
  memoryKey = key || '';
}

let memoryKey = '';

function query(params) {
  if (!params) return '';
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => q.append(k, x));
    else q.set(k, String(v));
  }
  const text = q.toString();
  return text ? `?${text}` : '';
}

/**
 * One request. `opts`: {query, body, signal, key (override), quiet401 (do not sign out)}.
 * Resolves to the parsed JSON (or text), throws ApiError.
 */
export async function api(method, path, opts = {}) {
  const headers = { Accept: 'application/json' };
  const key = opts.key !== undefined ? opts.key : (getKey() || memoryKey);
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method, headers, signal: opts.signal, cache: 'no-store' };
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  const url = path + query(opts.query);
  let res;
  try {
    res = await fetch(url, init);
  } catch (e) {
    if (isAbort(e)) throw e;
    throw new ApiError(0, 'network', `cannot reach the server (${e.message || e})`, null, `${method} ${path}`);
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!res.ok) {
    const e = data && typeof data === 'object' && data.error ? data.error : null;
    const err = new ApiError(
      res.status,
      e ? e.code : `http_${res.status}`,
      e ? e.message : (typeof data === 'string' && data ? data.slice(0, 300) : `${res.status} ${res.statusText}`),
      e ? e.field : null,
      `${method} ${path.replace(/\?.*$/, '')}`,
    );
    if (res.status === 401 && !opts.quiet401) {
      window.dispatchEvent(new CustomEvent('mnemos:unauthenticated', { detail: err }));
    }
    throw err;
  }
  return data;
}

export const get = (path, q, opts = {}) => api('GET', path, { ...opts, query: q });
export const post = (path, body, opts = {}) => api('POST', path, { ...opts, body });
export const patch = (path, body, opts = {}) => api('PATCH', path, { ...opts, body });
export const del = (path, q, opts = {}) => api('DELETE', path, { ...opts, query: q });

export const enc = encodeURIComponent;

/** A memory by id, with a small cache (for lists that show other memories' text). */
const memoryCache = new Map();
export async function memoryById(agent, id, opts = {}) {
  const k = `${agent}\u0000${id}`;
  if (!opts.fresh && memoryCache.has(k)) return memoryCache.get(k);
  const m = await get(`/v1/memories/${enc(id)}`, { agent_id: agent }, opts);
  memoryCache.set(k, m);
  return m;
}
export function forgetCached(agent, id) {
  memoryCache.delete(`${agent}\u0000${id}`);
}
