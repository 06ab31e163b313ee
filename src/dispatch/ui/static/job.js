// A job's page: the detail is rendered again by the server whenever the change feed names
// this job (event "changed"); the logs of the chosen rank follow live (event "line").
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const detail = document.getElementById("detail");
  const job = detail.dataset.job;
  const base = `/jobs/${encodeURIComponent(job)}`;
  const plans = new Map();

  function wire() {
    for (const button of detail.querySelectorAll(".actions button")) {
      button.addEventListener("click", async () => {
        const result = document.getElementById("action-result");
        result.className = ""; result.textContent = `${button.dataset.action}…`;
        const answer = await dispatchUi.act(job, button.dataset.action);
        result.className = answer.ok ? "ok" : "refused";
        result.textContent = answer.message;
      });
    }
    for (const plan of detail.querySelectorAll("details.plan")) {
      const attempt = plan.dataset.attempt;
      if (plans.has(attempt)) { plan.querySelector(".plan-body").innerHTML = plans.get(attempt); }
      plan.addEventListener("toggle", async () => {
        if (!plan.open || plans.has(attempt)) return;
        const response = await fetch(`${base}/plan?attempt=${encodeURIComponent(attempt)}`);
        // the server renders the fragment with autoescaping: it carries no markup of the job's
        plans.set(attempt, await response.text());
        plan.querySelector(".plan-body").innerHTML = plans.get(attempt);
      });
    }
  }
  async function refresh() {
    const open = new Set(Array.from(detail.querySelectorAll("details[open]")).map(
      (d) => d.className + (d.dataset.attempt || "") + (d.closest(".lane")?.dataset.attempt || "")));
    const response = await fetch(`${base}/detail`);
    if (!response.ok) return;
    const result = document.getElementById("action-result")?.cloneNode(true);
    detail.innerHTML = await response.text();
    for (const d of detail.querySelectorAll("details")) {
      const key = d.className + (d.dataset.attempt || "") + (d.closest(".lane")?.dataset.attempt || "");
      if (open.has(key)) d.open = true;
    }
    if (result) document.getElementById("action-result")?.replaceWith(result);
    wire();
  }
  wire();
  dispatchUi.stream(`${base}/events`, {changed: refresh});

  const logs = document.getElementById("logs");
  const state = document.getElementById("logs-state");
  const rank = document.getElementById("rank");
  let source = null;
  function follow() {
    if (source) source.close();
    logs.textContent = "";
    state.textContent = "following…";
    const query = rank.value === "" ? "" : `?rank=${encodeURIComponent(rank.value)}`;
    source = new EventSource(`${base}/logs${query}`);
    source.addEventListener("line", (event) => {
      logs.append(document.createTextNode(event.data + "\n"));
      while (logs.childNodes.length > 5000) logs.firstChild.remove();
      logs.scrollTop = logs.scrollHeight;
    });
    const finish = (text) => (event) => { state.textContent = text + (event.data ? `: ${event.data}` : ""); source.close(); };
    source.addEventListener("end", finish("ended"));
    source.addEventListener("failed", (event) => {
      const failed = JSON.parse(event.data);
      source.close();
      if (failed.retry) {
        state.textContent = `no output yet: ${failed.message} (trying again in 1 s)`;
        setTimeout(follow, 1000);
      } else {
        state.textContent = `no output to show: ${failed.message}`;
      }
    });
  }
  rank.addEventListener("change", follow);
  follow();
});
