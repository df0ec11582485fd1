"use strict";
// Small bar charts drawn as SVG with DOM calls (no library, no inline styles: colours come
// from app.css, so dark mode follows). Each bar carries its value as a <title>, and every
// chart sits beside a table with the same numbers for screen readers and exact values.

(() => {
  const NS = "http://www.w3.org/2000/svg";

  function svg(tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function short(n) {
    if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
    if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
    return String(Math.round(n));
  }

  // Vertical bars over time (one per day): rows [{label, value, note}].
  function columns(rows, description) {
    const width = 720;
    const height = 200;
    const pad = { top: 16, bottom: 28, left: 8, right: 8 };
    const max = Math.max(1, ...rows.map((r) => r.value));
    const step = (width - pad.left - pad.right) / Math.max(rows.length, 1);
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": description });
    chart.append(svg("title", {}, description));
    chart.append(svg("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: height - pad.bottom, y2: height - pad.bottom }));
    rows.forEach((r, i) => {
      const h = ((height - pad.top - pad.bottom) * r.value) / max;
      const x = pad.left + i * step + step * 0.15;
      const bar = svg("rect", { class: "bar", x, y: height - pad.bottom - h, width: step * 0.7, height: Math.max(h, r.value ? 1 : 0), rx: 2 });
      bar.append(svg("title", {}, `${r.label}: ${r.note || short(r.value)}`));
      chart.append(bar);
      const every = Math.ceil(rows.length / 8);
      if (i % every === 0 || i === rows.length - 1) {
        chart.append(svg("text", { x: x + step * 0.35, y: height - 10, "text-anchor": "middle" }, r.label.slice(5)));
      }
    });
    chart.append(svg("text", { class: "value", x: width - pad.right, y: 12, "text-anchor": "end" }, `max ${short(max)}`));
    return chart;
  }

  // Horizontal bars, biggest first: rows [{label, value, note}].
  function bars(rows, description) {
    const shown = rows.slice(0, 10);
    const width = 720;
    const line = 26;
    const labelWidth = 240;
    const height = shown.length * line + 8;
    const max = Math.max(1, ...shown.map((r) => r.value));
    const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": description });
    chart.append(svg("title", {}, description));
    shown.forEach((r, i) => {
      const y = 4 + i * line;
      const w = ((width - labelWidth - 90) * r.value) / max;
      const label = r.label.length > 34 ? `${r.label.slice(0, 33)}…` : r.label;
      chart.append(svg("text", { x: 0, y: y + 16 }, label));
      const bar = svg("rect", { class: "bar", x: labelWidth, y, width: Math.max(w, r.value ? 1 : 0), height: line - 8, rx: 2 });
      bar.append(svg("title", {}, `${r.label}: ${r.note || short(r.value)}`));
      chart.append(bar);
      chart.append(svg("text", { class: "value", x: labelWidth + w + 6, y: y + 16 }, r.note || short(r.value)));
    });
    return chart;
  }

  window.Charts = { columns, bars, short };
})();
