// dispatch ui: what every page shares. The action token (printed at start) is kept in this
// tab's sessionStorage: taken from the address's #token=... once, or typed into the field.
"use strict";
const dispatchUi = (() => {
  const KEY = "dispatch-ui-token";
  function takeToken() {
    if (!location.hash.startsWith("#token=")) return;
    sessionStorage.setItem(KEY, decodeURIComponent(location.hash.slice(7)));
    history.replaceState(null, "", location.pathname + location.search);
    const field = document.getElementById("token");
    if (field) field.value = token();
  }
  takeToken();
  window.addEventListener("hashchange", takeToken);
  function token() { return sessionStorage.getItem(KEY) || ""; }
  function setLive(up) {
    const live = document.getElementById("live");
    if (!live) return;
    live.classList.toggle("down", !up);
    live.textContent = up ? "● live" : "● reconnecting";
  }
  function stream(url, handlers) {
    const source = new EventSource(url);
    source.onopen = () => setLive(true);
    source.onerror = () => setLive(false);
    for (const [name, handle] of Object.entries(handlers)) {
      source.addEventListener(name, (event) => handle(event.data, event));
    }
    return source;
  }
  async function act(job, action) {
    const response = await fetch(`/jobs/${encodeURIComponent(job)}/actions/${action}`, {
      method: "POST", headers: {"X-Dispatch-Token": token()}, credentials: "same-origin",
    });
    let body = {};
    try { body = await response.json(); } catch (e) { body = {error: response.statusText}; }
    return {ok: response.ok && body.ok, message: body.message || body.error || response.statusText};
  }
  function age(seconds) {
    seconds = Math.max(0, seconds);
    for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
      if (seconds >= size) return `${Math.floor(seconds / size)}${unit}`;
    }
    return `${Math.floor(seconds)}s`;
  }
  document.addEventListener("DOMContentLoaded", () => {
    const field = document.getElementById("token");
    if (field) {
      field.value = token();
      field.addEventListener("change", () => sessionStorage.setItem(KEY, field.value.trim()));
    }
  });
  return {token, stream, act, age};
})();
