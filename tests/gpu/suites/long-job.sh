# Long jobs (issue 37): a launch-bound PyTorch loop with thousands of tensor
# allocations a second runs under `gpuleak run` with a small trace bound,
# once keeping a 4 KiB tensor every step and once keeping nothing, side by
# side, for LONG_JOB_SECONDS (default 360; give the suite 120 s more):
#     bash tests/gpu/verify.sh long-job:480
#     LONG_JOB_SECONDS=1800 bash tests/gpu/verify.sh long-job:1920   (the 30-minute run)
# While they run, every trace folder's size (traces and a compaction's
# temporary file together) is read every 0.2 s. Passes when each folder
# stayed under the bound (LONG_JOB_BOUND, default 64M), the allocation rate
# was at least 1,000/s, the trace was compacted, and the report says LEAK at
# the leaking line for `leak` and NO LEAK for `clean`.
seconds=${LONG_JOB_SECONDS:-360}
bound=${LONG_JOB_BOUND:-64M}
program=tests/gpu/long_job/train_long.py
for shape in leak clean; do
  mkdir -p "$R/$shape"
  log "long-job: $shape for ${seconds}s, bound $bound"
  ( timeout $((seconds + 90)) "$D/gpuleak" run -q -o "$R/$shape/traces" --trace-max-bytes "$bound" \
      --json-report "$R/$shape/report.json" -- python3 "$program" "$seconds" "$shape" \
      > "$R/$shape/program.txt" 2> "$R/$shape/stderr.txt"; echo $? > "$R/$shape/rc" ) &
done
python3 - "$R" "$seconds" <<'EOF_WATCH' &
import json, os, sys, time
results, seconds = sys.argv[1], float(sys.argv[2])
largest = {"leak": 0, "clean": 0}
end = time.monotonic() + seconds + 90
while time.monotonic() < end and not all(os.path.exists(f"{results}/{s}/rc") for s in largest):
    for shape in largest:
        folder = f"{results}/{shape}/traces"
        total = 0
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            if ".trace" in name:
                try:
                    total += os.stat(os.path.join(folder, name)).st_size
                except FileNotFoundError:
                    pass
        largest[shape] = max(largest[shape], total)
    time.sleep(0.2)
json.dump(largest, open(f"{results}/largest_disk.json", "w"))
EOF_WATCH
wait
python3 - "$R" "$bound" "$program" <<'EOF_JUDGE'
import json, re, sys
results, bound_text, program = sys.argv[1:4]
units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
bound = int(bound_text[:-1]) * units[bound_text[-1].upper()] if bound_text[-1].isalpha() else int(bound_text)
leak_line = next(i for i, line in enumerate(open(program), 1) if "# LEAK" in line)
largest = json.load(open(f"{results}/largest_disk.json"))
summary = {"bound_bytes": bound, "leak_line": leak_line, "runs": {}}
ok = True
for shape in ("leak", "clean"):
    run = {"largest_disk_bytes": largest.get(shape)}
    try:
        program_out = json.loads(open(f"{results}/{shape}/program.txt").read().strip().splitlines()[-1])
        report = json.load(open(f"{results}/{shape}/report.json"))
    except (OSError, ValueError, IndexError) as error:
        run["error"] = str(error)
        summary["runs"][shape] = run
        ok = False
        continue
    main = max(report["processes"], key=lambda p: p["events"]["allocations"])
    run.update(steps=program_out["steps"], seconds=round(program_out["seconds"], 1),
               allocations=main["events"]["allocations"],
               allocations_per_s=round(main["events"]["allocations"] / program_out["seconds"]),
               verdict=main["verdict"]["name"], complete=main["verdict"]["complete"],
               compaction={k: v for k, v in (main["compaction"] or {}).items() if k != "steps"})
    sites = main["growth"]["sites"]
    run["site"] = sites[0]["site"] if sites else None
    checks = {
        "under_bound": largest.get(shape, bound + 1) <= bound,
        "rate_at_least_1000_per_s": run["allocations_per_s"] >= 1000,
        "compacted": bool(main["compaction"]),
        "complete": run["complete"],
    }
    if shape == "leak":
        checks["verdict_leak"] = run["verdict"] == "LEAK"
        checks["site_is_leak_line"] = bool(sites) and sites[0]["site"].get("line") == leak_line \
            and sites[0]["site"].get("file", "").endswith("train_long.py")
    else:
        checks["verdict_no_leak"] = run["verdict"] == "NO LEAK"
    run["checks"] = checks
    ok = ok and all(checks.values())
    summary["runs"][shape] = run
summary["pass"] = ok
json.dump(summary, open(f"{results}/summary.json", "w"), indent=1)
print(json.dumps(summary, indent=1))
EOF_JUDGE
