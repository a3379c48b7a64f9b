// Small DOM helpers: element builders, formatters and the shared bits of every page
// (error boxes, empty states, field errors). No framework: pages build their DOM with
// h() and replace it when their data changes.

import { isMissingRoute } from './api.js';

const SVG_NS = 'http://www.w3.org/2000/svg';

function apply(el, attrs) {
  if (!attrs) return;
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'style') throw new Error('inline style attributes are blocked by the CSP; use a class');
    if (key === 'class') el.setAttribute('class', Array.isArray(value) ? value.filter(Boolean).join(' ') : value);
    else if (key === 'testid') el.setAttribute('data-testid', value);
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === 'text') el.textContent = value;
    else if (key === 'value' && 'value' in el) el.value = value;
    else if (key === 'checked' || key === 'selected' || key === 'disabled' || key === 'hidden' || key === 'open') {
      el[key] = Boolean(value);
    } else el.setAttribute(key, value === true ? '' : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** An HTML element: h('a', {href: '#/x', class: 'link'}, 'text', child...). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  // Forms leave validation to the server, whose contract errors show next to the field.
  if (tag === 'form') el.noValidate = true;
  if (attrs instanceof Node || typeof attrs === 'string' || Array.isArray(attrs)) {
    children.unshift(attrs);
    attrs = null;
  }
  apply(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'style') throw new Error('inline style attributes are blocked by the CSP');
      if (key === 'testid') el.setAttribute('data-testid', value);
      else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2).toLowerCase(), value);
      else if (key === 'text') el.textContent = value;
      else el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function replace(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// ---- formatting -------------------------------------------------------------

export function fmtDate(value) {
  if (!value) return '—';
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

export function fmtDay(value) {
  if (!value) return '—';
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
}

/** "3 min ago", "in 5 h". */
export function relTime(value, now = Date.now()) {
  if (!value) return '';
  const t = new Date(value).getTime();
  if (Number.isNaN(t)) return '';
  const diff = (t - now) / 1000;
  const abs = Math.abs(diff);
  const units = [['d', 86400], ['h', 3600], ['min', 60], ['s', 1]];
  let text = 'now';
  for (const [unit, secs] of units) {
    if (abs >= secs) {
      const n = Math.floor(abs / secs);
      text = `${n} ${unit}`;
      break;
    }
  }
  if (text === 'now') return 'just now';
  return diff < 0 ? `${text} ago` : `in ${text}`;
}

export function timeEl(value) {
  if (!value) return h('span', { class: 'muted' }, '—');
  return h('time', { datetime: value, title: value }, fmtDate(value));
}

export function fmtNum(value, digits = 2) {
  if (value === undefined || value === null || Number.isNaN(value)) return '—';
  if (typeof value !== 'number') return String(value);
  if (Number.isInteger(value)) return value.toLocaleString();
  return value.toFixed(digits);
}

export function fmtMs(value) {
  if (value === undefined || value === null) return '—';
  if (value >= 1000) return `${(value / 1000).toFixed(2)} s`;
  if (value >= 10) return `${value.toFixed(0)} ms`;
  return `${value.toFixed(2)} ms`;
}

export function truncate(text, n = 140) {
  if (!text) return '';
  const t = String(text).replace(/\s+/g, ' ').trim();
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
}

export function shortId(id) {
  if (!id) return '';
  return id.length > 12 ? `…${id.slice(-8)}` : id;
}

/** datetime-local value → RFC 3339 (UTC), or '' */
export function localToRfc3339(value) {
  if (!value) return '';
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

/** RFC 3339 → datetime-local value (local time), or '' */
export function rfc3339ToLocal(value) {
  if (!value) return '';
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// ---- shared pieces ------------------------------------------------------------

export const MEMORY_TYPES = ['working', 'episodic', 'affective', 'semantic', 'procedural'];
export const MEMORY_STATUSES = ['active', 'superseded', 'stale', 'archived'];

export function typeBadge(type) {
  return h('span', { class: `badge badge-type type-${type || 'unknown'}` }, type || '?');
}

export function statusBadge(status) {
  return h('span', { class: `badge badge-status status-${status || 'unknown'}` }, status || '?');
}

/** A 0..1 value as a small bar and its number. */
export function meter(value, { label, testid } = {}) {
  const v = typeof value === 'number' ? Math.max(0, Math.min(1, value)) : null;
  const fill = h('span', { class: 'meter-fill' });
  if (v !== null) fill.style.width = `${(v * 100).toFixed(1)}%`;
  return h('span', { class: 'meter', title: label ? `${label}: ${fmtNum(value, 3)}` : undefined, testid },
    h('span', { class: 'meter-track' }, fill),
    h('span', { class: 'meter-num' }, v === null ? '—' : v.toFixed(2)));
}

export function pageHeader(title, subtitle, ...actions) {
  return h('div', { class: 'page-head' },
    h('div', null, h('h1', { tabindex: '-1', class: 'page-title' }, title), subtitle ? h('p', { class: 'muted page-sub' }, subtitle) : null),
    actions.length ? h('div', { class: 'page-actions' }, actions) : null);
}

export function card(title, body, { testid, actions, cls } = {}) {
  return h('section', { class: ['card', cls], testid, 'aria-label': typeof title === 'string' ? title : undefined },
    title ? h('div', { class: 'card-head' }, h('h2', null, title), actions ? h('div', { class: 'card-actions' }, actions) : null) : null,
    h('div', { class: 'card-body' }, body));
}

export function emptyState(title, hint, testid = 'empty') {
  return h('div', { class: 'empty', testid }, h('p', { class: 'empty-title' }, title), hint ? h('p', { class: 'muted' }, hint) : null);
}

export function loading(text = 'Loading…') {
  return h('div', { class: 'loading', role: 'status', 'aria-live': 'polite' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), text);
}

/** "This server has no such route yet" note for a feature the server lacks. */
export function notAvailable(what, testid = 'not-available') {
  return h('div', { class: 'note note-warn', testid, role: 'note' },
    h('strong', null, 'Not available on this server: '), what,
    h('span', { class: 'muted' }, ' (the server answered "no such route"; update mnemos to get it).'));
}

/** An error box for an API (or any) error. */
export function errorBox(err, testid = 'error') {
  if (isMissingRoute(err)) return notAvailable(err.route || 'this view', testid === 'error' ? 'not-available' : testid);
  const box = h('div', { class: 'error-box', role: 'alert', testid });
  box.append(h('strong', null, err && err.code ? `${err.code}: ` : 'Error: '), err && err.message ? err.message : String(err));
  if (err && err.field) box.append(h('span', { class: 'muted' }, ` (field: ${err.field})`));
  return box;
}

/**
 * Shows an API error next to the form field it names (`[name=field]`, or a
 * `[data-field=…]` element), else at the top of the form in `.form-error`.
 * Returns true when it was placed next to a field.
 */
export function showFormError(form, err) {
  clearFormErrors(form);
  const field = err && err.field ? String(err.field) : '';
  let target = null;
  if (field) {
    const base = field.replace(/\[\d+\].*$/, '').split('.')[0];
    target = form.querySelector(`[data-field="${CSS.escape(field)}"]`) ||
      form.querySelector(`[name="${CSS.escape(field)}"]`) ||
      form.querySelector(`[data-field="${CSS.escape(base)}"]`) ||
      form.querySelector(`[name="${CSS.escape(base)}"]`);
  }
  if (target && !isMissingRoute(err)) {
    const id = `err-${Math.random().toString(36).slice(2, 8)}`;
    const msg = h('div', { class: 'field-error', id, role: 'alert', testid: 'field-error', 'data-for': field }, err.message);
    const anchor = target.closest('.field') || target;
    anchor.append(msg);
    target.setAttribute('aria-invalid', 'true');
    target.setAttribute('aria-describedby', id);
    return true;
  }
  const top = form.querySelector('.form-error');
  if (top) {
    top.hidden = false;
    replace(top, errorBox(err));
  } else {
    form.prepend(h('div', { class: 'form-error' }, errorBox(err)));
  }
  return false;
}

export function clearFormErrors(form) {
  form.querySelectorAll('.field-error').forEach((e) => e.remove());
  form.querySelectorAll('[aria-invalid]').forEach((e) => { e.removeAttribute('aria-invalid'); e.removeAttribute('aria-describedby'); });
  form.querySelectorAll('.form-error').forEach((e) => { clear(e); e.hidden = true; });
}

/** A labelled form field. `control` is an input/select/textarea element with an id. */
export function field(label, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    control,
    hint ? h('div', { class: 'hint muted small' }, hint) : null);
}

export function select(name, options, value, attrs = {}) {
  const el = h('select', { name, ...attrs });
  for (const opt of options) {
    const [v, text] = Array.isArray(opt) ? opt : [opt, opt];
    el.append(h('option', { value: v, selected: v === value }, text));
  }
  return el;
}

/** A link to a route, keeping the current agent. */
export function link(href, text, attrs = {}) {
  return h('a', { href, ...attrs }, text);
}

/** A key/value list: pairs of [label, value-node-or-text]. */
export function kvList(pairs, testid) {
  const dl = h('dl', { class: 'kv', testid });
  for (const [k, v] of pairs) {
    if (v === undefined) continue;
    dl.append(h('dt', null, k), h('dd', null, v === null || v === '' ? h('span', { class: 'muted' }, '—') : v));
  }
  return dl;
}

/** A transient message at the bottom of the screen. */
export function toast(text, kind = 'ok') {
  let host = document.getElementById('toasts');
  if (!host) {
    host = h('div', { id: 'toasts', class: 'toasts', 'aria-live': 'polite' });
    document.body.append(host);
  }
  const t = h('div', { class: `toast toast-${kind}`, role: 'status', testid: 'toast' }, text);
  host.append(t);
  setTimeout(() => t.remove(), 4000);
}

/** Runs `fn` over `items` with at most `n` at a time; keeps order. */
export async function mapLimit(items, n, fn) {
  const out = new Array(items.length);
  let i = 0;
  const workers = Array.from({ length: Math.min(n, items.length) }, async () => {
    while (i < items.length) {
      const k = i++;
      try { out[k] = await fn(items[k], k); } catch (e) { out[k] = e; }
    }
  });
  await Promise.all(workers);
  return out;
}
