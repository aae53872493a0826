// A search hit opened (?message=<id>): the page shows the history around that message; put it
// in view and mark it. Runs after live.js, whose own load handler scrolls to the end first.
(function () {
  "use strict";

  function showTarget() {
    var box = document.getElementById("messages");
    var id = box && box.getAttribute("data-target-message");
    if (!id) return;
    var target = document.getElementById("msg-" + id);
    if (!target) return;
    target.classList.add("message-target");
    target.setAttribute("tabindex", "-1");
    target.scrollIntoView({ block: "center" });
    target.focus({ preventScroll: true });
  }

  document.addEventListener("DOMContentLoaded", function () {
    // After live.js's handler (registered first) and after the times are formatted.
    window.requestAnimationFrame(showTarget);
  });

  // A history opened around a message ends before the latest messages (it has "Load later"):
  // "Jump to latest" opens the latest page itself, and a message sent from there is followed to
  // the end of the list, where the socket puts it (the turn's end then brings the latest page).
  function windowed() { return !!document.getElementById("load-later"); }
  document.addEventListener("click", function (event) {
    if (windowed() && event.target.closest && event.target.closest("#jump-latest")) {
      window.location.assign(window.location.pathname);
    }
  });
  var sentFromWindow = false;
  document.addEventListener("htmx:afterRequest", function (event) {
    var path = event.detail && event.detail.requestConfig && event.detail.requestConfig.path;
    if (event.detail.successful && windowed() && typeof path === "string" && /\/send\/$/.test(path)) {
      sentFromWindow = true;
    }
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (!sentFromWindow) return;
    sentFromWindow = false;
    var box = document.getElementById("messages");
    if (box) box.scrollTop = box.scrollHeight;  // live.js hears the scroll: it follows from here
  });

  // The search in a conversation: opened, its field takes the focus.
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details || !details.classList || !details.classList.contains("conv-search")) return;
    if (details.open) {
      var input = details.querySelector("input[type=search]");
      if (input) input.focus();
    }
  }, true);
  // Esc closes it again, focus back on its toggle.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var details = event.target && event.target.closest && event.target.closest("details.conv-search[open]");
    if (!details) return;
    details.open = false;
    var summary = details.querySelector("summary");
    if (summary) summary.focus();
  });
})();
