// The streaming reply: its raw text is kept here, outside the page, and its bubble shows it as
// Markdown while it streams. The socket appends numbered pieces to the bubble's body
// (<span class="delta" data-seq>, text only); a page, a refresh or a socket joining mid-turn
// brings the reply so far (<span class="delta" data-snapshot data-seq>), and a reply being
// continued its text before the stream (<span class="delta" data-prefix>). Pieces this page already
// has (seq not above the one it shows) are skipped, so nothing is lost or doubled, whatever
// re-renders the conversation. The Markdown goes through the same guarantees as the server's
// (web/rendering.py): markdown-it with raw HTML off and its link validation, then DOMPurify with
// the same allow-list as nh3; no HTML a model writes reaches the page.
(function () {
  "use strict";
  if (!window.markdownit || !window.DOMPurify) return;

  var md = window.markdownit("commonmark", { html: false, linkify: true, breaks: true })
    .enable(["table", "strikethrough", "linkify"]);
  // Only addresses with their scheme become links, as on the server.
  md.linkify.set({ fuzzyLink: false, fuzzyEmail: false });
  var escapeHtml = md.utils.escapeHtml;
  var LANGUAGE = /^[A-Za-z0-9_+#.\-]{1,32}$/;

  // Code blocks in the server's frame (web/rendering.py): a head with the fence's language, then
  // the code, plain (Pygments' colours come with the server's rendering when the turn ends).
  function codeBlock(code, info) {
    var word = (info || "").trim().split(/\s+/)[0] || "";
    var language = LANGUAGE.test(word) ? word : "";
    var head = '<div class="codeblock-head">' +
      (language ? '<span class="codeblock-lang">' + escapeHtml(language) + "</span>" : "") + "</div>";
    var cls = language ? ' class="language-' + escapeHtml(language) + '"' : "";
    return '<div class="codeblock">' + head + "<pre><code" + cls + ">" + escapeHtml(code) +
      "</code></pre></div>\n";
  }
  md.renderer.rules.fence = function (tokens, idx) {
    return codeBlock(tokens[idx].content, tokens[idx].info);
  };
  md.renderer.rules.code_block = function (tokens, idx) {
    return codeBlock(tokens[idx].content, "");
  };
  // Table cells' alignment as a class (the Content Security Policy forbids style attributes).
  md.core.ruler.push("alignment_classes", function (state) {
    state.tokens.forEach(function (token) {
      if (token.type !== "th_open" && token.type !== "td_open") return;
      var found = /^text-align:(left|center|right)$/.exec(token.attrGet("style") || "");
      if (!token.attrs) return;
      token.attrs = token.attrs.filter(function (a) { return a[0] !== "style"; });
      if (found) token.attrSet("class", "align-" + found[1]);
    });
  });

  var TAGS = ["p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul",
    "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th",
    "td", "div", "span"];
  // The classes nh3 keeps, no others.
  var ALIGN = /^align-(left|center|right)$/;
  var CLASSES = {
    DIV: /^(codeblock|codeblock-head)$/,
    SPAN: /^codeblock-lang$/,
    TH: ALIGN,
    TD: ALIGN,
    CODE: /^language-[A-Za-z0-9_+#.\-]{1,32}$/,
  };
  var purify = window.DOMPurify();
  purify.addHook("uponSanitizeAttribute", function (node, data) {
    if (data.attrName !== "class") return;
    var allowed = CLASSES[node.nodeName];
    if (!allowed || !allowed.test(data.attrValue)) data.keepAttr = false;
  });
  // Links open in a new tab, without handing it this page, as the server's rendering does.
  purify.addHook("afterSanitizeAttributes", function (node) {
    if (node.nodeName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  });
  var PURIFY = {
    ALLOWED_TAGS: TAGS,
    ALLOWED_ATTR: ["href", "title", "class"],
    // http, https and mailto links, and relative ones; no javascript:, data: or other schemes.
    ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|[^a-z]|[a-z+.\-]+(?:[^a-z+.\-:]|$))/i,
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
  };

  function render(text) {
    return purify.sanitize(md.render(text), PURIFY).trim();
  }

  // turn body id + attempt -> {text, seq}
  var streams = {};
  var dirty = new Set();
  var scheduled = false;

  function bodies(root) {
    var found = [];
    if (root.nodeType !== 1) return found;
    if (root.matches("[data-streaming=true] .body[data-attempt]")) found.push(root);
    root.querySelectorAll("[data-streaming=true] .body[data-attempt]").forEach(function (b) {
      found.push(b);
    });
    var up = root.closest && root.closest("[data-streaming=true] .body[data-attempt]");
    if (up && found.indexOf(up) < 0) found.push(up);
    return found;
  }

  // Takes in the pieces appended to a bubble's body; marks it for a render when it shows less
  // (or other) than this page has.
  function takeIn(body) {
    var key = body.id + ":" + body.getAttribute("data-attempt");
    var stream = streams[key] || (streams[key] = { prefix: "", text: "", seq: 0 });
    body.querySelectorAll(":scope > span.delta").forEach(function (span) {
      var seq = parseInt(span.getAttribute("data-seq"), 10);
      if (span.hasAttribute("data-prefix")) {
        // A reply being continued: its text so far, which the stream extends.
        stream.prefix = span.textContent;
      } else if (span.hasAttribute("data-snapshot")) {
        if (seq > stream.seq) { stream.text = span.textContent; stream.seq = seq; }
      } else if (isNaN(seq)) {
        stream.text += span.textContent;
      } else if (seq > stream.seq) {
        stream.text += span.textContent;
        stream.seq = seq;
      }
      span.remove();
    });
    if (body.__shown === undefined) {
      // Rendered by the server (a page, a refresh, a morph): shown in this page's own way at
      // once, so it never shows less than the page had, not even for a frame.
      dirty.add(body);
      flush();
    } else if (body.getAttribute("data-rendered") !== String(stream.seq) || body.__shown !== stream.prefix + stream.text) {
      dirty.add(body);
      schedule();
    }
  }

  function flush() {
    dirty.forEach(function (body) {
      if (!body.isConnected) return;
      var stream = streams[body.id + ":" + body.getAttribute("data-attempt")];
      if (!stream) return;
      body.innerHTML = render(stream.prefix + stream.text);
      body.__shown = stream.prefix + stream.text;
      body.setAttribute("data-rendered", String(stream.seq));
    });
    dirty.clear();
    document.dispatchEvent(new CustomEvent("rollback:streamRendered"));
  }

  // One render per animation frame; a page in the background (no frames) still renders.
  function schedule() {
    if (scheduled) return;
    scheduled = true;
    var done = false;
    function once() { if (!done) { done = true; scheduled = false; flush(); } }
    window.requestAnimationFrame(once);
    window.setTimeout(once, 250);
  }

  var observer = new MutationObserver(function (records) {
    var seen = new Set();
    records.forEach(function (record) {
      bodies(record.target).forEach(function (b) { seen.add(b); });
      record.addedNodes.forEach(function (node) {
        bodies(node).forEach(function (b) { seen.add(b); });
      });
    });
    seen.forEach(takeIn);
  });

  function start() {
    bodies(document.body).forEach(takeIn);
    observer.observe(document.body, { childList: true, subtree: true, attributes: true,
      attributeFilter: ["data-rendered", "data-attempt"] });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
