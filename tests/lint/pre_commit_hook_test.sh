#!/usr/bin/env bash
# The hook of .pre-commit-hooks.yaml, run by the real pre-commit on a scratch
# repository: a staged leaky file fails the hook with its GL101 finding, a
# clean one passes. Usage: pre_commit_hook_test.sh SOURCE_DIR GPULEAK_BINARY
set -euo pipefail
source_dir=$1
binary=$2
if ! command -v pre-commit >/dev/null; then
  echo "pre-commit is not installed (scripts/setup installs it)"; exit 1
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/bin" "$scratch/repo" "$scratch/hooks"
ln -s "$(readlink -f "$binary")" "$scratch/bin/gpuleak"
export PATH="$scratch/bin:$PATH" PRE_COMMIT_HOME="$scratch/cache" HOME="$scratch"
# The hook definition of this tree (committed or not) as a repository of its own.
cp "$source_dir/.pre-commit-hooks.yaml" "$scratch/hooks/"
git -C "$scratch/hooks" init -q .
git -C "$scratch/hooks" add .pre-commit-hooks.yaml
git -C "$scratch/hooks" -c user.email=test@example.invalid -c user.name=test commit -q -m hooks
cd "$scratch/repo"
git init -q .
cat > leaky.py <<'PY'
import torch


def train(model, loader, opt):
    total = 0
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        total += loss
    return total
PY
sed 's/total += loss$/total += loss.item()/' leaky.py > clean.py
git add leaky.py clean.py

set +e
out=$(pre-commit try-repo "$scratch/hooks" gpuleak-lint --files leaky.py 2>&1)
leaky_rc=$?
clean_out=$(pre-commit try-repo "$scratch/hooks" gpuleak-lint --files clean.py 2>&1)
clean_rc=$?
set -e
status=0
if [ "$leaky_rc" -eq 0 ] || ! grep -q "leaky.py:11:9: error GL101" <<<"$out"; then
  echo "FAIL: the hook should fail on leaky.py with GL101 (exit $leaky_rc):"; echo "$out"; status=1
fi
if [ "$clean_rc" -ne 0 ] || ! grep -q "Passed" <<<"$clean_out"; then
  echo "FAIL: the hook should pass on clean.py (exit $clean_rc):"; echo "$clean_out"; status=1
fi
[ "$status" -eq 0 ] && echo "pre-commit hook: fails on leaky.py with GL101, passes on clean.py"
exit "$status"
