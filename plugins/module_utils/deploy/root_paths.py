# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Directories on a host that only root can change, for what root makes there and later trusts (the MPS daemons'
directories, the local proxy's pid file and admin socket).

- ``shared_place(path)``: the directory every user can write on most hosts (/tmp, /dev/shm ...) that holds ``path``,
  or None: such a path is refused on the controller, before anything runs.
- ``CHECK`` and ``WALK``: the host's side, POSIX sh run as root. WALK walks ``$1`` (an absolute, normalised directory)
  from / one component at a time, never through a symbolic link: each component must be a directory of root's that
  nobody else can write (as OpenSSH checks the path of authorized_keys), so that nothing on the way can be replaced by
  another user; a missing one is made (mkdir, which does not follow a link either, then checked like the others) and
  named in ``$made``. With ``$private`` set, the last component is made 0700. A failure prints why, naming the
  component, and exits 1.

Standard library only.
"""

from __future__ import annotations

SHARED_PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/run/shm", "/run/lock", "/var/lock")

CHECK = r"""fail() { echo "$*"; exit 1; }
check() {
  if [ -L "$1" ]; then fail "$2 is a symbolic link; expected a directory of root's"; fi
  if [ ! -d "$1" ]; then fail "$2 is not a directory"; fi
  info=$(stat -c '%u %a' -- "$1") || fail "$2 cannot be looked at"
  set -- "$1" "$2" $info "$3"
  if [ "$3" != 0 ]; then fail "$2 is owned by uid $3; expected a directory of root's"; fi
  if [ -z "$5" ] && [ $((0$4 & 022)) -ne 0 ]; then fail "$2 can be written by other users (mode $4); expected a directory only root can write"; fi
}
"""

WALK = r"""cd / || fail "/ cannot be entered"
check . /
path= rest=${1#/} made=
while [ -n "$rest" ]; do
  part=${rest%%/*}
  case $rest in */*) rest=${rest#*/} ;; *) rest= ;; esac
  path=$path/$part
  [ -e "$part" ] || [ -L "$part" ] || { mkdir -- "$part" 2>/dev/null && made="$made $path"; } || [ -e "$part" ] ||
    fail "$path cannot be made"
  # A private last directory: one of root's in a directory only root can write, made 0700.
  if [ -z "$rest" ] && [ -n "$private" ]; then check "$part" "$path" owner && chmod 0700 -- "$part"; fi
  check "$part" "$path"
  cd -P -- "$part" || fail "$path cannot be entered"
done
"""


def shared_place(path):
    """The place of SHARED_PLACES that holds ``path`` (or is it), else None."""
    return next((place for place in SHARED_PLACES if path == place or path.startswith(place + "/")), None)


def quote(text):
    """``text`` as one word of a POSIX shell."""
    return "'" + text.replace("'", "'\\''") + "'"
