// A small force-directed layout: pairwise repulsion, springs along edges, a pull to
// the centre, velocity decay. O(n²) per step, which for the console's neighbourhoods
// (≤ a few hundred nodes) is a few milliseconds: the page lays out synchronously
// before the first paint, then animates only while the user drags.

export class ForceLayout {
  /**
   * nodes: [{id, depth?, r?}] (x/y are added), edges: [{source: index, target: index, weight?}]
   */
  constructor(nodes, edges, { width = 800, height = 600, linkDistance = 70, charge = 900, gravity = 0.004 } = {}) {
    this.gravity = gravity;
    this.nodes = nodes;
    this.edges = edges;
    this.width = width;
    this.height = height;
    this.linkDistance = linkDistance;
    this.charge = charge;
    this.alpha = 1;
    this.degree = new Uint16Array(nodes.length);
    for (const e of edges) { this.degree[e.source]++; this.degree[e.target]++; }
    this.seedPositions();
  }

  /** Rings by depth (the seed in the middle), spread by the golden angle. */
  seedPositions() {
    const cx = this.width / 2;
    const cy = this.height / 2;
    const golden = Math.PI * (3 - Math.sqrt(5));
    const byDepth = new Map();
    this.nodes.forEach((n, i) => {
      const d = n.depth ?? 1;
      if (!byDepth.has(d)) byDepth.set(d, []);
      byDepth.get(d).push(i);
    });
    for (const [depth, idx] of byDepth) {
      idx.forEach((i, k) => {
        const n = this.nodes[i];
        if (depth === 0 && idx.length === 1) { n.x = cx; n.y = cy; } else {
          const radius = this.linkDistance * (depth || 0.5) * (1 + k / Math.max(8, idx.length) * 0.6);
          const angle = k * golden + depth;
          n.x = cx + radius * Math.cos(angle);
          n.y = cy + radius * Math.sin(angle);
        }
        n.vx = 0;
        n.vy = 0;
      });
    }
  }

  /** One step at the current alpha. */
  step() {
    const nodes = this.nodes;
    const n = nodes.length;
    const alpha = this.alpha;
    const charge = this.charge * alpha;
    // Repulsion between every pair (softened at short range).
    for (let i = 0; i < n; i++) {
      const a = nodes[i];
      for (let j = i + 1; j < n; j++) {
        const b = nodes[j];
        let dx = b.x - a.x;
        let dy = b.y - a.y;
        let d2 = dx * dx + dy * dy;
        if (d2 < 1e-4) { dx = (Math.random() - 0.5) * 0.1; dy = (Math.random() - 0.5) * 0.1; d2 = dx * dx + dy * dy; }
        if (d2 > 250000) continue; // beyond 500 px: negligible
        const f = charge / (d2 + 25);
        const d = Math.sqrt(d2);
        const fx = (dx / d) * f;
        const fy = (dy / d) * f;
        a.vx -= fx; a.vy -= fy;
        b.vx += fx; b.vy += fy;
      }
    }
    // Springs.
    for (const e of this.edges) {
      const a = nodes[e.source];
      const b = nodes[e.target];
      const dx = b.x - a.x;
      const dy = b.y - a.y;
      const d = Math.sqrt(dx * dx + dy * dy) || 0.01;
      const rest = this.linkDistance * (1.2 - 0.4 * Math.min(1, e.weight ?? 0.5));
      const bias = this.degree[e.source] / (this.degree[e.source] + this.degree[e.target]);
      const k = ((d - rest) / d) * alpha * 0.25;
      a.vx += dx * k * (1 - bias); a.vy += dy * k * (1 - bias);
      b.vx -= dx * k * bias; b.vy -= dy * k * bias;
    }
    // Gravity to the centre, then integrate with decay.
    const cx = this.width / 2;
    const cy = this.height / 2;
    for (const p of nodes) {
      p.vx += (cx - p.x) * this.gravity * alpha;
      p.vy += (cy - p.y) * this.gravity * alpha;
      if (p.fixed) { p.vx = 0; p.vy = 0; continue; }
      p.vx *= 0.6;
      p.vy *= 0.6;
      p.x += p.vx;
      p.y += p.vy;
    }
    this.alpha *= 0.985;
  }

  /** Runs `n` steps now. */
  run(n) {
    for (let i = 0; i < n; i++) this.step();
  }

  /** The bounding box of the nodes: {x0, y0, x1, y1}. */
  bounds(pad = 20) {
    let x0 = Infinity; let y0 = Infinity; let x1 = -Infinity; let y1 = -Infinity;
    for (const p of this.nodes) {
      const r = p.r || 6;
      x0 = Math.min(x0, p.x - r); y0 = Math.min(y0, p.y - r);
      x1 = Math.max(x1, p.x + r); y1 = Math.max(y1, p.y + r);
    }
    if (!Number.isFinite(x0)) return { x0: 0, y0: 0, x1: this.width, y1: this.height };
    return { x0: x0 - pad, y0: y0 - pad, x1: x1 + pad, y1: y1 + pad };
  }
}
