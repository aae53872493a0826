// Keyboard shortcuts, like the peers': a new chat, the sessions' search, the composer, copying
// the last reply, and "?" for the sheet that lists them (#shortcuts, a <dialog>; the top bar's
// "Shortcuts" button opens it too). Ctrl stands for Cmd on a Mac.
(function () {
  "use strict";

  function typing(target) {
    if (!target || target.nodeType !== 1) return false;
    return target.isContentEditable || !!target.closest("input, textarea, select, [contenteditable]");
  }
  function visible(el) {
    return !!el && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  }

  function sheet() { return document.getElementById("shortcuts"); }
  var opener = null;
  function openSheet() {
    var dialog = sheet();
    if (!dialog || dialog.open) return;
    opener = document.activeElement;
    dialog.showModal();
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-shortcuts-open]");
    if (button) { openSheet(); return; }
    var close = event.target.closest && event.target.closest("[data-shortcuts-close]");
    if (close && sheet()) sheet().close();
  });
  // Closed, the focus goes back where it was, unless the reader has moved on meanwhile: "close"
  // comes as a task after the dialog closed, and a key pressed at once (Ctrl+K, say) is handled
  // before it.
  document.addEventListener("close", function (event) {
    if (event.target !== sheet()) return;
    var now = document.activeElement;
    var left = !now || now === document.body || event.target.contains(now);
    if (left && opener && opener.isConnected && opener.focus) opener.focus();
    opener = null;
  }, true);

  // The sessions' search: in a collapsed sidebar or a closed drawer, the sidebar opens first.
  function focusSearch() {
    var search = document.querySelector("[data-testid=session-search]");
    if (!search) return false;
    if (!visible(search)) {
      var toggle = document.querySelector('[data-layout-toggle="sidebar"]');
      if (toggle) toggle.click();
    }
    search.focus();
    search.select();
    // Something swapped in the same moment (a live update) may have taken the focus back to the
    // page: once more, on the next frame, unless the reader has moved on to another field.
    window.requestAnimationFrame(function () {
      var now = document.activeElement;
      if (search.isConnected && now !== search && (!now || now === document.body)) {
        search.focus();
        search.select();
      }
    });
    return true;
  }
  function focusComposer() {
    var box = document.querySelector("[data-testid=message-input]");
    if (!box) return false;
    // An open drawer (narrow screens) covers the composer: it closes first.
    document.querySelectorAll("body.sidebar-open [data-layout-close=sidebar], body.panel-open [data-layout-close=panel]")
      .forEach(function (close) { close.click(); });
    box.focus();
    return true;
  }
  function newChat() {
    var button = document.querySelector("[data-testid=new-session]");
    if (!button || !button.form) return false;
    button.form.requestSubmit(button);
    return true;
  }
  function copyLastReply() {
    var replies = document.querySelectorAll(
      "#messages [data-testid=message][data-role=assistant]:not([data-streaming]) [data-copy-button]");
    var last = replies[replies.length - 1];
    if (!last) return false;
    last.click();  // copy.js copies it and says so on the button
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.isComposing || event.repeat) return;
    var ctrl = event.ctrlKey || event.metaKey;
    var key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    var done = false;
    if (ctrl && event.shiftKey && !event.altKey && key === "o") done = newChat();
    else if (ctrl && event.shiftKey && !event.altKey && key === "c") done = copyLastReply();
    else if (ctrl && !event.shiftKey && !event.altKey && key === "k") done = focusSearch();
    else if (event.shiftKey && !ctrl && !event.altKey && key === "Escape") done = focusComposer();
    else if (!ctrl && !event.altKey && !typing(event.target) && !document.querySelector("dialog[open]")) {
      if (key === "?") { openSheet(); done = !!sheet(); }
      else if (key === "/" && !event.shiftKey) done = focusSearch();
    }
    if (done) {
      event.preventDefault();
      event.stopPropagation();
    }
  }, true);  // before app.js's Esc, which would take Shift+Esc to close a drawer
})();
