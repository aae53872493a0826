// htmx swaps that leave nothing to complain about on the console.
//
// 1. htmx looks for an answer's out-of-band targets from the element that asked. When a live
//    update replaces that element while its request is out (a newer refresh replacing the page's
//    #live-refresh, the socket's "stopped" replacing the Stop button), the answer finds none of
//    its targets (htmx:oobErrorNoTarget for every region) and is lost. So an element whose request
//    is out stays in the page until answered: a live fetch (data-live-fetch) where it is, without
//    its id, the newer one beside it, and its (older) answer is dropped; any other in a hidden
//    holder, its answer swapped in as usual.
// 2. A streamed piece (or a running tool's line) that arrives once its bubble is already final
//    has nothing to go to: it is dropped before htmx tries.
// 3. The reader's own request for a region (the checkpoint list's filter) makes a live fetch of
//    that region still out stale: asked before, with the old filter, its answer could land after
//    the reader's and undo it. It is dropped like a replaced one's (not aborted: an abort is an
//    error on the console).
(function () {
  "use strict";

  var waiting = new Set(); // elements whose request is out
  var stale = new Set(); // live fetches out whose region the reader has asked for since
  function targetOf(elt) {
    var selector = elt.getAttribute && elt.getAttribute("hx-target");
    if (!selector || selector.charAt(0) !== "#") return null;
    return document.getElementById(selector.slice(1));
  }
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    var target = event.detail && event.detail.target;
    if (!elt || !target || (elt.hasAttribute && elt.hasAttribute("data-live-fetch"))) return;
    waiting.forEach(function (other) {
      if (other !== elt && other.hasAttribute("data-live-fetch") && targetOf(other) === target) {
        stale.add(other);
      }
    });
  });
  var answering = null; // the element whose answer is being swapped in now
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail && event.detail.elt) waiting.add(event.detail.elt);
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var elt = (event.detail && event.detail.elt) || null;
    // A live fetch replaced by a newer one: its answer is older than the newer one's, so it is
    // not swapped in at all (it would undo, say, "Show older" clicked meanwhile).
    if (elt && elt.hasAttribute && elt.hasAttribute("data-live-fetch") &&
        (elt.hasAttribute("data-kept-waiting") || stale.has(elt))) {
      event.detail.shouldSwap = false;
      return;
    }
    answering = elt;
  });
  document.addEventListener("htmx:afterSwap", function () { answering = null; });
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!elt) return;
    waiting.delete(elt);
    stale.delete(elt);
    if (elt.hasAttribute && elt.hasAttribute("data-kept-waiting")) elt.remove();
  });

  function keep(elt) {
    elt.removeAttribute("id");
    elt.setAttribute("data-kept-waiting", "");
  }

  function holder() {
    var box = document.getElementById("waiting-requests");
    if (!box) {
      box = document.createElement("div");
      box.id = "waiting-requests";
      box.hidden = true;
      document.body.appendChild(box);
    }
    return box;
  }

  function isAnswering(elt) {
    return !!answering && (elt === answering || elt.contains(answering) || answering.contains(elt));
  }

  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || !target.isConnected) return;
    if (waiting.has(target) && !isAnswering(target)) {
      var place = document.createElement(target.localName);
      place.hidden = true;
      target.after(place);
      keep(target);
      event.detail.target = place;
      return;
    }
    waiting.forEach(function (elt) {
      if (elt !== target && elt.isConnected && target.contains(elt) && !isAnswering(elt)) {
        keep(elt);
        holder().appendChild(elt);
      }
    });
  });

  var PIECE = /^\s*<div id="(turn-\d+-(?:body|tools))" hx-swap-oob="beforeend">[\s\S]*<\/div>\s*$/;
  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    var message = event.detail && event.detail.message;
    var found = typeof message === "string" ? PIECE.exec(message) : null;
    if (found && !document.getElementById(found[1])) event.preventDefault();
  });
})();
