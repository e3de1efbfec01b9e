#!/usr/bin/env bash
# Checks the README's promise that its two commands work on a fresh Debian 12
# machine. It builds a pristine Debian 12 (bookworm) root with mmdebstrap
# (variant minbase: the Essential packages and apt, plus ca-certificates, and
# sudo with --user), git-clones one committed revision of this repository into
# it (nothing uncommitted, no build/, models/ or ccache goes in), and runs the
# first two commands of the README's first sh block there, read from that
# revision's README.md (`bash scripts/quickstart.sh`, `bash scripts/test.sh`),
# as root or, with --user, as a user with passwordless sudo, as the README
# promises both. Everything else the commands need they must install
# themselves from Debian's registry and PyPI.
#
# From the host only what a fresh machine of this kind also has goes in:
# /etc/resolv.conf, the local CA certificates (/usr/local/share/ca-certificates,
# registered with update-ca-certificates), pip's settings (/etc/pip.conf,
# /etc/pip/, ~/.config/pip, ~/.pip) and the PIP_* environment variables, except
# PIP_FIND_LINKS (a folder of local wheels would be a host leak). The root sees
# /proc, /sys, /dev, /dev/pts and a fresh /dev/shm; they are unmounted by a trap
# on any exit, failure or Ctrl-C. Downloaded Debian packages (only the .deb
# files) are kept between runs in $DUET_FRESH_APT_CACHE (default
# /var/tmp/duet-fresh-apt-cache; --no-cache to start empty); one run at a time
# per cache. The root is deleted at the end (--keep keeps it).
#
# Prints each step's time and the total; exits non-zero when a command fails,
# printing the tail of that step's log. The full log's path is printed; it
# stays in the run's folder (default /var/tmp/duet-fresh.XXXXXX).
#
# Needs root (mmdebstrap's root mode, mount, chroot) and network access to
# deb.debian.org and PyPI. Measured on a 2-core Debian 12 VM, builds with
# DUET_JOBS=2 (the scripts' default); the slower figures with other builds
# sharing the two cores:
#   --rev 6dca90f: fails in quickstart.sh at CMake's configure ("Could NOT
#     find OpenCL", from libdnnl-dev's package config), 1-3 min in all;
#   --rev 42750ac --no-cache: passes, 6m22s (root 28 s, quickstart.sh 4m00s,
#     test.sh 1m53s: 648 tests, the cuda ones skipped);
#   --rev f168d88, packages cached: passes, 8m46s as root (quickstart.sh
#     6m25s, test.sh 1m48s, 671 tests) and 7m32s with --user.
# .ci/run calls it twice after sanitize.sh: with --user (the README's two
# commands, 21-22 min on this VM) and as root with --install-only (below).
#
# With --install-only it runs only the set-up steps the README's commands
# begin with (scripts/install-deps.sh and fetch-model.sh). As root that is
# the one path that differs from a user's: install-deps.sh calls apt-get
# without sudo. Everything after the installs (venv, build, tests) runs the
# same as root or as a user, and the --user run covers it.
#
# With --python it checks docs/python.md's install instead of the README's
# commands: scripts/install-deps.sh and fetch-model.sh, then
# `python3 -m venv v && v/bin/pip install .` (timed on its own), then a
# generation through the installed package that must name Paris. Not in
# .ci/run (the wheel builds all of Duet again, cold: run it by hand).
# --rev ebc3915 --python, packages cached: passes, 5m07s in all (the
# pip install 4m08s).
#
# usage: bash scripts/fresh-machine-test.sh [--rev REV] [--user] [--keep]
#                                           [--no-cache] [--workdir DIR]
#                                           [--python | --install-only]
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
rev=HEAD
as_user=0
keep=0
use_cache=1
python_mode=0
install_only=0
workdir=""
cache="${DUET_FRESH_APT_CACHE:-/var/tmp/duet-fresh-apt-cache}"
suite=bookworm
mirror=http://deb.debian.org/debian
security=http://deb.debian.org/debian-security

usage() { sed -n '/^# usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rev) rev="${2:?--rev needs a revision}"; shift 2 ;;
    --rev=*) rev="${1#--rev=}"; shift ;;
    --user) as_user=1; shift ;;
    --keep) keep=1; shift ;;
    --no-cache) use_cache=0; shift ;;
    --python) python_mode=1; shift ;;
    --install-only) install_only=1; shift ;;
    --workdir) workdir="${2:?--workdir needs a folder}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fresh-machine-test: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

if [ $python_mode -eq 1 ] && [ $install_only -eq 1 ]; then
  echo "fresh-machine-test: --python and --install-only are two different checks; give one" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-machine-test: must run as root (mmdebstrap, mount, chroot)" >&2
  exit 1
fi
sha=$(git -C "$repo" rev-parse --verify --quiet "$rev^{commit}") ||
  { echo "fresh-machine-test: '$rev' is not a commit of $repo" >&2; exit 1; }

