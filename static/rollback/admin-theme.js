// The admin in the theme its user chose on the profile page. Loaded (after Django's theme.js)
// only when that choice is Light or Dark; with the default, System, the admin's own "auto"
// follows the system setting, as the chat does.
(function () {
  "use strict";
  var chosen = document.currentScript && document.currentScript.getAttribute("data-theme");
  if (chosen === "light" || chosen === "dark") document.documentElement.dataset.theme = chosen;
})();
