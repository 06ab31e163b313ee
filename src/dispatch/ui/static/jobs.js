// The jobs table, kept live: the server's change feed sends the rows that changed
// (event "rows"); each is updated in place, added at the top, or removed when it no longer
// matches the filters. Everything is inserted as text (textContent), never as HTML.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const table = document.getElementById("jobs");
  const body = table.tBodies[0];
  const filters = JSON.parse(table.dataset.filters);
  // the server's clock against this browser's, for ages
  const skew = Number(table.dataset.now) - Date.now() / 1000;

  function matches(row) {
    return (!filters.state || row.state === filters.state)
      && (!filters.cause || row.cause === filters.cause)
      && (!filters.cluster || row.cluster === filters.cluster)
      && (!filters.name || row.job.toLowerCase().includes(filters.name.toLowerCase()));
  }
  function badge(kind, value) {
    const span = document.createElement("span");
    span.className = `badge ${kind}-${value}`;
    span.textContent = value;
    return span;
  }
  function cells(tr, row) {
    tr.replaceChildren();
    const add = (cls, content) => {
      const td = document.createElement("td");
      td.className = cls;
      if (content instanceof Node) td.append(content); else td.textContent = content;
      tr.append(td);
    };
    const link = document.createElement("a");
    link.href = `/jobs/${encodeURIComponent(row.job)}`;
    link.textContent = row.job;
    add("id", link);
    add("state", badge("state", row.state));
    add("cause", row.cause ? badge("cause", row.cause) : "");
    add("cluster", row.cluster);
    add("num attempts", String(row.attempts));
    add("age", dispatchUi.age(Date.now() / 1000 + skew - row.createdAt));
    add("submitter", row.submittedBy || "");
    add("summary", row.summary);
    tr.dataset.job = row.job;
    tr.dataset.created = row.createdAt;
  }
  function apply(row) {
    const existing = body.querySelector(`tr[data-job="${CSS.escape(row.job)}"]`);
    if (!matches(row)) { if (existing) existing.remove(); return; }
    const tr = existing || document.createElement("tr");
    cells(tr, row);
    if (!existing) {
      const newer = Array.from(body.rows).find((r) => Number(r.dataset.created) < row.createdAt);
      body.insertBefore(tr, newer || null);
    }
    tr.classList.remove("flash"); void tr.offsetWidth; tr.classList.add("flash");
  }
  dispatchUi.stream("/events", {
    rows: (data) => {
      const message = JSON.parse(data);
      message.rows.forEach(apply);
      document.getElementById("total").textContent = message.total.toLocaleString("en");
      for (const el of document.querySelectorAll("[data-state]")) {
        el.textContent = message.counts[el.dataset.state] || 0;
      }
      const empty = document.getElementById("empty");
      if (empty && body.rows.length) empty.remove();
      const unfiltered = !filters.state && !filters.cause && !filters.cluster && !filters.name;
      document.getElementById("shown").textContent = unfiltered
        ? `showing ${body.rows.length.toLocaleString("en")} of ${message.total.toLocaleString("en")}`
        : `showing ${body.rows.length.toLocaleString("en")} matching (kept live)`;
    },
  });
  setInterval(() => {
    for (const tr of body.rows) {
      tr.querySelector(".age").textContent = dispatchUi.age(Date.now() / 1000 + skew - Number(tr.dataset.created));
    }
  }, 30000);
});
