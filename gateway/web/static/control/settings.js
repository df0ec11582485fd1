"use strict";
// Settings: every key of the configuration, grouped, with its documentation beside it. Each
// input's name is its key (name="llm.model"); the form's submit sends the keys whose values
// changed to /api/settings, which validates them as `switchboard config set` does, writes
// config.toml (comments kept) and applies them: a change that fails validation changes
// nothing and is shown beside its key; one that needs a restart says so.

(() => {
  const { el, fill, notice, api, section } = window.Control;

  let dirty = false; // the form is not redrawn while someone edits it
  const initial = new Map(); // key -> the value shown, as text

  const keyOf = (item) => item.key || item.name;
  const docOf = (item) => item.doc || item.docs || item.description || "";
  const isSecret = (item) => item.secret || item.type === "secret";
  const kindOf = (item) => {
    if (isSecret(item)) return "secret";
    if (item.choices && item.choices.length) return "choice";
    const type = String(item.type || "str").toLowerCase();
    if (type.startsWith("bool")) return "bool";
    if (["int", "integer", "float", "number"].includes(type)) return "number";
    if (["list", "array", "tuple", "dict", "object", "json", "table"].some((t) => type.startsWith(t))) return "json";
    return "text";
  };

  function shown(item) {
    const value = item.value;
    if (value === null || value === undefined) return "";
    if (kindOf(item) === "json") return JSON.stringify(value, null, 1);
    return String(value);
  }

  function input(item, id) {
    const key = keyOf(item);
    const kind = kindOf(item);
    const described = `${id}-doc`;
    const common = { id, name: key, "aria-describedby": described, data: { kind } };
    let node;
    if (kind === "bool" || kind === "choice") {
      const choices = kind === "bool" ? ["true", "false"] : item.choices.map(String);
      node = el("select", common, choices.map((c) => el("option", { value: c }, c)));
      if (item.value === null || item.value === undefined) node.prepend(el("option", { value: "" }, "(unset)"));
    } else if (kind === "json") {
      node = el("textarea", { ...common, rows: "2", class: "field", spellcheck: "false" });
    } else if (kind === "secret") {
      node = el("input", { ...common, type: "password", autocomplete: "off", placeholder: item.value ? "set: type to replace it" : "not set" });
    } else {
      node = el("input", { ...common, type: kind === "number" ? "number" : "text", step: kind === "number" ? "any" : null });
    }
    const value = kind === "secret" ? "" : shown(item);
    node.value = value;
    initial.set(key, value);
    node.addEventListener("input", () => {
      dirty = true;
    });
    return node;
  }

  function row(item, index) {
    const id = `setting-${index}`;
    const key = keyOf(item);
    return el(
      "div",
      { class: "setting", data: { key } },
      el("label", { for: id }, key),
      el("div", { class: "control" }, input(item, id), item.restart ? el("small", { class: "advice" }, "Applies after a restart.") : null),
      el("p", { class: "doc hint", id: `${id}-doc` }, docOf(item)),
      el("p", { class: "error", role: "alert", hidden: true, data: { error: key } }),
    );
  }

  function value(node) {
    const kind = node.dataset.kind;
    const text = node.value;
    if (kind === "bool") return text === "" ? null : text === "true";
    if (kind === "number") return text === "" ? null : Number(text);
    if (kind === "json") return text.trim() === "" ? null : JSON.parse(text);
    return text;
  }

  function showErrors(form, errors) {
    for (const box of form.querySelectorAll("[data-error]")) {
      const message = errors[box.dataset.error];
      box.hidden = !message;
      box.textContent = message || "";
      const field = form.elements.namedItem(box.dataset.error);
      if (field && field.setAttribute) field.setAttribute("aria-invalid", message ? "true" : "false");
    }
  }

  async function save(form) {
    const values = {};
    const errors = {};
    for (const node of form.querySelectorAll("[name]")) {
      if (node.name === "filter") continue;
      if (node.value === initial.get(node.name)) continue;
      try {
        values[node.name] = value(node);
      } catch (err) {
        errors[node.name] = "Not valid JSON.";
      }
    }
    showErrors(form, errors);
    if (Object.keys(errors).length) {
      notice("Some values are not valid; nothing was saved.", true);
      return;
    }
    if (!Object.keys(values).length) {
      notice("Nothing changed.");
      return;
    }
    const response = await fetch("/api/settings", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ values }),
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) {
      const field = answer.field || answer.key;
      showErrors(form, answer.errors || (field ? { [field]: answer.error } : {}));
      notice(answer.error || `Not saved (${response.status}); nothing changed.`, true);
      return;
    }
    const restart = answer.restart || answer.needs_restart || [];
    notice(
      answer.message ||
        `Saved and applied: ${Object.keys(values).join(", ")}.${restart.length ? ` These need a restart to apply: ${restart.join(", ")}.` : ""}`,
    );
    dirty = false;
    await window.Control.reload();
  }

  function filterBox(form) {
    const box = el("input", { type: "search", name: "filter", id: "filter", placeholder: "llm.model, telegram, timeout…" });
    box.addEventListener("input", () => {
      const words = box.value.toLowerCase().trim();
      for (const setting of form.querySelectorAll(".setting")) {
        setting.hidden = Boolean(words) && !setting.textContent.toLowerCase().includes(words);
      }
      for (const group of form.querySelectorAll("fieldset.group")) {
        group.hidden = !group.querySelector(".setting:not([hidden])");
      }
    });
    return el("div", { class: "search" }, el("label", { for: "filter", class: "sr" }, "Find a setting"), box);
  }

  section({
    busy: () => dirty,
    load: async (content) => {
      if (dirty) return;
      const data = await api("/api/settings");
      initial.clear();
      let index = 0;
      const form = el("form", { id: "settings", "aria-label": "Settings", novalidate: true });
      const groups = (data.groups || []).map((group) =>
        el(
          "fieldset",
          { class: "group" },
          el("legend", {}, group.title || group.name),
          group.doc ? el("p", { class: "hint" }, group.doc) : null,
          (group.keys || group.settings || []).map((item) => row(item, index++)),
        ),
      );
      form.append(
        filterBox(form),
        ...groups,
        el("div", { class: "savebar" }, el("button", { type: "submit" }, "Save"), el("span", { class: "hint" }, "Only the values you changed are sent; a change that does not validate changes nothing.")),
      );
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        save(form).catch((err) => notice(err.message, true));
      });
      fill(content, form);
    },
  });
})();
