// Opens a `gpuleak report --format speedscope` file with speedscope itself:
// validates it against the JSON schema speedscope ships
// (dist/release/file-format-schema.json), then imports it in the real
// speedscope app in headless Chromium and reads what the app shows.
//
//   node check_speedscope.mjs FILE [--expect-profile NAME]...
//        [--expect-top-frame NAME-SUBSTRING PROFILE]... [--input KIND] [--chromium PATH]
//
// --expect-top-frame: the first row of speedscope's Sandwich table for that
// profile, which lists frames by self weight, heaviest first: the frame that
// is the leaf of the most weight (summed over the samples whose leaf it is).
// --input: what FILE is, and so which speedscope importer must take it:
//   speedscope (default; also validated against the schema), folded ("a;b;c 123"
//   lines: one profile named after FILE), trace-event (Trace Event Format JSON:
//   one profile per pid/tid with slices; check_perfetto.py uses this).
// Exit 0: accepted and every expectation holds; 1: not; 77: speedscope,
// playwright-core or Chromium is missing.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { SKIP, Unavailable, importInSpeedscope, locateSpeedscope } from "./speedscope_page.mjs";

// What speedscope logs ("Importing as ...") for each kind of input.
const IMPORTERS = { speedscope: /^speedscope json/i, folded: /collapsed stack/i, "trace-event": /trace event format/i };

function parseArguments(argv) {
  const args = { file: null, profiles: [], topFrames: [], input: "speedscope",
    chromium: process.env.GPULEAK_CHROMIUM || "/usr/bin/chromium" };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--expect-profile") args.profiles.push(argv[++i]);
    else if (a === "--expect-top-frame") args.topFrames.push({ frame: argv[++i], profile: argv[++i] });
    else if (a === "--input") args.input = argv[++i];
    else if (a === "--chromium") args.chromium = argv[++i];
    else if (!a.startsWith("--") && args.file === null) args.file = a;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!IMPORTERS[args.input]) throw new Error(`--input must be one of ${Object.keys(IMPORTERS).join(", ")}`);
  if (!args.file) throw new Error("usage: check_speedscope.mjs FILE [--expect-profile NAME] [--expect-top-frame SUBSTRING PROFILE]");
  for (const t of args.topFrames) {
    if (t.frame === undefined || t.profile === undefined) throw new Error("--expect-top-frame needs SUBSTRING PROFILE");
  }
  return args;
}

// Schema errors in speedscope's own schema, as "path: message" lines.
function schemaErrors(release, document) {
  const require = createRequire(import.meta.url);
  const Ajv = require("ajv");
  const schema = JSON.parse(fs.readFileSync(path.join(release, "file-format-schema.json"), "utf8"));
  const validate = new Ajv({ allErrors: true }).compile(schema);
  if (validate(document)) return [];
  return validate.errors.slice(0, 5).map(e => `${e.dataPath || "(root)"}: ${e.message}`);
}

async function main() {
  const args = parseArguments(process.argv.slice(2));
  let tools;
  try {
    tools = await locateSpeedscope(args.chromium);
  } catch (error) {
    if (error instanceof Unavailable) {
      console.log(`SKIP: ${error.message}`);
      return SKIP;
    }
    throw error;
  }
  console.log(`speedscope ${tools.version}`);

  if (args.input === "speedscope") {
    let document;
    try {
      document = JSON.parse(fs.readFileSync(args.file, "utf8"));
    } catch (error) {
      return fail(`${args.file} is not JSON: ${error.message}`);
    }
    const errors = schemaErrors(tools.release, document);
    if (errors.length) return fail(`speedscope's file-format-schema.json rejects it: ${errors.join("; ")}`);
    console.log("file-format-schema.json: valid");
  }

  let shown;
  try {
    const wanted = [...new Set(args.topFrames.map(t => t.profile))];
    shown = await importInSpeedscope(tools, path.resolve(args.file), wanted);
  } catch (error) {
    return fail(`speedscope did not import ${args.file}: ${error.message}`);
  }
  console.log(`imported as: ${shown.importer}`);
  console.log(`profiles: ${shown.profiles.map(p => `${p.name} [${p.total}]`).join(", ")}`);
  if (shown.complaints.length) return fail(`speedscope complained while importing: ${shown.complaints.join("; ")}`);
  if (!IMPORTERS[args.input].test(shown.importer || "")) {
    return fail(`speedscope imported it as "${shown.importer}", not with its ${args.input} importer`);
  }

  const names = shown.profiles.map(p => p.name);
  for (const name of args.profiles) {
    if (!names.includes(name)) return fail(`no profile named "${name}" (speedscope shows: ${names.join(", ")})`);
  }
  for (const { frame, profile } of args.topFrames) {
    const rows = shown.top[profile];
    if (!rows) return fail(`no profile named "${profile}" (speedscope shows: ${names.join(", ")})`);
    if (!rows.length) return fail(`speedscope's Sandwich table for "${profile}" is empty`);
    console.log(`top frame of "${profile}" (Sandwich, by self): ${rows[0].name} self ${rows[0].self}`);
    if (!rows[0].name.includes(frame)) return fail(`top frame of "${profile}" is "${rows[0].name}", expected it to contain "${frame}"`);
  }
  console.log("ok");
  return 0;
}

function fail(message) {
  console.log(`FAIL: ${message}`);
  return 1;
}

main().then(code => process.exit(code), error => {
  console.log(`FAIL: ${error.message}`);
  process.exit(1);
});
