"use strict";
// The settings page is a plain form rendered on the server (it works without this). This
// adds: the count of unsaved changes in the bar with the buttons, each changed setting
// marked "changed" (a value differs from the one it was shown with, _was.<key>; a secret
// typed or marked to be removed); a filter over the keys and their descriptions (and one for
// the settings set somewhere or changed), which opens the sections it finds something in;
// the problems of a refused save focused; and a link to a closed section opening it.

(() => {
  const form = document.querySelector("form.settings");
  if (!form) return;
  const bar = form.querySelector(".savebar");
  const unsaved = document.getElementById("settings-unsaved");
  const settings = Array.from(form.querySelectorAll(".setting"));
  const groups = Array.from(form.querySelectorAll("details.group"));
  const wasOpen = new Map(groups.map((g) => [g, g.open]));

  // -- what is changed ----------------------------------------------------------------------

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

  function count() {
    let n = 0;
    for (const block of settings) {
      const on = changed(block);
      mark(block, on);
      if (on) n += 1;
    }
    unsaved.textContent = n === 0 ? "No unsaved changes." : n === 1 ? "1 unsaved change." : `${n} unsaved changes.`;
    bar.toggleAttribute("data-unsaved", n > 0);
    return n;
  }

  // -- the filter ---------------------------------------------------------------------------

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

  // -- going to a section or a field --------------------------------------------------------

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

  form.addEventListener("input", count);
  form.addEventListener("change", count);
  let submitting = false;
  form.addEventListener("submit", () => {
    submitting = true;
  });
  window.addEventListener("beforeunload", (event) => {
    if (!submitting && count() > 0) event.preventDefault(); // the browser asks before leaving
  });
  for (const group of groups) {
    group.addEventListener("toggle", () => {
      if (!box.value && !onlySet.checked) wasOpen.set(group, group.open);
    });
  }
  box.addEventListener("input", filter);
  onlySet.addEventListener("change", filter);
  const problems = document.getElementById("settings-problems");
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[href^='#']");
    if (!link || !(form.contains(link) || (problems && problems.contains(link)))) return;
    event.preventDefault();
    history.replaceState(null, "", link.getAttribute("href"));
    reveal(link.getAttribute("href").slice(1));
  });
  finder.hidden = false;
  if (window.matchMedia("(max-width: 64rem)").matches) form.querySelector("details.index").open = false;
  count();
  if (problems) problems.focus();
  else if (location.hash) reveal(location.hash.slice(1));
})();
