// The HTML report in a real browser: traces made by the real collector
// (make_trace.py, no GPU needed), pages written by the real
// `gpuleak report --html` (and one by `gpuleak run --html`), each loaded in
// headless Chromium through playwright-core. Run by CTest (tests/report/CMakeLists.txt):
//
//   node html_browser_test.mjs --gpuleak BIN --collector SO --python PY \
//        --chromium /usr/bin/chromium --work DIR
//
// Exit status 0: every check passed; 1: a check failed; 77: skipped because
// Chromium or node_modules/playwright-core is missing (CTest SKIP_RETURN_CODE).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const SKIP = 77;
const here = path.dirname(fileURLToPath(import.meta.url));

function parseArguments(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
      throw new Error(`bad argument ${argv[i]} (expected --name value pairs)`);
    }
    args[argv[i].slice(2)] = argv[i + 1];
  }
  for (const name of ["gpuleak", "collector", "python", "chromium", "work"]) {
    if (!args[name]) throw new Error(`--${name} is missing`);
  }
  return args;
}

const args = parseArguments(process.argv.slice(2));

// Skips, each with the reason.
try {
  fs.accessSync(args.chromium, fs.constants.X_OK);
} catch {
  console.log(`SKIP: no Chromium at ${args.chromium} (scripts/setup installs Debian's chromium)`);
  process.exit(SKIP);
}
let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch (error) {
  console.log(`SKIP: playwright-core is not installed (run scripts/setup: npm ci): ${error.message}`);
  process.exit(SKIP);
}

const failures = [];
function check(condition, message) {
  if (!condition) failures.push(message);
  console.log(`${condition ? "ok  " : "FAIL"} ${message}`);
}

// --- Traces -----------------------------------------------------------------

fs.rmSync(args.work, { recursive: true, force: true });
fs.mkdirSync(args.work, { recursive: true });

// The script runs from a folder whose name is markup too, so paths in frames,
// the command line and the page title must be escaped as well.
const scriptDir = path.join(args.work, "scripts <i>&amp; x");
fs.mkdirSync(scriptDir);
const script = path.join(scriptDir, "make_trace.py");
fs.copyFileSync(path.join(here, "make_trace.py"), script);
const scriptLines = fs.readFileSync(script, "utf8").split("\n");
const keptLine = scriptLines.findIndex((l) => l.includes("# kept: </script><b>injected</b>")) + 1;
if (keptLine === 0) throw new Error("make_trace.py lost its marked line");
const siteLabel = `make_trace.py:${keptLine}`;

function makeTrace(mode) {
  const dir = path.join(args.work, `${mode}-traces`);
  fs.mkdirSync(dir);
  // Run from the work folder with a relative script path, so the folder's
  // markup is early in the command line and thus in the page's title.
  const result = spawnSync(args.python, [path.relative(args.work, script), args.collector, mode], {
    cwd: args.work,
    env: { ...process.env, GPULEAK_TRACE_DIR: dir },
    encoding: "utf8",
    timeout: 60000,
  });
  if (result.status !== 0) {
    throw new Error(`make_trace.py ${mode} failed (${result.status}): ${result.stderr}`);
  }
  const traces = fs.readdirSync(dir).filter((f) => f.endsWith(".trace"));
  if (traces.length !== 1) throw new Error(`${mode}: expected one trace in ${dir}, found ${traces}`);
  return dir;
}

function writeReport(name, traceDirs) {
  const html = path.join(args.work, `${name}.html`);
  // The traces were written by the collector alone (no `gpuleak run` to
  // capture source lines): the lines come from the work folder, named as
  // the checkout.
  const result = spawnSync(args.gpuleak, ["report", "--html", html, "--source-root", args.work,
                                          ...traceDirs], {
    encoding: "utf8",
    timeout: 60000,
  });
  if (result.status !== 0) {
    throw new Error(`gpuleak report --html ${name} failed (${result.status}): ${result.stderr}`);
  }
  if (!fs.existsSync(html)) throw new Error(`gpuleak report did not write ${html}`);
  return html;
}

