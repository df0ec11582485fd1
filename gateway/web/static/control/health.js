"use strict";
// Health: channels, models, the store, the nodes of a cluster and the last error, each with
// what to do when something is wrong; the work in progress and the latest turns with traces.

(() => {
  const { el, fill, ago, when, number, timeEl, table, state, api, section } = window.Control;

  function advice(text) {
    return text ? el("p", { class: "advice" }, text) : null;
  }

  function connection(value) {
    if (value === null) return state("unknown", "no report");
    return value ? state("open", "connected") : state("closed", "disconnected");
  }

  function channels(data) {
    return table(
      ["Channel", "State", "Last message", "Last error"],
      data.channels.map((c) => [
        el("span", {}, el("strong", {}, c.name), el("br"), el("small", { class: "muted" }, c.detail || "")),
        connection(c.connected),
        c.last_message_at ? timeEl(c.last_message_at) : el("span", { class: "muted" }, "none yet"),
        el("span", {}, c.last_error || "—", advice(c.advice)),
      ]),
      { caption: "Channels" },
    );
  }

  function models(data) {
    const now = Date.now() / 1000;
    return table(
      ["Model", "Configured in", "State", "Last answer", "Last error"],
      data.models.map((m) => [
        el("span", { title: m.label }, m.name),
        m.settings.join(", "),
        m.cooling_until && m.cooling_until > now
          ? state("closed", `cooling down until ${when(m.cooling_until)}`)
          : state("open", m.answered_last ? "answered last" : "ready"),
        m.last_answer_at ? timeEl(m.last_answer_at) : el("span", { class: "muted" }, "none yet"),
        el("span", {}, m.last_error || "—", advice(m.advice)),
      ]),
      { caption: "Models" },
    );
  }

  function store(data) {
    const s = data.store;
    const w = data.work;
    return el(
      "section",
      { class: "card", "aria-labelledby": "store-title" },
      el("h3", { id: "store-title" }, "Store and work ", state(s.ok ? "open" : "closed", s.ok ? "answering" : "in trouble")),
      el(
        "dl",
        { class: "facts" },
        el("dt", {}, "Database"), el("dd", {}, s.engine),
        el("dt", {}, "Turns running"), el("dd", { id: "running" }, w.running),
        el("dt", {}, "Messages queued behind a turn"), el("dd", {}, w.queued),
        el("dt", {}, "Messages waiting"), el("dd", {}, w.waiting),
        el("dt", {}, "Replies not yet delivered"), el("dd", {}, w.unsent),
      ),
      s.error ? el("p", { class: "error" }, s.error) : null,
      advice(s.advice),
    );
  }

  function nodes(data) {
    if (!data.nodes.length) return null;
    return table(
      ["Node", "Role", "Heartbeat", { label: "Sessions", num: true }, { label: "Turns run", num: true }],
      data.nodes.map((n) => [
        el("span", { title: `pid ${n.pid} on ${n.host}` }, n.name),
        el("span", {}, state(n.role === "gone" ? "closed" : "open", n.role), advice(n.advice)),
        `${n.heartbeat_age} s ago`,
        String(n.sessions_in_flight),
        String(n.turns),
      ]),
      { caption: "Nodes of the cluster" },
    );
  }

  function lastError(data) {
    const e = data.last_error;
    return el(
      "section",
      { class: "card", "aria-labelledby": "error-title" },
      el("h3", { id: "error-title" }, "Last error"),
      e ? el("div", {}, el("p", {}, el("strong", {}, `${e.level} `), timeEl(e.at)), el("pre", { class: "block" }, e.message), advice(data.last_error_advice)) : el("p", { class: "muted" }, "None since the start."),
    );
  }

  function turns(data) {
    return table(
      ["Finished", "Conversation", "Outcome", "Time", "Calls", { label: "Tokens", num: true }, "Guard decisions"],
      data.recent_turns.map((t) => [
        el("a", { href: `/trace/${encodeURIComponent(t.turn_id)}`, "aria-label": `Trace of the turn ${ago(t.finished_at)}` }, ago(t.finished_at)),
        t.title,
        el("span", { class: `outcome ${t.outcome}` }, t.outcome),
        `${t.seconds < 10 ? t.seconds.toFixed(2) : t.seconds.toFixed(1)} s`,
        `${t.llm_calls} model, ${t.tool_calls} tool`,
        `${t.estimated ? "≈ " : ""}${number(t.input_tokens)} in / ${number(t.output_tokens)} out`,
        t.decisions.length ? el("ul", { class: "decisions" }, t.decisions.map((d) => el("li", { title: d.reason }, `${d.guard}: ${d.code}`))) : "none",
      ]),
      { caption: "Latest turns", empty: "No turns yet." },
    );
  }

  section({
    topic: "health",
    load: async (content) => {
      const data = await api("/api/health");
      fill(content,
        el("p", { class: "muted" }, `${data.agent} · ${data.model} · version ${data.version}`),
        el("section", { class: "card", id: "channels" }, channels(data)),
        el("section", { class: "card", id: "models" }, models(data)),
        el("div", { class: "grid" }, store(data), lastError(data)),
        data.nodes.length ? el("section", { class: "card", id: "nodes" }, nodes(data)) : null,
        el("section", { class: "card", id: "turns" }, turns(data)),
      );
    },
  });
})();
