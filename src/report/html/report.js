// gpuleak HTML report: draws each process's memory timeline with uPlot
// (inlined into the page at build time) from the report's own JSON (the
// application/json block with id "gpuleak-data", schema gpuleak-report/1). Every text on the page is written by gpuleak itself;
// this script only adds the plots, so the page reads the same without it.
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
        { key: "device_used_bytes", label: "device used", stroke: "#1e8449", width: 1.5 },
        { key: "host_rss_bytes", label: "host RSS", stroke: "#d68910", width: 1.5 },
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
        points: { show: x.values.length <= 60 },
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
    document.documentElement.setAttribute("data-plots", String(plots.length));
  }

  main();
})();
