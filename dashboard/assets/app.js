// tgrelay dashboard: live refresh. The pages work without it; with it, a
// page marked data-live refetches itself when the server's event stream
// ticks (or every few seconds when the stream is refused), and swaps in
// the fresh #live region. Nothing else runs.
(function () {
  "use strict";
  var events = document.body.getAttribute("data-live");
  var status = document.getElementById("live-status");
  if (!events || !window.fetch || !window.DOMParser) return;
  var busy = false, timer = null;

  function show(state, text) {
    if (!status) return;
    status.setAttribute("data-state", state);
    status.textContent = text;
  }

  function refresh() {
    if (busy || document.hidden) return;
    // Do not pull the page away from under a focused form control.
    var a = document.activeElement;
    if (a && (a.tagName === "INPUT" || a.tagName === "SELECT")) return;
    busy = true;
    fetch(location.href, { credentials: "same-origin", cache: "no-store", redirect: "error" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live"), cur = document.getElementById("live");
        if (fresh && cur) cur.replaceWith(document.adoptNode(fresh));
        if (timer === null) show("live", "live");
        else show("polling", "refreshing");
      })
      .catch(function () { show("stale", "offline"); })
      .then(function () { busy = false; });
  }

  function poll() {
    if (timer !== null) return;
    timer = setInterval(refresh, 5000);
    show("polling", "refreshing");
  }

  if (!window.EventSource) { poll(); return; }
  var es = new EventSource(events);
  es.addEventListener("open", function () { show("live", "live"); });
  es.addEventListener("tick", refresh);
  es.addEventListener("error", function () {
    // A refused stream (too many open, or the relay stopping) closes for
    // good; fall back to polling. A dropped one reconnects by itself.
    if (es.readyState === EventSource.CLOSED) poll();
    else show("stale", "reconnecting");
  });
})();
