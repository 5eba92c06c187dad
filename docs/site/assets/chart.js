// The candles chart of the try-it panel: when a route whose form is marked
// data-chart="candles" (its 200 body is a CandleList: GET
// /markets/{universal_id}/candles) answers 200, this draws the answer's
// candles as inline SVG under the status. First-party and dependency-free,
// like app.js, and it never sees the key: app.js hands it the route, the
// status, the URL and the body (events "tryit:answer" and "tryit:clear" on
// #tryit-result). Colours come from site.css (the CSP allows no inline
// style); each candle is a <g class="candle">, and the figure carries
// data-candles (the answer's count) and data-trade-candles (those drawn
// with trade prices) for tests and tools.
(function () {
  "use strict";

  var result = document.getElementById("tryit-result"), fig = document.getElementById("tryit-chart");
  if (!result || !fig) { return; }
  var SVG = "http://www.w3.org/2000/svg";
  // The drawing's own units (the SVG scales to the panel's width).
  var W = 400, H = 230, left = 38, right = 8, top = 10, bottom = 24;

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (parent) { parent.appendChild(e); }
    return e;
  }

  function html(name, cls, text, parent) {
    var e = document.createElement(name);
    if (cls) { e.className = cls; }
    if (text) { e.textContent = text; }
    parent.appendChild(e);
    return e;
  }

  function num(v) { return typeof v === "number" && isFinite(v) ? v : null; }

  // side reads one OHLC field; null when the object or the field is null.
  function side(o, field) { return o && typeof o === "object" ? num(o[field]) : null; }

  function clear() {
    fig.hidden = true;
    fig.removeAttribute("data-candles");
    fig.removeAttribute("data-trade-candles");
    fig.removeAttribute("aria-label");
    while (fig.firstChild) { fig.removeChild(fig.firstChild); }
  }

  // describe reads the market, interval and venue from the request's URL
  // (the API's defaults where the query has none).
  function describe(href) {
    var u = new URL(href), m = /\/markets\/([^/]+)\/candles$/.exec(u.pathname);
    return {
      market: m ? decodeURIComponent(m[1]) : "?",
      interval: u.searchParams.get("interval") || "1h",
      venue: u.searchParams.get("venue") || "all"
    };
  }

  // label is a candle's start as shown on the time axis (UTC).
  function label(start, interval) {
    var s = String(start);
    return interval === "1d" ? s.slice(0, 10) : s.slice(5, 16).replace("T", " ");
  }

  // niceStep is the grid's step: 1, 2 or 5 times a power of ten, about a
  // quarter of span.
  function niceStep(span) {
    var raw = span / 4, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10);
  }

  function draw(list, info) {
    var n = list.length;
    var title = n + (n === 1 ? " candle" : " candles") + " of " + info.market + ", interval " +
      info.interval + (info.venue === "all" ? ", all venues" : ", " + info.venue);
    fig.hidden = false;
    fig.setAttribute("data-candles", String(n));
    html("figcaption", "", title, fig);
    if (n === 0) {
      fig.setAttribute("data-trade-candles", "0");
      html("p", "note chart-empty", "No candles in this range.", fig);
      return;
    }

    // What each candle shows: the trade OHLC where it has trades, and the
    // best bid and ask in force at its end; null fields are skipped.
    var rows = list.map(function (c) {
      c = c || {};
      var t = { open: side(c.trade, "open"), high: side(c.trade, "high"), low: side(c.trade, "low"), close: side(c.trade, "close") };
      return {
        start: c.start, trades: num(c.trades), volume: num(c.volume),
        trade: t.open !== null && t.close !== null ? t : null,
        bid: side(c.bid, "close"), ask: side(c.ask, "close")
      };
    });
    var lo = Infinity, hi = -Infinity;
    rows.forEach(function (r) {
      var vs = [r.bid, r.ask];
      if (r.trade) { vs.push(r.trade.open, r.trade.close, r.trade.high, r.trade.low); }
      vs.forEach(function (v) {
        if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      });
    });
    if (lo > hi) { lo = 0; hi = 1; } // nothing to draw but the slots
    var pad = Math.max((hi - lo) * 0.08, 0.005), dataLo = lo, dataHi = hi;
    lo -= pad;
    hi += pad;
    if (lo < 0 && dataLo >= 0) { lo = 0; }
    if (hi > 1 && dataHi <= 1) { hi = 1; }
    var plotH = H - top - bottom, slot = (W - left - right) / n;
    var y = function (v) { return top + (hi - v) / (hi - lo) * plotH; };
    var x = function (i) { return left + slot * (i + 0.5); };
    var bodyW = Math.max(1, Math.min(slot * 0.6, 12));

    var svg = el("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title, "class": "chart-svg" }, fig);

    // Price grid and its labels.
    var step = niceStep(hi - lo), first = Math.ceil(lo / step - 1e-9) * step;
    var digits = Math.min(6, Math.max(0, -Math.floor(Math.log10(step) + 1e-9)));
    for (var k = 0; first + k * step <= hi + 1e-9; k++) {
      var v = first + k * step, gy = y(v);
      el("line", { x1: left, x2: W - right, y1: gy, y2: gy, "class": "grid" }, svg);
      el("text", { x: left - 4, y: gy + 3, "class": "axis", "text-anchor": "end" }, svg).textContent = v.toFixed(digits);
    }
    // Time labels: the first, middle and last candle (UTC).
    var ticks = n === 1 ? [0] : n === 2 ? [0, 1] : [0, Math.floor((n - 1) / 2), n - 1];
    ticks.forEach(function (i, j) {
      var anchor = ticks.length === 1 ? "middle" : j === 0 ? "start" : j === ticks.length - 1 ? "end" : "middle";
      var tx = anchor === "start" ? left + slot * i : anchor === "end" ? left + slot * (i + 1) : x(i);
      el("text", { x: tx, y: H - 8, "class": "axis", "text-anchor": anchor }, svg).textContent =
        label(rows[i].start, info.interval) + (j === ticks.length - 1 ? " UTC" : "");
    });

    // Best bid and ask: a step line of the value in force at each
    // candle's end, broken where it is null.
    ["bid", "ask"].forEach(function (name) {
      var d = "", prev = false;
      rows.forEach(function (r, i) {
        if (r[name] === null) { prev = false; return; }
        var sy = y(r[name]).toFixed(2), x0 = (left + slot * i).toFixed(2), x1 = (left + slot * (i + 1)).toFixed(2);
        d += (prev ? " V" + sy : " M" + x0 + " " + sy) + " H" + x1;
        prev = true;
      });
      if (d) { el("path", { d: d.trim(), "class": "line " + name }, svg); }
    });

    // The candles: a wick from low to high and a body from open to close,
    // green when the close is not below the open; a transparent slot
    // carries the tooltip.
    var drawn = 0;
    rows.forEach(function (r, i) {
      var g = el("g", { "class": "candle", "data-start": r.start }, svg);
      var tip = label(r.start, info.interval) + " UTC";
      if (r.trade) {
        var t = r.trade, cx = x(i), up = t.close >= t.open;
        if (t.high !== null && t.low !== null) {
          el("line", { x1: cx, x2: cx, y1: y(t.high), y2: y(t.low), "class": "wick" }, g);
        }
        var y0 = y(Math.max(t.open, t.close)), y1 = y(Math.min(t.open, t.close));
        el("rect", { x: cx - bodyW / 2, y: y0, width: bodyW, height: Math.max(1, y1 - y0), "class": "body " + (up ? "up" : "down") }, g);
        tip += " · trades o " + t.open + " h " + t.high + " l " + t.low + " c " + t.close;
        drawn++;
      } else {
        tip += " · no trade";
      }
      tip += " · bid " + (r.bid === null ? "—" : r.bid) + " · ask " + (r.ask === null ? "—" : r.ask) +
        (r.trades !== null ? " · " + r.trades + " trades" : "") + (r.volume ? ", volume " + r.volume : "");
      el("rect", { x: left + slot * i, y: top, width: slot, height: plotH, "class": "slot" }, g);
      el("title", {}, g).textContent = tip;
    });
    fig.setAttribute("data-trade-candles", String(drawn));

    var legend = html("p", "chart-legend", "", fig);
    [["swatch up", "trades up"], ["swatch down", "trades down"], ["swatch bid", "best bid"], ["swatch ask", "best ask"]].forEach(function (l) {
      html("span", l[0], "", legend).setAttribute("aria-hidden", "true");
      html("span", "", l[1], legend);
    });
  }

  result.addEventListener("tryit:clear", clear);
  result.addEventListener("tryit:answer", function (e) {
    clear();
    var d = e.detail;
    if (!d || d.chart !== "candles" || d.status !== 200) { return; }
    var list;
    try { list = JSON.parse(d.body).data; } catch (err) { return; }
    if (Array.isArray(list)) { draw(list, describe(d.url)); }
  });
})();
