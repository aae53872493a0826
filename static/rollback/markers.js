// Checkpoint markers in the conversation (checkpoints/_marker.html, placed by web/chat_state.py).
//
// 1. "Show in conversation" (a checkpoint of the panel): a marker already loaded is scrolled to,
//    highlighted for a moment and focused, the panel's drawer closed on a narrow screen. A marker
//    not loaded (further back than the loaded messages, or on another branch) is the link's: the
//    page opens around the checkpoint (?checkpoint=<id>), where this script shows it on load.
// 2. Live: a deleted checkpoint's marker goes at once wherever it is loaded (the live refresh
//    only re-renders the latest messages; those loaded with "Load earlier" are kept as they
//    were). A page opened around a point of the history ("Load later" below it) is not replaced
//    by the latest messages for a checkpoint made or deleted elsewhere: the reader stays where
//    they read (a new checkpoint sits at its branch's end, which such a page does not show).
(function () {
  "use strict";

  var FLASH = "checkpoint-marker-flash";

  function messages() { return document.getElementById("messages"); }

  function marker(id) {
    var box = messages();
    return box ? box.querySelector("#checkpoint-marker-" + CSS.escape(String(id))) : null;
  }

  function reveal(node) {
    node.classList.remove(FLASH);
    void node.offsetWidth; // restart the highlight when shown again
    node.classList.add(FLASH);
    node.scrollIntoView({ block: "center" });
    node.focus({ preventScroll: true });
  }

  document.addEventListener("animationend", function (event) {
    var node = event.target;
    if (node && node.classList && node.classList.contains(FLASH)) node.classList.remove(FLASH);
  });

  // Under reduced motion the highlight does not fade: it goes with the focus.
  document.addEventListener("focusout", function (event) {
    var node = event.target;
    if (node && node.classList && node.classList.contains(FLASH)) node.classList.remove(FLASH);
  });

  document.addEventListener("click", function (event) {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    var link = event.target.closest && event.target.closest("a[data-show-checkpoint]");
    if (!link) return;
    var node = marker(link.getAttribute("data-show-checkpoint"));
    if (!node) return; // the link opens the page around it
    event.preventDefault();
    if (document.body.classList.contains("panel-open")) {
      var close = document.querySelector('[data-layout-close="panel"]');
      if (close) close.click();
    }
    reveal(node);
  });

  // A page opened around a checkpoint: after live.js's scroll to the end and search.js's.
  document.addEventListener("DOMContentLoaded", function () {
    window.requestAnimationFrame(function () {
      var box = messages();
      var id = box && box.getAttribute("data-target-checkpoint");
      var node = id && marker(id);
      if (node) reveal(node);
    });
  });

  // The live refresh the socket asks for names its event and the checkpoints it deleted.
  document.addEventListener("htmx:load", function (event) {
    var elt = event.target;
    if (!elt || elt.id !== "live-refresh") return;
    (elt.getAttribute("data-checkpoints-gone") || "").split(" ").forEach(function (id) {
      var node = id && marker(id);
      if (node) remove(node);
    });
  });

  // A marker above the view goes without moving what the reader sees (the list has no scroll
  // anchoring: live.js follows the end itself).
  function remove(node) {
    var box = messages();
    var next = node.nextElementSibling;
    var above = box && next && node.getBoundingClientRect().bottom <= box.getBoundingClientRect().top;
    var before = above ? next.getBoundingClientRect().top : 0;
    node.remove();
    if (above) box.scrollTop += next.getBoundingClientRect().top - before;
  }

  var answering = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    answering = (event.detail && event.detail.elt) || null;
  });
  document.addEventListener("htmx:afterSwap", function () { answering = null; });
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || target.id !== "messages" || !answering) return;
    var cause = answering.getAttribute && answering.getAttribute("data-event");
    var windowed = !!target.querySelector(":scope > #load-later");
    if (windowed && (cause === "checkpoint.created" || cause === "checkpoint.deleted")) {
      event.detail.shouldSwap = false;
    }
  });
})();
