// The attention explorer of "Attention, Step by Step" (attnbook.plot.attention_explorer).
// Each explorer carries its weights as JSON (hundredths, indexed [layer][head][query][key]).
// This script sets up every explorer on the page that is not set up yet, so it may run many times.
(function () {
  "use strict";

  // A weight in [0, 1] as a shade of blue. Black text up to 0.75 and white above keep a contrast
  // of at least 4.5 : 1 on every shade (WCAG AA).
  function paint(cell, weight) {
    cell.style.background = "rgba(23, 74, 150, " + weight.toFixed(2) + ")";
    cell.style.color = weight > 0.75 ? "#fff" : "#000";
  }

  function quoted(token) {
    return "\u201c" + token + "\u201d";
  }

  function setUp(root) {
    var data = JSON.parse(root.querySelector("script.ae-data").textContent);
    var queries = Array.prototype.slice.call(root.querySelectorAll(".ae-query"));
    var rows = Array.prototype.slice.call(root.querySelectorAll(".ae-row"));
    var layerMenu = root.querySelector("select.ae-layer");
    var headMenu = root.querySelector("select.ae-head");
    var status = root.querySelector(".ae-status");
    var sameTokens = data.queries.join("\u0000") === data.keys.join("\u0000");
    var shown = { query: data.query, layer: data.layer, head: data.head };

    function show() {
      var heads = data.weights[shown.layer];
      var summary = [];
      rows.forEach(function (row, h) {
        row.hidden = shown.head !== "all" && h !== shown.head;
        if (row.hidden) return;
        var weights = heads[h][shown.query];
        var best = 0;
        row.querySelectorAll(".ae-key").forEach(function (cell, k) {
          var weight = weights[k] / 100;
          paint(cell, weight);
          cell.querySelector(".ae-weight").textContent = weight.toFixed(2);
          cell.classList.toggle("ae-self", sameTokens && k === shown.query);
          if (weights[k] > weights[best]) best = k;
        });
        var most = quoted(data.keys[best]) + " (" + (weights[best] / 100).toFixed(2) + ")";
        summary.push(shown.head === "all" && heads.length > 1 ? most + " in head " + (h + 1) : most);
      });
      queries.forEach(function (button, i) {
        button.setAttribute("aria-pressed", i === shown.query ? "true" : "false");
        button.tabIndex = i === shown.query ? 0 : -1;
      });
      var where = [];
      if (data.weights.length > 1) where.push("layer " + (shown.layer + 1));
      if (heads.length > 1 && shown.head !== "all") where.push("head " + (shown.head + 1));
      status.textContent = quoted(data.queries[shown.query]) + (where.length ? " (" + where.join(", ") + ")" : "") +
        " looks most at " + summary.join(", ") + ". Point at another query token, or use \u2190 \u2192 on the focused one.";
    }

    function choose(i) {
      if (i !== shown.query) { shown.query = i; show(); }
    }

    queries.forEach(function (button, i) {
      button.addEventListener("mouseenter", function () { choose(i); });
      button.addEventListener("focus", function () { choose(i); });
      button.addEventListener("click", function () { choose(i); });
      button.addEventListener("keydown", function (event) {
        var next = { ArrowRight: i + 1, ArrowDown: i + 1, ArrowLeft: i - 1, ArrowUp: i - 1,
                     Home: 0, End: queries.length - 1 }[event.key];
        if (next === undefined) return;
        event.preventDefault();
        queries[Math.max(0, Math.min(queries.length - 1, next))].focus();
      });
    });
    if (layerMenu) {
      layerMenu.value = String(shown.layer);
      layerMenu.addEventListener("change", function () { shown.layer = Number(layerMenu.value); show(); });
    }
    if (headMenu) {
      headMenu.value = String(shown.head);
      headMenu.addEventListener("change", function () {
        shown.head = headMenu.value === "all" ? "all" : Number(headMenu.value);
        show();
      });
    }
    show();
  }

  // This script's own explorer first, then any other on the page that is not set up yet. An explorer
  // without its weights (a notebook that removed the scripts of an untrusted output) is left as text.
  var mine = document.currentScript && document.currentScript.closest(".attention-explorer");
  var roots = Array.prototype.slice.call(document.querySelectorAll(".attention-explorer"));
  if (mine) roots.unshift(mine);
  roots.forEach(function (root) {
    if (root.hasAttribute("data-ready") || !root.querySelector("script.ae-data")) return;
    root.setAttribute("data-ready", "");
    setUp(root);
  });
})();
