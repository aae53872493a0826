// htmx swaps that leave nothing to complain about on the console.
//
// 1. htmx looks for an answer's out-of-band targets from the element that asked. When a live
//    update replaces that element while its request is out (a newer refresh replacing the page's
//    #live-refresh, the socket's "stopped" replacing the Stop button), the answer finds none of
//    its targets (htmx:oobErrorNoTarget for every region) and is lost. So an element whose request
//    is out stays in the page until answered: a live fetch (data-live-fetch) where it is, without
//    its id, the newer one beside it, and its (older) answer is dropped; any other in a hidden
//    holder, its answer swapped in as usual.
// 2. A streamed piece (or a running tool's line, or its output) that arrives once its bubble is
//    already final has nothing to go to: it is dropped before htmx tries.
// 3. A refresh's checkpoint list (and its count of rows) was made for the view the page had
//    when it asked (data-view: the filter and how many rows were loaded). When the reader has
//    chosen another filter or loaded older checkpoints since, it is not swapped in: it would
//    undo what they just did (their own answer brings the list they asked for).
// 4. An answer that brings the chat's state (the page's refresh: an action's answer, or a live
//    fetch) says when its reads began (#messages' data-state-at). One older than the state the
//    page shows is not swapped in: an action's answer rendered before a change that followed it
//    (a turn's start, whose refresh came back first) would bring back what that change ended,
//    a bubble for an attempt that is not the one streaming, and undo it.
(function () {
  "use strict";

  var waiting = new Set(); // elements whose request is out
  var answering = null; // the element whose answer is being swapped in now
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail && event.detail.elt) waiting.add(event.detail.elt);
  });
  var STATE_AT = /<div id="messages"[^>]*\sdata-state-at="(\d+)"/;
  function olderState(text) {
    var found = typeof text === "string" ? STATE_AT.exec(text) : null;
    var shown = document.getElementById("messages");
    var now = shown ? parseInt(shown.getAttribute("data-state-at") || "", 10) : NaN;
    return !!found && !isNaN(now) && parseInt(found[1], 10) < now;
  }
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail && olderState(event.detail.serverResponse)) {
      event.detail.shouldSwap = false;
      return;
    }
    var elt = (event.detail && event.detail.elt) || null;
    // A live fetch replaced by a newer one: its answer is older than the newer one's, so it is
    // not swapped in at all (it would undo, say, "Show older" clicked meanwhile).
    if (elt && elt.hasAttribute && elt.hasAttribute("data-live-fetch") &&
        elt.hasAttribute("data-kept-waiting")) {
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

  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || (target.id !== "checkpoint-list" && target.id !== "checkpoint-shown")) return;
    var fragment = event.detail.fragment;
    var fresh = fragment && fragment.querySelector ? fragment.querySelector("#" + target.id) : null;
    fresh = fresh || (fragment && fragment.firstElementChild);
    var made = fresh && fresh.getAttribute ? fresh.getAttribute("data-view") : null;
    if (made && window.rollbackListView && made !== window.rollbackListView()) {
      event.detail.shouldSwap = false;
    }
  });

  var PIECE = /^\s*<div id="(turn-\d+-(?:body|tools|out-[0-9a-f]+))" hx-swap-oob="beforeend">[\s\S]*<\/div>\s*$/;
  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    var message = event.detail && event.detail.message;
    var found = typeof message === "string" ? PIECE.exec(message) : null;
    if (found && !document.getElementById(found[1])) event.preventDefault();
  });
})();
