// The MCP server's admin form: only the fields of the chosen transport show (the fieldsets
// web/admin/mcp.py marks "mcp-http" and "mcp-stdio"); both show when scripts are off.
(function () {
  "use strict";
  function show() {
    var select = document.getElementById("id_transport");
    if (!select) return;
    var wanted = select.value === "stdio" ? "mcp-stdio" : "mcp-http";
    document.querySelectorAll("fieldset.mcp-transport").forEach(function (set) {
      set.hidden = !set.classList.contains(wanted);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    show();
    var select = document.getElementById("id_transport");
    if (select) select.addEventListener("change", show);
  });
})();
