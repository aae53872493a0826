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

  // A turn runs while the composer's actions say data-busy="true"; a finished reply is a newer
  // (greater id) assistant message than before, however quickly its turn ran; a failure shows a
  // [data-testid=turn-error]; an approval asked shows a [data-testid=approval] box.
  function busy() {
    var actions = document.getElementById("composer-actions");
    return !!actions && actions.getAttribute("data-busy") === "true";
  }
  function count(selector) { return document.querySelectorAll(selector).length; }
  function newestReply() {
    var newest = 0;
    document.querySelectorAll("#messages [data-testid=message][data-role=assistant]:not([data-streaming])")
      .forEach(function (m) { newest = Math.max(newest, parseInt(m.id.slice(4), 10) || 0); });
    return newest;
  }
  function state() {
    return {
      busy: busy(), reply: newestReply(),
      failed: count("#messages [data-testid=turn-error]"), asked: count("#messages [data-testid=approval]"),
    };
  }
  var last = { busy: false, reply: 0, failed: 0, asked: 0 };
  function check() {
    var now = state();
    if ((last.busy && !now.busy) || now.reply > last.reply || now.failed > last.failed ||
        now.asked > last.asked) mark();
    last = now;
  }
  document.addEventListener("DOMContentLoaded", function () { last = state(); });
  document.addEventListener("htmx:wsAfterMessage", check);
  document.addEventListener("htmx:afterSettle", check);
  document.addEventListener("htmx:oobAfterSwap", check);
  document.addEventListener("visibilitychange", unmark);
  window.addEventListener("focus", unmark);
})();
