"use strict";
// Memory and workspace: MEMORY.md, daily notes, people's and groups' memory, the bootstrap
// files and skills. Open one, edit it, review the changes as a diff, then save. What the
// assistant wrote to the file meanwhile is never lost: it is merged with the owner's edit,
// and where both changed the same lines the owner decides what stays. Each save is in the
// audit log with who and when, listed below.

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

  // A conflict's lines as shown ("" : the side removed them).
  function lines(text, removed) {
    return el("pre", { class: "block" }, text || removed);
  }

  // The parts both sides changed, each for the owner to decide: their lines and the file's
  // now, and which to keep. Nothing is kept or dropped until every one is decided.
  function conflictsView(parts, resolved) {
    const conflicts = parts.filter((p) => "mine" in p);
    const choices = conflicts.map(() => null);
    const use = el("button", { type: "button", disabled: true }, "Use these choices");
    const items = conflicts.map((c, i) => {
      const name = `conflict-${i}`;
      const choice = (value, label) => {
        const id = `${name}-${value}`;
        const input = el("input", { type: "radio", name, id, value });
        input.addEventListener("change", () => {
          choices[i] = value;
          use.disabled = choices.includes(null);
        });
        return el("label", { for: id, class: "choice" }, input, ` ${label}`);
      };
      return el(
        "fieldset",
        { class: "conflict" },
        el("legend", {}, `Conflict ${i + 1} of ${conflicts.length}`),
        el(
          "div",
          { class: "sides" },
          el("div", {}, el("h4", {}, "Yours"), lines(c.mine, "(nothing: you removed these lines)")),
          el("div", {}, el("h4", {}, "In the file now"), lines(c.theirs, "(nothing: these lines were removed)")),
        ),
        el("div", { class: "choices" }, choice("mine", "Keep yours"), choice("theirs", "Keep the file's"), choice("both", "Keep both (the file's first)")),
      );
    });
    use.addEventListener("click", () => {
      let k = 0;
      const text = parts
        .map((p) => {
          if (!("mine" in p)) return p.text;
          const chosen = choices[k++];
          if (chosen === "mine") return p.mine;
          if (chosen === "theirs") return p.theirs;
          const gap = p.theirs && p.mine && !p.theirs.endsWith("\n") ? "\n" : "";
          return p.theirs + gap + p.mine;
        })
        .join("");
      resolved(text);
    });
    return [
      el("h3", { id: "conflicts-title" }, "You and the assistant changed the same lines"),
      el("p", { class: "notice error" }, "The file changed since you opened it (the assistant may have added a note) where you changed it too. Decide what stays in each place; the rest of both changes is kept."),
      items,
      el("div", { class: "actions" }, use),
    ];
  }

  async function open(name) {
    const file = await api(fileUrl(name));
    const content = document.getElementById("content");
    // the version the editor's text is made from: a save is merged with what changed the
    // file since (the assistant's notes), never written over it
    let base = { digest: file.digest, text: file.text };
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

    // the editor's text on top of the file as it is now (``now``: its text, ``digest``)
    function rebase(text, now, digest) {
      area.value = text;
      base = { digest, text: now };
    }

    function conflicted(parts, now, digest) {
      fill(review, conflictsView(parts, (text) => {
        rebase(text, now, digest);
        reviewChanges();
      }));
      review.querySelector("input").focus();
    }

    async function reviewChanges() {
      try {
        const answer = await post("/api/memory/diff", { name, text: area.value, base: base.digest, base_text: base.text });
        if (answer.parts) {
          conflicted(answer.parts, answer.now, answer.digest);
          return;
        }
        if (answer.changed_since) rebase(answer.text, answer.now, answer.digest);
        const reviewed = area.value;
        const save = el("button", { type: "button", disabled: answer.diff ? null : true }, "Save");
        save.addEventListener("click", async () => {
          save.disabled = true;
          area.readOnly = true; // what is saved is what was reviewed
          try {
            const saved = await post("/api/memory/save", { name, text: reviewed, base: base.digest, base_text: base.text });
            rebase(saved.text, saved.text, saved.digest);
            fill(review, el("p", { class: "notice", role: "status" }, saved.message));
          } catch (err) {
            if (err.status === 409 && err.answer && err.answer.parts) {
              notice("");
              conflicted(err.answer.parts, err.answer.current.text, err.answer.current.digest);
            } else {
              notice(err.message, true);
            }
          } finally {
            area.readOnly = false;
          }
        });
        fill(review,
          el("h3", { id: "diff-title" }, "Changes to save"),
          answer.merged ? el("p", { class: "notice", role: "status" }, "The file changed since you opened it (the assistant may have added a note): those changes are kept, merged with yours, and shown in the editor.") : null,
          diffView(answer.diff),
          el("div", { class: "actions" }, save),
        );
        save.focus();
      } catch (err) {
        notice(err.message, true);
      }
    }

    const check = el("button", { type: "button", disabled: file.whole ? null : true }, "Review changes");
    check.addEventListener("click", reviewChanges);
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
