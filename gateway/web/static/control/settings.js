"use strict";
// The settings page. Its form is rendered on the server, but fetched and posted by this
// script with the page key (session.js): the page itself holds no setting, as a
// navigation carries only the cookie, which other programs on this machine may get too.
// *Check* and *Save* post the form to /api/settings/form and show the form it answers
// with (a save's result kept in the address, ?done=, so a reload shows it again and posts
// nothing); *Restart now* asks for a restart and opens the restarting page. On top: the
// count of unsaved changes in the bar with the buttons, each changed setting marked
// "changed" (a value differs from the one it was shown with, _was.<key>; a secret typed or
// marked to be removed); a filter over the keys and their descriptions (and one for the
// settings set somewhere or changed), which opens the sections it finds something in; the
// problems of a refused save focused; and a link to a closed section opening it.

(() => {
  const { $, notice, request } = window.Control;
  const content = $("content");
  let form = null; // the form shown now
  let problems = null;
  let count = () => 0;
  let leaving = false; // saved, or the restarting page opens: nothing is lost

  function setUp() {
    form = content.querySelector("form.settings");
    problems = document.getElementById("settings-problems");
    if (!form) return;
    const bar = form.querySelector(".savebar");
    const unsaved = document.getElementById("settings-unsaved");
    const settings = Array.from(form.querySelectorAll(".setting"));
    const groups = Array.from(form.querySelectorAll("details.group"));
    const wasOpen = new Map(groups.map((g) => [g, g.open]));

    // -- what is changed --------------------------------------------------------------------

    function changed(block) {
      const key = block.dataset.key;
      const input = form.elements.namedItem(key);
      if (!input) return false; // read-only here
      const clear = form.elements.namedItem(`_clear.${key}`);
      if (clear && clear.checked) return true;
      const was = form.elements.namedItem(`_was.${key}`);
      if (!was) return input.value !== ""; // a secret: typed
      return input.value !== was.value;
    }

    function mark(block, on) {
      const marks = block.querySelector(".marks");
      const there = marks.querySelector("[data-mark='changed']");
      if (on && !there) {
        const span = document.createElement("span");
        span.className = "mark";
        span.dataset.mark = "changed";
        span.textContent = "changed, not saved";
        marks.prepend(span);
      } else if (!on && there) {
        there.remove();
      }
      block.toggleAttribute("data-changed", on);
    }

    count = () => {
      let n = 0;
      for (const block of settings) {
        const on = changed(block);
        mark(block, on);
        if (on) n += 1;
      }
      unsaved.textContent = n === 0 ? "No unsaved changes." : n === 1 ? "1 unsaved change." : `${n} unsaved changes.`;
      bar.toggleAttribute("data-unsaved", n > 0);
      return n;
    };

    // -- the filter -------------------------------------------------------------------------

    const finder = form.querySelector(".finder");
    const box = document.getElementById("settings-filter");
    const onlySet = document.getElementById("settings-only-set");
    const found = document.getElementById("settings-found");
    const texts = new Map(settings.map((b) => [b, `${b.dataset.key} ${b.querySelector(".about").textContent}`.toLowerCase()]));

    function filter() {
      const words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
      const active = words.length > 0 || onlySet.checked;
      let shown = 0;
      for (const block of settings) {
        const text = texts.get(block);
        const set = block.hasAttribute("data-origin") || block.hasAttribute("data-changed");
        const match = words.every((w) => text.includes(w)) && (!onlySet.checked || set);
        block.hidden = active && !match;
        if (!block.hidden) shown += 1;
      }
      // a section shows while something in it does; innermost first, so the group of the
      // channels not set up knows about its own
      for (const group of groups.slice().reverse()) {
        const any = group.querySelector(".setting:not([hidden]), details.group:not([hidden])") !== null;
        group.hidden = active && !any;
        group.open = active ? any : wasOpen.get(group);
        const entry = form.querySelector(`.settings-index a[href="#${CSS.escape(group.id)}"]`);
        if (entry) entry.parentElement.hidden = group.hidden;
      }
      found.textContent = !active ? "" : shown === 0 ? "No setting matches." : shown === 1 ? "1 setting matches." : `${shown} settings match.`;
    }

    form.addEventListener("input", count);
    form.addEventListener("change", count);
    for (const group of groups) {
      group.addEventListener("toggle", () => {
        if (!box.value && !onlySet.checked) wasOpen.set(group, group.open);
      });
    }
    box.addEventListener("input", filter);
    onlySet.addEventListener("change", filter);
    finder.hidden = false;
    if (window.matchMedia("(max-width: 64rem)").matches) form.querySelector("details.index").open = false;
    count();
  }

  // -- going to a section or a field ----------------------------------------------------------

  function reveal(id) {
    const target = id && document.getElementById(decodeURIComponent(id));
    if (!target) return;
    for (let node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    (target.closest(".setting") || target).scrollIntoView({ block: "start" });
    const focus = target.tagName === "DETAILS" ? target.querySelector("summary") : target;
    if (focus.matches("input, select, textarea, summary")) focus.focus({ preventScroll: true });
  }

  // -- the form from the server, and back -------------------------------------------------------

  // Show the form the server rendered (every value escaped there), then what it says.
  function show(html) {
    const parsed = new DOMParser().parseFromString(html, "text/html");
    content.replaceChildren(...parsed.body.childNodes);
    content.setAttribute("aria-busy", "false");
    setUp();
    document.body.dataset.loaded = "1";
  }

  async function load() {
    try {
      const done = new URLSearchParams(location.search).get("done");
      const response = await request(`/api/settings/form${done ? `?done=${encodeURIComponent(done)}` : ""}`);
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(answer.error || `Could not load the settings (${response.status}).`);
      show(answer.html);
      if (location.hash) reveal(location.hash.slice(1));
    } catch (err) {
      if (err.message !== "signed out") notice(err.message, true);
    }
  }

  async function submit(event) {
    event.preventDefault();
    const data = new URLSearchParams();
    for (const [name, value] of new FormData(form)) data.append(name, value);
    const button = event.submitter;
    if (button && button.name) data.append(button.name, button.value);
    const buttons = Array.from(form.querySelectorAll("button"));
    for (const b of buttons) b.disabled = true;
    try {
      const response = await request("/api/settings/form", { method: "POST", body: data });
      const answer = await response.json().catch(() => ({}));
      if (!answer.html) throw new Error(answer.error || `It did not work (${response.status}).`);
      notice("");
      if (answer.done) history.replaceState(null, "", `/settings?done=${encodeURIComponent(answer.done)}`);
      show(answer.html);
      if (problems) problems.focus();
      else (content.querySelector(".notice") || content).scrollIntoView({ block: "start" });
    } catch (err) {
      for (const b of buttons) b.disabled = false;
      if (err.message !== "signed out") notice(err.message, true);
    }
  }

  async function restart(event) {
    event.preventDefault();
    const button = event.target.querySelector("button");
    button.disabled = true;
    try {
      const response = await request("/api/restart", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ page: true }),
      });
      const answer = await response.json().catch(() => ({}));
      if (!response.ok || !answer.page) throw new Error(answer.error || `Not restarted (${response.status}).`);
      leaving = true;
      location.assign(answer.page);
    } catch (err) {
      button.disabled = false;
      if (err.message !== "signed out") notice(err.message, true);
    }
  }

  content.addEventListener("submit", (event) => {
    if (event.target === form) submit(event);
    else if (event.target.classList.contains("restart")) restart(event);
  });
  window.addEventListener("beforeunload", (event) => {
    if (form && !leaving && count() > 0) event.preventDefault(); // the browser asks before leaving
  });
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[href^='#']");
    if (!link || !form || !(form.contains(link) || (problems && problems.contains(link)))) return;
    event.preventDefault();
    history.replaceState(null, "", link.getAttribute("href"));
    reveal(link.getAttribute("href").slice(1));
  });
  if (!Session.leaving()) load();
})();