if ! command -v mmdebstrap >/dev/null; then
  echo "fresh-machine-test: installing mmdebstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
fi

if [ -n "$workdir" ]; then
  mkdir -p "$workdir"
  work=$(cd "$workdir" && pwd)
else
  work=$(mktemp -d /var/tmp/duet-fresh.XXXXXX)
fi
root="$work/root"
log="$work/fresh-machine-test.log"
[ ! -e "$root" ] || { echo "fresh-machine-test: $root already exists" >&2; exit 1; }
: >"$log"

if [ $as_user -eq 1 ]; then
  user=user home=/home/user
else
  user=root home=/root
fi
dest="$home/duet"

mounts=()  # mount points inside the root, in mount order
mount_in() {  # mount_in TARGET MOUNT-ARGS...: mounts and records for the trap
  local target="$root$1"
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounts+=("$target")
  mount --make-private "$target"
}

# Processes still running inside the root (a Ctrl-C leaves some): their
# /proc/PID/root is the root.
root_pids() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [ "$r" = "$root" ] && echo "${p#/proc/}"
  done
  return 0
}

cleanup() {
  local rc=$? pids i
  trap - EXIT INT TERM
  if [ -n "$step_pid" ]; then
    # mmdebstrap unmounts what it mounted in the root when it ends.
    kill -TERM -- "-$step_pid" 2>/dev/null || true
    for i in $(seq 30); do
      kill -0 -- "-$step_pid" 2>/dev/null || break
      sleep 1
    done
    kill -KILL -- "-$step_pid" 2>/dev/null || true
  fi
  mapfile -t pids < <(root_pids)
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    sleep 2
    mapfile -t pids < <(root_pids)
    [ ${#pids[@]} -eq 0 ] || kill -9 "${pids[@]}" 2>/dev/null || true
  fi
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true
  done
  if [ -d "$root" ]; then
    if grep -q " $root/" /proc/self/mountinfo; then
      echo "fresh-machine-test: something is still mounted under $root; not deleting it" >&2
    elif [ $keep -eq 1 ]; then
      echo "fresh-machine-test: root kept in $root"
    else
      rm -rf --one-file-system "$root"
    fi
  fi
  echo "fresh-machine-test: full log in $log"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s; }
# A command in the root as root, with none of the host's environment.
as_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
t0=$(now)
timings=()
step_log=""
step_pid=""
step() {  # step NAME COMMAND...: runs COMMAND with its output in its own log and the full log
  local name="$1" start rc=0
  shift
  step_log="$work/$(printf '%02d' $((${#timings[@]} + 1)))-$(echo "$name" | tr -c 'a-zA-Z0-9.\n-' '-').log"
  echo "== $name ($(date -u +%H:%M:%S) UTC)" | tee -a "$log"
  start=$(now)
  # In the background, so that a signal reaches the trap at once (bash runs
  # traps only between commands; wait is one it interrupts), and in a process
  # group of its own (set -m), which the trap ends as a whole.
  set -m
  "$@" >"$step_log" 2>&1 &
  step_pid=$!
  set +m
  wait $step_pid || rc=$?
  step_pid=""
  cat "$step_log" >>"$log"
  timings+=("$(printf '%-32s %s' "$name" "$(fmt $(($(now) - start)))")")
  if [ $rc -ne 0 ]; then
    echo "== $name FAILED (exit $rc) after $(fmt $(($(now) - start))); last lines of $step_log:" | tee -a "$log"
    tail -n 40 "$step_log"
    summary
    echo "fresh-machine-test: FAIL at '$name' (rev $sha)" | tee -a "$log"
    exit 1
  fi
  echo "   done in $(fmt $(($(now) - start)))" | tee -a "$log"
}
summary() {
  local t
  echo "-- timings (rev ${sha:0:12}, as $user)" | tee -a "$log"
  for t in "${timings[@]}"; do echo "   $t"; done | tee -a "$log"
  echo "   $(printf '%-32s %s' total "$(fmt $(($(now) - t0)))")" | tee -a "$log"
}

echo "fresh-machine-test: rev $sha as $user in $work"
git -C "$repo" log -1 --format='   %h %s' "$sha" | cut -c1-120

# --- the root -----------------------------------------------------------------
include=ca-certificates
[ $as_user -eq 0 ] || include+=,sudo
hooks=()
if [ $use_cache -eq 1 ]; then
  mkdir -p "$cache"
  # shellcheck disable=SC2016  # "$1" is mmdebstrap's, the root's path
  hooks=(--setup-hook='mkdir -p "$1"/var/cache/apt/archives'
         --setup-hook="sync-in $cache /var/cache/apt/archives"
         --customize-hook="sync-out /var/cache/apt/archives $cache")
fi
make_root() {
  mmdebstrap --mode=root --variant=minbase --include="$include" "${hooks[@]}" "$suite" "$root" \
    "deb $mirror $suite main" "deb $mirror $suite-updates main" "deb $security $suite-security main"
}
step "mmdebstrap $suite" make_root

# --- what comes from the host, the clone ---------------------------------------
setup_root() {
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  # The root shares the host's name (one UTS namespace); a fresh Debian names
  # itself in /etc/hosts (sudo otherwise warns that it cannot resolve it).
  hostname >"$root/etc/hostname"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    "$(hostname)" >"$root/etc/hosts"
  if [ -d /usr/local/share/ca-certificates ]; then
    cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
  fi
  [ ! -f /etc/pip.conf ] || cp -a /etc/pip.conf "$root/etc/pip.conf"
  [ ! -d /etc/pip ] || cp -a /etc/pip "$root/etc/pip"
  if [ $as_user -eq 1 ]; then
    as_root useradd --create-home --shell /bin/bash "$user"
    echo "$user ALL=(ALL) NOPASSWD:ALL" >"$root/etc/sudoers.d/90-$user"
    chmod 0440 "$root/etc/sudoers.d/90-$user"
  fi
  mkdir -p "$root$home"
  [ ! -d "$HOME/.config/pip" ] || { mkdir -p "$root$home/.config" && cp -a "$HOME/.config/pip" "$root$home/.config/pip"; }
  [ ! -d "$HOME/.pip" ] || cp -a "$HOME/.pip" "$root$home/.pip"
  git clone --quiet --no-hardlinks --no-checkout "$repo" "$root$dest"
  git -C "$root$dest" -c advice.detachedHead=false checkout --quiet --detach "$sha"
  git -C "$root$dest" log -1 --format='cloned %H'
  if [ $as_user -eq 1 ]; then
    as_root chown -R "$user:$user" "$home"
  fi
}
step "clone and host settings" setup_root

mount_in /proc -t proc proc
mount_in /sys --bind /sys
mount_in /dev --bind /dev
mount_in /dev/pts --bind /dev/pts
mount_in /dev/shm -t tmpfs -o mode=1777,nosuid,nodev tmpfs
[ $use_cache -eq 0 ] || mount_in /var/cache/apt/archives --bind "$cache"
step "update-ca-certificates" as_root update-ca-certificates

# The environment of a login on a fresh machine (bash -l sets PATH from
# /etc/profile), plus the host's PIP_* settings.
envs=(HOME="$home" USER="$user" LOGNAME="$user" SHELL=/bin/bash LANG=C.UTF-8 TERM=dumb)
while IFS='=' read -r name value; do
  case "$name" in
    PIP_FIND_LINKS) ;;
    PIP_*) envs+=("$name=$value") ;;
  esac
