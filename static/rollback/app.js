// Rollback's few behaviours that are not htmx: the composer keys, confirmations and dialogs
// (live.js has live updates, scrolling and times). No inline script: the Content Security Policy
// allows none.
(function () {
  "use strict";

  // Error answers (4xx) carry a notice to show; 5xx are real failures.
  if (window.htmx) {
    htmx.config.responseHandling = [
      { code: "204", swap: false },
      { code: "[23]..", swap: true },
      { code: "[4]..", swap: true, error: false },
      { code: "...", swap: false, error: true },
    ];
    // New content is made live (its hx-* attributes processed) in the same task as the swap,
    // not 20 ms later: a form swapped in with an error, then submitted at once with Enter, was
    // still a plain form, and the browser sent it as a page load (losing what was typed).
    htmx.config.defaultSettleDelay = 0;
  }

  // Enter sends, Shift+Enter is a new line; an empty message cannot be sent.
  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-testid=message-input]")) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (box.value.trim() && !box.disabled) box.form.requestSubmit();
    }
  });
  document.addEventListener("input", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-testid=message-input]")) return;
    var send = box.form && box.form.querySelector("[data-testid=send]");
    if (send) send.disabled = box.disabled || !box.value.trim();
    box.style.height = "auto";
    box.style.height = Math.min(box.scrollHeight, 192) + "px";
  });
  document.addEventListener("submit", function (event) {
    var box = event.target.querySelector && event.target.querySelector("[data-testid=message-input]");
    if (box && !box.value.trim()) event.preventDefault();
  }, true);

  // A form with data-confirm asks before it is sent (the Content Security Policy allows no
  // inline onsubmit).
  document.addEventListener("submit", function (event) {
    var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // <dialog> elements arriving from the server open themselves; [data-close] closes them.
  function openDialogs(root) {
    (root.querySelectorAll ? root.querySelectorAll("dialog[data-autopen]") : []).forEach(function (d) {
      if (!d.open && d.showModal) d.showModal();
    });
  }
  document.addEventListener("click", function (event) {
    var closer = event.target.closest && event.target.closest("[data-close]");
    if (closer) {
      var dialog = closer.closest("dialog");
      if (dialog) { dialog.close(); dialog.remove(); }
    }
  });

  // The Files panel's Close empties the file view.
  document.addEventListener("click", function (event) {
    var closer = event.target.closest && event.target.closest("[data-file-close]");
    var view = closer && closer.closest("#file-view");
    if (view) view.replaceChildren();
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    openDialogs(event.target);
    var box = document.querySelector("[data-testid=message-input]");
    // Not away from a field the user is in (a live update of the composer arrives any time).
    var idle = !document.activeElement || document.activeElement === document.body;
    if (box && !box.disabled && event.target.id === "composer" && idle) box.focus();
  });
  // A refused action inside a dialog (say, a checkpoint deleted in another tab) closes the dialog
  // so the notice it brought is visible.
  document.addEventListener("htmx:afterRequest", function (event) {
    var status = event.detail.xhr && event.detail.xhr.status;
    var dialog = event.detail.elt && event.detail.elt.closest && event.detail.elt.closest("dialog");
    if (dialog && status >= 400) { dialog.close(); dialog.remove(); }
  });
  // Renaming a session in place: the field arrives focused with the name selected; Esc keeps the
  // old name (the form's Cancel), Enter saves (the form's own submit).
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || !event.target.closest) return;
    var form = event.target.closest("[data-rename-form]");
    var cancel = form && form.querySelector("[data-rename-cancel]");
    if (cancel) { event.preventDefault(); cancel.click(); }
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var field = event.target.querySelector && event.target.querySelector("[data-rename-form] input[name=name]");
    if (field) { field.focus(); field.select(); }
  });
  // [data-copy-target="#id"] copies that element's text (a new API key); where the clipboard is not
  // available, the text is selected for the reader to copy.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy-target]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy-target"));
    if (!source) return;
    var status = button.parentNode.querySelector("[data-copy-status]");
    function say(text) { if (status) status.textContent = text; }
    function select() {
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      say("Selected: press Ctrl+C (⌘C) to copy.");
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(source.textContent.trim()).then(function () { say("Copied."); }, select);
    } else {
      select();
    }
  });
  // Layout: "Sessions" collapses the sidebar on a wide screen and opens it as a drawer on a narrow
  // one; "Checkpoints & branches" opens the panel's drawer below 1000 px. Esc or ✕ closes a drawer.
  var NARROW = window.matchMedia("(max-width: 700px)");
  function shown(el) {
    if (!el) return false;
    var style = getComputedStyle(el);
    return style.display !== "none" && style.visibility !== "hidden";
  }
  function syncLayout() {
    document.querySelectorAll("[data-layout-toggle]").forEach(function (button) {
      var target = document.getElementById(button.getAttribute("aria-controls"));
      button.setAttribute("aria-expanded", shown(target) ? "true" : "false");
    });
  }
  function closeDrawer(which) {
    var cls = which === "panel" ? "panel-open" : "sidebar-open";
    if (!document.body.classList.contains(cls)) return false;
    document.body.classList.remove(cls);
    var button = document.querySelector('[data-layout-toggle="' + which + '"]');
    syncLayout();
    if (button) button.focus();
    return true;
  }
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest("[data-layout-toggle]");
    var close = event.target.closest && event.target.closest("[data-layout-close]");
    if (close) { closeDrawer(close.getAttribute("data-layout-close")); return; }
    if (!toggle) return;
    var which = toggle.getAttribute("data-layout-toggle");
    if (which === "panel") {
      document.body.classList.toggle("panel-open");
      document.body.classList.remove("sidebar-open");
    } else if (NARROW.matches) {
      document.body.classList.toggle("sidebar-open");
      document.body.classList.remove("panel-open");
    } else {
      document.body.classList.toggle("sidebar-collapsed");
    }
    syncLayout();
    var target = document.getElementById(toggle.getAttribute("aria-controls"));
    var first = shown(target) && target.querySelector("input, button:not(.drawer-close), a, select, textarea");
    if (first && (document.body.classList.contains("panel-open") || document.body.classList.contains("sidebar-open"))) first.focus();
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented) return;
    if (document.querySelector("dialog[open]")) return;
    if (closeDrawer("panel") || closeDrawer("sidebar")) event.preventDefault();
  });
  window.addEventListener("resize", syncLayout);
  document.addEventListener("DOMContentLoaded", syncLayout);
  // Scrolling (follow the latest only from the bottom) is live.js's.
  document.addEventListener("DOMContentLoaded", function () { openDialogs(document); });
})();
