#!/usr/bin/env bash
# make lint: the import boundaries of the root module. Each framework lives
# in one package, so replacing or upgrading it touches one place
# (docs/STYLE: "a dependency rule that matters is enforced by a lint step").
#
#   pgx (github.com/jackc/pgx/v5/...)   only pkg/postgres and its
#       subpackages (pkg/postgres/pgtest), in production code AND tests:
#       a test outside reads rows through pgtest helpers or env.Admin.
#   the MCP SDK (github.com/modelcontextprotocol/go-sdk/...)   only
#       pkg/mcpserver in production code. Root-module test files may import
#       it to drive the server as an MCP client (pkg/httpserver's tests
#       do), and so may the separate e2e module, which this script does
#       not look at.
#   Echo (github.com/labstack/echo/...)   only pkg/httpserver in production
#       code.
#
# It reads direct imports with `go list -f` (a package's transitive
# dependencies, `go list -deps`, naturally include the frameworks of the
# packages it builds on). GOWORK=off keeps the e2e module out.
set -euo pipefail
cd "$(dirname "$0")/.."

mod=$(GOWORK=off go list -m)
listing=$(GOWORK=off go list -f '{{.ImportPath}} prod {{join .Imports " "}}
{{.ImportPath}} test {{join .TestImports " "}} {{join .XTestImports " "}}' ./...)

# check RULE_NAME IMPORT_PREFIX OWNER_PACKAGE KINDS: fails for every package
# outside OWNER_PACKAGE (and its subpackages) whose imports of KINDS (prod,
# or "prod test") include IMPORT_PREFIX or a package below it.
bad=0
check() {
  local name=$1 prefix=$2 owner=$3 kinds=$4 out
  out=$(awk -v prefix="$prefix" -v owner="$mod/$owner" -v kinds=" $kinds " '
    index(kinds, " " $2 " ") == 0 { next }
    $1 == owner || index($1, owner "/") == 1 { next }
    { for (i = 3; i <= NF; i++) if ($i == prefix || index($i, prefix "/") == 1) print $1 " (" $2 ") imports " $i }
  ' <<<"$listing" | sort -u)
  if [ -n "$out" ]; then
    echo "import boundary: $name may be imported only under $owner:" >&2
    echo "$out" | sed 's/^/  /' >&2
    bad=1
  fi
}

check pgx github.com/jackc/pgx pkg/postgres "prod test"
check "the MCP SDK" github.com/modelcontextprotocol/go-sdk pkg/mcpserver prod
check Echo github.com/labstack/echo pkg/httpserver prod
exit $bad
