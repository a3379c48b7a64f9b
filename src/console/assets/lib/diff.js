// A word-level diff (longest common subsequence over words and the spaces between
// them), for the version history of a memory.

import { h } from './dom.js';

function tokens(text) {
  return String(text || '').split(/(\s+)/).filter((t) => t !== '');
}

/**
 * The edit script from `a` to `b`: [{op: 'eq'|'del'|'ins', text}], adjacent parts of
 * the same kind merged.
 */
export function wordDiff(a, b) {
  const x = tokens(a);
  const y = tokens(b);
  // Trim the common prefix and suffix: most edits touch a few words.
  let start = 0;
  while (start < x.length && start < y.length && x[start] === y[start]) start++;
  let endX = x.length;
  let endY = y.length;
  while (endX > start && endY > start && x[endX - 1] === y[endY - 1]) { endX--; endY--; }
  const mx = x.slice(start, endX);
  const my = y.slice(start, endY);
  const parts = [];
  const push = (op, text) => {
    const last = parts[parts.length - 1];
    if (last && last.op === op) last.text += text; else parts.push({ op, text });
  };
  if (start) push('eq', x.slice(0, start).join(''));
  const n = mx.length;
  const m = my.length;
  if (n * m > 4_000_000) {
    // Too large for the table: show it as one replacement.
    if (n) push('del', mx.join(''));
    if (m) push('ins', my.join(''));
  } else if (n || m) {
    // lcs[i][j] = LCS length of mx[i..] and my[j..], in one flat array.
    const w = m + 1;
    const lcs = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i * w + j] = mx[i] === my[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n && j < m) {
      if (mx[i] === my[j]) { push('eq', mx[i]); i++; j++; } else if (lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) { push('del', mx[i]); i++; } else { push('ins', my[j]); j++; }
    }
    while (i < n) push('del', mx[i++]);
    while (j < m) push('ins', my[j++]);
  }
  if (endX < x.length) push('eq', x.slice(endX).join(''));
  return parts;
}

/** The diff as a <p> with <ins>/<del>. */
export function diffView(a, b, testid = 'diff') {
  const parts = wordDiff(a, b);
  const el = h('p', { class: 'diff', testid });
  if (!parts.some((p) => p.op !== 'eq')) {
    el.append(h('span', { class: 'muted' }, '(content unchanged) '), String(b || ''));
    return el;
  }
  for (const p of parts) {
    if (p.op === 'eq') el.append(p.text);
    else if (p.op === 'ins') el.append(h('ins', { title: 'added' }, p.text));
    else el.append(h('del', { title: 'removed' }, p.text));
  }
  return el;
}
