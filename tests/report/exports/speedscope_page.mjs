// Drives the real speedscope web app (node_modules/speedscope/dist/release,
// the build its own `speedscope` CLI opens) in headless Chromium: serves it
// and one profile file on a loopback port, opens
// index.html#profileURL=..., and reads back what the page shows. speedscope
// ships only a browser bundle (its importers are not exported to Node), so
// the page is the only way to run its importer.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { createRequire } from "node:module";

export const SKIP = 77;
export const CHROMIUM_FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];
const PAGE_TIMEOUT_MS = 30000;

export class Unavailable extends Error {}  // the consumer is not installed: exit 77

// The speedscope release folder and Chromium, or Unavailable saying which is missing.
export async function locateSpeedscope(chromiumPath) {
  const require = createRequire(import.meta.url);
  let release;
  try {
    release = path.join(path.dirname(require.resolve("speedscope/package.json")), "dist", "release");
  } catch {
    throw new Unavailable("the speedscope npm package is not installed (run scripts/setup: npm ci)");
  }
  let chromium;
  try {
    ({ chromium } = await import("playwright-core"));
  } catch {
    throw new Unavailable("playwright-core is not installed (run scripts/setup: npm ci)");
  }
  try {
    fs.accessSync(chromiumPath, fs.constants.X_OK);
  } catch {
    throw new Unavailable(`no Chromium at ${chromiumPath} (scripts/setup installs Debian's chromium)`);
  }
  const version = JSON.parse(fs.readFileSync(path.join(release, "..", "..", "package.json"), "utf8")).version;
  return { release, chromium, chromiumPath, version };
}

function serve(release, profileFile) {
  const profileUrlPath = "/profile/" + encodeURIComponent(path.basename(profileFile));
  const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".wasm": "application/wasm" };
  const server = http.createServer((request, response) => {
    const urlPath = decodeURIComponent(new URL(request.url, "http://x").pathname);
    const file = urlPath === decodeURIComponent(profileUrlPath)
      ? profileFile
      : path.join(release, path.normalize(urlPath).replace(/^(\.\.[/\\])+/, ""));
    fs.readFile(file, (error, body) => {
      if (error) {
        response.writeHead(404).end();
        return;
      }
      response.writeHead(200, { "content-type": types[path.extname(file)] || "application/octet-stream" });
      response.end(body);
    });
  });
  return new Promise(resolve => {
    server.listen(0, "127.0.0.1", () => resolve({ server, profileUrlPath }));
  });
}

// Imports `profileFile` in speedscope. Returns
//   { importer, profiles: [{name, total}], top: {profileName: [{name, total, self}, ...]} }
// where top lists speedscope's Sandwich table (sorted by self weight, its
// default) for each profile named in `sandwichFor`. Throws Error with
// speedscope's own complaint when it rejects the file.
export async function importInSpeedscope(tools, profileFile, sandwichFor = []) {
  const { server, profileUrlPath } = await serve(tools.release, profileFile);
  const port = server.address().port;
  const browser = await tools.chromium.launch({
    executablePath: tools.chromiumPath, args: CHROMIUM_FLAGS, timeout: PAGE_TIMEOUT_MS,
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(PAGE_TIMEOUT_MS);
    const complaints = [];
    let importer = null;
    page.on("dialog", async dialog => {
      complaints.push(`speedscope said: ${dialog.message()}`);
      await dialog.dismiss();
    });
    page.on("pageerror", error => complaints.push(`page error: ${error.message}`));
    page.on("console", message => {
      const text = message.text();
      const match = /^Importing as (.*)$/.exec(text);
      if (match) importer = match[1];
      if (text.startsWith("Failed to load format")) complaints.push(`speedscope: ${text.split("\n")[0]}`);
    });
    // Only loopback requests: the app must not reach anything else.
    await page.route(url => !url.href.startsWith(`http://127.0.0.1:${port}/`), route => route.abort());

    const profileUrl = `http://127.0.0.1:${port}${profileUrlPath}`;
    await page.goto(`http://127.0.0.1:${port}/index.html#profileURL=${encodeURIComponent(profileUrl)}`);
    // Loaded: the toolbar shows the Export button; failed: a dialog, or the welcome page stays.
    const deadline = Date.now() + PAGE_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (complaints.some(c => c.startsWith("speedscope said"))) break;
      if (await page.getByText("Export", { exact: false }).count() > 0) break;
      await page.waitForTimeout(100);
    }
    if (await page.getByText("Export", { exact: false }).count() === 0) {
      throw new Error(complaints.join("; ") || `speedscope showed no profile within ${PAGE_TIMEOUT_MS} ms`);
    }

    const profiles = await readProfileList(page);
    const top = {};
    for (const name of sandwichFor) {
      if (!profiles.some(p => p.name === name)) continue;
      await selectProfile(page, name, profiles.length);
      top[name] = await readSandwich(page);
    }
    return { importer, profiles, top, complaints };
  } finally {
    await browser.close();
    server.close();
  }
}

async function tableRows(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll("tr")].map(row => [...row.children].map(cell => cell.textContent.trim())));
}

// The toolbar's middle shows "NAME (i/N)" when a file holds several profiles;
// clicking it lists them all in a table (#, Name, Total Weight).
async function readProfileList(page) {
  const selector = page.getByText(/\(\d+\/\d+\)/);
  if (await selector.count() === 0) {
    const lines = (await page.evaluate(() => document.body.innerText)).split("\n").map(s => s.trim());
    const name = lines[lines.findIndex(l => l.includes("Sandwich")) + 1] || "";
    return [{ name, total: "" }];
  }
  await selector.first().click();
  const rows = await tableRows(page);
  await page.keyboard.press("Escape");
  const header = rows.findIndex(r => r[1] === "Name" && r[2] === "Total Weight");
  return rows.slice(header + 1).filter(r => r.length === 3).map(r => ({ name: r[1], total: r[2] }));
}

async function selectProfile(page, name, count) {
  if (count < 2) return;
  await page.getByText(/\(\d+\/\d+\)/).first().click();
  await page.locator("tr", { has: page.getByText(name, { exact: true }) }).first().click();
  await page.keyboard.press("Escape");
}

// Sandwich: one row per frame, Total / Self / Symbol Name, heaviest self first.
async function readSandwich(page) {
  await page.getByText("Sandwich", { exact: false }).first().click();
  await page.waitForTimeout(300);
  const rows = await tableRows(page);
  const header = rows.findIndex(r => r[0] === "Total" && r[1] === "Self" && r[2] === "Symbol Name");
  if (header < 0) throw new Error("speedscope's Sandwich view showed no frame table");
  await page.getByText("Time Order", { exact: false }).first().click();
  return rows.slice(header + 1).filter(r => r.length === 3).map(r => ({ total: r[0], self: r[1], name: r[2] }));
}