done < <(env)
in_root() {  # in_root COMMAND: runs a shell command in the clone as $user
  if [ $as_user -eq 1 ]; then
    chroot --userspec="$user:$user" "$root" /usr/bin/env -i "${envs[@]}" /bin/bash -lc "cd $dest && $1"
  else
    chroot "$root" /usr/bin/env -i "${envs[@]}" /bin/bash -lc "cd $dest && $1"
  fi
}

# --- docs/python.md's install (--python) ---------------------------------------------
if [ $python_mode -eq 1 ]; then
  step "install-deps.sh, fetch-model.sh" in_root "bash scripts/install-deps.sh && bash scripts/fetch-model.sh"
  step "python3 -m venv v && v/bin/pip install ." in_root "python3 -m venv v && v/bin/pip install ."
  check='import duet; print(duet.Pipeline("configs/smollm2.yaml").generate("What is the capital of France?").text)'
  step "generate through the package" in_root "v/bin/python -c '$check' | tee /dev/stderr | grep -q Paris"
  summary
  echo "fresh-machine-test: PASS (rev $sha, as $user, --python)" | tee -a "$log"
  exit 0
fi

# --- the set-up steps alone (--install-only) -------------------------------------
if [ $install_only -eq 1 ]; then
  step "install-deps.sh" in_root "bash scripts/install-deps.sh"
  step "fetch-model.sh" in_root "bash scripts/fetch-model.sh"
  summary
  echo "fresh-machine-test: PASS (rev $sha, as $user, --install-only)" | tee -a "$log"
  exit 0
fi

# --- the README's two commands ----------------------------------------------------
# The first two lines of the first ```sh block of the cloned README, comments cut.
mapfile -t commands < <(awk '/^```sh$/ {inside = 1; next} inside && /^```/ {exit}
  inside && NF {sub(/[[:space:]]*#.*/, ""); print; if (++n == 2) exit}' "$root$dest/README.md")
if [ ${#commands[@]} -ne 2 ]; then
  echo "fresh-machine-test: cannot read two commands from the README's first sh block" >&2
  exit 1
fi
for c in "${commands[@]}"; do
  step "$c" in_root "$c"
done

summary
echo "fresh-machine-test: PASS (rev $sha, as $user)" | tee -a "$log"
