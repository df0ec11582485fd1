"use strict";
// Jobs: the heartbeat and every scheduled job with its next run and last outcome; pause,
// resume, run now, delete (what the cron tool and `switchboard cron` do).

(() => {
  const { el, fill, timeEl, table, state, api, post, action, section } = window.Control;

  function outcome(last, skip) {
    if (skip) return el("span", {}, state("paused", "skipped"), el("br"), el("small", { class: "muted" }, skip));
    if (!last) return el("span", { class: "muted" }, "not run yet");
    const good = last.state === "done" || last.state === "answered";
    return el("span", {}, state(good ? "done" : last.state === "running" ? "running" : "failed", last.state), " ", timeEl(last.at));
  }

  function heartbeat(h, scheduler) {
    if (!scheduler) return el("p", { class: "card muted" }, "This gateway runs no scheduler.");
    if (!h.enabled) {
      return el("section", { class: "card", "aria-labelledby": "hb-title" }, el("h3", { id: "hb-title" }, "Heartbeat"), el("p", { class: "muted" }, "Off: turn on heartbeat.enabled in ", el("a", { href: "/settings" }, "Settings"), " for regular check-ins (HEARTBEAT.md lists what to check)."));
    }
    const minutes = Math.round(h.every / 60);
    return el(
      "section",
      { class: "card", "aria-labelledby": "hb-title" },
      el("h3", { id: "hb-title" }, "Heartbeat ", state(h.paused ? "paused" : "active", h.paused ? "paused" : "on")),
      el(
        "dl",
        { class: "facts" },
        el("dt", {}, "Every"), el("dd", {}, minutes >= 1 ? `${minutes} min` : `${h.every} s`),
        el("dt", {}, "Next check-in"), el("dd", {}, h.paused ? "paused" : timeEl(h.next_run)),
        el("dt", {}, "Sends to"), el("dd", {}, h.target || "the owner's chat, once there is one"),
        el("dt", {}, "Last outcome"), el("dd", {}, outcome(h.last, h.last_skip)),
      ),
      el(
        "div",
        { class: "actions" },
        h.paused
          ? action("Resume", () => post("/api/heartbeat/resume"), { focus: "toggle:heartbeat", aria: "Resume the heartbeat" })
          : action("Pause", () => post("/api/heartbeat/pause"), { class: "secondary", focus: "toggle:heartbeat", aria: "Pause the heartbeat" }),
        action("Run now", () => post("/api/heartbeat/run"), { class: "secondary", key: "heartbeat", aria: "Run the heartbeat now" }),
      ),
      el("p", { class: "hint" }, "What it checks is in ", el("a", { href: "/memory?file=HEARTBEAT.md" }, "HEARTBEAT.md"), "."),
    );
  }

  function jobs(list) {
    return el(
      "section",
      { class: "card", "aria-labelledby": "jobs-title" },
      el("h3", { id: "jobs-title" }, "Scheduled jobs"),
      table(
        ["What", "When", "Next run", "Last outcome", "Sends to", "State", ""],
        list.map((j) => {
          const url = (act) => `/api/jobs/${encodeURIComponent(j.id)}/${act}`;
          const label = `job ${j.id}`;
          return [
            el("span", {}, j.what || el("span", { class: "muted" }, "(nothing)"), el("br"), el("small", { class: "muted" }, `${j.kind} · by ${j.owner} · `, el("span", { class: "id" }, j.id))),
            j.schedule,
            j.state === "paused" ? "paused" : timeEl(j.next_run),
            outcome(j.last, null),
            j.target,
            state(j.state, j.state),
            el(
              "span",
              { class: "actions" },
              j.state === "paused"
                ? action("Resume", () => post(url("resume")), { focus: `toggle:${j.id}`, aria: `Resume ${label}` })
                : action("Pause", () => post(url("pause")), { class: "secondary", focus: `toggle:${j.id}`, aria: `Pause ${label}` }),
              j.state === "active" ? action("Run now", () => post(url("run")), { class: "secondary", key: j.id, aria: `Run ${label} now` }) : null,
              action("Delete", () => post(url("delete")), { class: "danger", key: j.id, aria: `Delete ${label}`, confirm: `Delete job ${j.id}? This cannot be undone.` }),
            ),
          ];
        }),
        { empty: "No scheduled jobs: people make them by asking (“remind me at 9”)." },
      ),
    );
  }

  section({
    topic: "jobs",
    load: async (content) => {
      const data = await api("/api/jobs");
      fill(content, heartbeat(data.heartbeat, data.scheduler), jobs(data.jobs));
    },
  });
})();
