"use strict";
// Approvals: the tool calls waiting for a decision, every argument in full (as /show ID shows
// them in a chat), Approve / Deny (what /approve ID does); the ones decided lately below.

(() => {
  const { el, fill, timeEl, table, state, api, post, action, section } = window.Control;

  function request(r) {
    return el(
      "article",
      { class: "card", "aria-labelledby": `req-${r.id}` },
      el("h3", { id: `req-${r.id}` }, `${r.tool} for ${r.requester}`),
      el(
        "p",
        { class: "muted" },
        "Request ",
        el("code", { class: "id" }, r.id),
        " in ",
        el("a", { href: `/conversations?session=${encodeURIComponent(r.session)}` }, r.chat),
        " · asked ",
        timeEl(r.created_at),
        " · refused ",
        timeEl(r.expires_at),
        " without a decision",
      ),
      el("p", {}, el("strong", {}, "Why it needs approval: "), r.reason),
      r.reach ? el("pre", { class: "block" }, r.reach) : null,
      el(
        "dl",
        { class: "arguments" },
        r.arguments.length
          ? r.arguments.map((a) => [el("dt", {}, a.name), el("dd", {}, el("pre", { class: "block" }, a.value))])
          : el("dd", { class: "muted" }, "(no arguments)"),
      ),
      el(
        "div",
        { class: "actions" },
        action("Approve", () => post(`/api/approvals/${encodeURIComponent(r.id)}/approve`), { key: r.id, describedby: `req-${r.id}` }),
        action("Deny", () => post(`/api/approvals/${encodeURIComponent(r.id)}/deny`), { class: "secondary", key: r.id, describedby: `req-${r.id}` }),
      ),
      el("p", { class: "hint" }, "Approve lets this exact call run once; the conversation then goes on."),
    );
  }

  section({
    topic: "approvals",
    load: async (content) => {
      const data = await api("/api/approvals");
      fill(content,
        data.waiting.length ? el("div", {}, data.waiting.map(request)) : el("p", { class: "card muted" }, "Nothing is waiting for your approval."),
        el("h3", {}, "Decided lately"),
        table(
          ["Request", "Tool", "For", "Decision", "When"],
          data.decided.map((r) => [el("code", { class: "id" }, r.id), r.tool, r.requester, el("span", {}, state(r.state === "approved" ? "done" : "failed", r.state), el("br"), el("small", { class: "muted" }, r.decided_by || "")), timeEl(r.decided_at)]),
          { empty: "None yet." },
        ),
      );
    },
  });
})();
