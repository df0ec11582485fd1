"use strict";
// Usage and cost: tokens per day, person, conversation and model over the last 30 days, as
// charts with the same numbers in tables below them; cost estimated from the prices in [llm].

(() => {
  const { el, fill, number, money, table, api, section } = window.Control;
  const { days, bars, short } = window.Charts;

  const tokens = (r) => r.input_tokens + r.output_tokens;
  const about = (r) => (r.estimated_tokens ? "≈ " : "");

  function costCell(r) {
    if (r.cost === null || r.cost === undefined) return "—";
    return `${money(r.cost)}${r.cost_incomplete ? " +" : ""}`;
  }

  function rowsTable(label, rows) {
    return table(
      [label, { label: "Turns", num: true }, { label: "Input tokens", num: true }, { label: "Output tokens", num: true }, { label: "Est. cost", num: true }],
      rows.map((r) => [r.label, number(r.turns), about(r) + number(r.input_tokens), about(r) + number(r.output_tokens), costCell(r)]),
      { empty: "Nothing used yet." },
    );
  }

  function block(id, title, chart, tableNode) {
    return el("section", { class: "card", "aria-labelledby": id }, el("h3", { id }, title), chart, el("details", {}, el("summary", {}, "The numbers"), tableNode));
  }

  function note(r) {
    return `${short(tokens(r))} tokens${r.cost !== null && r.cost !== undefined ? `, ${money(r.cost)}` : ""}`;
  }

  section({
    load: async (content) => {
      const data = await api("/api/usage");
      const total = data.by_day.reduce((sum, r) => sum + tokens(r), 0);
      const cost = data.by_day.reduce((sum, r) => sum + (r.cost || 0), 0);
      const priced = data.priced.length > 0;
      const chartRows = (rows) => rows.map((r) => ({ label: r.label, value: tokens(r), note: note(r) }));
      fill(content,
        el(
          "div",
          { class: "card" },
          el(
            "dl",
            { class: "facts" },
            el("dt", {}, `Tokens in the last ${data.days} days`), el("dd", {}, number(total)),
            el("dt", {}, "Estimated cost"), el("dd", {}, priced ? money(cost) : "—"),
          ),
          el(
            "p",
            { class: "hint" },
            priced
              ? `Cost uses the prices set in [llm] for ${data.priced.join(", ")}; other models' tokens are counted without a price (+).`
              : "Set llm.input_price_per_million and llm.output_price_per_million in Settings for cost estimates.",
            data.by_day.some((r) => r.estimated_tokens) ? " ≈: counted by Switchboard where the model's server reported no usage." : "",
          ),
        ),
        block("per-day", "Per day", days(chartRows(data.by_day), data.days, `Tokens per day, last ${data.days} days`), rowsTable("Day", data.by_day)),
        el(
          "div",
          { class: "grid" },
          block("per-person", "Per person", bars(chartRows(data.by_person), "Tokens per person"), rowsTable("Person", data.by_person)),
          block("per-model", "Per model", bars(chartRows(data.by_model), "Tokens per model"), rowsTable("Model", data.by_model)),
        ),
        block("per-chat", "Per conversation", bars(chartRows(data.by_chat), "Tokens per conversation"), rowsTable("Conversation", data.by_chat)),
      );
    },
  });
})();
