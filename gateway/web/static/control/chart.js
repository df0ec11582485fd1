"use strict";
// Small bar charts: the bars are SVG drawn with DOM calls, the words beside them are HTML
// (so they stay readable at any width). No library and no inline styles: colours come from
// app.css, so dark mode follows. Every bar carries its value as a <title>, and every chart
// has the same numbers in a table beside it for screen readers and exact values.

(() => {
  const NS = "http://www.w3.org/2000/svg";
  const { el } = window.Control;

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

  // One column per day over the whole period (days without use are empty): rows
  // [{label: "YYYY-MM-DD", value, note}], days: how many, ending on today ("YYYY-MM-DD",
  // the owner's day as the server counts it, not the browser's).
  function days(rows, count, description, today) {
    const byDay = new Map(rows.map((r) => [r.label, r]));
    const all = [];
    const [year, month, date] = today.split("-").map(Number);
    for (let i = count - 1; i >= 0; i--) {
      const day = new Date(Date.UTC(year, month - 1, date - i)); // calendar days, no zone
      const label = day.toISOString().slice(0, 10);
      all.push(byDay.get(label) || { label, value: 0, note: "nothing" });
    }
    const highest = Math.max(0, ...all.map((r) => r.value));
    const max = Math.max(1, highest); // the scale of the bars
    const chart = svg("svg", { viewBox: `0 0 ${all.length * 10} 100`, preserveAspectRatio: "none", class: "chart columns", role: "img", "aria-label": description });
    chart.append(svg("title", {}, description));
    chart.append(svg("line", { class: "axis", x1: 0, x2: all.length * 10, y1: 99.5, y2: 99.5 }));
    all.forEach((r, i) => {
      const h = (96 * r.value) / max;
      const bar = svg("rect", { class: "bar", x: i * 10 + 1.5, y: 100 - h, width: 7, height: h });
      bar.append(svg("title", {}, `${r.label}: ${r.note || short(r.value)}`));
      chart.append(bar);
    });
    return el(
      "figure",
      { class: "chart" },
      el("p", { class: "hint axis-top" }, highest ? `highest: ${short(highest)} ${highest === 1 ? "token" : "tokens"} a day` : "nothing used on these days"),
      chart,
      el("p", { class: "hint axis-bottom" }, el("span", {}, all[0].label), el("span", {}, all[all.length - 1].label)),
    );
  }

  // Horizontal bars, biggest first: rows [{label, value, note}].
  function bars(rows, description) {
    const shown = rows.slice(0, 10);
    const max = Math.max(1, ...shown.map((r) => r.value));
    return el(
      "ol",
      { class: "hbars", "aria-label": description },
      shown.map((r) => {
        const bar = svg("svg", { viewBox: "0 0 100 4", preserveAspectRatio: "none", class: "chart", "aria-hidden": "true" });
        bar.append(svg("rect", { class: "bar", x: 0, y: 0, width: Math.max((100 * r.value) / max, r.value ? 0.5 : 0), height: 4 }));
        return el("li", {}, el("span", { class: "label" }, r.label), el("span", { class: "value" }, r.note || short(r.value)), bar);
      }),
    );
  }

  window.Charts = { days, bars, short };
})();
