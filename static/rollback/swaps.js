// htmx swaps that leave nothing to complain about on the console.
//
// 1. htmx looks for an answer's out-of-band targets from the element that asked. When a live
//    update replaces that element while its request is out (a newer refresh replacing the page's
//    #live-refresh, the socket's "stopped" replacing the Stop button), the answer finds none of
//    its targets (htmx:oobErrorNoTarget for every region) and is lost. So an element whose request
//    is out stays in the page until answered: a live fetch (data-live-fetch) where it is, without
//    its id, the newer one beside it, and its (older) answer is dropped; any other in a hidden
//    holder, its answer swapped in as usual. So too when an answer's own swap replaces it (the
//    sidebar's list fetched again on the socket's news while its Unarchive waits: the answer's
//    header found no #conv-header).
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
// 5. An out-of-band fragment for a place the server cannot know a page has is marked
//    data-oob-optional: a session's link (the tab's sidebar may list another page of sessions, a
//    search or the archived ones), an approval's slot (gone with its turn once the page's refresh
//    came). When the page has no element of its id, it is left out of the answer or the socket's
//    message before htmx looks for its target (which would log htmx:oobErrorNoTarget).
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
    // The same as for an out-of-band target (below), for this answer's own target: the sidebar's
    // list fetched again (a socket's news) while a button of it (Unarchive, Rename) waits.
    // (The event's own `elt` is the target: the element that asked is the request's.)
    var asker = event.detail.requestConfig && event.detail.requestConfig.elt;
    var target = event.detail.target;
    if (event.detail.shouldSwap && target) {
      keepWaitingInside(target, function (elt) {
        return !!asker && (elt === asker || elt.contains(asker) || asker.contains(elt));
      });
    }
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
    keepWaitingInside(target, isAnswering);
  });

  function keepWaitingInside(target, spared) {
    waiting.forEach(function (elt) {
      if (elt !== target && elt.isConnected && target.contains(elt) && !spared(elt)) {
        keep(elt);
        holder().appendChild(elt);
      }
    });
  }

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

  var OPTIONAL = "data-oob-optional";
  function withoutAbsent(text) {
    if (typeof text !== "string" || text.indexOf(OPTIONAL) < 0) return text;
    var parsed = document.createElement("template");
    parsed.innerHTML = text;
    var absent = Array.prototype.filter.call(
      parsed.content.querySelectorAll("[" + OPTIONAL + "][hx-swap-oob]"),
      function (elt) { return !elt.id || !document.getElementById(elt.id); }
    );
    absent.forEach(function (elt) { elt.remove(); });
    return absent.length ? parsed.innerHTML : text;
  }
  // On every page (base.html's hx-ext): htmx's answers and the ws extension's messages.
  if (window.htmx) htmx.defineExtension("oob-optional", { transformResponse: withoutAbsent });

  var PIECE = /^\s*<div id="(turn-\d+-(?:body|tools|out-[0-9a-f]+))" hx-swap-oob="beforeend">[\s\S]*<\/div>\s*$/;
  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    var message = event.detail && event.detail.message;
    var found = typeof message === "string" ? PIECE.exec(message) : null;
    if (found && !document.getElementById(found[1])) event.preventDefault();
  });
})();
