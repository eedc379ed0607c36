// keel inbox: keeps the list live. Forms work without this file; it only
// replaces the cards when a call is held or decided anywhere, and puts the
// number waiting into the page title.
(function () {
  "use strict";
  var cards = document.getElementById("cards");
  if (!cards || !window.EventSource) return;
  var base = document.title.replace(/^\(\d+\) /, "");
  function title(n) {
    document.title = (n > 0 ? "(" + n + ") " : "") + base;
  }
  function refresh(n) {
    fetch("/fragment/inbox", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) { window.location.assign("/login"); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (html === null) return;
        cards.innerHTML = html;
        cards.setAttribute("data-count", String(n));
        title(n);
      })
      .catch(function () {});
  }
  var events = new EventSource("/events");
  events.addEventListener("changed", function (e) {
    var n = parseInt(e.data, 10) || 0;
    if (String(n) !== cards.getAttribute("data-count") || document.hidden === false) refresh(n);
  });
})();
