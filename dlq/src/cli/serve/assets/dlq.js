// dlq serve: the page's only script (served from /static, as the
// Content-Security-Policy requires). Everything works without it; it adds:
// live updates (the page refreshes its content when the database changes)
// and "choose every row" on the items page.
(function () {
  "use strict";
  var body = document.body;
  var lastEvent = body.getAttribute("data-last-event");
  var light = document.getElementById("live");

  // Ticking "select all" ticks every row of this page. Listened for on the
  // document: a live update replaces the table and its checkbox.
  document.addEventListener("change", function (event) {
    var all = event.target;
    if (!all || all.id !== "select-all") return;
    var boxes = document.querySelectorAll('#items-form input[name="item"]');
    for (var i = 0; i < boxes.length; i++) boxes[i].checked = all.checked;
  });

  // A person busy with the page (a ticked box, typing, a confirmation)
  // is not interrupted: the page waits for them.
  function busy() {
    if (document.querySelector('input[name="item"]:checked')) return true;
    var active = document.activeElement;
    if (active && (active.tagName === "INPUT" || active.tagName === "SELECT")) return true;
    return !!document.getElementById("confirm");
  }

  function refresh() {
    fetch(location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        var main = document.getElementById("main");
        if (fresh && main && !busy()) {
          main.replaceWith(document.importNode(fresh, true));
          lastEvent = doc.body.getAttribute("data-last-event");
          body.setAttribute("data-last-event", lastEvent);
        }
      })
      .catch(function () {});
  }

  function poll() {
    fetch("/api/live", { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (live) {
        if (light) light.className = "live on";
        var changed = String(live.last_event_id) !== lastEvent;
        var computing = !!document.getElementById("computing");
        if ((changed || computing || live.runs_running > 0) && !busy()) refresh();
      })
      .catch(function () { if (light) light.className = "live off"; })
      .then(function () { setTimeout(poll, 2000); });
  }
  if (!document.getElementById("confirm")) setTimeout(poll, 2000);
})();
