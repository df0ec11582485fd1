"use strict";
// Conversations: every session on every channel by name, search across all of them, and one
// conversation's transcript (?session=KEY) with its tool calls, results and traces; stop its
// running turn or start it afresh (what /stop and /new do; a fresh start tells the chat).

(() => {
  const { el, fill, ago, timeEl, table, state, api, post, action, notice, section } = window.Control;

  const STATES = { idle: "idle", running: "answering", stopping: "stopping", waiting: "waiting for approval" };

  function sessionLink(session, text) {
    return el("a", { href: `/conversations?session=${encodeURIComponent(session)}` }, text);
  }

  function searchForm(query) {
    const input = el("input", { type: "search", name: "q", id: "q", value: query || "", placeholder: "Words anyone said" });
    return el(
      "form",
      { class: "search", role: "search", action: "/conversations" },
      el("label", { for: "q", class: "sr" }, "Search every conversation"),
      input,
      el("button", { type: "submit" }, "Search"),
    );
  }

  async function listing(content) {
    const data = await api("/api/conversations");
    fill(content,
      searchForm(""),
      table(
        ["Conversation", "Last message", "Messages", "State"],
        data.conversations.map((c) => [
          el("span", {}, sessionLink(c.session, c.title), el("br"), el("small", { class: "muted" }, c.channel)),
          c.last_text
            ? el("span", {}, `${c.last_role === "user" ? "" : "↳ "}${c.last_text}`, " ", el("small", { class: "muted" }, "· ", timeEl(c.last_at)))
            : el("span", { class: "muted" }, "—"),
          String(c.messages),
          el(
            "span",
            {},
            state(c.state, STATES[c.state] || c.state),
            c.approvals ? el("span", {}, " ", el("a", { href: "/approvals" }, `${c.approvals} to approve`)) : null,
            c.queued ? el("small", { class: "muted" }, ` ${c.queued} waiting`) : null,
          ),
        ]),
        { empty: "No conversations yet.", caption: "Every conversation, most recent first" },
      ),
    );
  }

  async function results(content, query) {
    const data = await api(`/api/conversations/search?q=${encodeURIComponent(query)}`);
    fill(content,
      searchForm(query),
      el("p", {}, el("a", { href: "/conversations" }, "← Every conversation")),
      table(
        ["Conversation", "Who", "What was said", "When"],
        data.results.map((r) => [
          sessionLink(r.session, r.title),
          r.who,
          el("p", { class: "snippet" }, r.snippet.map((piece) => (piece.hit ? el("mark", {}, piece.text) : piece.text))),
          timeEl(r.at),
        ]),
        { empty: `Nothing said matches “${query}”.`, caption: `Messages with “${query}”` },
      ),
    );
  }

  function entry(m) {
    // who said it, by name: "You" for the owner's own words, the agent's name for its answers
    const who = m.role === "tool" ? `Tool result: ${m.tool || "tool"}` : m.who;
    const header = el(
      "header",
      {},
      el("strong", {}, who),
      timeEl(m.at),
      m.running ? el("span", { class: "state", data: { state: "running" } }, "this turn runs now") : null,
      m.turn ? el("a", { href: `/trace/${encodeURIComponent(m.turn)}`, "aria-label": `Trace of the turn ${m.turn}` }, "trace") : null,
    );
    const parts = [header];
    if (m.role === "tool") {
      parts.push(el("details", {}, el("summary", {}, m.error ? "failed: show the result" : "show the result"), el("pre", {}, m.text)));
    } else if (m.text) {
      parts.push(el("p", { class: "text" }, m.text));
    }
    for (const call of m.calls || []) {
      parts.push(el("details", {}, el("summary", {}, `Called ${call.name}`), el("pre", {}, call.arguments)));
    }
    if (m.files && m.files.length) parts.push(el("p", { class: "hint" }, `Files: ${m.files.join(", ")}`));
    return el("article", { class: `entry ${m.role}${m.error ? " error" : ""}` }, parts);
  }

  async function transcript(content, session) {
    const data = await api(`/api/conversations/transcript?session=${encodeURIComponent(session)}`);
    document.title = `${data.title} · Switchboard`;
    const items = [];
    let generation = null;
    for (const m of data.messages) {
      if (generation !== null && m.generation !== generation) items.push(el("p", { class: "fresh" }, "A fresh conversation started here (/new)."));
      generation = m.generation;
      items.push(entry(m));
    }
    const busy = data.state === "running" || data.state === "waiting";
    fill(content,
      el("p", {}, el("a", { href: "/conversations" }, "← Every conversation")),
      el(
        "section",
        { class: "card", "aria-labelledby": "conversation-title" },
        el("h3", { id: "conversation-title" }, data.title),
        el("p", { class: "muted" }, el("code", { class: "id" }, data.session), " · ", state(data.state, STATES[data.state] || data.state)),
        el(
          "div",
          { class: "actions" },
          busy ? action("Stop", () => post("/api/conversations/stop", { session }), { class: "danger", key: session }) : null,
          action("Start fresh", () => post("/api/conversations/new", { session }), {
            class: "secondary",
            key: session,
            confirm: "Start this conversation afresh? What was said stays on disk but leaves the assistant's context; the chat is told.",
          }),
        ),
      ),
      items.length ? el("div", { class: "transcript" }, items) : el("p", { class: "muted" }, "Nothing said yet."),
    );
  }

  const params = new URLSearchParams(location.search);
  let session = params.get("session");
  const query = params.get("q");
  section({
    topic: "conversations",
    load: async (content) => {
      if (session) {
        try {
          return await transcript(content, session);
        } catch (err) {
          // no such conversation (an old or mistyped link): say so, and list the ones there are
          session = null;
          history.replaceState(null, "", "/conversations");
          notice(err.message, true);
        }
      }
      return query ? results(content, query) : listing(content);
    },
  });
})();
