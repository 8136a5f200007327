#!/usr/bin/env bash
# tests/s3/setup.sh — installs what the S3 test server needs, skipping what is present.
#
#   bash tests/s3/setup.sh
#
# * Debian packages: nodejs npm awscli python3-botocore (apt-get only when one is
#   missing; needs root or sudo for that). A `node`/`npm` already on PATH counts as
#   installed (e.g. NodeSource's nodejs, which bundles npm and conflicts with Debian's
#   npm package).
# * s3rver@3.7.1 (pinned) into build/s3rver/ via `npm install --prefix build/s3rver`,
#   skipped when build/s3rver/node_modules/s3rver is already 3.7.1.
#
# Idempotent; after the first run it needs no network. Prints nothing on the fast path.
set -euo pipefail
cd "$(dirname "$0")/../.."
S3RVER_VERSION=3.7.1
PREFIX=build/s3rver
# one setup at a time (make test runs the rel and asan S3 tests side by side; two apt-get
# or npm installs at once fail on dpkg's lock or fill one prefix twice)
mkdir -p build
exec 9>build/.s3-setup.lock
flock 9

is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
for p in nodejs npm awscli python3-botocore; do
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm) command -v npm >/dev/null 2>&1 && continue ;;
  esac
  is_installed "$p" || missing+=("$p")
done
# Debian's aws lives at /usr/bin/aws; a pyenv/pip aws elsewhere on PATH is not ours.
if [ ! -x /usr/bin/aws ] && is_installed awscli; then
  echo "s3 setup: awscli is installed but /usr/bin/aws is missing" >&2; exit 1
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "s3 setup: installing ${missing[*]}" >&2
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo=(sudo); else
      echo "s3 setup: missing ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
      exit 2
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q >/dev/null
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

pj="$PREFIX/node_modules/s3rver/package.json"
if ! grep -Eq "^  \"version\": \"$S3RVER_VERSION\",?\$" "$pj" 2>/dev/null; then
  echo "s3 setup: npm install s3rver@$S3RVER_VERSION into $PREFIX" >&2
  mkdir -p "$PREFIX"
  # A package.json of our own keeps npm from walking up to a parent project.
  [ -f "$PREFIX/package.json" ] ||
    printf '{"name":"tandem-s3rver","private":true}\n' >"$PREFIX/package.json"
  npm install --prefix "$PREFIX" --save-exact --no-audit --no-fund --loglevel=error \
      "s3rver@$S3RVER_VERSION" >&2
fi
[ -x "$PREFIX/node_modules/.bin/s3rver" ] || {
  echo "s3 setup: $PREFIX/node_modules/.bin/s3rver missing after install" >&2; exit 1; }
