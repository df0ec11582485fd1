"use strict";
// The page's half of its sign-in. A sign-in hands the page a key (signin.js keeps it in
// this origin's localStorage); the server opens nothing to the session cookie alone,
// because browsers send a host's cookies to every port of it, so another program listening
// on this machine may get the cookie, but never this origin's storage. Every request the
// pages make goes through Session.fetch, which adds the key; the chat's WebSocket offers it
// as a subprotocol (a page cannot give a WebSocket a header). Sign out posts it too (a
// cookie alone ends no session); the key stays behind, dead with its session, until the
// next sign-in replaces it. A page whose browser lost the key (its site data cleared)
// goes to the sign-in page, which says why.

(() => {
  const ITEM = "switchboard-key";
  const HEADER = "X-Switchboard-Key";
  const PROTOCOL = "switchboard"; // the one the server answers with
  const KEY_PROTOCOL = "switchboard.key.";

  function key() {
    try {
      return localStorage.getItem(ITEM) || "";
    } catch (err) {
      return ""; // site data is blocked for this address
    }
  }

  // Off to the sign-in page (once: the first reason stands); "key": this browser has no
  // key, or the server refused it.
  let leaving = false;
  function signIn(why) {
    if (leaving) return;
    leaving = true;
    const here = location.pathname === "/login" ? "/" : location.pathname;
    const reason = why === "key" ? "&why=key" : "";
    location.assign(`/login?next=${encodeURIComponent(here)}${reason}`);
  }

  // fetch() with the key; same origin only (the key never goes anywhere else).
  function send(path, init) {
    const options = Object.assign({}, init || {});
    const headers = new Headers(options.headers || {});
    headers.set(HEADER, key());
    options.headers = headers;
    options.credentials = "same-origin";
    return fetch(path, options);
  }

  // What a 401 means for this page: the key is missing or refused ("key"), or the
  // session ended (signed out, expired).
  async function refusal(response) {
    const answer = await response.clone().json().catch(() => ({}));
    return !key() || answer.sign_in === "key" ? "key" : "";
  }

  // The subprotocols a WebSocket of the page offers: the one the server answers with, and
  // the one that carries the key.
  function protocols() {
    return [PROTOCOL, KEY_PROTOCOL + key()];
  }

  async function signOut(event) {
    event.preventDefault();
    try {
      await send("/logout", { method: "POST" });
    } catch (err) {
      // unreachable: the session ends when it expires, or with --sign-out-all
    }
    leaving = true;
    location.assign("/login");
  }

  window.Session = { key, fetch: send, refusal, protocols, signIn, leaving: () => leaving };

  // A page without the key would get nothing: say so at once instead of a broken page.
  if (!key()) {
    signIn("key");
    return;
  }
  document.addEventListener("submit", (event) => {
    if (event.target instanceof HTMLFormElement && event.target.classList.contains("signout")) {
      signOut(event);
    }
  });
})();
