#!/bin/sh
# gitmail's commit guard: what the pre-commit hook `gitmail install --guard` puts in a repository runs, after the
# repository's own pre-commit hook. Usage: guard.sh PYTHON
#
# A session's commit of files another holder leased exclusively is refused; a person's is warned and goes on.
# Python decides that (`PYTHON -m gitmail guard pre-commit`, gitmail/commit_guard.py) only where a lease may be in
# the way: this finds the repository's mailbox name as gitmail/workspace.py does and reads the lease index hook.sh
# reads (written by gitmail/store/lease_refs.py), so a commit in a repository where nobody else holds a lease starts
# one git process and no Python. It never stops a commit for a fault of its own: what it cannot read, Python is
# asked about, and what Python cannot read is one line, and the commit goes on.

python=$1
tab='	'
nl='
'

guard() {
    if command -v "$python" >/dev/null 2>&1; then
        # -P: never import a `gitmail` from the repository being committed to.
        exec "$python" -P -c 'import sys; from gitmail.commit_guard import main; sys.exit(main(sys.argv[1:]))' \
            pre-commit
    elif command -v gitmail >/dev/null 2>&1; then
        exec gitmail guard pre-commit
    fi
    echo "gitmail: the lease guard cannot run (no Python at $python, no gitmail on PATH); the commit goes on" >&2
    exit 0
}

mailbox=${GITMAIL_DIR:-${HOME:-}/.gitmail/mail.git}
case $mailbox in /*) ;; *) guard ;; esac
[ -d "$mailbox/gitmail" ] || exit 0 # no mailbox: nothing is leased

# The repository's mailbox name, as workspace.py's `place` gives it: a linked worktree (its git directory has a
# commondir) is named after the folder that holds the common git directory (`api` for api/.git and for api.git),
# the main work tree after its own folder (git runs the hook at its top); `gitmail.name` in the repository's own
# config chooses another. Python is asked whenever this is not plain.
cd -P . 2>/dev/null || guard
dirs=$(git rev-parse --git-dir --git-common-dir 2>/dev/null) || guard
case $dirs in *"$nl"*) ;; *) guard ;; esac
git_dir=${dirs%%"$nl"*} common=${dirs#*"$nl"}
case $common in /*) ;; *) common=$PWD/$common ;; esac
case $git_dir in /*) ;; *) git_dir=$PWD/$git_dir ;; esac
common=$(cd -P "$common" 2>/dev/null && pwd) || guard
name=${PWD##*/}
if [ -e "$git_dir/commondir" ]; then
    case $common in
    */.git) name=${common%/.git} && name=${name##*/} ;;
    *) name=${common##*/} && name=${name%.git} && name=${name:-${common##*/}} ;;
    esac
fi
while IFS= read -r line; do
    case $line in
    *[gG][iI][tT][mM][aA][iI][lL]* | *[iI][nN][cC][lL][uU][dD][eE]*)
        chosen=$(git config --file "$common/config" --includes --get gitmail.name 2>/dev/null)
        [ -z "$chosen" ] || name=$chosen
        break
        ;;
    esac
done <"$common/config"

# The name's ref-safe form (values/names.py): [a-z0-9_-] stand for themselves, '.' and capitals are %XX; any other
# name is left to Python.
ref= rest=$name
while [ -n "$rest" ]; do
    c=${rest%"${rest#?}"}
    rest=${rest#?}
    case $c in
    [a-z0-9_-]) ref=$ref$c ;;
    .) ref=$ref%2E ;;
    [A-Z]) ref=$ref$(printf '%%%02X' "'$c") ;;
    *) guard ;;
    esac
done
case $ref in '' | _*) guard ;; esac

# The committer: the session the host names to the commands it runs (workspace.py's `session_from_environment`),
# else the person, whose leases the index lists as `-`.
me=-
for found in "claude:${CLAUDE_CODE_SESSION_ID:-}" "codex:${CODEX_THREAD_ID:-}" "codex:${CODEX_SESSION_ID:-}"; do
    case ${found#*:} in '' | *[!A-Za-z0-9_-]*) ;; *) me=$found && break ;; esac
done

# No index yet: Python decides (and writes one). An empty one: nobody holds a lease here. Lines only of the
# committer's own leases: nothing stands in its way.
index=$mailbox/gitmail/stamps/$ref.leases
[ -e "$index" ] || guard
[ -s "$index" ] || exit 0
others=no
while IFS= read -r entry; do
    [ "${entry%%"$tab"*}" = "$me" ] || { others=yes && break; }
done 2>/dev/null <"$index" || others=yes
[ $others = no ] || guard
exit 0
