// The streaming reply: its raw text is kept here, outside the page, and its bubble shows it as
// Markdown while it streams. The socket appends numbered pieces to the bubble's body
// (<span class="delta" data-seq data-attempt>, text only); a page, a refresh or a socket joining
// mid-turn brings the reply so far (<span class="delta" data-snapshot data-seq>), and a reply
// being continued its text before the stream (<span class="delta" data-prefix>). Pieces this page
// already has (seq not above the one it shows) are skipped, and a piece joins the text only
// right after the one before it: one that comes after a gap (pieces the page never took in: they
// came before their bubble did, while the refresh that brings it was on its way, or for an
// attempt the bubble did not show yet) waits, and the page fetches its refresh, whose snapshot
// (read after that piece was stored) fills the gap. So nothing is lost or doubled, whatever
// re-renders the conversation and whenever. The Markdown goes through the same guarantees as the server's
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
  // The other attributes nh3 keeps, by tag (DOMPurify's ALLOWED_ATTR is for every tag).
  var ATTRS = { A: ["href", "title"] };
  var purify = window.DOMPurify();
  purify.addHook("uponSanitizeAttribute", function (node, data) {
    if (data.attrName !== "class") {
      if ((ATTRS[node.nodeName] || []).indexOf(data.attrName) < 0) data.keepAttr = false;
      return;
    }
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

  // turn body id + attempt -> {prefix, text, seq, pending: {seq: text}}
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

  function attemptOf(body) {
    return parseInt(body.getAttribute("data-attempt"), 10) || 0;
  }

  function streamOf(body, attempt) {
    var key = body.id + ":" + attempt;
    return streams[key] || (streams[key] = { prefix: "", text: "", seq: 0, pending: {} });
  }

  // The pieces that follow the text so far join it, in order; those it already has go.
  function drain(stream) {
    while (Object.prototype.hasOwnProperty.call(stream.pending, stream.seq + 1)) {
      stream.text += stream.pending[stream.seq + 1];
      delete stream.pending[stream.seq + 1];
      stream.seq += 1;
    }
    Object.keys(stream.pending).forEach(function (seq) {
      if (parseInt(seq, 10) <= stream.seq) delete stream.pending[seq];
    });
  }

  function gapped(stream) {
    return Object.keys(stream.pending).length > 0;
  }

  // A gap: the page fetches its refresh (at most one a second), whose bubble brings the reply so
  // far from the store. Looked at again a little later, in case that refresh came too early.
  var resyncedAt = 0;
  function resync() {
    var refresh = document.getElementById("live-refresh");
    if (!refresh || !window.htmx) return;
    var wait = resyncedAt + 1000 - Date.now();
    if (wait > 0) { window.setTimeout(recheckGaps, wait + 50); return; }
    resyncedAt = Date.now();
    htmx.ajax("GET", refresh.getAttribute("hx-get"), { source: refresh, swap: "none" });
    window.setTimeout(recheckGaps, 1500);
  }

  function recheckGaps() {
    var left = bodies(document.body).some(function (body) {
      return gapped(streamOf(body, attemptOf(body)));
    });
    if (left) resync();
  }

  // Takes in the pieces appended to a bubble's body; marks it for a render when it shows less
  // (or other) than this page has.
  function takeIn(body) {
    var attempt = attemptOf(body);
    var stream = streamOf(body, attempt);
    body.querySelectorAll(":scope > span.delta").forEach(function (span) {
      var seq = parseInt(span.getAttribute("data-seq"), 10);
      var own = parseInt(span.getAttribute("data-attempt"), 10);
      var into = stream;
      // A piece of another attempt of the turn (taken over by another worker): an older
      // attempt's is not the reply; a newer one's waits for its bubble (the refresh that the
      // new attempt's start asked for).
      if (!isNaN(own) && own !== attempt) into = own > attempt ? streamOf(body, own) : null;
      if (!into) {
        // nothing to keep
      } else if (span.hasAttribute("data-prefix")) {
        // A reply being continued: its text so far, which the stream extends.
        into.prefix = span.textContent;
      } else if (span.hasAttribute("data-snapshot")) {
        if (seq > into.seq) { into.text = span.textContent; into.seq = seq; }
      } else if (isNaN(seq)) {
        into.text += span.textContent;
      } else if (seq > into.seq) {
        into.pending[seq] = span.textContent;
      }
      if (into) drain(into);
      span.remove();
    });
    if (gapped(stream)) resync();
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
      var stream = streams[body.id + ":" + attemptOf(body)];
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

  // A live refresh morphing a bubble this page already shows: the body stays as this page
  // rendered it, and the server's pieces (its snapshot of the reply so far) join the stream as
  // any others do. So a refresh never shows an older snapshot, nor the server's rendering of the
  // same text, not even until the next piece. live.js asks this of every node it morphs.
  window.RollbackStream = {
    keeps: function (oldNode, newNode) {
      if (oldNode.nodeType !== 1 || newNode.nodeType !== 1 || oldNode.__shown === undefined) return false;
      if (!oldNode.matches("[data-streaming=true] .body[data-attempt]")) return false;
      if (oldNode.getAttribute("data-attempt") !== newNode.getAttribute("data-attempt")) return false;
      newNode.querySelectorAll(":scope > span.delta").forEach(function (span) {
        oldNode.appendChild(span.cloneNode(true));
      });
      return true;
    },
  };

  function start() {
    bodies(document.body).forEach(takeIn);
    observer.observe(document.body, { childList: true, subtree: true, attributes: true,
      attributeFilter: ["data-rendered", "data-attempt"] });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
