// The copy button of the page for in-app browsers. The page reads without it: the short
// link is in a read-only box the visitor can select. In-app browsers (WeChat's among them)
// often lack the asynchronous clipboard or refuse it outside https, so the selection and
// execCommand("copy") come first, then navigator.clipboard.
(function () {
  "use strict";
  var button = document.getElementById("copy");
  var box = document.getElementById("short-url");
  var status = document.getElementById("copy-status");
  if (!button || !box) return;
  button.hidden = false;
  function say(text) { if (status) status.textContent = text; }
  function selectBox() {
    box.focus();
    box.select();
    try { box.setSelectionRange(0, box.value.length); } catch (e) { /* old engines */ }
  }
  box.addEventListener("focus", selectBox);
  button.addEventListener("click", function () {
    selectBox();
    var done = false;
    try { done = document.execCommand("copy"); } catch (e) { done = false; }
    if (done) { say(button.getAttribute("data-copied")); return; }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(box.value).then(
        function () { say(button.getAttribute("data-copied")); },
        function () { say(button.getAttribute("data-failed")); });
    } else {
      say(button.getAttribute("data-failed"));
    }
  });
})();
