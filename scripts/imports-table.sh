#!/usr/bin/env bash
# Prints the rows of docs/ARCHITECTURE.md's "## Imports" table from go
# list: what each package imports of ours (tests excluded). Paste them
# over the table when docs/architecture_test.go says it differs.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/sframekit/sframekit/
go list -f '{{.ImportPath}}|{{join .Imports " "}}' ./... | grep -v '/docs|' | while IFS='|' read -r p imps; do
  ours=""
  for i in $imps; do
    case $i in "$mod"*) ours+="\`${i#"$mod"}\`, " ;; esac
  done
  ours=${ours%, }
  echo "| \`${p#"$mod"}\` | ${ours:-—} |"
done
