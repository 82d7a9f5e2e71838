// The dashboard's only script besides htmx: live countdowns, the upload progress bar and
// copy buttons. No inline handlers anywhere, so the pages run under a strict CSP.
(function () {
  "use strict";

  // The same wording as the server's duration_text: "42 s", "3 min 5 s", "2 h 5 min".
  function duration(seconds) {
    if (seconds < 60) return seconds + " s";
    var minutes = Math.floor(seconds / 60);
    var rest = seconds % 60;
    if (minutes < 60) return rest ? minutes + " min " + rest + " s" : minutes + " min";
    var hours = Math.floor(minutes / 60);
    minutes = minutes % 60;
    if (hours < 24) return minutes ? hours + " h " + minutes + " min" : hours + " h";
    var days = Math.floor(hours / 24);
    hours = hours % 24;
    return hours ? days + " d " + hours + " h" : days + " d";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-countdown]").forEach(function (element) {
      var at = Date.parse(element.getAttribute("datetime"));
      if (isNaN(at)) return;
      var left = Math.round((at - now) / 1000);
      element.textContent = left > 0 ? "in " + duration(left) : "now";
    });
  }

  document.addEventListener("DOMContentLoaded", tick);
  document.addEventListener("htmx:afterSettle", tick);
  window.setInterval(tick, 1000);

  // Upload progress of forms marked data-upload-progress (htmx reports XHR progress).
  document.addEventListener("htmx:xhr:progress", function (event) {
    var form = event.target.closest && event.target.closest("form[data-upload-progress]");
    if (!form || !event.detail.lengthComputable) return;
    var bar = form.querySelector("progress");
    if (!bar) return;
    bar.hidden = false;
    bar.value = Math.round((event.detail.loaded / event.detail.total) * 100);
    bar.textContent = bar.value + " %";
  });

  // A request htmx could not complete (a 403, a 413, a 500, the server gone): say so
  // instead of failing silently; the next successful swap clears it.
  function showError(text) {
    var box = document.getElementById("request-error");
    if (!box) return;
    box.textContent = text;
    box.hidden = false;
  }
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var text = xhr.status === 403 ? "Not allowed: only operators can change this."
      : xhr.status === 413 ? "The upload is larger than the server accepts."
      : "The server answered " + xhr.status + " " + xhr.statusText + ".";
    showError(text);
  });
  document.addEventListener("htmx:sendError", function () {
    showError("The server cannot be reached; live parts resume when it is back.");
  });
  // A 503 from the server's request deadline (omniroute_admin/deadline.py) is retargeted
  // at the error box itself: show it, and leave the part that asked as it was (its poll
  // goes on, and its next successful swap hides the box again).
  document.addEventListener("htmx:afterSwap", function (event) {
    var box = document.getElementById("request-error");
    if (!box) return;
    box.hidden = event.detail.target !== box;
  });

  // Copy the text of the element a [data-copy] button names (the new token's secret).
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.textContent.trim()).then(function () {
      button.textContent = "Copied";
    });
  });
})();
