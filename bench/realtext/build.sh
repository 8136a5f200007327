#!/usr/bin/env bash
# build.sh — a real-text multi-domain corpus for tandem, built offline from Debian packages.
#
#   bash bench/realtext/build.sh --out DIR --train prose=2400k,code=1200k,... \
#        [--val 40k | --val prose=40k,...] [--test 60k | --test prose=60k,...] \
#        [--seed 1] [--no-install]
#   bash bench/realtext/build.sh --list        # the domains, their packages, licences
#
# The only network it needs is Debian's archive (apt-get). For each domain named in
# --train it installs that domain's packages if missing, extracts clean plain text,
# splits it by document (seeded; test, then val, then train, so val/test never share a
# document with train and do not move when the train sizes change) to the byte targets
# (k = 1000, M = 1e6), and writes:
#
#   DIR/raw/<domain>/{train,val,test}.txt    the text (documents separated by a blank line)
#   DIR/raw/<domain>/documents.tsv           which document went where, and its bytes
#   DIR/<domain>/{train,val,test}_000.bin    llm.c shards, byte-level tokens (vocab 256)
#   DIR/dataset.yaml                         tandem's dataset (docs/data.md)
#   DIR/packages.txt                         the package versions the text came from
#
# `tandem prep` is not used: it splits whole documents by a seeded hash against fractions,
# while this benchmark wants exact byte targets per split; the shards
# are written in the same format and layout (realtext.py, Debian's /usr/bin/python3,
# standard library only). DIR is replaced whole on a rebuild, so the same command gives
# the same bytes (idempotent); a non-empty DIR this script did not make is refused.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=/usr/bin/python3 # Debian's, not a pyenv/venv one earlier on PATH

usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; }

out= train= val=40k test=60k seed=1 install=1 list=0
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --train) train=${2:?--train needs NAME=SIZE,...}; shift 2 ;;
        --val) val=${2:?--val needs a size}; shift 2 ;;
        --test) test=${2:?--test needs a size}; shift 2 ;;
        --seed) seed=${2:?--seed needs a number}; shift 2 ;;
        --no-install) install=0; shift ;;
        --list) list=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if [ "$list" = 0 ] && { [ -z "$out" ] || [ -z "$train" ]; }; then
    echo "build.sh: --out and --train are required (see --help)" >&2
    exit 2
fi

# Nothing of this machine's locale, terminal or clock may reach the text.
export LC_ALL=C.UTF-8 TZ=UTC
unset COLUMNS MANWIDTH MANOPT PYTHONPATH PYTHONHOME PYTHONSTARTUP

# apt-get install of the packages not installed yet; apt-get update first, since a fresh
# machine may have no package lists at all.
apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$install" = 0 ]; then
        echo "build.sh: missing packages (--no-install given): ${missing[*]}" >&2
        exit 2
    fi
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    echo "build.sh: installing ${missing[*]}" >&2
    "${sudo[@]}" apt-get update -q >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

# The extractor itself needs Python 3.11 with its full standard library (tarfile, lzma).
apt_install python3-minimal libpython3.11-stdlib

if [ "$list" = 1 ]; then
    exec "$py" "$here/realtext.py" list
fi

# Each domain's packages, as realtext.py declares them (one list, no copy here).
read -r -a pkgs <<<"$("$py" "$here/realtext.py" packages --train "$train")"
apt_install "${pkgs[@]}"

start=$(date +%s)
"$py" "$here/realtext.py" build --out "$out" --train "$train" --val "$val" --test "$test" \
    --seed "$seed"
echo "build.sh: corpus built in $(($(date +%s) - start)) s"
