"use strict";
// Memory and workspace: MEMORY.md, daily notes, people's and groups' memory, the bootstrap
// files and skills. Open one, edit it, review the changes as a diff, then save; a file the
// assistant changed meanwhile is not overwritten (the diff is shown again). Each save is in
// the audit log with who and when, listed below.

(() => {
  const { el, fill, number, ago, timeEl, table, notice, api, post, section } = window.Control;

  const GROUPS = [
    ["memory", "Long-term memory"],
    ["daily", "Daily notes"],
    ["person", "People's memory"],
    ["group", "Groups' memory"],
    ["bootstrap", "Bootstrap files (read into every prompt)"],
    ["skill", "Skills"],
  ];
  let editing = false; // an open editor is never redrawn under the keyboard

  function fileUrl(name) {
    return `/api/workspace/${name.split("/").map(encodeURIComponent).join("/")}`;
  }

  function diffView(diff) {
    const pre = el("pre", { class: "diff", tabindex: "0", "aria-label": "Changes to save" });
    if (!diff) {
      pre.append("No changes.");
      return pre;
    }
    for (const line of diff.split("\n")) {
      if (!line) continue;
      const kind = line.startsWith("+++") || line.startsWith("---") || line.startsWith("@@") ? "at" : line[0] === "+" ? "add" : line[0] === "-" ? "del" : "";
      pre.append(el("span", { class: kind || null }, `${line}\n`));
    }
    return pre;
  }

  async function open(name) {
    const file = await api(fileUrl(name));
    const content = document.getElementById("content");
    let base = file.digest;
    const area = el("textarea", { id: "editor", class: "field", spellcheck: "false", readonly: file.whole ? null : true }, "");
    area.value = file.text;
    const review = el("div", { id: "review" });
    // an edit after the review takes the review (and its Save) away: only what was
    // reviewed is ever saved
    area.addEventListener("input", () => fill(review));
    notice("");
    const close = el("button", { type: "button", class: "secondary" }, "Close");
    close.addEventListener("click", () => {
      editing = false;
      wanted = null;
      history.replaceState(null, "", "/memory");
      window.Control.reload();
    });
    const check = el("button", { type: "button", disabled: file.whole ? null : true }, "Review changes");
    check.addEventListener("click", async () => {
      try {
        const reviewed = area.value;
        const answer = await post("/api/memory/diff", { name, text: reviewed, base });
        base = answer.digest; // the save replaces what the diff was made against, nothing newer
        const save = el("button", { type: "button", disabled: answer.diff ? null : true }, "Save");
        save.addEventListener("click", async () => {
          save.disabled = true;
          try {
            const saved = await post("/api/memory/save", { name, text: reviewed, base });
            base = saved.digest;
            fill(review, el("p", { class: "notice", role: "status" }, saved.message));
          } catch (err) {
            notice(err.message, true);
            if (err.status === 409) {
              fill(review, el("p", { class: "notice error" }, "The file changed meanwhile. Review the changes again before saving."));
            }
          }
        });
        fill(review,
          el("h3", { id: "diff-title" }, "Changes to save"),
          answer.changed_since ? el("p", { class: "notice error" }, "The file changed since you opened it: the diff is against what it holds now.") : null,
          diffView(answer.diff),
          el("div", { class: "actions" }, save),
        );
        save.focus();
      } catch (err) {
        notice(err.message, true);
      }
    });
    editing = true;
    history.replaceState(null, "", `/memory?file=${encodeURIComponent(name)}`);
    fill(content,
      el(
        "section",
        { class: "card", "aria-labelledby": "file-title" },
        el("h3", { id: "file-title" }, name),
        file.whole ? null : el("p", { class: "notice error" }, "This file is too long to edit here; it is shown cut."),
        el("label", { for: "editor", class: "sr" }, `Contents of ${name}`),
        area,
        el("div", { class: "actions" }, check, close),
        review,
      ),
    );
    area.focus();
  }

  async function listing(content) {
    const data = await api("/api/memory");
    const groups = GROUPS.map(([kind, title]) => {
      const files = data.files.filter((f) => f.kind === kind);
      if (!files.length) return null;
      return el(
        "section",
        { class: "card", "aria-label": title },
        el("h3", {}, title),
        el(
          "ul",
          { class: "files-list" },
          files.map((f) => {
            const button = el("button", { type: "button", class: "link" }, f.name);
            button.addEventListener("click", () => open(f.name).catch((err) => notice(err.message, true)));
            return el("li", {}, button, el("span", { class: "muted" }, ` ${number(f.size)} bytes, changed ${ago(f.modified)}`));
          }),
        ),
      );
    });
    fill(content,
      el("div", { class: "grid" }, groups),
      el("h3", {}, "Edits made here"),
      table(
        ["File", "By", "When"],
        data.edits.map((e) => [e.path, e.by, timeEl(e.at)]),
        { empty: "No edits yet." },
      ),
    );
  }

  let wanted = new URLSearchParams(location.search).get("file"); // a file to open at once
  section({
    busy: () => editing,
    load: async (content) => {
      if (editing) return;
      if (wanted) {
        try {
          await open(wanted);
          return;
        } catch (err) {
          // a file that is not there (an old link): say so, and show the files there are
          wanted = null;
          history.replaceState(null, "", "/memory");
          notice(err.message, true);
        }
      }
      await listing(content);
    },
  });
})();
