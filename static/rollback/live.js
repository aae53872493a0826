// Live updates that change only what changed, scrolling that follows the reader, local times.
//
// The server swaps its regions (messages, composer, header, side panel) with idiomorph
// (hx-swap-oob="morph"), configured here so that a live update never takes away what the reader
// types or reads: the values of text fields, an open edit form (data-live-keep), an open <dialog>,
// messages loaded with "Load earlier". A branch switched elsewhere is announced.
(function () {
  "use strict";

  var BOTTOM_SLACK = 48; // px from the end that still count as "at the bottom"

  function isTextField(node) {
    if (!node || node.nodeType !== 1) return false;
    if (node.localName === "textarea") return true;
    if (node.localName !== "input") return false;
    var type = (node.getAttribute("type") || "text").toLowerCase();
    return ["text", "search", "url", "email", "tel", "number", ""].indexOf(type) >= 0;
  }

  function isKept(node) {
    if (!node || node.nodeType !== 1) return false;
    if (node.localName === "dialog" && node.open) return true;
    // An element holding an open edit form (or a filled detail box) is the reader's, not the server's.
    if (node.hasAttribute("data-live-keep") && node.childNodes.length) return true;
    return !!(node.querySelector && node.querySelector(":scope > form[data-live-keep]"));
  }

  // htmx's "morph" swap, defined here rather than with idiomorph's own extension build: that one
  // claims every swap style as inline (so an out-of-band "beforeend" nested its element into the
  // target) and reads "morph:{...}" options with Function(), which the page's CSP forbids.
  var MORPH_STYLES = { "morph": "outerHTML", "morph:outerHTML": "outerHTML", "morph:innerHTML": "innerHTML" };
  if (window.htmx && window.Idiomorph) {
    htmx.defineExtension("morph", {
      isInlineSwap: function (swapStyle) { return MORPH_STYLES[swapStyle] === "outerHTML"; },
      handleSwap: function (swapStyle, target, fragment) {
        var style = MORPH_STYLES[swapStyle];
        return style ? Idiomorph.morph(target, fragment.children, { morphStyle: style }) : false;
      },
    });
  }

  function newerRating(oldNode, newNode) {
    if (oldNode.nodeType !== 1 || newNode.nodeType !== 1) return false;
    if (!oldNode.matches("form.feedback[data-at]") || !newNode.getAttribute) return false;
    var was = parseInt(oldNode.getAttribute("data-at") || "", 10);
    var now = parseInt(newNode.getAttribute("data-at") || "", 10);
    return !isNaN(was) && !isNaN(now) && was > now;
  }

  if (window.Idiomorph) {
    Idiomorph.defaults.ignoreActiveValue = true;
    Idiomorph.defaults.callbacks.beforeAttributeUpdated = function (name, node) {
      // What the user typed stays: the server's value never replaces a text field's.
      if (name === "value" && isTextField(node)) return false;
      // An open dialog stays open.
      if (name === "open" && node.localName === "dialog") return false;
      // A folder of the Files panel stays as the reader left it, open or collapsed.
      if (name === "open" && node.localName === "details" && node.hasAttribute("data-keep-open")) return false;
      return true;
    };
    Idiomorph.defaults.callbacks.beforeNodeMorphed = function (oldNode, newNode) {
      if (isKept(oldNode)) return false;
      // A streaming reply's body is stream.js's: it takes the server's snapshot in its own way.
      if (window.RollbackStream && window.RollbackStream.keeps(oldNode, newNode)) return false;
      // A reply's rating answered after this rendering's reads began stays: the refresh, read
      // before the rating was written and arriving after it, would take it back.
      if (newerRating(oldNode, newNode)) return false;
      // A time already shown in the reader's zone stays as it is.
      if (oldNode.localName === "time" && newNode.nodeType === 1 &&
          oldNode.getAttribute("datetime") === newNode.getAttribute("datetime") &&
          oldNode.hasAttribute("data-local")) return false;
      return true;
    };
    Idiomorph.defaults.callbacks.beforeNodeRemoved = function (node) {
      if (node.nodeType !== 1) return true;
      // An open dialog stays open.
      if (node.localName === "dialog" && node.open) return false;
      // A code block's copy button is this page's own (copy.js), never in the server's HTML: a
      // refresh that morphs its message keeps it, and the "Copied" it may be showing.
      return !node.matches("button.copy-code[data-copy-button]");
    };
  }

  // --- This tab and what it shows ------------------------------------------------------------

  // Every request of the chat page names its tab (the page's rendering: its socket knows it too)
  // and what its panels show, so an answer that brings the page's new state (the refresh) keeps
  // the reader's checkpoint filter, the checkpoints loaded and the open file, and the tab's own
  // change makes its socket fetch nothing more (web/pages/tabs.py).
  function pageTab() {
    var holder = document.querySelector("[data-rollback-tab]");
    return holder ? holder.getAttribute("data-rollback-tab") : "";
  }
  function valueOf(id) {
    var node = document.getElementById(id);
    return node && node.value ? node.value : "";
  }
  function checkpointView() {
    var form = document.getElementById("checkpoint-filter");
    var kind = form && form.elements.kind ? form.elements.kind.value : "all";
    var scope = form && form.elements.scope ? form.elements.scope.value : "all";
    return { kind: kind, scope: scope, shown: valueOf("checkpoint-shown") || "0" };
  }
  // What swaps.js compares an answer's checkpoint list with (its data-view).
  window.rollbackListView = function () {
    var view = checkpointView();
    return view.kind + "|" + view.scope + "|" + view.shown;
  };
  document.addEventListener("htmx:configRequest", function (event) {
    var tab = pageTab();
    if (!tab) return;
    var view = checkpointView();
    var params = new URLSearchParams();
    params.set("kind", view.kind);
    params.set("scope", view.scope);
    params.set("shown", view.shown);
    var open = valueOf("file-open-path");
    if (open) {
      params.set("open", open);
      params.set("open_sha", valueOf("file-open-sha"));
    }
    event.detail.headers["X-Rollback-Tab"] = tab;
    event.detail.headers["X-Rollback-View"] = params.toString();
  });

  // --- Scrolling -------------------------------------------------------------------------------

  function box() { return document.getElementById("messages"); }

  function atBottom(el) {
    return el.scrollHeight - el.scrollTop - el.clientHeight <= BOTTOM_SLACK;
  }

  // Where this script last put the view: a reader who moved it up since is reading, even
  // before the browser has dispatched that scroll event.
  var pinnedTop = null;
  function scrollToEnd() {
    var el = box();
    if (el) {
      el.scrollTop = el.scrollHeight;
      pinnedTop = el.scrollTop;
    }
    showJump();
  }

  function showJump() {
    var el = box();
    var jump = document.getElementById("jump-latest");
    if (el && jump) jump.hidden = atBottom(el);
  }

  // Whether the reader is at the bottom: only then does the view follow new content. Set by
  // scrolling (the reader's, or ours to the end), never by content growing under the reader: a
  // streamed reply re-rendered after a message would otherwise look like a reader scrolled up.
  var following = true;
  function follow() {
    var el = box();
    if (following && el && pinnedTop !== null && el.scrollTop < pinnedTop - BOTTOM_SLACK) {
      following = false;
    }
    if (following) scrollToEnd(); else showJump();
  }

  document.addEventListener("scroll", function (event) {
    if (event.target && event.target.id === "messages") {
      following = atBottom(event.target);
      // At the bottom, by whatever means (the content shrank under the view and the browser
      // moved it up, say): that is where the view now stands, not a reader who scrolled away.
      if (following) pinnedTop = event.target.scrollTop;
      showJump();
    }
  }, true);
  // This tab's own message accepted (composer.js): the view goes to the end, and follows again.
  document.addEventListener("rollback:sent", function () { following = true; scrollToEnd(); });
  // stream.js renders a streaming reply after the socket's message, in an animation frame.
  document.addEventListener("rollback:streamRendered", follow);
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("#jump-latest")) scrollToEnd();
  });

  // "Load earlier": the messages above grow, the one the reader sees stays where it is.
  var anchor = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || target.id !== "load-earlier") return;
    var next = target.nextElementSibling;
    anchor = next ? { node: next, top: next.getBoundingClientRect().top } : null;
  });
  // After the settle: the loaded messages' times are formatted (their widths change) by then.
  document.addEventListener("htmx:afterSettle", function () {
    if (!anchor) return;
    var el = box();
    if (el && anchor.node.isConnected) {
      el.scrollTop += anchor.node.getBoundingClientRect().top - anchor.top;
    }
    anchor = null;
    showJump();
  });

  // --- What a live update leaves in place ------------------------------------------------------

  // Messages loaded with "Load earlier" stay when the same branch is shown again: they are put in
  // front of the server's last page (with the "load earlier" button of what is loaded) before the
  // morph, so that the morph keeps them.
  function keepLoadedHistory(old, fresh) {
    if (!fresh || old.getAttribute("data-branch-id") !== fresh.getAttribute("data-branch-id")) return;
    var first = fresh.querySelector(":scope > [id^=msg-]");
    if (!first) return;
    var same = old.querySelector(":scope > #" + CSS.escape(first.id));
    if (!same) return;
    var loaded = [];
    for (var n = old.firstElementChild; n && n !== same; n = n.nextElementSibling) loaded.push(n);
    if (!loaded.some(function (n) { return n.id && n.id.indexOf("msg-") === 0; })) return;
    var button = fresh.querySelector(":scope > #load-earlier");
    if (button) button.remove();
    loaded.forEach(function (n) { fresh.insertBefore(n.cloneNode(true), first); });
  }

  var branchBefore = null;
  function currentBranch() {
    var badge = document.querySelector("[data-testid=current-branch]");
    return badge ? { id: badge.getAttribute("data-branch-id"), label: badge.textContent } : null;
  }

  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    if (!target) return;
    if (target.id === "messages") {
      var fragment = event.detail.fragment;
      var fresh = fragment.querySelector ? fragment.querySelector("#messages") : null;
      keepLoadedHistory(target, fresh || fragment.firstElementChild);
    }
  });

  // A branch switched by another tab (or the agent, or the API) is followed and announced; this
  // tab's own requests switch silently.
  // A fetch that a live update itself starts (data-live-fetch: the panel's list reloading with
  // its filter) is not the reader's request.
  function readerRequest(event) {
    var elt = event.detail && event.detail.elt;
    return !(elt && elt.hasAttribute && elt.hasAttribute("data-live-fetch"));
  }
  var ownRequests = 0;
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (!readerRequest(event)) return;
    ownRequests += 1;
    var release = event.detail.elt && event.detail.elt.closest && event.detail.elt.closest("[data-live-release]");
    if (release) {
      var form = release.closest("[data-live-keep]");
      if (form) form.removeAttribute("data-live-keep");
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (!readerRequest(event)) return;
    ownRequests = Math.max(0, ownRequests - 1);
  });
  document.addEventListener("htmx:wsBeforeMessage", function () {
    branchBefore = currentBranch();
  });
  // After a turn's end, a branch change or a checkpoint, the socket has the page fetch its
  // refresh (#live-refresh): a branch switched elsewhere shows once that fetch is swapped in.
  var refreshFrom = null;
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (elt && elt.id === "live-refresh") {
      refreshFrom = ownRequests === 0 ? currentBranch() : null;
    }
  });
  document.addEventListener("htmx:afterOnLoad", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!elt || elt.id !== "live-refresh") return;
    var now = currentBranch();
    if (refreshFrom && now && refreshFrom.id !== now.id && ownRequests === 0) announce(now.label);
    refreshFrom = null;
    refreshComposer();
    follow();
  });

  // htmx's ws extension opens a closed socket again by itself only after 1006, 1011, 1012 or
  // 1013, codes a server behind daphne cannot send. The server asks for it with its own codes:
  // 4012 (this browser's login goes on under a new key: the password was changed here) at once,
  // 4503 (the database or Redis does not answer) after pauses that grow up to a minute. Any
  // other code (4404 no such session) leaves the socket closed; 4401 (signed out) leads to sign-in.
  // (A handshake during an outage is accepted, then closed: the pauses start again only once a
  // socket stayed open for half a minute.)
  var RECONNECT = 4012, UNAVAILABLE = 4503;
  // 4401: the login ended (logged out in another tab, expired): the page is loaded again, which
  // leads to the whole sign-in page and, once signed in, back here (drafts are composer.js's, in
  // localStorage). Not while this page is already leaving (its own Log out). A page without the
  // socket (the sign-in page) clears the mark of that reload; a chat page that is refused again
  // under the mark (a login the socket refuses but the page accepts) shows a notice instead.
  var SIGNED_OUT = 4401, RELOADED = "rollback.signInReload", leaving = false;
  window.addEventListener("beforeunload", function () { leaving = true; });
  function reloadMark(value) {
    try {
      if (value === undefined) return parseInt(sessionStorage.getItem(RELOADED) || "0", 10);
      if (value) sessionStorage.setItem(RELOADED, String(value)); else sessionStorage.removeItem(RELOADED);
    } catch (e) { /* no storage: no mark */ }
    return 0;
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (!document.querySelector("[ws-connect]")) reloadMark(null);
  });
  function signIn() {
    if (leaving) return;
    if (Date.now() - reloadMark() > 300000) {
      reloadMark(Date.now());
      window.location.reload();
      return;
    }
    var notices = document.getElementById("notices");
    if (!notices || notices.querySelector("[data-testid=signed-out-notice]")) return;
    var notice = document.createElement("div");
    notice.className = "notice error";
    notice.setAttribute("role", "alert");
    notice.setAttribute("data-testid", "signed-out-notice");
    notice.textContent = "Live updates stopped: this page's sign-in is no longer accepted. Reload the page to sign in again.";
    notices.appendChild(notice);
  }
  var unavailableCloses = 0, openedAt = 0;
  document.addEventListener("htmx:wsOpen", function () {
    openedAt = Date.now();
    // A turn the page shows running may have ended between the page's render and the socket's
    // joining: its end went to nobody. The page then fetches its refresh once, which shows the
    // turn as it now is (a turn still running is shown the same, and goes on streaming).
    var refresh = document.getElementById("live-refresh");
    if (refresh && document.querySelector("#messages [data-streaming]") && window.htmx) {
      htmx.ajax("GET", refresh.getAttribute("hx-get"), { source: refresh, swap: "none" });
    }
  });
  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail && event.detail.event && event.detail.event.code;
    var socket = event.detail && event.detail.socketWrapper;
    if (Date.now() - openedAt > 30000) unavailableCloses = 0;
    if (code === SIGNED_OUT) { signIn(); return; }
    if (!socket || (code !== RECONNECT && code !== UNAVAILABLE)) return;
    var pause = 250;
    if (code === UNAVAILABLE) {
      pause = Math.min(60000, 2000 * Math.pow(2, unavailableCloses)) * (0.5 + Math.random() / 2);
      unavailableCloses += 1;
    }
    setTimeout(function () { socket.reconnect(); }, pause);
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var now = currentBranch();
    if (branchBefore && now && branchBefore.id !== now.id && ownRequests === 0) announce(now.label);
    branchBefore = null;
    refreshComposer();
    follow();
  });

  function announce(label) {
    var notices = document.getElementById("notices");
    if (!notices) return;
    var notice = document.createElement("div");
    notice.className = "notice info";
    notice.setAttribute("role", "status");
    notice.setAttribute("data-testid", "branch-notice");
    notice.textContent = "The branch was switched elsewhere: now on " + label.trim() + ".";
    notices.appendChild(notice);
  }

  // A draft kept through a morph still needs its Send button and its height (app.js's "input").
  function refreshComposer() {
    var input = document.querySelector("[data-testid=message-input]");
    if (input && input.value) input.dispatchEvent(new Event("input", { bubbles: true }));
  }

  // A refresh answered to this tab's own request (edit, regenerate, branch) follows like a live one.
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "messages") follow();
  });

  // --- Times in the reader's zone --------------------------------------------------------------

  var timeOnly = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  var dateTime = new Intl.DateTimeFormat(undefined, {
    month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
  });
  var dateTimeYear = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
  });
  var full = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" });

  function sameDay(a, b) {
    return a.getFullYear() === b.getFullYear() && a.getMonth() === b.getMonth() && a.getDate() === b.getDate();
  }

  function localTimes(root) {
    if (!root || !root.querySelectorAll) return;
    var times = Array.prototype.slice.call(root.querySelectorAll("time[datetime]"));
    if (root.matches && root.matches("time[datetime]")) times.push(root);
    var today = new Date();
    times.forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) return;
      var format = sameDay(when, today) ? timeOnly
        : when.getFullYear() === today.getFullYear() ? dateTime : dateTimeYear;
      el.textContent = format.format(when);
      el.title = full.format(when);
      el.setAttribute("data-local", "");
    });
  }

  document.addEventListener("htmx:load", function (event) { localTimes(event.target); });
  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document.body);
    scrollToEnd();
  });
})();
