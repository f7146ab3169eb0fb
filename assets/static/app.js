// vshortlink pages: small improvements on pages that work without script.
// Copy buttons, the date field shown only when "a date" is chosen, live search on the links,
// rows of rules and targets added, removed and moved in place on a link's options.
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
  // The options form's rules and targets: add, remove and move rows here instead of a round
  // trip (without script those buttons post the form and the server shows it again). Rows are
  // numbered by their place, so every name, id and button is renumbered after a change.
  document.querySelectorAll("fieldset[data-rows]").forEach(function (group) {
    var kind = group.dataset.rows;
    var list = group.querySelector(".rows");
    var template = group.querySelector("template");
    var empty = group.querySelector(".empty-rows");
    var add = group.querySelector("button[value='add_" + kind + "']");
    if (!list || !template || !add) return;
    var max = parseInt(group.dataset.max, 10) || 100;
    var legend = list.dataset.legend || "{n}";
    var pattern = new RegExp("(" + kind + "[.-]|_" + kind + "\\.)\\d+", "g");
    var rows = function () {
      return Array.prototype.filter.call(list.children, function (el) {
        return el.classList.contains("row-box");
      });
    };
    var renumber = function () {
      var all = rows();
      all.forEach(function (row, i) {
        var els = [row].concat(Array.prototype.slice.call(row.querySelectorAll("*")));
        els.forEach(function (el) {
          ["name", "id", "for", "aria-describedby"].concat(el.tagName === "BUTTON" ? ["value"] : [])
            .forEach(function (attr) {
              var v = el.getAttribute(attr);
              if (v) el.setAttribute(attr, v.replace(pattern, function (_, p) { return p + i; }));
            });
        });
        var title = row.querySelector("[data-n]");
        if (title) title.textContent = legend.replace("{n}", String(i + 1));
        var up = row.querySelector("button[value^='up_']");
        var down = row.querySelector("button[value^='down_']");
        if (up) up.disabled = i === 0;
        if (down) down.disabled = i === all.length - 1;
      });
      add.disabled = all.length >= max;
      if (empty) empty.hidden = all.length > 0;
    };
    group.addEventListener("click", function (event) {
      var button = event.target.closest("button[name='action']");
      if (!button || !group.contains(button)) return;
      var m = /^(add|remove|up|down)_([a-z]+)(?:\.(\d+))?$/.exec(button.value);
      if (!m || m[2] !== kind) return;
      event.preventDefault();
      var all = rows();
      var row = m[3] !== undefined ? all[parseInt(m[3], 10)] : null;
      if (m[1] === "add") {
        if (all.length >= max) return;
        var fresh = template.content.firstElementChild.cloneNode(true);
        list.appendChild(fresh);
        renumber();
        var first = fresh.querySelector("input");
        if (first) first.focus();
        return;
      }
      if (!row) return;
      if (m[1] === "remove") {
        row.remove();
        renumber();
        add.focus();
      } else if (m[1] === "up" && row.previousElementSibling) {
        list.insertBefore(row, row.previousElementSibling);
        renumber();
        (button.disabled ? row.querySelector("button[value^='down_']") : button).focus();
      } else if (m[1] === "down" && row.nextElementSibling) {
        list.insertBefore(row.nextElementSibling, row);
        renumber();
        (button.disabled ? row.querySelector("button[value^='up_']") : button).focus();
      }
    });
  });

  // A form shown again with errors: the first field to correct gets the focus.
  var invalid = document.querySelector(".options-form [aria-invalid='true']");
  if (invalid) invalid.focus();

  // "Remove the password" makes a new password meaningless: the field is disabled meanwhile.
  var removePassword = document.getElementById("o-password-remove");
  var password = document.getElementById("o-password");
  if (removePassword && password) {
    var syncPassword = function () { password.disabled = removePassword.checked; };
    removePassword.addEventListener("change", syncPassword);
    syncPassword();
  }
})();
