// Small SVG and CSS charts: a line chart (retention curve), horizontal bars (stage
// timings, counters) and a stacked bar (tokens by section). Widths are set through
// the CSSOM (el.style.width), which the CSP allows, never as style attributes.

import { h, s, fmtDay, fmtMs, fmtNum } from './dom.js';

/**
 * A line chart of points [{x: Date|number, y: number}], y in [yMin, yMax].
 * opts: {yMin, yMax, yLabel, testid, marker: x value for a "now" line, xFormat}
 */
export function lineChart(points, opts = {}) {
  const W = opts.width || 440;
  const H = opts.height || 210;
  const pad = { l: 42, r: 14, t: 12, b: 28 };
  const yMin = opts.yMin ?? 0;
  const yMax = opts.yMax ?? 1;
  const xs = points.map((p) => +p.x);
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const sx = (x) => pad.l + (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0)) * (W - pad.l - pad.r);
  const sy = (y) => pad.t + (1 - (Math.max(yMin, Math.min(yMax, y)) - yMin) / (yMax - yMin)) * (H - pad.t - pad.b);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': opts.label || 'line chart', testid: opts.testid });
  // Grid and y ticks.
  for (let i = 0; i <= 4; i++) {
    const y = yMin + ((yMax - yMin) * i) / 4;
    svg.append(
      s('line', { class: 'grid', x1: pad.l, x2: W - pad.r, y1: sy(y), y2: sy(y) }),
      s('text', { class: 'tick', x: pad.l - 6, y: sy(y) + 4, 'text-anchor': 'end' }, opts.yFormat ? opts.yFormat(y) : y.toFixed(2)),
    );
  }
  svg.append(s('line', { class: 'axis', x1: pad.l, x2: W - pad.r, y1: H - pad.b, y2: H - pad.b }));
  // X ticks: up to 6 evenly spaced labels.
  const fmt = opts.xFormat || ((x) => fmtDay(new Date(x)));
  const nTicks = Math.min(6, points.length);
  for (let i = 0; i < nTicks; i++) {
    const x = x0 + ((x1 - x0) * i) / Math.max(1, nTicks - 1);
    svg.append(s('text', { class: 'tick', x: sx(x), y: H - 8, 'text-anchor': i === 0 ? 'start' : i === nTicks - 1 ? 'end' : 'middle' }, fmt(x)));
  }
  if (points.length) {
    const d = points.map((p, i) => `${i ? 'L' : 'M'}${sx(+p.x).toFixed(1)},${sy(p.y).toFixed(1)}`).join(' ');
    const area = `${d} L${sx(+points[points.length - 1].x).toFixed(1)},${sy(yMin)} L${sx(+points[0].x).toFixed(1)},${sy(yMin)} Z`;
    svg.append(s('path', { class: 'area', d: area }), s('path', { class: 'line', d }));
    for (const p of points) {
      svg.append(s('circle', { class: 'pt', cx: sx(+p.x), cy: sy(p.y), r: 2.2 },
        s('title', null, `${new Date(+p.x).toLocaleString()}: ${p.y.toFixed(3)}`)));
    }
  }
  if (opts.marker !== undefined && +opts.marker >= x0 && +opts.marker <= x1) {
    const mx = sx(+opts.marker);
    svg.append(s('line', { class: 'now-line', x1: mx, x2: mx, y1: pad.t, y2: H - pad.b }),
      s('text', { class: 'tick', x: mx + 4, y: pad.t + 10 }, opts.markerLabel || 'now'));
  }
  return svg;
}

/**
 * Horizontal bars: rows [{label, value, title?}]; opts {format, testid, max}.
 */
export function hbars(rows, opts = {}) {
  const max = opts.max ?? Math.max(1e-9, ...rows.map((r) => r.value || 0));
  const fmt = opts.format || ((v) => fmtNum(v));
  const box = h('div', { class: 'bars', testid: opts.testid, role: 'list' });
  for (const r of rows) {
    const fill = h('span', { class: `bar-fill ${r.cls || ''}` });
    fill.style.width = `${Math.max(0, Math.min(100, ((r.value || 0) / max) * 100)).toFixed(1)}%`;
    box.append(h('div', { class: 'bar-row', role: 'listitem', 'data-label': r.label, title: r.title || `${r.label}: ${fmt(r.value)}` },
      h('span', { class: 'bar-label' }, r.label),
      h('span', { class: 'bar-track' }, fill),
      h('span', { class: 'bar-val' }, fmt(r.value))));
  }
  return box;
}

export const msBars = (timings, testid) => hbars(
  Object.entries(timings || {}).map(([label, value]) => ({ label, value: Number(value) || 0 })),
  { format: fmtMs, testid },
);

/**
 * A stacked bar of parts [{label, value}] out of `total` (the remainder shown empty),
 * with a legend.
 */
export function stackBar(parts, total, opts = {}) {
  const sum = parts.reduce((a, p) => a + (p.value || 0), 0);
  const whole = Math.max(total || 0, sum, 1);
  const bar = h('div', { class: 'stackbar', role: 'img', 'aria-label': opts.label || 'stacked bar', testid: opts.testid });
  const legend = h('div', { class: 'legend' });
  parts.forEach((p, i) => {
    const seg = h('span', { class: `c${i % 8}`, title: `${p.label}: ${fmtNum(p.value)}${opts.unit ? ` ${opts.unit}` : ''}` });
    seg.style.width = `${((p.value || 0) / whole) * 100}%`;
    bar.append(seg);
    legend.append(h('span', { class: 'legend-item', 'data-section': p.label },
      h('span', { class: `swatch c${i % 8}` }), `${p.label} `, h('strong', null, fmtNum(p.value)), opts.unit ? ` ${opts.unit}` : '', p.extra ? h('span', { class: 'muted' }, ` · ${p.extra}`) : ''));
  });
  if (total && total > sum) {
    legend.append(h('span', { class: 'legend-item' }, h('span', { class: 'swatch cfree', title: 'unused' }), 'unused ', h('strong', null, fmtNum(total - sum))));
  }
  return h('div', null, bar, legend);
}
