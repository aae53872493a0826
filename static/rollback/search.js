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
