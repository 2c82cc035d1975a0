# Sourced by the model tests (bash): reads MESHSPLIT MODEL WORK_DIR from the
# test's arguments into $meshsplit, $model and $work, sets $here (tests/models)
# and $repo, exits 77 (ctest: skipped) when the shared model is absent, and
# empties the work directory.
set -euo pipefail
meshsplit=$1
model=$2
work=$3
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [[ ! -f "$model" ]]; then
  echo "skipped: needs ../shared/models/hlo/$(basename "$model") (absent: $model);" \
       "README, 'Optional test data', says how to get it"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
