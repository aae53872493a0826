// Tabs true to each other about the session they show: the browser tab's title follows the
// session's name (a rename or an automatic title, made here or anywhere), and a session deleted
// elsewhere leaves its page with a notice (its socket closes with 4404).
(function () {
  "use strict";

  var SUFFIX = " · Rollback";
  var NOT_FOUND = 4404;

  function shownName() {
    var title = document.querySelector("#conv-header [data-testid=session-title]");
    return title ? title.textContent.trim() : null;
  }

  // Only the name's part of the title changes: a mark another script put around it stays.
  var lastName = null;
  function syncTitle() {
    var name = shownName();
    if (name === null || name === lastName) return;
    var before = lastName === null ? null : lastName + SUFFIX;
    if (before && document.title.indexOf(before) >= 0) {
      document.title = document.title.replace(before, name + SUFFIX);
    } else if (lastName !== null || document.title.indexOf(name + SUFFIX) < 0) {
      document.title = name + SUFFIX;
    }
    lastName = name;
  }

  document.addEventListener("DOMContentLoaded", syncTitle);
  document.addEventListener("htmx:afterSettle", syncTitle);
  document.addEventListener("htmx:oobAfterSwap", syncTitle);

  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail && event.detail.event && event.detail.event.code;
    if (code !== NOT_FOUND) return;
    var notices = document.getElementById("session-notices");
    if (!notices || notices.querySelector("[data-testid=session-gone]")) return;
    var notice = document.createElement("div");
    notice.className = "notice error";
    notice.setAttribute("data-testid", "session-gone");
    notice.textContent = "This session was deleted (in another tab or elsewhere). ";
    var home = document.createElement("a");
    home.href = "/chat/";
    home.textContent = "Go to your sessions";
    notice.appendChild(home);
    notices.appendChild(notice);
    var composer = document.querySelector("[data-testid=message-input]");
    if (composer) composer.setAttribute("disabled", "");
    var send = document.querySelector("[data-testid=send]");
    if (send) send.setAttribute("disabled", "");
    var entry = document.querySelector("#session-list li.active");
    if (entry) entry.remove();
  });

  // The sidebar's list again after a change (a live update, or an entry's own action: pin,
  // archive, rename, delete) asks for as many sessions as the list shows, so the pages the
  // reader loaded by scrolling stay. A new search or view starts from the first page.
  document.addEventListener("htmx:configRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!elt || !(elt.id === "sessions-refresh" || (elt.closest && elt.closest("#session-list li")))) return;
    event.detail.parameters.shown = String(document.querySelectorAll("#session-list [data-testid=session]").length);
  });
})();
