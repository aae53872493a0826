// Attachments from the composer: the Attach button, files dropped on the composer, or pasted
// into it go into the session's workspace as the user's own version (the Files panel's upload:
// the same endpoint, the same checks, all or none), and the draft gets a line naming them, so the
// message says what was attached. A refusal (too large, too many, a quota) is said under the
// composer, and nothing is written.
(function () {
  "use strict";

  function form() { return document.getElementById("composer-attach"); }
  function input() { return document.getElementById("composer-attach-files"); }
  function status() { return document.getElementById("composer-attach-status"); }

  function say(text, error) {
    var box = status();
    if (!box) return;
    box.textContent = text;
    box.hidden = !text;
    box.classList.toggle("error", !!error);
  }

  function send(files) {
    var f = form(), field = input();
    if (!f || !field || !files || !files.length) return;
    var names = [];
    try {
      var transfer = new DataTransfer();
      for (var i = 0; i < files.length; i++) { transfer.items.add(files[i]); names.push(files[i].name); }
      field.files = transfer.files;
    } catch (e) {
      return;  // no DataTransfer: the button still works through the input itself
    }
    f.setAttribute("data-names", JSON.stringify(names));
    say("Attaching " + names.join(", ") + "…", false);
    if (window.htmx) htmx.trigger(f, "submit");
  }

  function attached(names) {
    var box = document.querySelector("[data-testid=message-input]");
    if (!box || !names.length) return;
    var line = "Attached: " + names.map(function (n) { return "`" + n + "`"; }).join(", ");
    box.value = box.value ? box.value.replace(/\s*$/, "") + "\n" + line : line;
    box.dispatchEvent(new Event("input", { bubbles: true }));  // its draft and its Send button
  }

  document.addEventListener("change", function (event) {
    if (event.target && event.target.id === "composer-attach-files") {
      var names = Array.prototype.map.call(event.target.files || [], function (f) { return f.name; });
      form().setAttribute("data-names", JSON.stringify(names));
      say("Attaching " + names.join(", ") + "…", false);
      if (window.htmx) htmx.trigger(form(), "submit");
    }
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var f = form();
    if (!f || event.detail.elt !== f) return;
    var names = JSON.parse(f.getAttribute("data-names") || "[]");
    var field = input();
    if (field) field.value = "";
    var xhr = event.detail.xhr;
    // The status itself: this site has htmx swap its 4xx answers (a form with its errors),
    // which it then counts as successful.
    if (xhr && xhr.status >= 200 && xhr.status < 300) {
      say("Attached to the workspace: " + names.join(", ") + ".", false);
      attached(names);
      return;
    }
    var why = "The files could not be attached.";
    if (xhr && xhr.responseText) {
      var found = new DOMParser().parseFromString(xhr.responseText, "text/html")
        .querySelector("[data-testid=upload-error]");
      if (found) why = found.textContent;
    }
    say(why + " Nothing was attached.", true);
  });

  // Files dropped on the composer, or pasted into its textarea (a screenshot, a copied file).
  document.addEventListener("dragover", function (event) {
    var composer = event.target && event.target.closest && event.target.closest("#composer");
    if (composer && event.dataTransfer && Array.prototype.indexOf.call(event.dataTransfer.types, "Files") >= 0) {
      event.preventDefault();
      composer.classList.add("dropping");
    }
  });
  document.addEventListener("dragleave", function (event) {
    var composer = event.target && event.target.closest && event.target.closest("#composer");
    if (composer) composer.classList.remove("dropping");
  });
  document.addEventListener("drop", function (event) {
    var composer = event.target && event.target.closest && event.target.closest("#composer");
    if (!composer || !event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    composer.classList.remove("dropping");
    send(event.dataTransfer.files);
  });
  document.addEventListener("paste", function (event) {
    var box = event.target && event.target.closest && event.target.closest("[data-testid=message-input]");
    var files = event.clipboardData && event.clipboardData.files;
    if (!box || !files || !files.length) return;
    event.preventDefault();  // a pasted file is attached, not pasted as its name
    send(files);
  });
})();
