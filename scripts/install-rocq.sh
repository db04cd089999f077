#!/usr/bin/env bash
# Builds a separate Debian root with Rocq 9.2 (Debian unstable's `coq` 9.2.0 + stdlib + CoqHammer
# + ATPs) under ~/.cache/prod/rocq-9.2, for the checker's second prover version (docs/provers.md).
# The host system is never touched: nothing from another suite is installed into it; the root is
# a plain directory the checker bind-mounts read-only under bubblewrap.
#
#   scripts/install-rocq.sh            # build if missing (idempotent), print the root's path
#   scripts/install-rocq.sh --force    # rebuild (the old root is replaced only after success)
#
# Environment:
#   PROD_ROCQ_ROOT      where the root goes (default ${XDG_CACHE_HOME:-~/.cache}/prod/rocq-9.2)
#   PROD_ROCQ_SUITE     Debian suite (default unstable)
#   PROD_ROCQ_EXTRA     extra packages, space-separated
#   PROD_DEBIAN_MIRROR  mirror URL; default: the Debian archive the host's apt is configured with
#
# Needs mmdebstrap (Debian 12 has it: apt-get install mmdebstrap) and either root or
# unprivileged user namespaces with /etc/subuid ranges (mmdebstrap's unshare mode).
set -euo pipefail

suite="${PROD_ROCQ_SUITE:-unstable}"
root="${PROD_ROCQ_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/prod/rocq-9.2}"
force=0
[ "${1:-}" = "--force" ] && force=1

# coq = Rocq 9.2 (rocq, coqtop/coqc/coqchk shims); the provers CoqHammer finds on PATH are the
# host's set (E, CVC4, Z3; Vampire is not in Debian); Rocq's OCaml development files and findlib
# build the ProD plugin (the checker's term audit) inside the root.
packages="coq libcoq-stdlib libcoq-hammer eprover cvc4 z3 libcoq-core-ocaml-dev ocaml-findlib ${PROD_ROCQ_EXTRA:-}"
packages="$(echo $packages | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//')"
marker="$root/prod-root.txt"
spec="suite=$suite packages=$packages fixups=2"

if [ $force = 0 ] && [ -f "$marker" ] && grep -qxF "$spec" "$marker"; then
  echo "$root"
  exit 0
fi

if ! command -v mmdebstrap >/dev/null; then
  echo "mmdebstrap not found: sudo apt-get install -y mmdebstrap" >&2
  exit 1
fi

# The Debian archive the host already uses (never a hard-coded host name): the first `deb`
# source whose release is labelled "Debian" (not Debian-Security) and is not an -updates suite.
mirror="${PROD_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(apt-get indextargets --format '$(REPO_URI) $(LABEL) $(SUITE) $(TARGET_OF)' 2>/dev/null |
    awk '$2 == "Debian" && $3 !~ /-/ && $4 == "deb" { print $1; exit }')"
fi
if [ -z "$mirror" ]; then
  # No downloaded release files: fall back to the configured sources alone.
  mirror="$(apt-get indextargets --no-release-info --format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' 2>/dev/null |
    awk '$2 !~ /-/ && $3 == "deb" && $1 !~ /security/ { print $1; exit }')"
fi
if [ -z "$mirror" ]; then
  echo "cannot find the host's Debian mirror in its apt sources; set PROD_DEBIAN_MIRROR" >&2
  exit 1
fi

parent="$(dirname "$root")"
mkdir -p "$parent"
# In mmdebstrap's unshare mode (not root) the tree belongs to subordinate uids: remove it from a
# user namespace that maps them.
remove_tree() {
  [ -e "$1" ] || return 0
  if [ "$(id -u)" -eq 0 ]; then rm -rf "$1"; else unshare --map-auto --map-root-user -- rm -rf "$1"; fi
}
tmp="$(mktemp -d "$parent/.rocq-build.XXXXXX")"
chmod 755 "$tmp"
hooks="$(mktemp -d)"
log="$hooks/mmdebstrap.log"
cleanup() { remove_tree "$tmp"; rm -rf "$hooks"; }
trap cleanup EXIT

# Fix-ups of the Debian packages, applied inside the new root only (docs/provers.md):
# 1. libcoq-hammer 1.3.3+9.2-2 calls /usr/libexec/htimeout but ships
#    /usr/libexec/coq-hammer/htimeout, so every ATP call fails ("Error running eprover").
# 2. CoqHammer keeps only E's `# SZS` lines, but E >= 3 prints `% SZS status Theorem`, so E's
#    proofs are never recognised; this wrapper (first on the sandbox's PATH) rewrites the tag.
cat > "$hooks/eprover" <<'EOF'
#!/bin/sh
# ProD: CoqHammer 1.3.3 expects E 2.x's `# SZS` comment lines; E >= 3 writes `% SZS`.
/usr/bin/eprover "$@" | sed 's/^% SZS /# SZS /'
EOF
# The marker, written last by the hooks: the spec line (checked above), then what was built.
printf '%s\nmirror=%s\n' "$spec" "$mirror" > "$hooks/prod-root.txt"

run() {
  # $@: extra mmdebstrap options
  mmdebstrap --variant=apt --include="$(echo $packages | tr ' ' ',')" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='ln -sfn coq-hammer/htimeout "$1/usr/libexec/htimeout"' \
    --customize-hook="upload $hooks/eprover /usr/local/bin/eprover" \
    --customize-hook='chmod 755 "$1" "$1/usr/local/bin/eprover"' \
    --customize-hook='chroot "$1" coqc --version' \
    --customize-hook="upload $hooks/prod-root.txt /prod-root.txt" \
    --customize-hook='chroot "$1" dpkg-query -W coq libcoq-stdlib libcoq-hammer eprover cvc4 z3 >> "$1/prod-root.txt"' \
    --customize-hook='date -u "+built=%Y-%m-%dT%H:%M:%SZ" >> "$1/prod-root.txt"' \
    "$@" "$suite" "$tmp" "$mirror" 2>&1 | tee "$log" >&2
  return "${PIPESTATUS[0]}"
}

start=$(date +%s)
echo "building the Rocq root for suite $suite from $mirror (packages: $packages)" >&2
if ! run; then
  if grep -q 'is expired' "$log"; then
    # A mirror that serves a frozen snapshot of unstable: signatures are still checked, only
    # the Valid-Until freshness date is not.
    echo "warning: $suite's Release file on $mirror is past its Valid-Until date; retrying without that check" >&2
    remove_tree "$tmp"
    mkdir "$tmp"
    run --aptopt='Acquire::Check-Valid-Until "false"'
  else
    exit 1
  fi
fi

# Atomic replacement: the new root appears under its name only once complete (renames stay in
# one directory, so they need no write access to the trees themselves).
if [ -e "$root" ]; then
  old="$parent/.rocq-old.$$"
  mv "$root" "$old"
  mv "$tmp" "$root"
  remove_tree "$old"
else
  mv "$tmp" "$root"
fi
echo "built $root in $(( $(date +%s) - start )) s ($(du -sh "$root" | cut -f1))" >&2
echo "$root"
