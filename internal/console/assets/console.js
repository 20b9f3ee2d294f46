// fleetd console: forms post with the session's CSRF token, the live part
// of a page follows the server's event stream, and (opt-in) the browser
// notifies when something enters "Needs you". No inline script, no build
// step.
"use strict";
(function () {
  const meta = document.querySelector('meta[name="csrf"]');
  const csrf = meta ? meta.content : "";
  const flash = document.getElementById("flash");

  function show(text, bad) {
    if (!flash) return;
    flash.textContent = text || "";
    flash.className = bad ? "bad" : "good";
  }

  document.addEventListener("submit", async function (ev) {
    const form = ev.target;
    if (!(form instanceof HTMLFormElement) || form.method !== "post") return;
    ev.preventDefault();
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) return;
    const data = new FormData(form);
    if (ev.submitter && ev.submitter.name) data.set(ev.submitter.name, ev.submitter.value);
    let body;
    try {
      const resp = await fetch(form.action, {
        method: "POST", body: data, credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf },
      });
      try { body = await resp.json(); } catch (e) { body = { error: "HTTP " + resp.status }; }
    } catch (e) {
      body = { error: "fleetd is not reachable: " + e };
    }
    const diff = document.getElementById("diff");
    if (diff && "diff" in body) diff.textContent = body.diff || "(no change)";
    else if (diff && body.ok && data.get("dryRun") === "1") diff.textContent = "(no change)";
    show(body.error || body.message, !!body.error);
    if (body.ok && "reset" in form.dataset) form.reset();
    if (body.ok && body.redirect && data.get("dryRun") !== "1") window.location.assign(body.redirect);
  });

  // Replacing the live part keeps what the user is typing in it.
  function replace(el, html) {
    const kept = {};
    const active = document.activeElement;
    const focused = active && el.contains(active) && active.id ? active.id : "";
    el.querySelectorAll("textarea[id], input[id]").forEach(function (i) { kept[i.id] = i.value; });
    el.innerHTML = html;
    Object.keys(kept).forEach(function (id) {
      const i = document.getElementById(id);
      if (i) i.value = kept[id];
    });
    if (focused) {
      const f = document.getElementById(focused);
      if (f) f.focus();
    }
  }

  // Notifications: opt-in, remembered in this browser.
  const button = document.getElementById("notify");
  const supported = "Notification" in window;
  function enabled() {
    return supported && Notification.permission === "granted" && localStorage.getItem("fleetd-notify") === "on";
  }
  function label() {
    if (!button) return;
    button.hidden = !supported;
    button.textContent = enabled() ? "Notifications on" : "Notify me";
  }
  if (button) {
    label();
    button.addEventListener("click", async function () {
      if (enabled()) {
        localStorage.setItem("fleetd-notify", "off");
      } else if ((await Notification.requestPermission()) === "granted") {
        localStorage.setItem("fleetd-notify", "on");
      }
      label();
    });
  }
  function needs() {
    const m = new Map();
    document.querySelectorAll("[data-key]").forEach(function (n) { m.set(n.dataset.key, n.dataset.text); });
    return m;
  }
  let seen = needs();
  function notifyNew() {
    const now = needs();
    if (enabled()) {
      now.forEach(function (text, key) {
        if (!seen.has(key)) new Notification("fleetd: needs you", { body: text, tag: key });
      });
    }
    seen = now;
  }

  const live = document.getElementById("live");
  if (live && live.dataset.stream) {
    const es = new EventSource(live.dataset.stream);
    es.addEventListener("update", function (e) {
      replace(live, e.data);
      live.dataset.updates = String(Number(live.dataset.updates || "0") + 1);
      notifyNew();
    });
    es.addEventListener("gone", function () {
      es.close();
      show("This member is gone.", true);
    });
    es.addEventListener("error", function () {
      if (es.readyState === EventSource.CLOSED) show("Lost fleetd; reload the page.", true);
    });
  }
})();