// `gpuleak run --html` writes the same page through the same code path as
// `gpuleak report --html`; one leaking run checks that path end to end.
function runWithReport(name) {
  const html = path.join(args.work, `${name}.html`);
  const result = spawnSync(args.gpuleak, [
    "run", "-o", path.join(args.work, `${name}-traces`), "--html", html, "--",
    args.python, path.relative(args.work, script), args.collector, "leak",
  ], { cwd: args.work, encoding: "utf8", timeout: 120000 });
  if (result.status !== 0) {
    throw new Error(`gpuleak run --html failed (${result.status}): ${result.stderr}`);
  }
  if (!fs.existsSync(html)) throw new Error(`gpuleak run did not write ${html}`);
  return html;
}

const leakTraces = makeTrace("leak");
const cleanTraces = makeTrace("clean");
const pages = {
  leak: writeReport("leak", [leakTraces]),
  clean: writeReport("clean", [cleanTraces]),
  both: writeReport("both", [leakTraces, cleanTraces]),
  run: runWithReport("run"),
};

// --- Browser ----------------------------------------------------------------

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "gpuleak-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: args.chromium,
  headless: true,
  viewport: { width: 1200, height: 900 },
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});

// Loads one page; returns what the checks need. Every request is recorded;
// anything that is not the page itself (or about:/data:) is blocked too.
async function open(htmlPath, { javaScript = true } = {}) {
  const page = await context.newPage();
  const url = pathToFileURL(htmlPath).href;
  const problems = [];
  const requests = [];
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console error: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("request", (request) => requests.push(request.url()));
  await page.route("**/*", (route) => {
    const requested = route.request().url();
    return requested === url ? route.continue() : route.abort();
  });
  if (!javaScript) {
    const cdp = await context.newCDPSession(page);
    await cdp.send("Emulation.setScriptExecutionDisabled", { value: true });
  }
  await page.goto(url, { waitUntil: "load" });
  if (javaScript) {
    await page.waitForFunction(() => document.documentElement.hasAttribute("data-plots"), null, {
      timeout: 15000,
    });
    await page.waitForTimeout(100);  // a frame for late errors
  }
  const outside = requests.filter(
    (r) => r !== url && !r.startsWith("about:") && !r.startsWith("data:"));
  return { page, url, problems, outside };
}

// Facts about a loaded page, read in the page.
async function facts(page) {
  return page.evaluate(() => {
    const text = (selector) =>
      Array.from(document.querySelectorAll(selector), (e) => e.textContent.trim());
    const canvases = Array.from(document.querySelectorAll(".gl-timeline canvas"), (c) => {
      const box = c.getBoundingClientRect();
      // Count painted pixels: an empty canvas has none.
      let painted = 0;
      const pixels = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted++;
      return { width: box.width, height: box.height, painted };
    });
    return {
      title: document.title,
      plots: document.documentElement.getAttribute("data-plots"),
      verdicts: text(".gl-verdict-name"),
      growingSites: text(".gl-growing-site .gl-site"),
      leakSites: text(".gl-leak-group .gl-site"),
      frames: text("ol.gl-frames li"),
      // Per process: the series named in its charts' legends.
      legends: Array.from(document.querySelectorAll(".gl-timeline"), (t) =>
        Array.from(t.querySelectorAll(".u-legend .u-series th"), (e) => e.textContent.trim())),
      charts: Array.from(document.querySelectorAll(".gl-timeline"),
                         (t) => t.querySelectorAll(".uplot").length),
      canvases,
      sections: document.querySelectorAll("section.gl-process").length,
      summaryRows: document.querySelectorAll("table.gl-summary tbody tr").length,
      markupElements: document.querySelectorAll("b, i").length,
      scripts: document.scripts.length,
      body: document.body.innerText,
      data: JSON.parse(document.getElementById("gpuleak-data").textContent),
    };
  });
}

