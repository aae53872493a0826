// Copy buttons. Every message has one from the server (data-copy holds the message's own text,
// as written: the Markdown, not the page's rendering of it); every code block in a message gets
// one here (it copies the code), on page load and again whenever htmx, a live update or a morph
// brings or rebuilds messages. The server does not put buttons inside rendered Markdown: that is
// sanitised HTML, where only text and formatting may be.
(function () {
  "use strict";

  // The Clipboard API needs a secure context (https or localhost); elsewhere, the old way.
  function writeText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () { return legacyCopy(text); });
    }
    return legacyCopy(text);
  }

  function legacyCopy(text) {
    return new Promise(function (resolve, reject) {
      var buffer = document.createElement("textarea");
      buffer.className = "copy-buffer";
      buffer.value = text;
      buffer.setAttribute("readonly", "");
      buffer.setAttribute("aria-hidden", "true");
      var focused = document.activeElement;
      document.body.appendChild(buffer);
      buffer.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      buffer.remove();
      if (focused && focused.focus) focused.focus();
      if (ok) resolve(); else reject(new Error("copy refused"));
    });
  }

  function feedback(button, label, ok) {
    var idle = button.getAttribute("data-idle-label") || button.getAttribute("aria-label");
    button.setAttribute("data-idle-label", idle);
    button.textContent = ok ? "Copied" : "Copy failed";
    button.setAttribute("aria-label", ok ? "Copied" : "Copy failed");
    button.classList.toggle("copied", ok);
    window.clearTimeout(button.__copyTimer);
    button.__copyTimer = window.setTimeout(function () {
      button.textContent = label;
      button.setAttribute("aria-label", idle);
      button.classList.remove("copied");
    }, 1500);
  }

  function textFor(button) {
    if (button.hasAttribute("data-copy")) return button.getAttribute("data-copy");
    var block = button.closest(".codeblock");
    var code = block && block.querySelector("pre code, pre");
    return code ? code.textContent : "";
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy-button]");
    if (!button) return;
    event.preventDefault();
    writeText(textFor(button)).then(
      function () { feedback(button, "Copy", true); },
      function () { feedback(button, "Copy", false); }
    );
  });

  // Code blocks of finished messages get their button (a streaming bubble is re-rendered many
  // times a second; its blocks get theirs when the finished reply replaces it).
  function addCodeButtons() {
    document.querySelectorAll(
      ".message:not([data-streaming]) .body .codeblock > .codeblock-head"
    ).forEach(function (head) {
      if (head.querySelector("[data-copy-button]")) return;
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy-code";
      button.textContent = "Copy";
      button.setAttribute("data-copy-button", "");
      button.setAttribute("data-testid", "copy-code");
      var language = head.querySelector(".codeblock-lang");
      button.setAttribute("aria-label", language ? "Copy the " + language.textContent + " code" : "Copy the code");
      head.appendChild(button);
    });
  }

  var pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    // A frame, or a moment in a background tab (which has no frames).
    function once() { if (pending) { pending = false; addCodeButtons(); } }
    window.requestAnimationFrame(once);
    window.setTimeout(once, 250);
  }

  function start() {
    addCodeButtons();
    // Whatever changes the page (an htmx swap, a WebSocket's out-of-band swap, idiomorph, the
    // end of a stream) may bring blocks without a button, or take a button away: check again.
    new MutationObserver(schedule).observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
