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

  // What the cost shown rests on. A call is priced when it is made: a price set later
  // prices the calls after it, so "no price" is said of the models in use now, and calls
  // made before their price are told apart from models that have none.
  function priceNote(data) {
    const missing = data.unpriced.length
      ? ` ${data.unpriced.join(", ")} ${data.unpriced.length === 1 ? "has" : "have"} no price: add ${data.unpriced.length === 1 ? "it" : "them"} under [llm.prices] in Settings for cost estimates.`
      : "";
    if (data.priced) return `Each call's cost at the prices when it was made ([llm.prices] over the shipped table); a model without a price counts as free.${missing}`;
    if (!data.by_day.length) return `Nothing used yet.${missing || " Each call's cost will be counted at its model's price when it is made."}`;
    if (!missing) return "The calls so far were made before their model had a price, so they have no cost; the calls from now on are priced.";
    return missing.trim();
  }

  section({
    load: async (content) => {
      const data = await api("/api/usage");
      const total = data.by_day.reduce((sum, r) => sum + tokens(r), 0);
      const cost = data.by_day.reduce((sum, r) => sum + (r.cost || 0), 0);
      const chartRows = (rows) => rows.map((r) => ({ label: r.label, value: tokens(r), note: note(r) }));
      fill(content,
        el(
          "div",
          { class: "card" },
          el(
            "dl",
            { class: "facts" },
            el("dt", {}, `Tokens in the last ${data.days} days`), el("dd", {}, number(total)),
            el("dt", {}, "Estimated cost"), el("dd", {}, data.priced ? money(cost) : "—"),
          ),
          el("p", { class: "hint" }, priceNote(data), data.by_day.some((r) => r.estimated_tokens) ? " ≈: counted by Switchboard where the model's server reported no usage." : ""),
        ),
        data.caps.length
          ? el(
              "section",
              { class: "card", "aria-labelledby": "caps" },
              el("h3", { id: "caps" }, "Spend limits"),
              el(
                "ul",
                { class: "caps" },
                ...data.caps.map((c) => {
                  const share = c.limit > 0 ? Math.min(c.spent / c.limit, 1) : 1;
                  return el(
                    "li",
                    {},
                    el("span", { class: "cap-key" }, c.key),
                    el("meter", { min: "0", max: "1", value: String(share), "aria-label": `${c.key}: ${money(c.spent)} of ${money(c.limit)}` }),
                    el("span", {}, `${money(c.spent)} of ${money(c.limit)}, resets ${new Date(c.resets_at * 1000).toLocaleString()}`),
                  );
                }),
              ),
            )
          : null,
        block("per-day", "Per day", days(chartRows(data.by_day), data.days, `Tokens per day, last ${data.days} days`, data.today), rowsTable("Day", data.by_day)),
        el(
          "div",
          { class: "grid wide" }, // wide enough for each table's five columns
          block("per-person", "Per person", bars(chartRows(data.by_person), "Tokens per person"), rowsTable("Person", data.by_person)),
          block("per-model", "Per model", bars(chartRows(data.by_model), "Tokens per model"), rowsTable("Model", data.by_model)),
          block("per-agent", "Per agent", bars(chartRows(data.by_agent), "Tokens per agent"), rowsTable("Agent", data.by_agent)),
        ),
        block("per-chat", "Per conversation", bars(chartRows(data.by_chat), "Tokens per conversation"), rowsTable("Conversation", data.by_chat)),
      );
    },
  });
})();