// `count` charts in all: each process with samples has two (live
// allocations; pool, device and host memory).
function checkPlots(name, f, count) {
  check(f.plots === String(count), `${name}: the script drew ${count} chart(s) (data-plots=${f.plots})`);
  check(f.canvases.length === count, `${name}: ${count} uPlot canvas(es) (found ${f.canvases.length})`);
  for (const [i, c] of f.canvases.entries()) {
    check(c.width > 0 && c.height > 0, `${name}: canvas ${i} has a nonzero size (${c.width}x${c.height})`);
    check(c.painted > 1000, `${name}: canvas ${i} has lines drawn on it (${c.painted} pixels)`);
  }
}

function checkClean(name, loaded) {
  check(loaded.problems.length === 0, `${name}: no console or page errors ${JSON.stringify(loaded.problems)}`);
  check(loaded.outside.length === 0, `${name}: no request leaves the page ${JSON.stringify(loaded.outside)}`);
}

function checkEscaping(name, f) {
  check(f.markupElements === 0, `${name}: markup from the trace made no <b>/<i> elements`);
  // The data block, uPlot, d3, d3-flame-graph and the page's own script.
  check(f.scripts === 5, `${name}: exactly the page's 5 script elements (found ${f.scripts})`);
}

try {
  // Leaking trace.
  {
    const loaded = await open(pages.leak);
    const f = await facts(loaded.page);
    checkClean("leak", loaded);
    checkPlots("leak", f, 2);
    checkEscaping("leak", f);
    check(f.verdicts.length === 1 && f.verdicts[0] === "LEAK", `leak: verdict LEAK (${f.verdicts})`);
    check(f.growingSites.includes(siteLabel), `leak: growing site ${siteLabel} (${f.growingSites})`);
    check(f.leakSites.includes(siteLabel), `leak: still allocated at exit from ${siteLabel}`);
    check(f.frames.some((t) => t.includes(`${scriptDir}/make_trace.py:${keptLine}`)),
          "leak: a frame shows the full file:line, with the folder's markup as text");
    check(f.frames.some((t) => t.includes("keep_</script><b>tensor</b>")),
          "leak: the renamed function's markup shows as text in its frame");
    check(f.body.includes("# kept: </script><b>injected</b>"),
          "leak: the source line's markup shows as text");
    check(/\+64\.0 KiB\/step/.test(f.body), "leak: the rate per step reads +64.0 KiB/step");
    check(/Cause:/.test(f.body) && /Fix:/.test(f.body), "leak: the banner names a cause and a fix");
    check(f.title.includes("scripts <i>&amp; x"), "leak: the title names the process, markup as text");
    check(["live tensors", "pool reserved", "device used", "host RSS"].every(
              (s) => f.legends[0].includes(s)),
          `leak: plotted series ${JSON.stringify(f.legends[0])}`);
    check(!f.legends[0].includes("live device memory"),
          "leak: live device memory (all zero here) is not plotted");
    const site = f.data.processes[0].growth.sites[0];
    check(site && site.site.source_line.includes("</script><b>injected</b>"),
          "leak: the embedded JSON gives back the source line unchanged");
    await loaded.page.screenshot({ path: path.join(args.work, "leak.png"), fullPage: true });
    await loaded.page.close();
  }

  // Clean trace.
  {
    const loaded = await open(pages.clean);
    const f = await facts(loaded.page);
    checkClean("clean", loaded);
    checkPlots("clean", f, 2);
    checkEscaping("clean", f);
    check(f.verdicts.length === 1 && ["NO LEAK", "NOT YET"].includes(f.verdicts[0]),
          `clean: verdict NO LEAK or NOT YET (${f.verdicts})`);
    check(f.growingSites.length === 0 && f.leakSites.length === 0, "clean: no growing or leaked site");
    check(f.body.includes("every allocation was freed"), "clean: says every allocation was freed");
    await loaded.page.screenshot({ path: path.join(args.work, "clean.png"), fullPage: true });
    await loaded.page.close();
  }

  // Two processes in one report: a summary table and a section each.
  {
    const loaded = await open(pages.both);
    const f = await facts(loaded.page);
    checkClean("both", loaded);
    checkPlots("both", f, 4);
    check(f.charts.length === 2 && f.charts.every((n) => n === 2), `both: two charts per process (${f.charts})`);
    checkEscaping("both", f);
    check(f.sections === 2 && f.summaryRows === 2, `both: 2 sections and 2 summary rows (${f.sections}, ${f.summaryRows})`);
    check(f.verdicts[0] === "LEAK" && f.verdicts[1] !== "LEAK", `both: verdicts ${f.verdicts}`);
    await loaded.page.close();
  }

  // The page `gpuleak run --html` wrote.
  {
    const loaded = await open(pages.run);
    const f = await facts(loaded.page);
    checkClean("run", loaded);
    checkPlots("run", f, 2);
    checkEscaping("run", f);
    check(f.verdicts.length === 1 && f.verdicts[0] === "LEAK", `run: verdict LEAK (${f.verdicts})`);
    check(f.growingSites.includes(siteLabel), `run: growing site ${siteLabel} (${f.growingSites})`);
    await loaded.page.close();
  }

  // Every shipped trace (examples/traces, recorded on the GPU): the page
  // draws a chart for every process that did GPU work (a timeline, or for a
  // run without steps the driver's memory over time), the allocator's
  // reserve is never below the live tensors it holds, a reading the program
  // took now and then is not repeated at every step, the flame graph's
  // heaviest frame is the report's leaking site, and the filter narrows the
  // tables.
  {
    const shipped = path.join(here, "..", "..", "examples", "traces");
    const folders = [];
    for (const group of fs.readdirSync(shipped).sort()) {
      const dir = path.join(shipped, group);
      if (!fs.statSync(dir).isDirectory()) continue;
      for (const name of fs.readdirSync(dir).sort()) {
        const folder = path.join(dir, name);
        if (fs.statSync(folder).isDirectory() &&
            fs.readdirSync(folder).some((f) => f.endsWith(".trace"))) folders.push([`${group}/${name}`, folder]);
      }
    }
    check(folders.length >= 15, `shipped: ${folders.length} trace folders found`);
    for (const [name, folder] of folders) {
      const html = path.join(args.work, `shipped-${name.replace("/", "-")}.html`);
      const made = spawnSync(args.gpuleak, ["report", "--html", html, folder], { encoding: "utf8", timeout: 120000 });
      if (!fs.existsSync(html)) {
        check(false, `${name}: gpuleak report --html wrote the page (${made.status}: ${made.stderr})`);
        continue;
      }
      const loaded = await open(html);
      await loaded.page.waitForFunction(() => document.documentElement.hasAttribute("data-flames"), null,
                                        { timeout: 15000 });
      const g = await loaded.page.evaluate(() => {
        const sections = Array.from(document.querySelectorAll("section.gl-process"), (s) => ({
          charts: s.querySelectorAll(".gl-timeline .uplot, .gl-driver-memory .uplot").length,
          flame: s.querySelector(".gl-flame") !== null,
          flameRects: s.querySelectorAll(".gl-flame svg rect").length,
          flameText: Array.from(s.querySelectorAll(".gl-flame svg g"), (e) => e.textContent).join("\n"),
          rising: Array.from(s.querySelectorAll(".gl-rising-site .gl-site"), (e) => e.textContent),
          process: Number((s.querySelector("[data-process]") || { getAttribute: () => -1 }).getAttribute("data-process")),
        }));
        return { sections, data: JSON.parse(document.getElementById("gpuleak-data").textContent) };
      });
      checkClean(name, loaded);
      // The page reads each trace again for its charts: its numbers are the JSON report's.
      const json = spawnSync(args.gpuleak, ["report", "--json", folder], { encoding: "utf8", timeout: 120000 });
      const reported = JSON.parse(json.stdout || "{\"processes\": []}");
      const numbers = (d) => d.processes.map((p) => [p.pid, p.growth.verdict, p.growth.rate_bytes_per_step,
                                                     p.peak_live_bytes, p.leaks.bytes, p.timeline.step.length]);
      check(JSON.stringify(numbers(reported)) === JSON.stringify(numbers(g.data)),
            `${name}: the page's verdict, rate, peak, leaked bytes and timeline are the JSON report's`);
      check(g.sections.length > 0 && g.sections.every((s) => s.charts >= 1),
            `${name}: a chart for each of its ${g.sections.length} process section(s) (${g.sections.map((s) => s.charts)})`);
      for (const [i, p] of g.data.processes.entries()) {
        const t = p.timeline;
        let below = 0;
        for (let k = 0; k < t.step.length; k++) {
          const reserved = t.pool_reserved_bytes[k];
          if (reserved !== null && p.torch_tracking && reserved < t.live_tensor_bytes[k]) below++;
        }
        check(below === 0, `${name} pid ${p.pid}: the allocator's reserve is at least the live tensors at every step (${below} below)`);
        const samples = (t.device_used_bytes || []).filter((v) => v !== null).length;
        const readings = Math.ceil((p.duration_s || 0) / 0.05) + 2;  // one every 50 ms at most
        check(samples <= Math.max(readings, 2) || samples <= 2 || t.step.length <= 2,
              `${name} pid ${p.pid}: device memory in use is drawn at the ${samples} steps with a reading (at most ${readings})`);
        const section = g.sections.find((s) => s.process === i);
        // A run too short for a verdict shows where memory rose, one item a site.
        const rising = (p.growth.rising_sites || []).length;
        if (section && (rising > 0 || section.rising.length > 0)) {
          check(section.rising.length === rising,
                `${name} pid ${p.pid}: the page lists the ${rising} site(s) rising so far (${section.rising})`);
        }
        const tree = p.page && p.page.flame && p.page.flame["growth-per-step"];
        if (section && tree && p.growth.sites.length > 0) {
          // The heaviest leaf of the growth view (the frame with the most
          // bytes of its own) is the report's fastest-growing site.
          let leaf = { name: "", value: -1 };
          const visit = (node) => {
            const own = node.value - (node.children || []).reduce((sum, child) => sum + child.value, 0);
            if (own > leaf.value) leaf = { name: node.name, value: own };
            (node.children || []).forEach(visit);
          };
          visit(tree);
          const top = p.growth.sites.reduce((a, b) => (b.rate_bytes_per_step > a.rate_bytes_per_step ? b : a)).site;
          check(leaf.name.startsWith(top.function) && (top.line === 0 || leaf.name.includes(`:${top.line})`)),
                `${name} pid ${p.pid}: the growth flame graph's top frame is the leaking site ${top.label} (${leaf.name})`);
          check(section.flameRects > 0 && section.flameText.includes(top.function),
                `${name} pid ${p.pid}: the flame graph is drawn and shows ${top.function}`);
        }
      }
      await loaded.page.close();
    }
    // The filter narrows the tables of a leaking page to the rows that name the term.
    const loaded = await open(pages.leak);
    const before = await loaded.page.evaluate(() => document.querySelectorAll("section table tbody tr:not([hidden])").length);
    await loaded.page.fill("#gl-filter", "make_trace.py");
    const matching = await loaded.page.evaluate(() => document.querySelectorAll("section table tbody tr:not([hidden])").length);
    await loaded.page.fill("#gl-filter", "no-such-function-anywhere");
    const none = await loaded.page.evaluate(() => document.querySelectorAll("section table tbody tr:not([hidden])").length);
    check(before > 0 && matching > 0 && none === 0,
          `filter: ${before} rows, ${matching} naming make_trace.py, ${none} for a term nothing has`);
    await loaded.page.close();
  }

  // Without JavaScript the text parts are all there.
  {
    const loaded = await open(pages.leak, { javaScript: false });
    const f = await loaded.page.evaluate(() => ({
      verdict: document.querySelector(".gl-verdict-name")?.textContent,
      site: document.querySelector(".gl-growing-site .gl-site")?.textContent,
      canvases: document.querySelectorAll("canvas").length,
    }));
    checkClean("no-js", loaded);
    check(f.verdict === "LEAK" && f.site === siteLabel && f.canvases === 0,
          `no-js: verdict and site readable without the script (${JSON.stringify(f)})`);
    await loaded.page.close();
  }
} finally {
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
}

console.log(`pages and screenshots in ${args.work}`);
if (failures.length) {
  console.log(`${failures.length} check(s) failed`);
  process.exit(1);
}
console.log("all checks passed");
