// The dashboard's only script besides htmx and idiomorph: live parts morphed into place
// and their real changes announced, ages and countdowns told from the instants the server
// writes, the upload progress bar, copy buttons and the phone nav. No inline handlers anywhere, so the pages run under a strict CSP.
(function () {
  "use strict";

  // hx-swap="morph": the response is morphed into the element instead of replacing it, so
  // the focused button or tab, the scroll position, a half-typed search and an open
  // <details> survive a live refresh. (idiomorph's own htmx extension also accepts
  // "morph:{...}" configs through Function(), which the CSP forbids: this one does not.)
  var RELATIVE_ATTRIBUTES = ["datetime", "data-relative", "data-absolute", "title"];

  function isKeptAsWritten(oldNode, newNode) {
    if (newNode.nodeType !== 1) return false;
    if (oldNode.hasAttribute("data-polled-at")) return newNode.hasAttribute("data-polled-at");
    if (!oldNode.hasAttribute("data-relative")) return false;
    return RELATIVE_ATTRIBUTES.every(function (name) {
      return oldNode.getAttribute(name) === newNode.getAttribute(name);
    });
  }

  if (window.htmx && window.Idiomorph) {
    var morphConfig = {
      morphStyle: "outerHTML",
      ignoreActiveValue: true,
      callbacks: {
        beforeAttributeUpdated: function (name, element) {
          return !(name === "open" && element.tagName === "DETAILS");
        },
        // What this script writes into the page (an instant's distance, the time of the
        // last poll) is left as it is while the server's element is the same: a poll
        // that changed nothing changes nothing in the document either.
        beforeNodeMorphed: function (oldNode, newNode) {
          return !(oldNode.nodeType === 1 && isKeptAsWritten(oldNode, newNode));
        },
      },
    };
    window.htmx.defineExtension("morph", {
      isInlineSwap: function (swapStyle) {
        return swapStyle === "morph";
      },
      handleSwap: function (swapStyle, target, fragment) {
        if (swapStyle !== "morph") return false;
        return window.Idiomorph.morph(target, fragment.children, morphConfig);
      },
    });
  }

  // Live regions ([data-announce]) are not aria-live themselves: a screen reader would
  // read the whole region on every poll, or nothing. Their text moves on every poll
  // (ages, countdowns, counters), so nothing is said from it: each subject with a state
  // an operator acts on declares it ([data-live-key], [data-live-state]) with the
  // sentence for arriving there ([data-live-say]; ladder/templatetags/live.py). After a
  // poll, the subjects whose state changed say their sentences, once, together, in
  // #live-announcer; a subject that appears or goes (a search, a new row) says nothing.
  var MAX_SAID = 3;

  function normalized(element) {
    return element.textContent.replace(/\s+/g, " ").trim();
  }

  function snapshot(region) {
    var states = Object.create(null);
    region.querySelectorAll("[data-live-key]").forEach(function (part) {
      states[part.getAttribute("data-live-key")] = {
        state: part.getAttribute("data-live-state"),
        say: part.getAttribute("data-live-say") || "",
        isCause: part.hasAttribute("data-live-cause"),
      };
    });
    return states;
  }

  // A connection's own change ([data-live-cause]) is said before what follows from it.
  function announcement(before, after) {
    var causes = [];
    var effects = [];
    Object.keys(after).forEach(function (key) {
      var was = before[key];
      var now = after[key];
      if (!was || was.state === now.state || !now.say) return;
      var list = now.isCause ? causes : effects;
      if (list.indexOf(now.say) < 0) list.push(now.say);
    });
    var said = causes.concat(effects);
    var more = said.length - MAX_SAID;
    if (more > 0) {
      said = said.slice(0, MAX_SAID);
      said.push("And " + more + " more change" + (more > 1 ? "s" : "") + ".");
    }
    return said.join(" ");
  }

  function announce(text) {
    var announcer = document.getElementById("live-announcer");
    if (!announcer || !text) return;
    // The same words twice in a row are not re-read unless the text node changes.
    announcer.textContent = "";
    window.setTimeout(function () {
      announcer.textContent = text;
    }, 50);
  }

  // Focus follows the action: a fragment answering what the user did marks what they need
  // next with [data-focus] (the first field of an edit form, the one-time secret's Copy
  // button, the edited row, the success or error message), and the message to say with
  // [data-say]. Each is acted on once and unmarked, so a later poll says nothing again.
  function followAction() {
    var said = document.querySelector("[data-say]");
    var target = document.querySelector("[data-focus]");
    var way = target && target.getAttribute("data-focus");
    document.querySelectorAll("[data-say], [data-focus]").forEach(function (element) {
      element.removeAttribute("data-say");
      element.removeAttribute("data-focus");
    });
    if (target && way === "control") {
      // A field with an error: its input, select or textarea.
      target = target.querySelector("input:not([type=hidden]), select, textarea") || target;
    }
    if (target) {
      if (!target.hasAttribute("tabindex") && !/^(A|BUTTON|INPUT|SELECT|TEXTAREA)$/.test(target.tagName)) {
        target.setAttribute("tabindex", "-1");
      }
      target.focus({ preventScroll: true });
      target.scrollIntoView({ block: "nearest" });
    }
    if (said) announce(normalized(said));
  }
  document.addEventListener("DOMContentLoaded", followAction);
  document.addEventListener("htmx:afterSettle", followAction);

  // By region id, so a region replaced whole (not morphed) still compares with its past.
  var snapshots = Object.create(null);
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-announce]").forEach(function (region) {
      snapshots[region.id] = snapshot(region);
    });
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var region = event.detail.target;
    if (!region || !region.hasAttribute || !region.hasAttribute("data-announce")) return;
    var before = snapshots[region.id];
    var after = snapshot(region);
    snapshots[region.id] = after;
    // Only the region's own refreshes (its poll, a save elsewhere) are announced; what the
    // user asked for (a tab, a search, a page) is already in front of them.
    // A refresh that an action of this page triggered (`candidate-saved from:body`) is
    // not said either: the action's own message is, once. Polls have no triggering event.
    var config = event.detail.requestConfig;
    var isPoll = !config || !config.triggeringEvent;
    if (before && event.detail.elt === region && isPoll) {
      announce(announcement(before, after));
    }
  });

  // On a phone the nav and the pool tabs are lines that scroll sideways
  // ([data-scroll-current]): bring the current page or tab into view, once per page.
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-scroll-current]").forEach(function (strip) {
      var current = strip.querySelector("[aria-current]");
      if (!current || strip.scrollWidth <= strip.clientWidth) return;
      strip.scrollLeft = current.offsetLeft - (strip.clientWidth - current.offsetWidth) / 2;
    });
  });

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

  // Instants told as their distance from now (ladder/templatetags/citations.py,
  // `relative_time`): the server writes the instant only, so a poll of an unchanged page
  // is the same bytes (a 304) and the words move here, every second. "past": an age,
  // never said as ahead (a clock a little behind the server's says "0 s ago");
  // "future": "in 37 min", "now" at zero, then "5 s ago". With data-absolute, the
  // instant as the page writes it stays in front: "12:01:35 UTC (in 1 min 35 s)".
  // These elements sit in no live region: the ticking is never read out.
  function distance(element, now) {
    var at = Date.parse(element.getAttribute("datetime"));
    if (isNaN(at)) return null;
    var seconds = (at - now) / 1000;
    if (element.getAttribute("data-relative") === "past" || seconds <= -1) {
      return duration(Math.max(0, Math.floor(-seconds))) + " ago";
    }
    var left = Math.ceil(seconds);
    return left > 0 ? "in " + duration(left) : "now";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-relative]").forEach(function (element) {
      var said = distance(element, now);
      if (said === null) return;
      var absolute = element.getAttribute("data-absolute");
      var text = absolute ? absolute + " (" + said + ")" : said;
      if (element.textContent !== text) element.textContent = text;
    });
  }

  // A live part's "Live: updated ..." (ladder/templatetags/live.py `live_updated`): a
  // poll's fragment carries no time (it would make every answer differ), so the time an
  // answer came, a 304 revalidated by the browser included, is written here.
  function two(number) {
    return (number < 10 ? "0" : "") + number;
  }
  function markPolled(region) {
    var now = new Date();
    region.querySelectorAll("[data-polled-at]").forEach(function (element) {
      element.setAttribute("datetime", now.toISOString().replace(/\.\d+Z$/, "Z"));
      element.textContent =
        two(now.getUTCHours()) + ":" + two(now.getUTCMinutes()) + ":" + two(now.getUTCSeconds()) + " UTC";
    });
  }

  document.addEventListener("DOMContentLoaded", tick);
  // Right after the swap, before the browser paints: the server's fallback text of a new
  // or changed instant is never seen.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.querySelectorAll) markPolled(event.detail.target);
    tick();
  });
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

  // The pause control: while paused (remembered in this browser), the live parts' polls
  // are not sent; what the user asks for (a tab, a search, a save) still is.
  var PAUSED_KEY = "omniroute-live-paused";
  function isPaused() {
    try { return window.localStorage.getItem(PAUSED_KEY) === "1"; } catch (error) { return false; }
  }
  function showPause(button) {
    var paused = isPaused();
    button.setAttribute("aria-pressed", paused ? "true" : "false");
    button.textContent = paused ? "Live updates paused: resume" : "Pause live updates";
  }
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("live-pause");
    if (!button || !document.querySelector('[hx-trigger*="every"]')) return;
    button.hidden = false;
    showPause(button);
    button.addEventListener("click", function () {
      var paused = !isPaused();
      try { window.localStorage.setItem(PAUSED_KEY, paused ? "1" : "0"); } catch (error) { return; }
      showPause(button);
      announce(paused ? "Live updates paused." : "Live updates resumed.");
    });
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var config = event.detail.requestConfig;
    var isPoll = !config || !config.triggeringEvent;
    if (isPoll && isPaused()) event.preventDefault();
  });

  // Connection ids are picked from a <datalist> of the registered ones. An input that
  // takes several ([data-multi-list], separated by commas or spaces) offers them for the
  // id being typed: each option is the ids typed before it plus a registered one.
  function offerFor(input) {
    if (!input.matches || !input.matches("input[list]")) return;
    var list = document.getElementById(input.getAttribute("list"));
    if (!list) return;
    var prefix = "";
    if (input.hasAttribute("data-multi-list")) {
      var match = input.value.match(/^(.*[\s,])[^\s,]*$/);
      prefix = match ? match[1] : "";
    }
    list.querySelectorAll("option").forEach(function (option) {
      if (!option.hasAttribute("data-id")) option.setAttribute("data-id", option.value);
      option.value = prefix + option.getAttribute("data-id");
    });
  }
  document.addEventListener("input", function (event) { offerFor(event.target); });
  document.addEventListener("focusin", function (event) { offerFor(event.target); });

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
