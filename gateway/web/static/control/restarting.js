"use strict";
// The page shown while the gateway restarts. The settings' Restart button leads here (so
// a reload posts nothing); the restart waits for this page to load, as the web
// server is the first part to stop: this script says it has (the one-time ticket; a
// reload's ticket is spent, and nothing restarts again). Then it asks which start of the
// gateway answers (GET /api/restart) until one other than the one asked to restart does,
// and goes back to the settings.

(() => {
  const box = document.getElementById("restarting");
  if (!box) return;
  const { from, ticket, back } = box.dataset;
  const state = document.getElementById("restart-state");
  const began = Date.now();
  const PATIENCE_MS = 120000;

  async function poll() {
    try {
      const response = await Session.fetch("/api/restart", { cache: "no-store" });
      if (response.status === 401) {
        Session.signIn(await Session.refusal(response));
        return;
      }
      if (response.ok && (await response.json()).start !== from) {
        location.replace(back);
        return;
      }
    } catch (err) {
      // no answer: it is between its stop and its start
    }
    if (Date.now() - began > PATIENCE_MS) {
      state.textContent = "The gateway has not answered for two minutes: `switchboard status` and `switchboard logs` say why. This page keeps waiting.";
    }
    setTimeout(poll, 1000);
  }

  async function begin() {
    if (ticket) {
      await Session.fetch("/api/restart", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ ticket }),
      }).catch(() => null); // spent or already restarting: the polling tells
    }
    poll();
  }

  begin();
})();
