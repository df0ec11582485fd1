"use strict";
// One turn's trace: every model call, tool call and guard decision, as recorded.

(() => {
  const turn = decodeURIComponent(location.pathname.split("/").pop() || "");
  document.getElementById("turn").textContent = turn;
  const target = document.getElementById("events");

  function cell(text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  Control.request(`/api/traces/${encodeURIComponent(turn)}`)
    .then(async (response) => {
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) {
        target.textContent = answer.error || `Cannot load the trace (${response.status}).`;
        return;
      }
      const table = document.createElement("table");
      const head = table.createTHead().insertRow();
      for (const h of ["t (s)", "event", "details"]) {
        const th = document.createElement("th");
        th.textContent = h;
        head.append(th);
      }
      const body = table.createTBody();
      for (const event of answer.events) {
        const row = body.insertRow();
        if (event.event === "guard") row.className = "guard";
        const details = Object.entries(event)
          .filter(([key]) => key !== "t" && key !== "event")
          .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`)
          .join("  ");
        row.append(cell(Number(event.t || 0).toFixed(3)), cell(event.event || "?"), cell(details, "details"));
      }
      const wrap = document.createElement("div");
      wrap.className = "table-wrap";
      wrap.append(table);
      target.replaceChildren(wrap);
    })
    .catch((err) => {
      if (err.message !== "signed out") target.textContent = "Gateway unreachable.";
    });
})();
