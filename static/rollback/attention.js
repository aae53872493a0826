// A reply that ends (finished, failed, stopped, or waiting for an approval) while this tab is in
// the background marks the tab: "● " before its title and a dot on its favicon (the icon link's
// data-attention-icon), both gone once the tab is seen again.
(function () {
  "use strict";

  var MARK = "● ";
  var marked = false;
  var plainIcon = null;

  function icon() { return document.querySelector("link[rel=icon][data-attention-icon]"); }
  function mark() {
    if (!document.hidden) return;
    if (document.title.indexOf(MARK) !== 0) document.title = MARK + document.title;
    var link = icon();
    if (link && !marked) {
      plainIcon = link.getAttribute("href");
      link.setAttribute("href", link.getAttribute("data-attention-icon"));
    }
    marked = true;
  }
  function unmark() {
    if (document.hidden) return;
    if (document.title.indexOf(MARK) === 0) document.title = document.title.slice(MARK.length);
    var link = icon();
    if (link && marked && plainIcon !== null) link.setAttribute("href", plainIcon);
    marked = false;
  }

  // A turn runs while the composer's actions say data-busy="true"; an approval asked shows a
  // [data-testid=approval] box.
  function busy() {
    var actions = document.getElementById("composer-actions");
    return !!actions && actions.getAttribute("data-busy") === "true";
  }
  function approvals() { return document.querySelectorAll("#messages [data-testid=approval]").length; }
  var wasBusy = false, asked = 0;
  function check() {
    var now = busy(), waiting = approvals();
    if ((wasBusy && !now) || waiting > asked) mark();
    wasBusy = now;
    asked = waiting;
  }
  document.addEventListener("DOMContentLoaded", function () { wasBusy = busy(); asked = approvals(); });
  document.addEventListener("htmx:wsAfterMessage", check);
  document.addEventListener("htmx:afterSettle", check);
  document.addEventListener("htmx:oobAfterSwap", check);
  document.addEventListener("visibilitychange", unmark);
  window.addEventListener("focus", unmark);
})();
