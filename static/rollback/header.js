// The conversation header's details (branch, context, model, instructions, exports) behind its
// "⋯" on a phone: the button opens and closes them; a click elsewhere or Esc closes them. The
// open state is the body's, so a live update that morphs the header leaves it as it is.
(function () {
  "use strict";

  var OPEN = "header-open";

  function sync() {
    var open = document.body.classList.contains(OPEN);
    document.querySelectorAll("[data-header-more]").forEach(function (button) {
      button.setAttribute("aria-expanded", String(open));
    });
  }
  function close() {
    if (!document.body.classList.contains(OPEN)) return false;
    document.body.classList.remove(OPEN);
    sync();
    return true;
  }

  document.addEventListener("click", function (event) {
    var more = event.target.closest && event.target.closest("[data-header-more]");
    if (more) {
      document.body.classList.toggle(OPEN);
      sync();
      return;
    }
    if (!(event.target.closest && event.target.closest("#header-extra"))) close();
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && !document.querySelector("dialog[open]") && close()) {
      var button = document.querySelector("[data-header-more]");
      if (button) button.focus();
    }
  });
  // A morphed header comes with aria-expanded="false": say the state again.
  document.addEventListener("htmx:afterSettle", sync);
  document.addEventListener("htmx:oobAfterSwap", sync);
})();
