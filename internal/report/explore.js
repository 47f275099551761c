// The run page's interactive chart: the time series of every step, drawn as
// inline SVG from the JSON in #explore-data. Hover shows each step's values
// at that instant; drag across the plot zooms into that time span;
// double-click shows the whole run again.
(function () {
  const box = document.getElementById("explore");
  const data = JSON.parse(document.getElementById("explore-data").textContent);
  if (!box || !data.length) return;
  const NS = "http://www.w3.org/2000/svg";
  const W = 1200, H = 420, L = 70, R = 20, T = 20, B = 40;
  const colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
  const metrics = {
    rate: { label: "deliveries / s", col: 1, log: false, fmt: v => Math.round(v).toLocaleString("en") + "/s" },
    p99: { label: "p99 latency (ms, log scale)", col: 2, log: true, fmt: v => (v >= 1000 ? (v / 1000).toPrecision(3) + " s" : v.toPrecision(3) + " ms") },
  };
  let metric = metrics.rate;
  const all = data.flatMap(s => s.points.map(p => p[0]));
  const full = [Math.min(...all), Math.max(...all)];
  let span = full.slice();

  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "explore");
  box.appendChild(svg);
  const tip = document.createElement("div");
  tip.className = "tip";
  box.appendChild(tip);
  const el = (name, attrs, text) => {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };

  // nice returns round tick values from lo to at least hi, about n of them.
  function nice(lo, hi, n) {
    const raw = (hi - lo) / n || 1;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }
  const short = v => v >= 1e6 ? +(v / 1e6).toPrecision(3) + "M" : v >= 1e4 ? +(v / 1e3).toPrecision(3) + "k" : String(v);

  // yRange returns the axis of the visible values: from 0, or whole decades.
  function yRange() {
    const vs = data.flatMap(s => s.points.filter(p => p[0] >= span[0] && p[0] <= span[1]).map(p => p[metric.col]))
      .filter(v => v !== null && (!metric.log || v > 0));
    if (!vs.length) return null;
    const hi = Math.max(...vs);
    if (!metric.log) { const t = nice(0, hi > 0 ? hi * 1.1 : 1, 5); return [0, t[t.length - 1]]; }
    return [Math.pow(10, Math.floor(Math.log10(Math.min(...vs)))), Math.pow(10, Math.ceil(Math.log10(hi * 1.0001)))];
  }

  function draw() {
    svg.textContent = "";
    const yr = yRange();
    const x = t => L + (t - span[0]) / (span[1] - span[0] || 1) * (W - L - R);
    const y = metric.log
      ? v => H - B - (Math.log10(v) - Math.log10(yr[0])) / (Math.log10(yr[1]) - Math.log10(yr[0])) * (H - T - B)
      : v => H - B - (v - yr[0]) / (yr[1] - yr[0]) * (H - T - B);
    el("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff", stroke: "#ccc" });
    el("text", { x: 14, y: H / 2, transform: `rotate(-90 14 ${H / 2})`, "text-anchor": "middle", "font-size": 13 }, metric.label);
    el("text", { x: (W + L) / 2, y: H - 6, "text-anchor": "middle", "font-size": 13 }, "seconds since the start of the run");
    if (!yr) {
      el("text", { x: (W + L) / 2, y: H / 2, "text-anchor": "middle" }, "no data in this span");
      return;
    }
    const ticks = [];
    if (metric.log) for (let v = yr[0]; v <= yr[1] * 1.0001; v *= 10) ticks.push(v);
    else ticks.push(...nice(yr[0], yr[1], 5));
    for (const v of ticks) {
      el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee" });
      el("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 12 }, metric.log ? String(+v.toPrecision(3)) : short(v));
    }
    for (const t of nice(span[0], span[1], 8)) {
      el("line", { x1: x(t), x2: x(t), y1: H - B, y2: H - B + 5, stroke: "#999" });
      el("text", { x: x(t), y: H - B + 18, "text-anchor": "middle", "font-size": 12 }, String(t));
    }
    data.forEach((s, k) => {
      let d = "";
      for (const p of s.points) {
        const v = p[metric.col];
        if (p[0] < span[0] || p[0] > span[1] || v === null || (metric.log && v <= 0)) { d += " "; continue; }
        d += (d === "" || d.endsWith(" ") ? "M" : "L") + x(p[0]).toFixed(1) + "," + y(v).toFixed(1);
      }
      el("path", { d: d.trim().replace(/ +/g, " "), fill: "none", stroke: colors[k % colors.length], "stroke-width": 2, "data-step": s.step });
      el("text", { x: W - R - 6, y: T + 16 + 16 * k, "text-anchor": "end", fill: colors[k % colors.length], "font-size": 13 },
        s.step + (s.saturated ? " (saturated)" : ""));
    });
    svg.onmousemove = ev => {
      const r = svg.getBoundingClientRect();
      const px = (ev.clientX - r.left) / r.width * W;
      const t = span[0] + (px - L) / (W - L - R) * (span[1] - span[0]);
      const rows = [];
      data.forEach(s => {
        let best = null;
        for (const p of s.points) if (best === null || Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
        if (best && Math.abs(best[0] - t) <= 1.5 && best[metric.col] !== null)
          rows.push(`${s.step} @ ${best[0].toFixed(1)} s: ${metric.fmt(best[metric.col])}`);
      });
      tip.textContent = rows.join("\n");
      tip.style.display = rows.length ? "block" : "none";
      tip.style.left = (ev.clientX - box.getBoundingClientRect().left + 14) + "px";
      tip.style.top = (ev.clientY - box.getBoundingClientRect().top + 14) + "px";
    };
    svg.onmouseleave = () => { tip.style.display = "none"; };
  }

  // Zoom: drag across the plot; double-click for the whole run.
  let from = null;
  const timeAt = ev => {
    const r = svg.getBoundingClientRect();
    return span[0] + (((ev.clientX - r.left) / r.width * W) - L) / (W - L - R) * (span[1] - span[0]);
  };
  svg.addEventListener("mousedown", ev => { from = timeAt(ev); ev.preventDefault(); });
  svg.addEventListener("mouseup", ev => {
    if (from === null) return;
    const to = timeAt(ev);
    if (Math.abs(to - from) > (span[1] - span[0]) / 100) span = [Math.max(full[0], Math.min(from, to)), Math.min(full[1], Math.max(from, to))];
    from = null;
    draw();
  });
  svg.addEventListener("dblclick", () => { span = full.slice(); draw(); });
  document.querySelectorAll("#explore-metric button").forEach(b => b.addEventListener("click", () => {
    metric = metrics[b.dataset.metric];
    draw();
  }));
  window.exploreZoom = (a, b) => { span = [a, b]; draw(); }; // for tests and the console
  draw();
})();
