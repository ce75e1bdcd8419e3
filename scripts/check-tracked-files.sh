#!/usr/bin/env bash
# make lint: refuse tracked files over 1 MB and compiled binaries (ELF,
# Mach-O, PE). A committed build output bloats every clone and every Docker
# build context, and a binary cannot be reviewed.
#   scripts/check-tracked-files.sh            checks `git ls-files`
#   scripts/check-tracked-files.sh FILE...    checks the named files
set -euo pipefail
cd "$(dirname "$0")/.."

max_bytes=$((1024 * 1024))
if [ $# -gt 0 ]; then files=("$@"); else mapfile -d '' files < <(git ls-files -z); fi

bad=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue # deleted in the work tree, not yet committed
  size=$(stat -c %s -- "$f")
  if [ "$size" -gt "$max_bytes" ]; then
    echo "tracked file over 1 MB ($size bytes): $f" >&2
    bad=1
  fi
  # The first four bytes name the format: ELF, Mach-O (both byte orders,
  # 32/64-bit and universal), PE ("MZ" DOS stub).
  magic=$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
    7f454c46) kind=ELF ;;
    feedface | feedfacf | cefaedfe | cffaedfe | cafebabe) kind=Mach-O ;;
    4d5a*) kind=PE ;;
    *) kind= ;;
  esac
  # cafebabe is also a Java class file; still a compiled binary, still refused.
  if [ -n "$kind" ]; then
    echo "tracked compiled binary ($kind): $f" >&2
    bad=1
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "remove them with 'git rm --cached FILE' and keep build output in bin/ (ignored)" >&2
  exit 1
fi
