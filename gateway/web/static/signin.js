"use strict";
// The page a sign-in answers with: it hands the sign-in's page key to this origin's
// storage, then opens the page the browser was going to, in this page's place. The key
// never travels in a URL or a cookie: browsers send a host's cookies to every port of it,
// while localStorage belongs to this origin alone (scheme, host and port), so a program
// listening on another port of this machine gets the cookie at most, which opens nothing
// without the key. session.js sends the key with every request the pages make.

(() => {
  const box = document.getElementById("signed-in");
  if (!box) return;
  const { key, next } = box.dataset;
  box.removeAttribute("data-key");
  try {
    localStorage.setItem("switchboard-key", key);
  } catch (err) {
    const state = document.getElementById("signed-in-state");
    state.className = "error";
    state.setAttribute("role", "alert");
    state.textContent =
      "Signed in, but this browser does not let the page keep its key (site data is blocked for this address). Allow site data for it, then sign in again.";
    return;
  }
  location.replace(next && next.startsWith("/") && !next.startsWith("//") ? next : "/");
})();
