// vshortlink pages: small improvements on pages that work without script.
// Copy buttons, the date field shown only when "a date" is chosen, live search on the links.
(function () {
  "use strict";

  // Copy buttons are hidden until script can make them work.
  var bindCopy = function (root) {
  root.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var field = document.getElementById(button.dataset.copy);
      if (!field) return;
      var text = field.value || field.textContent;
      var done = function () {
        var label = button.textContent;
        button.textContent = button.dataset.done || label;
        button.classList.add("done");
        setTimeout(function () {
          button.textContent = label;
          button.classList.remove("done");
        }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () {
          field.select();
          document.execCommand("copy");
          done();
        });
      } else {
        field.select();
        document.execCommand("copy");
        done();
      }
    });
  });
  };
  bindCopy(document);

  // A validity menu shows its date field only for "until a date" (without script it is always
  // shown, and a date typed there is honoured).
  document.querySelectorAll("select[data-toggles]").forEach(function (select) {
    var box = document.getElementById(select.dataset.toggles);
    if (!box) return;
    var input = box.querySelector("input");
    var sync = function () {
      var on = select.value === "date";
      box.hidden = !on;
      if (input) input.required = on;
    };
    if (input && input.value && select.value !== "date") {
      select.value = "date";
    }
    select.addEventListener("change", sync);
    sync();
  });

  // Live search: the filter form reloads the results as you type, keeping focus.
  var form = document.querySelector("form[data-live]");
  var results = document.getElementById("results");
  if (form && results && window.fetch && window.DOMParser) {
    var timer = null;
    var last = "";
    var refresh = function () {
      var params = new URLSearchParams(new FormData(form));
      params.forEach(function (value, key) {
        if (!value) params.delete(key);
      });
      var query = params.toString();
      if (query === last) return;
      last = query;
      var url = form.action + (query ? "?" + query : "");
      fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (html === null) return;
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById("results");
          if (fresh) {
            results.replaceWith(fresh);
            results = fresh;
            bindCopy(fresh);
            history.replaceState(null, "", url);
          }
        })
        .catch(function () {});
    };
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(refresh, 250);
    });
  }
})();
