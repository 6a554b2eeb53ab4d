#!/usr/bin/env bash
# Runs one libFuzzer target of the fuzz preset for SECONDS on its committed seed corpus and
# fails on any finding (crash, sanitizer report, leak, timeout, out-of-memory). Usage:
#   scripts/fuzz.sh TARGET SECONDS        e.g. scripts/fuzz.sh jinja 60
#   scripts/fuzz.sh --list                the targets
# Build first: cmake --preset fuzz && cmake --build --preset fuzz. New inputs go to a scratch
# corpus (build/fuzz/corpus/TARGET), never into fuzz/corpus/; a finding is saved as
# build/fuzz/findings/TARGET-<kind>-<sha1> and reproduced with `build/fuzz/fuzz/fuzz_TARGET FILE`.
# FUZZ_JOBS=N runs N processes (libFuzzer -fork); extra arguments go to libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
# A target is a corpus folder (fuzz/corpus/README.md describes them and is not one).
targets=$(find fuzz/corpus -mindepth 1 -maxdepth 1 -type d -printf "%f\n" | sort)
if [ "${1:-}" = "--list" ]; then echo "$targets"; exit 0; fi
if [ $# -lt 2 ]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer args]  (targets: $(echo $targets))" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2
bin=build/fuzz/fuzz/fuzz_$target
seeds=fuzz/corpus/$target
[ -d "$seeds" ] || { echo "fuzz.sh: no seed corpus $seeds (targets: $(echo $targets))" >&2; exit 2; }
[ -x "$bin" ] || { echo "fuzz.sh: $bin not built (cmake --preset fuzz && cmake --build --preset fuzz)" >&2; exit 2; }
work=build/fuzz/corpus/$target findings=build/fuzz/findings
mkdir -p "$work" "$findings"
fork=()
[ -n "${FUZZ_JOBS:-}" ] && fork=(-fork="$FUZZ_JOBS" -ignore_crashes=0)
# -timeout: one input may take 25 s (a hang is a finding; 10 s gave false ones on a loaded
# 2-core machine); -rss_limit_mb / -malloc_limit_mb: 2 GiB is a finding (the issue's worst
# case asked for 16 GB); -max_len: the largest seed, at least 64 KiB.
max_len=$(find "$seeds" -type f -printf '%s\n' | sort -n | tail -1)
[ "$max_len" -lt 65536 ] && max_len=65536
# ASan: leaks are findings; UBSan reports abort (the preset builds with -fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
set +e
"$bin" "${fork[@]}" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
  -malloc_limit_mb=2048 -max_len="$max_len" -print_final_stats=1 \
  -artifact_prefix="$findings/$target-" "$@" "$work" "$seeds" 2>&1 | tee "build/fuzz/$target.log" \
  | grep -aE "^#[0-9]+[[:space:]]+(INITED|DONE)|ERROR|SUMMARY|Test unit written|stat::" 
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  echo "fuzz.sh: $target FAILED (exit $rc); log build/fuzz/$target.log, input in $findings/" >&2
  exit 1
fi
echo "fuzz.sh: $target ran ${seconds}s without a finding"
