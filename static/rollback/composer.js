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

  // The length limit (AGENT_MAX_INPUT_CHARS, in the textarea's data-max-chars): past 90% of it
  // the composer counts, past it the composer says by how much and will not send. The server
  // refuses a longer message anyway; a paste is never cut short here (no maxlength).
  var numbers = new Intl.NumberFormat("en-US");
  var PAIR = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;

  // Characters as the server counts them (code points: an emoji is one, not two).
  function length(text) {
    var pairs = text.match(PAIR);
    return text.length - (pairs ? pairs.length : 0);
  }

  function overLimit(box) {
    var limit = parseInt(box.getAttribute("data-max-chars"), 10);
    return limit > 0 && length(box.value) > limit;
  }

  // Shows the count or the excess under a textarea with a limit; says whether it is over.
  function showLimit(box) {
    var limit = parseInt(box.getAttribute("data-max-chars"), 10);
    var note = document.getElementById(box.getAttribute("aria-describedby") || "");
    if (!(limit > 0) || !note) return false;
    var used = length(box.value);
    var over = used > limit;
    var text = "";
    if (over) {
      var excess = used - limit;
      text = "This message is " + numbers.format(excess) + " character" + (excess === 1 ? "" : "s") +
        " over the limit of " + numbers.format(limit) + ". Shorten it to send it.";
    } else if (used >= limit * 0.9) {
      text = numbers.format(used) + " / " + numbers.format(limit) + " characters";
    }
    if (note.textContent !== text) note.textContent = text;
    note.hidden = !text;
    note.classList.toggle("over", over);
    if (over) box.setAttribute("aria-invalid", "true"); else box.removeAttribute("aria-invalid");
    return over;
  }

  // Send is available when no turn runs and there is something to send, within the limit.
  function sync() {
    var box = document.querySelector("[data-testid=message-input]");
    var send = document.querySelector("#composer-actions [data-testid=send]");
    var over = box ? showLimit(box) : false;
    if (box && send) send.disabled = busy() || box.disabled || !box.value.trim() || over;
  }

  // After app.js's own input handler (registered first), which knows nothing of a running turn
  // or of the limit.
  document.addEventListener("input", function (event) {
    var box = event.target;
    if (!box.matches) return;
    if (box.matches("[data-testid=message-input]")) sync();
    else if (box.matches("textarea[data-max-chars]")) {
      var over = showLimit(box);
      var submit = box.form && box.form.querySelector("[type=submit]");
      if (submit) submit.disabled = over;
    }
  });
  document.addEventListener("htmx:afterSettle", sync);
  document.addEventListener("htmx:oobAfterSwap", sync);
  document.addEventListener("htmx:wsAfterMessage", sync);
  document.addEventListener("DOMContentLoaded", sync);

  // Enter (or a submit) while a turn runs, or with a draft over the limit, keeps the draft
  // instead of sending it.
  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-testid=message-input]")) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && (busy() || overLimit(box))) {
      event.preventDefault();
      event.stopPropagation();
      showLimit(box);
    }
  }, true);
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.querySelector) return;
    var box = form.querySelector("textarea[data-max-chars]");
    var composer = form.getAttribute("data-testid") === "composer";
    if ((composer && busy()) || (box && overLimit(box))) {
      event.preventDefault();
      event.stopPropagation();
      if (box) showLimit(box);
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
