// gpuleak HTML report: draws each process's memory timeline, the live bytes
// of its sites and a chart for runs without steps with uPlot, and its flame
// graphs with d3-flame-graph (all inlined into the page at build time), from
// the report's own JSON (the application/json block with id "gpuleak-data",
// schema gpuleak-report/1, with each process's "page" data:
// src/report/html_page_data.h). Every text on the page is written by gpuleak
// itself; this script only adds the plots and the filter, so the page reads
// the same without it.
(function () {
  "use strict";

  var UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

  // The rules of src/quantity/units.cpp: 512 B, 4.00 KiB, 38.2 MiB, 150 GiB.
  function formatBytes(value) {
    if (value === null || value === undefined || !isFinite(value)) return "–";
    var magnitude = Math.abs(value);
    var unit = 0;
    while (magnitude >= 1024 && unit < UNITS.length - 1) {
      magnitude /= 1024;
      value /= 1024;
      unit++;
    }
    if (unit === 0) return value.toFixed(0) + " B";
    var digits = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2;
    return value.toFixed(digits) + " " + UNITS[unit];
  }

  // Axis ticks fall on multiples of powers of two (see BYTE_INCREMENTS), so
  // their labels stay short: "0", "768 MiB", "1.25 GiB".
  function formatTick(value) {
    if (value === 0) return "0";
    var magnitude = Math.abs(value);
    var unit = 0;
    while (magnitude >= 1024 && unit < UNITS.length - 1) {
      magnitude /= 1024;
      value /= 1024;
      unit++;
    }
    return String(Number(value.toFixed(3))) + " " + UNITS[unit];
  }

  var BYTE_INCREMENTS = [];
  for (var power = 0; power <= 52; power++) BYTE_INCREMENTS.push(Math.pow(2, power));

  // What can be plotted, in two charts that share the x axis and the cursor:
  // what gpuleak tracks as live (a leak grows here, often by far less than the
  // totals), and the totals around it. Only series with data are drawn.
  var CHARTS = [
    {
      title: "Live allocations",
      series: [
        { key: "live_tensor_bytes", label: "live tensors", stroke: "#c0392b", width: 2 },
        { key: "live_device_bytes", label: "live device memory", stroke: "#8e44ad", width: 2 },
      ],
    },
    {
      title: "Pool, device and host memory",
      series: [
        // The pool's reserve is sampled (at most every 50 ms), live tensors
        // are counted at the step: a sample below them was read before they
        // were allocated, and a point that cannot be is not drawn.
        { key: "pool_reserved_bytes", label: "pool reserved", stroke: "#2471a3", width: 1.5,
          atLeast: "live_tensor_bytes" },
        // Read by the program now and then (NVML, /proc): a value only at the
        // steps where a reading was taken, drawn as points on a line.
        { key: "device_used_bytes", label: "device used", stroke: "#1e8449", width: 1.5,
          sampled: true },
        { key: "host_rss_bytes", label: "host RSS", stroke: "#d68910", width: 1.5, sampled: true },
      ],
    },
  ];

  function hasData(values) {
    if (!Array.isArray(values)) return false;
    for (var i = 0; i < values.length; i++) {
      if (values[i] !== null && values[i] !== 0) return true;
    }
    return false;
  }

  function increasing(values, strictly) {
    for (var i = 1; i < values.length; i++) {
      if (values[i] < values[i - 1] || (strictly && values[i] === values[i - 1])) return false;
    }
    return true;
  }

  // x is the step number; for programs without steps (time windows), or
  // steps that do not increase, it is the time since the collector started.
  function xAxisOf(process) {
    var timeline = process.timeline;
    var growth = process.growth || {};
    if (growth.step_source !== "time-window" && increasing(timeline.step, true)) {
      return { values: timeline.step, label: "step", isStep: true };
    }
    if (increasing(timeline.time_s, false)) {
      return { values: timeline.time_s, label: "seconds since start", isStep: false };
    }
    var index = timeline.step.map(function (_, i) { return i; });
    return { values: index, label: "step boundary", isStep: false };
  }

  // The warm-up (ignored when judging growth) is shaded; for a leak, a dashed
  // line marks the first growing step.
  function marksOf(process, x) {
    var growth = process.growth || {};
    var steps = process.timeline.step;
    var marks = { warmupEnd: null, growthStart: null };
    var warmup = growth.warmup_steps || 0;
    if (warmup > 0 && x.values.length > 1) {
      marks.warmupEnd = x.values[Math.min(warmup, x.values.length - 1)];
    }
    if (growth.verdict === "LEAK" && growth.first_growing_step !== null) {
      // A long run's timeline is sampled: the first kept step at or after it.
      var at = steps.indexOf(growth.first_growing_step);
      for (var i = 0; at < 0 && i < steps.length; i++) {
        if (steps[i] >= growth.first_growing_step) at = i;
      }
      if (at >= 0) marks.growthStart = x.values[at];
    }
    return marks;
  }

  function drawMarks(u, marks) {
    var ctx = u.ctx;
    var left = u.bbox.left;
    var right = u.bbox.left + u.bbox.width;
    var clamp = function (px) { return Math.min(right, Math.max(left, px)); };
    ctx.save();
    if (marks.warmupEnd !== null) {
      var end = clamp(u.valToPos(marks.warmupEnd, "x", true));
      ctx.fillStyle = "rgba(127, 127, 127, 0.14)";
      ctx.fillRect(left, u.bbox.top, end - left, u.bbox.height);
    }
    if (marks.growthStart !== null) {
      var at = clamp(u.valToPos(marks.growthStart, "x", true));
      ctx.strokeStyle = "#c0392b";
      ctx.lineWidth = Math.max(1, window.devicePixelRatio || 1);
      ctx.setLineDash([6, 4]);
      ctx.beginPath();
      ctx.moveTo(at, u.bbox.top);
      ctx.lineTo(at, u.bbox.top + u.bbox.height);
      ctx.stroke();
    }
    ctx.restore();
  }

  function plotWidth(element) {
    return Math.max(320, Math.floor(element.clientWidth || 800));
  }

  // A series' values; where it must be at least another series (reserved
  // memory holds the live tensors), points below that are left out.
  function valuesOf(timeline, s) {
    var values = timeline[s.key] || [];
    if (!s.atLeast || !Array.isArray(timeline[s.atLeast])) return values;
    var floor = timeline[s.atLeast];
    return values.map(function (v, i) {
      return v !== null && floor[i] !== null && floor[i] !== undefined && v < floor[i] ? null : v;
    });
  }

  function drawChart(element, process, x, chart, chosen, syncKey) {
    var timeline = process.timeline;
    var data = [x.values];
    var series = [{ label: x.label }];
    chosen.forEach(function (s) {
      data.push(valuesOf(timeline, s));
      series.push({
        label: s.label,
        stroke: s.stroke,
        width: s.width,
        spanGaps: true,
        points: { show: x.values.length <= 60 || s.sampled === true },
        value: function (u, v) { return formatBytes(v); },
      });
    });
    var marks = marksOf(process, x);
    var holder = document.createElement("div");
    holder.className = "gl-chart";
    holder.setAttribute("data-series", chosen.map(function (s) { return s.label; }).join(","));
    element.appendChild(holder);
    var options = {
      title: chart.title,
      width: plotWidth(element),
      height: 260,
      scales: { x: { time: false } },
      series: series,
      cursor: { sync: { key: syncKey } },
      axes: [
        { label: x.label },
        {
          label: "bytes",
          size: 80,
          incrs: BYTE_INCREMENTS,
          values: function (u, ticks) { return ticks.map(formatTick); },
        },
      ],
      legend: { live: true },
      hooks: { drawAxes: [function (u) { drawMarks(u, marks); }] },
    };
    return new uPlot(options, data, holder);
  }

  // The charts of one process; returns the uPlot instances.
  function drawTimeline(element, process, index) {
    var timeline = process.timeline;
    var x = xAxisOf(process);
    var plans = [];
    CHARTS.forEach(function (chart) {
      var chosen = chart.series.filter(function (s) { return hasData(valuesOf(timeline, s)); });
      if (chosen.length > 0) plans.push({ chart: chart, chosen: chosen });
    });
    // Nothing but zeros: still show that nothing was live.
    if (plans.length === 0) plans.push({ chart: CHARTS[0], chosen: [CHARTS[0].series[0]] });
    element.textContent = "";
    return plans.map(function (plan) {
      return drawChart(element, process, x, plan.chart, plan.chosen, "gpuleak-process-" + index);
    });
  }

  var PALETTE = ["#c0392b", "#2471a3", "#1e8449", "#d68910", "#8e44ad", "#17a589", "#7f8c8d", "#a04000"];

  // The live bytes of the followed sites at each step, on the timeline's x
  // axis: the growing ones rise, each by its own rate.
  function drawSiteChart(element, process, index) {
    var series = process.page && process.page.site_series;
    if (!series || series.live_bytes.length !== process.timeline.step.length) return null;
    var x = xAxisOf(process);
    var last = series.live_bytes[series.live_bytes.length - 1];
    var order = series.sites.map(function (_, i) { return i; });
    order.sort(function (a, b) { return last[b] - last[a]; });
    order = order.slice(0, PALETTE.length);
    var data = [x.values];
    var uSeries = [{ label: x.label }];
    order.forEach(function (column, n) {
      data.push(series.live_bytes.map(function (row) { return row[column]; }));
      var site = series.sites[column];
      uSeries.push({
        label: site.label + (site.function ? " " + site.function : ""),
        stroke: PALETTE[n],
        width: 1.5,
        value: function (u, v) { return formatBytes(v); },
      });
    });
    element.textContent = "";
    var holder = document.createElement("div");
    holder.className = "gl-chart";
    holder.setAttribute("data-series", order.map(function (c) { return series.sites[c].label; }).join(","));
    element.appendChild(holder);
    var marks = marksOf(process, x);
    return new uPlot({
      title: "Live bytes per site",
      width: plotWidth(element),
      height: 260,
      scales: { x: { time: false } },
      series: uSeries,
      cursor: { sync: { key: "gpuleak-process-" + index } },
      axes: [
        { label: x.label },
        { label: "bytes", size: 80, incrs: BYTE_INCREMENTS,
          values: function (u, ticks) { return ticks.map(formatTick); } },
      ],
      legend: { live: true },
      hooks: { drawAxes: [function (u) { drawMarks(u, marks); }] },
    }, data, holder);
  }

  // A run without steps: the driver's memory over time (ProcessCudaUse).
  function drawDriverMemory(element, process) {
    var memory = process.page && process.page.driver_memory;
    if (!memory || memory.time_s.length === 0) return null;
    element.textContent = "";
    var holder = document.createElement("div");
    holder.className = "gl-chart";
    holder.setAttribute("data-series", "live tensors,device memory the driver handed out");
    element.appendChild(holder);
    var stepped = uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined;
    return new uPlot({
      title: "Live memory",
      width: plotWidth(element),
      height: 260,
      scales: { x: { time: false } },
      series: [
        { label: "seconds since start" },
        { label: "live tensors", stroke: "#c0392b", width: 2, paths: stepped,
          value: function (u, v) { return formatBytes(v); } },
        { label: "device memory the driver handed out", stroke: "#8e44ad", width: 2, paths: stepped,
          value: function (u, v) { return formatBytes(v); } },
      ],
      axes: [
        { label: "seconds since start" },
        { label: "bytes", size: 80, incrs: BYTE_INCREMENTS,
          values: function (u, ticks) { return ticks.map(formatTick); } },
      ],
      legend: { live: true },
    }, [memory.time_s, memory.tensor_bytes, memory.driver_bytes], holder);
  }

  var FLAME_VIEWS = [
    { key: "growth-per-step", label: "growth per step" },
    { key: "live-at-exit", label: "live at exit" },
    { key: "live-at-peak", label: "live at the peak" },
  ];

  // The flame graphs of one process (d3-flame-graph), one view at a time.
  function drawFlame(element, process) {
    var trees = (process.page && process.page.flame) || {};
    var views = FLAME_VIEWS.filter(function (v) { return trees[v.key]; });
    element.textContent = "";
    if (views.length === 0) {
      element.textContent = "Nothing to draw: no site grows and nothing was live.";
      return null;
    }
    if (typeof d3 === "undefined" || typeof flamegraph === "undefined") {
      throw new Error("d3-flame-graph is missing from the page");
    }
    var buttons = document.createElement("div");
    buttons.className = "gl-flame-views";
    var canvas = document.createElement("div");
    canvas.className = "gl-flame-canvas";
    element.appendChild(buttons);
    element.appendChild(canvas);
    var state = { chart: null, view: null };
    function show(view) {
      canvas.textContent = "";
      state.view = view.key;
      element.setAttribute("data-view", view.key);
      state.chart = flamegraph.default()
        .width(plotWidth(element))
        .cellHeight(18)
        .transitionDuration(0)
        .minFrameSize(2)
        .selfValue(false)
        .label(function (d) { return d.data.name + ": " + formatBytes(d.value) +
          (view.key === "growth-per-step" ? " per step" : ""); });
      d3.select(canvas).datum(trees[view.key]).call(state.chart);
      var term = document.getElementById("gl-filter");
      if (term && term.value) state.chart.search(term.value);
      Array.prototype.forEach.call(buttons.children, function (b) {
        b.setAttribute("aria-pressed", String(b.getAttribute("data-view") === view.key));
      });
    }
    views.forEach(function (view) {
      var b = document.createElement("button");
      b.type = "button";
      b.textContent = view.label;
      b.setAttribute("data-view", view.key);
      b.addEventListener("click", function () { show(view); });
      buttons.appendChild(b);
    });
    show(views[0]);
    return state;
  }

  // The filter: rows of the site tables whose text holds the term stay, the
  // others are hidden; frames that match are highlighted in the flame graphs.
  function wireFilter(flames) {
    var input = document.getElementById("gl-filter");
    if (!input) return;
    input.addEventListener("input", function () {
      var term = input.value.trim().toLowerCase();
      var rows = document.querySelectorAll("section table tbody tr");
      var shown = 0;
      Array.prototype.forEach.call(rows, function (row) {
        var keep = term === "" || row.textContent.toLowerCase().indexOf(term) >= 0;
        row.hidden = !keep;
        if (keep) shown++;
      });
      document.documentElement.setAttribute("data-filter-rows", String(shown));
      flames.forEach(function (f) {
        if (!f.chart) return;
        if (term === "") f.chart.clear(); else f.chart.search(input.value.trim());
      });
    });
  }

  function main() {
    var block = document.getElementById("gpuleak-data");
    if (!block) return;
    var report = JSON.parse(block.textContent);
    var processes = report.processes || [];
    var plots = [];
    var elements = document.querySelectorAll(".gl-timeline[data-process]");
    for (var i = 0; i < elements.length; i++) {
      var element = elements[i];
      var index = Number(element.getAttribute("data-process"));
      var process = processes[index];
      if (!process || !process.timeline || process.timeline.step.length === 0) continue;
      try {
        if (typeof uPlot !== "function") throw new Error("uPlot is missing from the page");
        drawTimeline(element, process, index).forEach(function (plot) {
          plots.push({ element: element, plot: plot });
        });
      } catch (error) {
        element.textContent = "The plot could not be drawn: " + error.message;
        console.error(error);
      }
    }

    var timelinePlots = plots.length;
    var extra = [
      { selector: ".gl-site-chart[data-process]", draw: drawSiteChart },
      { selector: ".gl-driver-memory[data-process]", draw: drawDriverMemory },
    ];
    extra.forEach(function (kind) {
      var found = document.querySelectorAll(kind.selector);
      for (var k = 0; k < found.length; k++) {
        var el = found[k];
        var process = processes[Number(el.getAttribute("data-process"))];
        if (!process) continue;
        try {
          var plot = kind.draw(el, process, Number(el.getAttribute("data-process")));
          if (plot) plots.push({ element: el, plot: plot });
        } catch (error) {
          el.textContent = "The plot could not be drawn: " + error.message;
          console.error(error);
        }
      }
    });
    var flames = [];
    var flameElements = document.querySelectorAll(".gl-flame[data-process]");
    for (var f = 0; f < flameElements.length; f++) {
      var flameElement = flameElements[f];
      try {
        var drawn = drawFlame(flameElement, processes[Number(flameElement.getAttribute("data-process"))] || {});
        if (drawn) flames.push(drawn);
      } catch (error) {
        flameElement.textContent = "The flame graph could not be drawn: " + error.message;
        console.error(error);
      }
    }
    wireFilter(flames);
    document.documentElement.setAttribute("data-flames", String(flames.length));

    var pending = false;
    window.addEventListener("resize", function () {
      if (pending) return;
      pending = true;
      window.requestAnimationFrame(function () {
        pending = false;
        plots.forEach(function (p) {
          p.plot.setSize({ width: plotWidth(p.element), height: 260 });
        });
      });
    });
    document.documentElement.setAttribute("data-extra-plots", String(plots.length - timelinePlots));
    document.documentElement.setAttribute("data-plots", String(timelinePlots));
  }

  main();
})();
