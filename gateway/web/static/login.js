"use strict";
// Shows a failed attempt and keeps where to go next; the token itself only travels in the
// POST body of the form, never in the address.
(() => {
  const params = new URLSearchParams(location.search);
  if (params.has("failed")) document.getElementById("failed").hidden = false;
  const next = params.get("next") || "/";
  if (/^\/[A-Za-z0-9/_-]*$/.test(next) && !next.startsWith("//")) {
    document.getElementById("next").value = next;
  }
})();
