// Decodes a `gpuleak report --format pprof` file with pprof-format (npm, the
// profile.proto decoder Datadog's Node profilers use), a second reader beside
// Go's pprof (check_pprof.py), and checks the references Go's pprof checks.
//
//   node check_pprof.mjs FILE [--sample-types a,b] [--expect-top SUBSTRING [--sample-index NAME]]
//
// --expect-top: the function with the largest flat value (the sum of the
// values of samples whose leaf location, location_id[0], has it as its
// innermost line) for --sample-index (default: default_sample_type, else the
// last type, as Go's pprof does).
// Exit 0: decoded, consistent, expectations hold; 1: not; 77: pprof-format missing.
import fs from "node:fs";
import zlib from "node:zlib";

const SKIP = 77;

function parseArguments(argv) {
  const args = { file: null };
  const flags = { "--sample-types": "sampleTypes", "--expect-top": "expectTop", "--sample-index": "sampleIndex" };
  for (let i = 0; i < argv.length; i++) {
    if (flags[argv[i]]) args[flags[argv[i]]] = argv[++i];
    else if (!argv[i].startsWith("--") && args.file === null) args.file = argv[i];
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!args.file) throw new Error("usage: check_pprof.mjs FILE [--sample-types a,b] [--expect-top S [--sample-index NAME]]");
  return args;
}

// The consistency rules Go's pprof enforces (profile.CheckValid and its parser).
function problems(profile, str) {
  const found = [];
  if (profile.stringTable.strings[0] !== "") found.push('string_table[0] is not ""');
  if (profile.sampleType.length === 0) found.push("no sample_type");
  const ids = (list, what) => {
    const map = new Map();
    for (const item of list) {
      const id = Number(item.id);
      if (id === 0) found.push(`${what} with reserved id 0`);
      if (map.has(id)) found.push(`two ${what}s with id ${id}`);
      map.set(id, item);
    }
    return map;
  };
  const mappings = ids(profile.mapping, "mapping");
  const functions = ids(profile.function, "function");
  const locations = ids(profile.location, "location");
  for (const location of profile.location) {
    if (Number(location.mappingId) !== 0 && !mappings.has(Number(location.mappingId))) {
      found.push(`location ${location.id} names unknown mapping ${location.mappingId}`);
    }
    for (const line of location.line) {
      if (!functions.has(Number(line.functionId))) found.push(`location ${location.id} names unknown function ${line.functionId}`);
    }
  }
  for (const [i, sample] of profile.sample.entries()) {
    if (sample.value.length !== profile.sampleType.length) {
      found.push(`sample ${i} has ${sample.value.length} values for ${profile.sampleType.length} types`);
    }
    for (const id of sample.locationId) {
      if (!locations.has(Number(id))) found.push(`sample ${i} names unknown location ${id}`);
    }
  }
  for (const f of profile.function) {
    if (str(f.name) === undefined) found.push(`function ${f.id} has a name index out of the string table`);
  }
  return { found: found.slice(0, 5), functions, locations };
}

async function main() {
  const args = parseArguments(process.argv.slice(2));
  let Profile;
  try {
    ({ Profile } = await import("pprof-format"));
  } catch {
    console.log("SKIP: the pprof-format npm package is not installed (run scripts/setup: npm ci)");
    return SKIP;
  }
  const version = JSON.parse(fs.readFileSync(new URL(import.meta.resolve("pprof-format/package.json")), "utf8")).version;
  console.log(`consumer: pprof-format ${version}`);

  let bytes = fs.readFileSync(args.file);
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = zlib.gunzipSync(bytes);
  else console.log("note: not gzip-compressed (Go's pprof accepts that too)");
  let profile;
  try {
    profile = Profile.decode(bytes);
  } catch (error) {
    return fail(`pprof-format could not decode it: ${error.message}`);
  }
  const str = index => profile.stringTable.strings[Number(index)];
  const { found, functions, locations } = problems(profile, str);
  if (found.length) return fail(`inconsistent profile: ${found.join("; ")}`);

  const types = profile.sampleType.map(t => str(t.type));
  console.log(`sample types: ${types.join(",")}; ${profile.sample.length} samples, ${profile.location.length} locations`);
  if (args.sampleTypes && types.join(",") !== args.sampleTypes) {
    return fail(`sample types are ${types.join(",")}, expected ${args.sampleTypes}`);
  }
  if (args.expectTop) {
    const fallback = Number(profile.defaultSampleType) ? types.indexOf(str(profile.defaultSampleType)) : types.length - 1;
    const column = args.sampleIndex ? types.indexOf(args.sampleIndex) : fallback;
    if (column < 0) return fail(`no sample type ${args.sampleIndex} (the profile has ${types.join(",")})`);
    const flat = new Map();
    for (const sample of profile.sample) {
      const leaf = locations.get(Number(sample.locationId[0]));
      if (!leaf || leaf.line.length === 0) continue;
      const name = str(functions.get(Number(leaf.line[0].functionId)).name);
      flat.set(name, (flat.get(name) || 0) + Number(sample.value[column]));
    }
    const ranked = [...flat].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    if (!ranked.length) return fail("no sample has a symbolized leaf location");
    console.log(`top by flat ${types[column]}: ${ranked[0][0]} ${ranked[0][1]}`);
    if (!ranked[0][0].includes(args.expectTop)) {
      return fail(`top entry is "${ranked[0][0]}", expected it to contain "${args.expectTop}"`);
    }
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
