// The sessions sidebar as each person leaves it: collapsed or not and how wide (dragged by its
// edge's grip), remembered in this browser; and each row's actions behind a "…" button where
// there is no hover (a touch screen), so that a title keeps the row's width.
(function () {
  "use strict";

  var COLLAPSED = "rollback.sidebar.collapsed";
  var WIDTH = "rollback.sidebar.width";
  var MIN = 180, MAX = 480;
  var NARROW = window.matchMedia("(max-width: 700px)");

  function store() {
    try { return window.localStorage; } catch (e) { return null; }
  }
  function sidebar() { return document.getElementById("sidebar"); }

  function restore() {
    var saved = store();
    var aside = sidebar();
    if (!saved || !aside) return;
    var width = parseInt(saved.getItem(WIDTH) || "", 10);
    if (width >= MIN && width <= MAX) aside.style.width = width + "px";
    if (saved.getItem(COLLAPSED) === "true" && !NARROW.matches &&
        !document.body.classList.contains("sidebar-collapsed")) {
      document.body.classList.add("sidebar-collapsed");
      window.dispatchEvent(new Event("resize"));  // app.js's syncLayout: aria-expanded
    }
  }

  // After app.js toggled the class (its listener was added first).
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest("[data-layout-toggle=sidebar]");
    var saved = store();
    if (toggle && saved && !NARROW.matches) {
      saved.setItem(COLLAPSED, String(document.body.classList.contains("sidebar-collapsed")));
    }
    var more = event.target.closest && event.target.closest("[data-row-more]");
    document.querySelectorAll(".session-list li.show-actions").forEach(function (row) {
      if (!more || row !== more.closest("li")) {
        row.classList.remove("show-actions");
        var button = row.querySelector("[data-row-more]");
        if (button) button.setAttribute("aria-expanded", "false");
      }
    });
    if (more) {
      var row = more.closest("li");
      var open = row.classList.toggle("show-actions");
      more.setAttribute("aria-expanded", String(open));
    }
  });

  // The width the grip leaves (the browser's own resize: horizontal), once it settles.
  function watchWidth() {
    var aside = sidebar();
    var saved = store();
    if (!aside || !saved || !window.ResizeObserver) return;
    var timer = null;
    new ResizeObserver(function () {
      if (NARROW.matches || document.body.classList.contains("sidebar-collapsed")) return;
      window.clearTimeout(timer);
      timer = window.setTimeout(function () {
        var width = Math.round(aside.getBoundingClientRect().width);
        if (width >= MIN && width <= MAX) saved.setItem(WIDTH, String(width));
      }, 250);
    }).observe(aside);
  }

  document.addEventListener("DOMContentLoaded", function () { restore(); watchWidth(); });
})();
