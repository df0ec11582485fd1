"use strict";
// The status page: /api/status every 5 seconds, drawn with DOM nodes and textContent only
// (names, errors and file contents come from chats and the workspace: never markup).

(() => {
  const $ = (id) => document.getElementById(id);

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "class") node.className = value;
      else if (key === "data") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function ago(at) {
    if (!at) return "never";
    const seconds = Math.max(0, Date.now() / 1000 - at);
    if (seconds < 60) return `${Math.round(seconds)} s ago`;
    if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
    return new Date(at * 1000).toLocaleString();
  }

  function when(at) {
    return at ? new Date(at * 1000).toLocaleString() : "—";
  }

  function table(headers, rows) {
    if (!rows.length) return el("p", { class: "muted" }, "Nothing yet.");
    return el(
      "div",
      { class: "scroll" },
      el(
        "table",
        {},
        el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h)))),
        el("tbody", {}, ...rows.map((cells) => el("tr", {}, ...cells.map((c) => el("td", {}, c))))),
      ),
    );
  }

  const number = (n) => Number(n || 0).toLocaleString();
  const cost = (c) => (c === null || c === undefined ? "—" : `$${c.toFixed(4)}`);

  function channels(data) {
    $("channels").replaceChildren(
      table(
        ["Channel", "State", "Last message", "Last error"],
        data.channels.map((c) => [
          el("span", { title: c.detail || "" }, c.name, el("br"), el("small", { class: "muted" }, c.detail || "")),
          el(
            "span",
            { class: "pill", data: { state: c.connected === null ? "unknown" : c.connected ? "open" : "closed" } },
            c.connected === null ? "unknown" : c.connected ? "connected" : "disconnected",
          ),
          ago(c.last_message_at),
          c.last_error || "—",
        ]),
      ),
    );
  }

  function modelState(m) {
    if (m.cooling_until && m.cooling_until > Date.now() / 1000) {
      return el("span", { class: "pill", data: { state: "closed" }, title: m.last_error || "" }, `cooling down until ${when(m.cooling_until)}`);
    }
    return el("span", { class: "pill", data: { state: "open" } }, m.answered_last ? "answered last" : "ready");
  }

  function models(data) {
    $("models").replaceChildren(
      table(
        ["Model", "Configured in", "State", "Last answer", "Last error"],
        (data.models || []).map((m) => [
          el("span", { title: m.label }, m.name),
          m.settings.join(", "),
          modelState(m),
          ago(m.last_answer_at),
          m.last_error || "—",
        ]),
      ),
    );
  }

  function nodes(data) {
    const list = data.nodes || [];
    $("nodes-panel").hidden = list.length === 0; // one process (SQLite): no cluster
    $("nodes").replaceChildren(
      table(
        ["Node", "Role", "Heartbeat", "Sessions in flight", "Turns run", "Database connections"],
        list.map((n) => [
          el("span", { title: `pid ${n.pid} on ${n.host}` }, n.name),
          el("span", { class: "pill", data: { state: n.role === "gone" ? "closed" : "open" } }, n.role),
          `${n.heartbeat_age}s ago`,
          el("span", { title: (n.sessions || []).join("\n") }, String(n.sessions_in_flight)),
          String(n.turns),
          String(n.connections),
        ]),
      ),
    );
  }

  function work(data) {
    const w = data.work;
    $("work").replaceChildren(
      el(
        "dl",
        { class: "facts" },
        el("dt", {}, "Turns running"), el("dd", { id: "running" }, w.running),
        el("dt", {}, "Messages queued behind a turn"), el("dd", {}, w.queued),
        el("dt", {}, "Messages waiting"), el("dd", {}, w.waiting),
        el("dt", {}, "Replies not yet delivered"), el("dd", {}, w.unsent),
      ),
    );
  }

  function turns(data) {
    $("turns").replaceChildren(
      table(
        ["Finished", "Chat", "Outcome", "Time", "Calls", "Tokens", "Guard decisions"],
        data.recent_turns.map((t) => [
          el("a", { href: `/trace/${encodeURIComponent(t.turn_id)}` }, ago(t.finished_at)),
          t.session_key,
          el("span", { class: `outcome ${t.outcome}` }, t.outcome),
          `${t.seconds < 10 ? t.seconds.toFixed(2) : t.seconds.toFixed(1)} s`,
          `${t.llm_calls} model, ${t.tool_calls} tool`,
          el(
            "span",
            t.estimated ? { title: "counted by Switchboard (tiktoken): the model's server reported no usage" } : {},
            `${t.estimated ? "≈ " : ""}${number(t.input_tokens)} in / ${number(t.output_tokens)} out`,
          ),
          t.decisions.length
            ? el("ul", { class: "decisions" }, ...t.decisions.map((d) => el("li", { title: d.reason }, `${d.guard}: ${d.code}`)))
            : "none",
        ]),
      ),
    );
  }

  function usage(data) {
    const u = data.usage;
    const about = (r) => (r.estimated_tokens ? "≈ " : "");
    const row = (r) => [r.key, r.turns, about(r) + number(r.input_tokens), about(r) + number(r.output_tokens), cost(r.cost)];
    const estimated = [...u.by_day, ...u.by_chat].some((r) => r.estimated_tokens);
    const headers = ["", "Turns", "Input tokens", "Output tokens", "Est. cost"];
    // each day's cost as a bar against the dearest day's
    const dearest = Math.max(0, ...u.by_day.map((r) => r.cost || 0));
    const bar = (value, max, low, high) =>
      el("meter", { min: 0, max: max || 1, low: low ?? max, high: high ?? max, optimum: 0, value: value || 0 });
    const dayRow = (r) => [...row(r), bar(r.cost, dearest)];
    const caps = u.caps.map((c) => [
      c.key,
      bar(Math.min(c.spent, c.limit), c.limit, c.limit * 0.5, c.limit * 0.8),
      `${cost(c.spent)} of ${cost(c.limit)}`,
      when(c.resets_at),
    ]);
    $("usage").replaceChildren(
      el("h3", {}, "Money caps"),
      u.caps.length
        ? table(["Cap", "Spent", "", "Resets"], caps)
        : el("p", { class: "muted" }, "No money caps set (limits.*_usd, [people], [agents])."),
      el("h3", {}, "Per day"),
      table(["Day", ...headers.slice(1), ""], u.by_day.map(dayRow)),
      el("h3", {}, "Per chat"),
      table(["Chat", ...headers.slice(1)], u.by_chat.map(row)),
      el("h3", {}, "Per agent"),
      table(["Agent", ...headers.slice(1)], u.by_agent.map(row)),
      el("h3", {}, "Per person"),
      table(["Person", ...headers.slice(1)], u.by_person.map(row)),
      el(
        "p",
        { class: "muted" },
        `Last 30 days, from the ${u.source}. `,
        u.priced
          ? "Cost at the prices of [llm.prices] and the shipped table when each call was made."
          : "No call had a price: set [llm.prices.\"<model>\"] input and output (dollars per million tokens).",
        estimated ? " ≈: counted by Switchboard (tiktoken) where the model's server reported no usage." : "",
      ),
    );
  }

  function schedule(data) {
    const s = data.schedule;
    if (!s.available) {
      $("schedule").replaceChildren(el("p", { class: "muted" }, "no scheduler"));
      return;
    }
    $("schedule").replaceChildren(
      table(
        ["Kind", "What", "Next run", "Sends to"],
        s.items.map((i) => [i.kind, i.description, when(i.next_run), i.target || "—"]),
      ),
    );
  }

  async function decide(code, action) {
    $("pairing-error").hidden = true;
    const response = await fetch(`/api/pairing/${encodeURIComponent(code)}/${action}`, {
      method: "POST",
      credentials: "same-origin",
    });
    if (!response.ok) {
      const answer = await response.json().catch(() => ({}));
      $("pairing-error").textContent = answer.error || `Failed (${response.status}).`;
      $("pairing-error").hidden = false;
    }
    refresh();
  }

  function pairing(data) {
    $("pairing").replaceChildren(
      data.pairing.length
        ? table(
            ["Who", "Code", ""],
            data.pairing.map((p) => [
              el("span", {}, `${p.channel} ${p.sender_id}${p.sender_name ? ` (${p.sender_name})` : ""}`, el("br"), el("small", { class: "muted" }, `expires ${when(p.expires_at)}`)),
              el("code", {}, p.code),
              el(
                "span",
                { class: "actions" },
                el("button", { type: "button", onclick: () => decide(p.code, "approve") }, "Approve"),
                el("button", { type: "button", class: "secondary", onclick: () => decide(p.code, "deny") }, "Deny"),
              ),
            ]),
          )
        : el("p", { class: "muted" }, "No one is waiting."),
    );
  }

  async function showFile(name) {
    const response = await fetch(`/api/workspace/${name.split("/").map(encodeURIComponent).join("/")}`, {
      credentials: "same-origin",
    });
    const view = $("file-view");
    const answer = await response.json().catch(() => ({}));
    view.textContent = response.ok ? `# ${answer.name}\n\n${answer.text}` : answer.error || "Cannot show it.";
    view.hidden = false;
  }

  function workspace(data) {
    $("workspace").replaceChildren(
      data.workspace.length
        ? el(
            "ul",
            { class: "files" },
            ...data.workspace.map((f) =>
              el(
                "li",
                {},
                el("button", { type: "button", class: "link", onclick: () => showFile(f.name) }, f.name),
                el("span", { class: "muted" }, ` ${f.kind}, ${number(f.size)} bytes, ${ago(f.modified)}`),
              ),
            ),
          )
        : el("p", { class: "muted" }, "No bootstrap or memory files."),
    );
  }

  async function refresh() {
    let data;
    try {
      const response = await fetch("/api/status", { credentials: "same-origin" });
      if (response.status === 401) {
        location.assign("/login?next=/status");
        return;
      }
      data = await response.json();
    } catch (err) {
      $("summary").textContent = "gateway unreachable";
      return;
    }
    $("summary").textContent = `${data.agent} · ${data.model} · v${data.version}`;
    channels(data);
    models(data);
    nodes(data);
    work(data);
    turns(data);
    usage(data);
    schedule(data);
    pairing(data);
    workspace(data);
    $("footer").textContent = `Updated ${new Date().toLocaleTimeString()} · access: ${data.auth === "token" ? "token or sign-in link" : "sign-in link"}`;
    document.body.dataset.loaded = "1";
  }

  refresh();
  setInterval(refresh, 5000);
})();
