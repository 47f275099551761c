# Sourced (never run) by the lab's measuring scripts, with the script's own
# arguments: "[BIN] [-- ARGS…]". Sets root (the checkout), tmp (a directory
# removed when the script exits) and bin (BIN, or else a build of this
# checkout in tmp), and takes BIN and the -- off the script's arguments.
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=
if [[ $# -gt 0 && $1 != -- ]]; then bin=$1; shift; fi
[[ ${1:-} == -- ]] && shift
if [[ -z $bin ]]; then
  (cd "$root" && go build -o "$tmp/scalechat" ./cmd/scalechat)
  bin=$tmp/scalechat
fi
