"use strict";
// What every section of the control center shares: building DOM nodes (text only: names,
// messages and files come from chats and the workspace, never markup), talking to the JSON
// endpoints (with the page key: session.js), tables that turn into cards on a phone, and the
// one event stream that says what changed. The stream is open only while the page is
// visible: a hidden page costs nothing. It is read with fetch, not EventSource, which
// cannot send the key.

(() => {
  const $ = (id) => document.getElementById(id);

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "data") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // Replace a node's children (null, undefined and false stand for nothing).
  function fill(node, ...children) {
    node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  }

  function ago(at) {
    if (!at) return "never";
    const seconds = Date.now() / 1000 - at;
    const future = seconds < 0;
    const s = Math.abs(seconds);
    let text;
    if (s < 60) text = `${Math.round(s)} s`;
    else if (s < 3600) text = `${Math.round(s / 60)} min`;
    else if (s < 86400) text = `${Math.round(s / 3600)} h`;
    else return new Date(at * 1000).toLocaleString();
    return future ? `in ${text}` : `${text} ago`;
  }

  const when = (at) => (at ? new Date(at * 1000).toLocaleString() : "—");
  const number = (n) => Number(n || 0).toLocaleString();
  const money = (c) => (c === null || c === undefined ? "—" : `$${c < 1 ? c.toFixed(4) : c.toFixed(2)}`);

  function timeEl(at, text) {
    return el("time", { datetime: at ? new Date(at * 1000).toISOString() : null, title: when(at) }, text || ago(at));
  }

  // A table whose rows become labelled cards on a phone (app.css: table.cards).
  // columns: [{label, num}] or strings; rows: arrays of cells (text or nodes).
  function table(columns, rows, options) {
    const opts = options || {};
    if (!rows.length) return el("p", { class: "muted" }, opts.empty || "Nothing yet.");
    const cols = columns.map((c) => (typeof c === "string" ? { label: c } : c));
    return el(
      "div",
      { class: "table-wrap" },
      el(
        "table",
        { class: "cards" },
        opts.caption ? el("caption", {}, opts.caption) : null,
        el("thead", {}, el("tr", {}, cols.map((c) => el("th", { scope: "col", class: c.num ? "num" : null }, c.label)))),
        el(
          "tbody",
          {},
          rows.map((cells) =>
            el("tr", {}, cells.map((cell, i) => el("td", { "data-label": cols[i].label, class: cols[i].num ? "num" : null }, cell))),
          ),
        ),
      ),
    );
  }

  function state(value, label) {
    return el("span", { class: "state", data: { state: value } }, label || value);
  }

  function notice(text, isError) {
    const box = $("notice");
    box.textContent = text || "";
    box.hidden = !text;
    box.classList.toggle("error", Boolean(isError));
    box.setAttribute("role", isError ? "alert" : "status");
  }

  // A request with the page key; a refused one sends the browser to sign in.
  async function request(path, init) {
    const response = await Session.fetch(path, init);
    if (response.status === 401) {
      Session.signIn(await Session.refusal(response));
      throw new Error("signed out");
    }
    return response;
  }

  async function api(path) {
    const response = await request(path);
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer.error || `Could not load it (${response.status}).`);
    return answer;
  }

  // A change: JSON body, the answer's message shown, its error shown as an alert.
  async function post(path, body) {
    const response = await request(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) {
      const error = new Error(answer.error || `It did not work (${response.status}).`);
      error.answer = answer;
      error.status = response.status;
      throw error;
    }
    return answer;
  }

  // A button that runs an action once at a time and says what happened.
  function action(label, run, options) {
    const opts = options || {};
    const button = el(
      "button",
      {
        type: "button",
        class: opts.class || null,
        "aria-label": opts.aria || null,
        "aria-describedby": opts.describedby || null,
        data: { focus: opts.focus || `${label}:${opts.key || ""}` }, // kept across redraws
      },
      label,
    );
    button.addEventListener("click", async () => {
      // a question, or what makes one from the page as it is when clicked
      const question = typeof opts.confirm === "function" ? opts.confirm() : opts.confirm;
      if (question && !window.confirm(question)) return;
      button.disabled = true;
      try {
        const answer = await run();
        notice(answer && answer.message ? answer.message : "Done.");
        await reload(button.dataset.focus);
      } catch (err) {
        notice(err.message, true);
      } finally {
        button.disabled = false;
      }
    });
    return button;
  }

  // -- the section: load, draw, reload on its topic's pulse ---------------------------------

  let current = null;
  let lastTopic;

  // ``keep``: the data-focus of the button whose action asks for the redraw (a disabled
  // button has lost the focus already).
  async function reload(keep) {
    if (!current) return;
    const content = $("content");
    content.setAttribute("aria-busy", "true");
    // a redraw keeps the keyboard where it was (the same button, when it is still there)
    const active = document.activeElement;
    const focused = keep || (content.contains(active) && active.dataset ? active.dataset.focus : null);
    try {
      await current.load(content);
      document.body.dataset.loaded = "1";
      if (focused) {
        const again = Array.from(content.querySelectorAll("[data-focus]")).find((n) => n.dataset.focus === focused);
        if (again) again.focus();
        else $("main").focus(); // the button went (its work is done): the section, not the page top
      }
    } catch (err) {
      if (err.message !== "signed out") notice(err.message, true);
    } finally {
      content.setAttribute("aria-busy", "false");
    }
  }

  function section(definition) {
    current = definition;
    reload();
  }

  // -- the event stream: one per visible page -------------------------------------------------

  let stream = null;
  let retry = 1000;

  function setLive(stateName, label) {
    const pill = $("live");
    if (!pill) return;
    pill.dataset.state = stateName;
    pill.textContent = label;
  }

  function badges(pulse) {
    for (const badge of document.querySelectorAll("[data-badge]")) {
      const count = pulse[badge.dataset.badge] || 0;
      badge.hidden = count === 0;
      badge.textContent = String(count);
      badge.setAttribute("aria-label", `${count} waiting`);
    }
  }

  function onPulse(data) {
    const pulse = JSON.parse(data);
    badges(pulse);
    setLive("open", pulse.running ? `live · ${pulse.running} running` : "live");
    const topic = current && current.topic ? JSON.stringify(pulse.topics[current.topic]) : undefined;
    if (topic !== undefined && lastTopic !== undefined && topic !== lastTopic && !(current.busy && current.busy())) {
      reload();
    }
    lastTopic = topic;
  }

  // The events of a server-sent stream as they come: "event:" and "data:" lines, a blank
  // line ending each; comments (": still here") are skipped.
  async function readEvents(body, onEvent) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value; // the server ends its lines with "\n" alone
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(name, data.join("\n"));
      }
    }
  }

  async function open() {
    if (stream || document.hidden || Session.leaving()) return;
    const mine = new AbortController();
    stream = mine;
    let refused = false;
    try {
      const response = await Session.fetch("/api/events", { signal: mine.signal, cache: "no-store" });
      if (response.status === 401) {
        refused = true;
        Session.signIn(await Session.refusal(response));
        return;
      }
      if (response.ok && response.body) {
        retry = 1000;
        await readEvents(response.body, (name, data) => {
          if (name === "pulse") onPulse(data);
        });
      }
    } catch (err) {
      // the connection dropped (signed out, the gateway stopped) or the page closed it
    } finally {
      if (stream === mine) stream = null;
    }
    if (refused || mine.signal.aborted || Session.leaving()) return; // closed on purpose
    setLive("closed", "reconnecting…");
    const check = await Session.fetch("/api/status").catch(() => null);
    if (check && check.status === 401) {
      Session.signIn(await Session.refusal(check));
      return;
    }
    setTimeout(open, retry);
    retry = Math.min(retry * 2, 15000);
  }

  function close() {
    if (stream) stream.abort();
    stream = null;
  }

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      close();
      setLive("unknown", "paused");
    } else {
      open();
      reload(); // what changed while nobody looked
    }
  });

  window.Control = { $, el, fill, ago, when, number, money, timeEl, table, state, notice, request, api, post, action, section, reload };
  document.addEventListener("DOMContentLoaded", open);
})();
