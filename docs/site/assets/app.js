// The try-it panel of the marketdata documentation site. First-party and
// dependency-free. The key lives in the password field's value and in a
// local variable for the duration of one request: it is never written to
// localStorage, sessionStorage, a cookie, the URL, the history or the
// console, and it is sent only as the Authorization header of a request to
// the API base URL the user sees.
(function () {
  "use strict";

  var $ = function (id) { return document.getElementById(id); };

  // The contents show where the reader is: the link of the section in view
  // gets aria-current="location" (site.css gives it a visible mark). The
  // section in view is the last one whose start has scrolled past the
  // header, or the one just picked from the contents.
  (function () {
    var toc = document.querySelector("nav.toc");
    if (!toc) { return; }
    var links = Array.prototype.filter.call(toc.querySelectorAll('a[href^="#"]'), function (a) {
      return $(a.getAttribute("href").slice(1));
    });
    var targets = [];
    links.forEach(function (a) {
      var el = $(a.getAttribute("href").slice(1));
      if (targets.indexOf(el) < 0) { targets.push(el); }
    });
    // Document order: the contents list Streams among the concepts.
    targets.sort(function (a, b) {
      return a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1;
    });
    var header = document.querySelector("header.top");
    var picked = null, current = null, queued = false;

    function onScreen(el) {
      var r = el.getBoundingClientRect();
      return r.bottom > 0 && r.top < window.innerHeight;
    }

    function inView() {
      var line = (header ? header.getBoundingClientRect().bottom : 0) + 16, found = -1;
      for (var i = 0; i < targets.length; i++) {
        if (targets[i].getBoundingClientRect().top > line) { break; }
        found = i;
      }
      // A picked section the page could not scroll up to the header (near
      // the end) stays marked while on screen; scrolling on past it lets go.
      if (picked && found < targets.indexOf(picked) && onScreen(picked)) { return picked; }
      picked = null;
      return found < 0 ? null : targets[found];
    }

    function mark() {
      queued = false;
      var el = inView();
      if (el === current) { return; }
      current = el;
      var first = null;
      links.forEach(function (a) {
        if (el && a.getAttribute("href") === "#" + el.id) {
          a.setAttribute("aria-current", "location");
          first = first || a;
        } else {
          a.removeAttribute("aria-current");
        }
      });
      // Keep the marked link visible in the contents when they scroll on
      // their own (wide screens); never scroll the page for it.
      if (first && toc.scrollHeight > toc.clientHeight) {
        var t = first.getBoundingClientRect(), box = toc.getBoundingClientRect();
        if (t.top < box.top || t.bottom > box.bottom) {
          toc.scrollTop += t.top - box.top - box.height / 3;
        }
      }
    }

    function queue() {
      if (!queued) {
        queued = true;
        window.requestAnimationFrame(mark);
      }
    }

    function pick() {
      picked = window.location.hash.length > 1 ? $(window.location.hash.slice(1)) : null;
      queue();
    }
    window.addEventListener("scroll", queue, { passive: true });
    window.addEventListener("resize", queue);
    window.addEventListener("hashchange", pick);
    pick();
  })();

  var ui = $("tryit-ui");
  if (!ui) { return; }
  ui.hidden = false;

  var apiURL = $("tryit-api-url"), keyInput = $("tryit-api-key"), route = $("tryit-route"),
      send = $("tryit-send"), result = $("tryit-result"), statusEl = $("tryit-status"),
      requestEl = $("tryit-request"), bodyEl = $("tryit-body"), curlEl = $("tryit-curl");
  var forms = Array.prototype.slice.call(document.querySelectorAll("fieldset.form"));
  var inFlight = null;
  var keyChars = /^[A-Za-z0-9_-]+$/;
  var allowedOrigins = Array.prototype.map.call(document.querySelectorAll("#tryit-api-urls option"), function (o) {
    return new URL(o.value).origin;
  });

  // A page opened from another origin than the one the API allows gets
  // every answer refused by the browser: say so before the user tries.
  var docsOrigin = document.body.getAttribute("data-docs-origin");
  if (docsOrigin && docsOrigin !== window.location.origin) {
    var w = $("tryit-origin-warning");
    w.textContent = "This page is open at " + window.location.origin + ", but the site is configured for " +
      docsOrigin + " (MD_DOCS_ORIGIN). The API lets browsers read its answers only from allowed origins, " +
      "so requests sent from here will fail.";
    w.hidden = false;
  }

  function currentForm() {
    for (var i = 0; i < forms.length; i++) {
      if (forms[i].getAttribute("data-op") === route.value) { return forms[i]; }
    }
    return null;
  }

  function showForm() {
    var f = currentForm();
    forms.forEach(function (x) { x.hidden = x !== f; });
    send.disabled = !f || f.hasAttribute("data-websocket");
  }
  route.addEventListener("change", showForm);
  showForm();

  // "Try it" buttons of the reference pick their route in the panel.
  Array.prototype.forEach.call(document.querySelectorAll("button.try"), function (b) {
    b.hidden = false;
    b.addEventListener("click", function () {
      route.value = b.getAttribute("data-try");
      showForm();
      $("tryit").scrollIntoView({ block: "start" });
      var first = currentForm() && currentForm().querySelector("input, select");
      (keyInput.value ? (first || send) : keyInput).focus();
    });
  });

  $("tryit-forget-key").addEventListener("click", function () {
    keyInput.value = "";
    keyInput.focus();
  });

  // Enter in any field of the panel sends.
  ui.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && e.target.tagName === "INPUT") {
      e.preventDefault();
      send.click();
    }
  });

  function setStatus(text, state) {
    statusEl.textContent = text;
    statusEl.setAttribute("data-state", state);
    result.setAttribute("data-state", state);
    result.hidden = false;
  }

  // refuse shows why a request was not sent.
  function refuse(text) {
    setStatus(text, "invalid");
    statusEl.setAttribute("data-status", "invalid");
  }

  // The panel tells chart.js (the candles chart) of each answer with a DOM
  // event on #tryit-result: the route and what it charts (the form's
  // data-chart), the status, the URL and the body, never the key.
  function clearAnswer() {
    result.dispatchEvent(new CustomEvent("tryit:clear"));
    bodyEl.textContent = "";
    Array.prototype.forEach.call(document.querySelectorAll("[data-header]"), function (td) {
      td.textContent = "—";
      td.removeAttribute("data-value");
    });
  }

  // Something that looks like an API key must not go into a URL: URLs end
  // up in the browser's history, proxies' and the API's access logs.
  var keyLike = /mdk_live_[A-Za-z0-9_-]{8,}/;
  function keyInURL(where) {
    return new Error("The " + where + " contains what looks like an API key (mdk_live_…). " +
      "It would be sent in the URL, which browsers, proxies and servers log; the key goes only in the API key field.");
  }

  // buildURL returns the request URL, or throws an Error to show.
  function buildURL(form) {
    if (keyLike.test(apiURL.value)) { throw keyInURL("API base URL"); }
    var base;
    try {
      base = new URL(apiURL.value.trim());
    } catch (e) {
      throw new Error("The API base URL is not a URL.");
    }
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw new Error("The API base URL must be http:// or https://.");
    }
    // The page's CSP lets it connect to the listed APIs only: say so
    // rather than let the browser's refusal look like a network error.
    if (allowedOrigins.indexOf(base.origin) < 0) {
      throw new Error("This site sends requests only to " + allowedOrigins.join(", ") +
        " (set by its operator: MD_DOCS_API_URL or marketdata docs --api-url).");
    }
    var path = form.getAttribute("data-path");
    var query = new URLSearchParams();
    var fields = form.querySelectorAll("[data-param]");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i], name = f.getAttribute("data-param"), where = f.getAttribute("data-in");
      var value = f.value.trim();
      if (value === "") {
        if (f.required) { throw new Error("Fill in " + name + "."); }
        continue;
      }
      if (keyLike.test(value)) { throw keyInURL(name + " field"); }
      if (where === "path") {
        // A dot segment would be resolved away by the URL, calling
        // another route than the one picked.
        if (value === "." || value === "..") {
          throw new Error(name + " cannot be \"" + value + "\": the URL would resolve it to another route.");
        }
        path = path.replace("{" + name + "}", encodeURIComponent(value));
      } else if (where === "query") {
        query.set(name, value);
      }
    }
    var u = new URL(base.href.replace(/\/+$/, "") + path);
    var qs = query.toString();
    u.search = qs ? "?" + qs : "";
    return u;
  }

  function shellQuote(s) { return "'" + s.replace(/'/g, "'\\''") + "'"; }

  send.addEventListener("click", function () {
    var form = currentForm();
    if (!form || form.hasAttribute("data-websocket")) { return; }
    clearAnswer();
    statusEl.removeAttribute("data-status");
    var url;
    try {
      url = buildURL(form);
    } catch (e) {
      refuse(e.message);
      return;
    }
    // Only Authorization: the API's CORS lets a page send no other header.
    var headers = {};
    var needsKey = !form.hasAttribute("data-nokey");
    var curl = "curl -si";
    if (needsKey) {
      var key = keyInput.value.trim();
      if (key !== "" && !keyChars.test(key)) {
        refuse("The key holds characters no API key has; paste the whole secret (mdk_live_…).");
        return;
      }
      if (key !== "") { headers.Authorization = "Bearer " + key; }
      curl += " -H 'Authorization: Bearer '\"$MD_KEY\"";
    }
    curlEl.textContent = curl + " " + shellQuote(url.href);
    requestEl.textContent = "GET " + url.href;

    if (inFlight) { inFlight.abort(); }
    var ctl = new AbortController();
    inFlight = ctl;
    var timer = setTimeout(function () { ctl.abort(); }, 30000);
    var started = performance.now();
    setStatus("Sending…", "pending");
    send.disabled = true;

    fetch(url.href, {
      method: "GET",
      headers: headers,
      mode: "cors",
      credentials: "omit",
      referrerPolicy: "no-referrer",
      cache: "no-store",
      redirect: "error",
      signal: ctl.signal
    }).then(function (res) {
      return res.text().then(function (text) {
        if (ctl !== inFlight) { return; } // replaced by a newer request
        var ms = Math.round(performance.now() - started);
        setStatus(res.status + " " + (res.statusText || "") + " · " + ms + " ms", res.ok ? "ok" : "error");
        statusEl.setAttribute("data-status", String(res.status));
        Array.prototype.forEach.call(document.querySelectorAll("[data-header]"), function (td) {
          var v = res.headers.get(td.getAttribute("data-header"));
          if (v !== null) {
            td.textContent = v;
            td.setAttribute("data-value", v);
          }
        });
        var shown = text;
        try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* not JSON: shown as is */ }
        bodyEl.textContent = shown === "" ? "(no body)" : shown;
        result.dispatchEvent(new CustomEvent("tryit:answer", { detail: {
          op: form.getAttribute("data-op"), chart: form.getAttribute("data-chart"), status: res.status,
          url: url.href, body: text } }));
      });
    }).catch(function (err) {
      if (ctl !== inFlight) { return; } // replaced by a newer request, which reports itself
      statusEl.setAttribute("data-status", "failed");
      if (err && err.name === "AbortError") {
        setStatus("No answer within 30 s; the request was abandoned.", "failed");
        return;
      }
      setStatus("The browser could not read the answer. Either the API cannot be reached at " +
        url.origin + ", or it does not allow this page's origin (" + window.location.origin +
        ") to read its answers (CORS: the API allows MD_DOCS_ORIGIN and MD_APP_ORIGINS only). " +
        "The browser's console shows which.", "failed");
    }).finally(function () {
      clearTimeout(timer);
      if (inFlight === ctl) { inFlight = null; }
      showForm(); // enables Send unless the route now picked cannot be sent
    });
  });
})();
