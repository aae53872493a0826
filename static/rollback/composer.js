// The composer while the agent answers: the draft can be typed, Send waits for the reply to end
// and Stop (or Esc) stops it. The server swaps only #composer-actions when a turn starts or ends
// (data-busy says whether one runs), never the textarea, so a draft survives.
(function () {
  "use strict";

  function actions() { return document.getElementById("composer-actions"); }
  function busy() {
    var box = actions();
    return !!box && box.getAttribute("data-busy") === "true";
  }

  // The length limit (AGENT_MAX_INPUT_CHARS, in the textarea's data-max-chars): past 90% of it
  // the composer counts, past it the composer says by how much and will not send. The server
  // refuses a longer message anyway; a paste is never cut short here (no maxlength).
  var numbers = new Intl.NumberFormat("en-US");
  var PAIR = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;

  // Characters as the server counts them (code points: an emoji is one, not two).
  function length(text) {
    var pairs = text.match(PAIR);
    return text.length - (pairs ? pairs.length : 0);
  }

  function overLimit(box) {
    var limit = parseInt(box.getAttribute("data-max-chars"), 10);
    return limit > 0 && length(box.value) > limit;
  }

  // Shows the count or the excess under a textarea with a limit; says whether it is over.
  function showLimit(box) {
    var limit = parseInt(box.getAttribute("data-max-chars"), 10);
    var note = document.getElementById(box.getAttribute("aria-describedby") || "");
    if (!(limit > 0) || !note) return false;
    var used = length(box.value);
    var over = used > limit;
    var text = "";
    if (over) {
      var excess = used - limit;
      text = "This message is " + numbers.format(excess) + " character" + (excess === 1 ? "" : "s") +
        " over the limit of " + numbers.format(limit) + ". Shorten it to send it.";
    } else if (used >= limit * 0.9) {
      text = numbers.format(used) + " / " + numbers.format(limit) + " characters";
    }
    if (note.textContent !== text) note.textContent = text;
    note.hidden = !text;
    note.classList.toggle("over", over);
    if (over) box.setAttribute("aria-invalid", "true"); else box.removeAttribute("aria-invalid");
    return over;
  }

  // Send is available when no turn runs and there is something to send, within the limit.
  function sync() {
    var box = document.querySelector("[data-testid=message-input]");
    var send = document.querySelector("#composer-actions [data-testid=send]");
    var over = box ? showLimit(box) : false;
    if (box && send) send.disabled = busy() || box.disabled || !box.value.trim() || over;
  }

  // After app.js's own input handler (registered first), which knows nothing of a running turn
  // or of the limit.
  document.addEventListener("input", function (event) {
    var box = event.target;
    if (!box.matches) return;
    if (box.matches("[data-testid=message-input]")) sync();
    else if (box.matches("textarea[data-max-chars]")) {
      var over = showLimit(box);
      var submit = box.form && box.form.querySelector("[type=submit]");
      if (submit) submit.disabled = over;
    }
  });
  document.addEventListener("htmx:afterSettle", sync);
  document.addEventListener("htmx:oobAfterSwap", sync);
  document.addEventListener("htmx:wsAfterMessage", sync);
  document.addEventListener("DOMContentLoaded", sync);

  // Enter (or a submit) while a turn runs, or with a draft over the limit, keeps the draft
  // instead of sending it.
  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-testid=message-input]")) return;
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && (busy() || overLimit(box))) {
      event.preventDefault();
      event.stopPropagation();
      showLimit(box);
    }
  }, true);
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.querySelector) return;
    var box = form.querySelector("textarea[data-max-chars]");
    var composer = form.getAttribute("data-testid") === "composer";
    if ((composer && busy()) || (box && overLimit(box))) {
      event.preventDefault();
      event.stopPropagation();
      if (box) showLimit(box);
    }
  }, true);

  // Esc stops the running reply (unless a dialog is open: there Esc closes the dialog; or the
  // edit form has it: there it cancels the edit).
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.isComposing || event.defaultPrevented) return;
    if (event.shiftKey || document.querySelector("dialog[open]")) return;
    var stop = document.querySelector("#composer-actions [data-testid=stop]");
    if (stop) {
      event.preventDefault();
      stop.click();  // a second Esc is harmless: the turn is already cancelled
    }
  });

  // --- Drafts ----------------------------------------------------------------------------------
  // What is typed in the composer (and in an edit form) is kept in localStorage, per user and
  // session (data-draft on the form: "<user id>:<session id>"), so a reload, a sign-in that
  // ended, or a swap of the composer loses nothing. A draft leaves only once the server
  // accepted the message; another user of the browser has other keys and never sees it.
  var DRAFT_PREFIX = "rollback.draft.";
  var DRAFT_DAYS = 30;

  function store() {
    try { return window.localStorage; } catch (e) { return null; }
  }
  function draftKey(form, suffix) {
    var owner = form && form.closest("[data-draft]");
    var key = owner && owner.getAttribute("data-draft");
    return key ? DRAFT_PREFIX + key + (suffix || "") : null;
  }
  function editSuffix(form) {
    var message = form.closest("[id^=msg-]");
    return message ? ":edit:" + message.id.slice(4) : null;
  }
  // The key of an edit form's draft (none outside a message: never the composer's).
  function editKey(form) {
    var suffix = editSuffix(form);
    return suffix ? draftKey(form, suffix) : null;
  }
  function keyFor(box) {
    if (!box || !box.form) return null;
    if (box.matches("[data-testid=message-input]")) return draftKey(box.form);
    if (box.matches("[data-testid=edit-input]")) return editKey(box.form);
    return null;
  }
  function readDraft(key) {
    var s = store();
    if (!s || !key) return "";
    try {
      var saved = JSON.parse(s.getItem(key) || "null");
      return saved && typeof saved.text === "string" ? saved.text : "";
    } catch (e) { return ""; }
  }
  function writeDraft(key, text) {
    var s = store();
    if (!s || !key) return;
    try {
      if (text.trim()) s.setItem(key, JSON.stringify({ text: text, at: Date.now() }));
      else s.removeItem(key);
    } catch (e) { /* storage full or refused: the draft stays in the page only */ }
  }
  function forgetOldDrafts() {
    var s = store();
    if (!s) return;
    var limit = Date.now() - DRAFT_DAYS * 86400000;
    for (var i = s.length - 1; i >= 0; i--) {
      var key = s.key(i);
      if (!key || key.indexOf(DRAFT_PREFIX) !== 0) continue;
      try {
        var saved = JSON.parse(s.getItem(key) || "null");
        if (!saved || !(saved.at > limit)) s.removeItem(key);
      } catch (e) { s.removeItem(key); }
    }
  }
  // A kept draft back into an empty field (the page loaded, the composer or an edit form came).
  function restoreDrafts(root) {
    if (!root || !root.querySelectorAll) return;
    root.querySelectorAll("[data-testid=message-input], [data-testid=edit-input]").forEach(function (box) {
      var text = readDraft(keyFor(box));
      var empty = !box.value.trim() || box.value === box.defaultValue;
      if (!text || !empty || box.value === text) return;
      box.value = text;
      box.dispatchEvent(new Event("input", { bubbles: true }));
    });
  }

  document.addEventListener("input", function (event) {
    var key = keyFor(event.target);
    if (key) writeDraft(key, event.target.value);
  });
  document.addEventListener("DOMContentLoaded", function () {
    forgetOldDrafts();
    restoreDrafts(document);
  });
  document.addEventListener("htmx:afterSettle", function (event) { restoreDrafts(event.target); });

  // Whether a request's answer is the server accepting it (not a refusal's notice, not a
  // redirect to the sign-in page).
  function accepted(event) {
    var xhr = event.detail && event.detail.xhr;
    return !!xhr && xhr.status >= 200 && xhr.status < 300 && !xhr.getResponseHeader("HX-Redirect");
  }
  // Before the answer is swapped in (an emptied composer): the sent draft is forgotten, and the
  // view goes to the end, where the message appears (live.js follows from there).
  document.addEventListener("htmx:beforeSwap", function (event) {
    var form = event.detail.requestConfig && event.detail.requestConfig.elt;
    if (!form || !form.matches || !accepted(event)) return;
    if (form.matches("[data-testid=composer]")) {
      writeDraft(draftKey(form), "");
      document.dispatchEvent(new CustomEvent("rollback:sent"));
    }
  });
  // hx-swap="none" (the edit form) swaps nothing: its answer is seen after the request.
  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    if (!form || !form.matches || !form.matches("[data-testid=edit-form]") || !accepted(event)) return;
    writeDraft(editKey(form), "");
    document.dispatchEvent(new CustomEvent("rollback:sent"));
  });

  // --- The edit form's keys and focus ------------------------------------------------------------
  // Like the composer: Enter sends, Shift+Enter is a new line, Esc cancels. The field is focused
  // when the form opens; when it closes, the focus goes back to that message's Edit button (or,
  // the edit made a new branch, to the composer).
  var returnTo = null;
  function focusBack() {
    if (!returnTo) return;
    var message = document.getElementById(returnTo);
    var edit = message && !message.querySelector("[data-testid=edit-form]") &&
      message.querySelector("[data-testid=edit-message]");
    if (message && message.querySelector("[data-testid=edit-form]")) return;  // not closed yet
    returnTo = null;
    if (edit) {
      // The message's tools show on hover or focus within: shown for the focus to land.
      message.classList.add("tools-shown");
      edit.addEventListener("blur", function () { message.classList.remove("tools-shown"); }, { once: true });
      edit.focus();
    }
    if (!edit || document.activeElement !== edit) {
      var box = document.querySelector("[data-testid=message-input]");
      if (box) box.focus();
    }
  }
  function closing(form) {
    var message = form.closest("[id^=msg-]");
    returnTo = message ? message.id : null;
  }
  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-testid=edit-input]") || event.isComposing) return;
    if (event.key === "Escape") {
      var cancel = box.form.querySelector("[data-edit-cancel]");
      event.preventDefault();
      if (cancel) cancel.click();
    } else if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      if (box.value.trim()) box.form.requestSubmit();
    }
  }, true);
  document.addEventListener("click", function (event) {
    var cancel = event.target.closest && event.target.closest("[data-edit-cancel]");
    var form = cancel && cancel.form;
    if (!form) return;
    writeDraft(editKey(form), "");
    closing(form);
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.matches && form.matches("[data-testid=edit-form]")) closing(form);
  });
  var opening = null;  // the message whose Edit was pressed, until its form is in
  document.addEventListener("htmx:beforeRequest", function (event) {
    var edit = event.detail.elt;
    var message = edit && edit.matches && edit.matches("[data-testid=edit-message]") && edit.closest("[id^=msg-]");
    if (message) opening = message.id;
  });
  document.addEventListener("htmx:afterSettle", function () {
    var message = opening && document.getElementById(opening);
    var field = message && message.querySelector("[data-testid=edit-form] [data-testid=edit-input]");
    if (!field) return;
    opening = null;
    field.focus();
    field.setSelectionRange(field.value.length, field.value.length);
  });
  document.addEventListener("htmx:afterRequest", function () { window.setTimeout(focusBack, 0); });
})();
