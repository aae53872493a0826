// The composer while the agent answers: the draft can be typed, Send waits for the reply to end
// and Stop (or Esc) stops it. The server swaps only #composer-actions when a turn starts or ends
// (data-busy says whether one runs), never the textarea, so a draft survives.
(function () {
  "use strict";

  function actions() { return document.getElementById("composer-actions"); }
  function busy() {
    var box = actions();
    return !!box && box.getAttribute("data-busy") === "true";
  }

  // Send is available when no turn runs and there is something to send.
  function sync() {
    var box = document.querySelector("[data-testid=message-input]");
    var send = document.querySelector("#composer-actions [data-testid=send]");
    if (box && send) send.disabled = busy() || box.disabled || !box.value.trim();
  }

  // After app.js's own input handler (registered first), which knows nothing of a running turn.
  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches("[data-testid=message-input]")) sync();
  });
  document.addEventListener("htmx:afterSettle", sync);
  document.addEventListener("htmx:oobAfterSwap", sync);
  document.addEventListener("htmx:wsAfterMessage", sync);
  document.addEventListener("DOMContentLoaded", sync);

  // Enter (or a submit) while a turn runs keeps the draft instead of sending it.
  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-testid=message-input]")) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && busy()) {
      event.preventDefault();
      event.stopPropagation();
    }
  }, true);
  document.addEventListener("submit", function (event) {
    if (event.target.getAttribute && event.target.getAttribute("data-testid") === "composer" && busy()) {
      event.preventDefault();
      event.stopPropagation();
    }
  }, true);

  // Esc stops the running reply (unless a dialog is open: there Esc closes the dialog).
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.isComposing || document.querySelector("dialog[open]")) return;
    var stop = document.querySelector("#composer-actions [data-testid=stop]");
    if (stop) {
      event.preventDefault();
      stop.click();  // a second Esc is harmless: the turn is already cancelled
    }
  });
})();
