// The overview follows the change feed: when jobs change, the page's figures and charts are
// fetched again from the server (at most every 3 s) and swapped in.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  let pending = false;
  async function refresh() {
    pending = false;
    const response = await fetch("/overview");
    if (!response.ok) return;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const stamp = Date.now();
    for (const id of ["now", "totals", "lost"]) {
      const fresh = page.getElementById(id);
      if (fresh) document.getElementById(id)?.replaceWith(document.importNode(fresh, true));
    }
    for (const id of ["ends-chart", "lost-chart"]) {
      const img = document.getElementById(id);
      img.src = img.src.split("?")[0] + `?t=${stamp}`;
    }
  }
  dispatchUi.stream("/events", {
    rows: () => { if (!pending) { pending = true; setTimeout(refresh, 3000); } },
  });
});
