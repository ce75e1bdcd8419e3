#!/usr/bin/env bash
# make vuln: govulncheck on both modules. It needs the Go vulnerability
# database (https://vuln.go.dev, or VULNDB=URL for a mirror or a file://
# copy). Where that database cannot be reached this says so in one line and
# exits 3, so "no known vulnerabilities" is never printed without a check.
set -uo pipefail
cd "$(dirname "$0")/.."

GOVULNCHECK="golang.org/x/vuln/cmd/govulncheck@${GOVULNCHECK_VERSION:-v1.9.0}"
db=(); [ -n "${VULNDB:-}" ] && db=(-db "$VULNDB")

rc=0
for mod in . e2e; do
  tags=(); [ "$mod" = e2e ] && tags=(-tags e2e)
  out=$(cd "$mod" && GOWORK=off go run "$GOVULNCHECK" "${db[@]}" "${tags[@]}" ./... 2>&1)
  status=$?
  if [ $status -ne 0 ] && grep -q 'fetching vulnerabilities' <<<"$out"; then
    echo "make vuln: the vulnerability database ${VULNDB:-https://vuln.go.dev} is unreachable from this machine, so NOTHING was checked." >&2
    echo "  cause: $(grep -m1 'fetching vulnerabilities' <<<"$out" | sed 's/^govulncheck: //')" >&2
    echo "  run it where the database is reachable, or point VULNDB at a mirror or a file:// copy." >&2
    exit 3
  fi
  echo "== govulncheck ($mod)"
  echo "$out"
  [ $status -ne 0 ] && rc=$status
done
exit $rc
