"use strict";
// People and access: pending pairing requests (Approve / Deny, as `switchboard pairing
// approve` does), and everyone who may talk to the assistant, by name, with their role, how
// they got in, their chats, time zone and usage; anyone paired or listed in config can be
// revoked (as `switchboard pairing revoke`: the pairing and the place in config.toml's
// lists; the answer says what still lets them in). People with several addresses (config's
// ids, or /link) are shown with all of them; the owner links and unlinks addresses, and
// confirms a link that waits for their word.

(() => {
  const { el, fill, number, timeEl, table, api, post, action, section } = window.Control;

  // what a revocation takes away: the pairing, and the place in config's lists
  const LETS_IN = new Set(["owners", "admins", "allow_from", "paired"]);
  const HOW = { owners: "owner (config)", admins: "admin (config)", allow_from: "allowed (config)", paired: "paired", wrote: "wrote", linked: "linked" };

  function pending(requests) {
    return el(
      "section",
      { class: "card", "aria-labelledby": "pending-title" },
      el("h3", { id: "pending-title" }, "Waiting to be let in"),
      table(
        ["Who", "Code", "Asked", ""],
        requests.map((p) => [
          el("span", { id: `who-${p.code}` }, el("strong", {}, p.sender_name || "no name"), el("br"), el("small", { class: "muted" }, `${p.channel} user `, el("span", { class: "id" }, p.sender_id))),
          el("code", { class: "id" }, p.code),
          el("span", {}, timeEl(p.created_at), el("br"), el("small", { class: "muted" }, "expires ", timeEl(p.expires_at))),
          el(
            "span",
            { class: "actions" },
            // labelled Approve and Deny exactly; who it is about is their description
            action("Approve", () => post(`/api/pairing/${encodeURIComponent(p.code)}/approve`), {
              key: p.code,
              describedby: `who-${p.code}`,
            }),
            action("That's me", () => post(`/api/pairing/${encodeURIComponent(p.code)}/owner`), {
              class: "secondary",
              key: p.code,
              describedby: `who-${p.code}`,
              confirm: `Make ${p.channel} user ${p.sender_id} (${p.sender_name || "no name"}) an owner? Only for an account of your own: an owner may do everything you may.`,
            }),
            action("Deny", () => post(`/api/pairing/${encodeURIComponent(p.code)}/deny`), {
              class: "secondary",
              key: p.code,
              describedby: `who-${p.code}`,
            }),
          ),
        ]),
        { empty: "No one is waiting." },
      ),
      el("p", { class: "hint" }, "Approving lets them talk to the assistant as a member, and tells them so at once. ",
        "Wrote to the assistant yourself from a new account? \u201cThat's me\u201d makes that account an owner of its channel."),
    );
  }

  function everyone(people, days) {
    return el(
      "section",
      { class: "card", "aria-labelledby": "people-title" },
      el("h3", { id: "people-title" }, "Everyone who may talk to the assistant"),
      table(
        ["Name", "Role", "How", "Chats", "Time zone", { label: `Used (${days} days)`, num: true }, ""],
        people.map((p) => [
          el("span", {}, el("strong", {}, p.name), el("br"), el("small", { class: "muted" }, `${p.channel} `, el("span", { class: "id" }, p.sender_id))),
          p.role,
          [p.how.map((h) => HOW[h] || h).join(", "), p.linked_with.length ? el("small", { class: "muted" }, el("br"), "also ", p.linked_with.join(", ")) : null],
          p.chats.length ? p.chats.join("; ") : el("span", { class: "muted" }, "—"),
          el("span", { title: p.timezone_from }, p.timezone, el("br"), el("small", { class: "muted" }, p.timezone_from)),
          `${number(p.turns)} ${p.turns === 1 ? "turn" : "turns"}, ${number(p.tokens)} ${p.tokens === 1 ? "token" : "tokens"}`,
          p.how.some((h) => LETS_IN.has(h))
            ? action("Revoke", () => post("/api/people/revoke", { channel: p.channel, sender_id: p.sender_id }), {
                class: "secondary",
                key: p.person,
                aria: `Revoke ${p.name}`,
                confirm: `Revoke ${p.name}? Their pairing and their place in ${p.channel}'s owners, admins and allow_from in config.toml go at once; to talk to the assistant again they have to ask to pair.`,
              })
            : el("span", { class: "muted" }, "—"),
        ]),
        { empty: "Nobody yet: people appear here once they are listed, paired or write." },
      ),
      el(
        "p",
        { class: "hint" },
        "Roles come from each channel's owners and admins in the settings; everyone else is a member. ",
        "This control center is the owner's: admins approve requests and pairing in their own chats (/approve, /pair).",
      ),
    );
  }

  function linked(people, waiting) {
    const address = el("input", { type: "text", id: "link-address", placeholder: "slack:U0123", autocomplete: "off" });
    const to = el("input", { type: "text", id: "link-to", placeholder: "telegram:123456", autocomplete: "off" });
    return el(
      "section",
      { class: "card", "aria-labelledby": "linked-title" },
      el("h3", { id: "linked-title" }, "One person, many addresses"),
      table(
        ["Person", "Addresses", "Role", "Conversation"],
        people.map((p) => [
          el("strong", {}, p.name),
          el(
            "ul",
            { class: "plain" },
            p.addresses.map((a) =>
              el(
                "li",
                {},
                el("span", { class: "id" }, a),
                " ",
                p.listed.includes(a)
                  ? el("small", { class: "muted", title: "Listed together in config.toml ([people] ids)" }, "config")
                  : action("Unlink", () => post("/api/people/unlink", { address: a }), {
                      class: "secondary",
                      key: a,
                      aria: `Unlink ${a}`,
                      confirm: `Unlink ${a}? It becomes a person of its own again.`,
                    }),
              ),
            ),
          ),
          p.role,
          p.one_conversation ? "one across channels" : "one per chat",
        ]),
        { empty: "Nobody has linked addresses: people link their chats with /link, or config lists them ([people.<name>] ids)." },
      ),
      waiting.length
        ? table(
            ["Waiting for you", "Code", ""],
            waiting.map((w) => [
              `${w.sent_by} asks to join ${w.asked_by}`,
              el("code", { class: "id" }, w.code),
              action("Confirm", () => post("/api/people/confirm", { code: w.code }), {
                key: w.code,
                confirm: `Make ${w.sent_by} and ${w.asked_by} one person? The higher role of the two applies to both.`,
              }),
            ]),
          )
        : null,
      el(
        "p",
        { class: "hint" },
        el("label", { for: "link-address" }, "Link "),
        address,
        el("label", { for: "link-to" }, " to the person of "),
        to,
        " ",
        action("Link", () => post("/api/people/link", { address: address.value, to: to.value }), {
          key: "link",
          // as Confirm asks: a link gives the address the person's role (an owner's too)
          confirm: () =>
            `Make ${address.value.trim() || "that address"} one person with ${to.value.trim() || "that person"}? ` +
            "The higher role of the two applies to both: linked to the owner, it becomes an owner.",
        }),
      ),
    );
  }

  section({
    topic: "people",
    load: async (content) => {
      const data = await api("/api/people");
      fill(content, pending(data.pending), everyone(data.people, data.usage_days), linked(data.linked, data.waiting_links));
    },
  });
})();
