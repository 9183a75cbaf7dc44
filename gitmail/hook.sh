#!/bin/sh
# gitmail's hook: a session starts, a tool call, a prompt, a turn's end, a wake.
# Usage: hook.sh MOMENT HOST PYTHON [--watch]
#
# These fire all the time, and almost always nothing has changed. Python decides everything, ahead of time: it
# leaves, for each session, the stamps the session last saw and the moments at which, while they hold, there is
# nothing to do; and for a new session's start, the answer the last start in its work tree would repeat
# (gitmail/store/startcache.py). This only compares those with the current stamps, using shell built-ins, and
# starts Python (`PYTHON -m gitmail hook MOMENT --host HOST`) whenever they do not settle it, or it cannot tell.
# What it writes is what it saw (the moment, the host process) and copies of what Python kept. The files and lines
# it shares with Python are defined in gitmail/store/hookfiles.py. It never fails the session.

moment=$1 host=$2 python=$3 watch=${4:-}
tab='	'

[ -n "$python" ] || exit 0

# Python's gitmail: this interpreter, or (when it is gone: a removed virtualenv) `gitmail` on PATH, or nothing.
gitmail() {
    if command -v "$python" >/dev/null 2>&1; then
        # -P: never import a `gitmail` from the session's own directory (a repository could hold one).
        "$python" -P -c 'import sys; from gitmail.hooks import main; sys.exit(main(sys.argv[1:]))' \
            "$moment" --host "$host" $watch
    elif command -v gitmail >/dev/null 2>&1; then
        command gitmail hook "$moment" --host "$host" $watch
    fi
}
run() {
    gitmail
    exit $?
}

# The host program running the session: the first process up from here that is not a shell, with its start time
# (in clock ticks since boot: a pid reused by another program has another), as `pid ticks`; nothing without /proc.
live() {
    pid=$PPID
    for _ in 1 2 3 4; do
        read -r stat 2>/dev/null <"/proc/$pid/stat" || return 0
        comm=${stat#*\(} && comm=${comm%%)*}
        set -- ${stat##*) }
        case $comm in
        sh | bash | dash | zsh | ksh | busybox | env | timeout) pid=$2 ;;
        *) { printf '%s %s\n' "$pid" "${20}" >"$shown.live"; } 2>/dev/null && return 0 ;;
        esac
    done
}

# Whether the lease index ($1) names a lease of another holder whose files this call's payload may write: every
# fixed piece of one of its patterns' file names is in the payload (store/lease_refs.py writes the index).
leased() {
    me=$host:$session
    set -f
    while IFS= read -r entry; do
        [ "${entry%%"$tab"*}" = "$me" ] && continue
        all=yes
        old=$IFS
        IFS=$tab
        set -- ${entry#*"$tab"}
        IFS=$old
        for piece in "$@"; do
            case $piece in
            '|') [ $all = yes ] && return 0 || all=yes ;;
            '*') return 0 ;;
            *) case $payload in *"$piece"*) ;; *) all=no ;; esac ;;
            esac
        done
        [ $all = yes ] && return 0
    done <"$1"
    return 1
}

# Whether the session's leases are due to be renewed: Python keeps .renew's time at the next renewal.
due() {
    [ -e "$shown.renew" ] && { : >"$shown.now"; } 2>/dev/null && [ "$shown.now" -nt "$shown.renew" ]
}

# The answer the last session start in this work tree kept (store/startcache.py), when it still holds: its files
# are named after the work tree's path, spelled with letters, digits, '.', '-', '_' and %2F for '/' (any other
# path is left to Python). `cat` runs in the C locale: it prints bytes, and reading the locale's files costs it more.
kept_answer() {
    case $dir in /*[!A-Za-z0-9._/-]* | *//* | */) [ "$dir" = / ] || return 0 ;; esac
    name= rest=${dir#/}
    while :; do # a name part at a time: a character at a time costs a path's length in loop turns
        case $rest in
        */*) name=$name%2F${rest%%/*} rest=${rest#*/} ;;
        *) name=$name%2F$rest && break ;;
        esac
    done
    kept=$mailbox/gitmail/cache/$host-$name
    key= config= quiet= record= claims=
    { read -r key && read -r config && read -r quiet; } 2>/dev/null <"$kept.key" || [ -n "$quiet" ] || return 0
    # The repository's config changed since (`git config gitmail.name` may have renamed it): Python answers.
    [ -z "$config" ] || [ ! "$config" -nt "$kept.key" ] || return 0
    ref=${key%%:*}
    case $ref in '' | *[!A-Za-z0-9%_-]*) return 0 ;; esac
    read -r mine 2>/dev/null <"$mailbox/gitmail/stamps/$ref"
    read -r everyone 2>/dev/null <"$mailbox/gitmail/stamps/_broadcast"
    read -r claims 2>/dev/null <"$mailbox/gitmail/stamps/_claims"
    flag=
    [ -n "$watch" ] && flag=watch
    [ "$key" = "$ref:$mine:$everyone:$claims:${GITMAIL_WAKE:-}:$flag:${PATH:-}" ] || return 0
    read -r record 2>/dev/null <"$kept.record" || return 0
    # With a remote that syncs by itself, the kept answer holds until a sync is due: until the time that
    # $kept.due was stamped with, which the record just written is older than. A record that cannot be written (a
    # full disk) leaves the answer to Python, which says so.
    { printf '%s\n' "$record" >"$shown.json" &&
        printf '%s\n' "$quiet" >"$shown.stamps" &&
        printf '%s\n' "$dir" >"$shown.top"; } 2>/dev/null &&
        { [ ! -e "$kept.due" ] || [ "$kept.due" -nt "$shown.json" ]; } &&
        live && { [ ! -s "$kept.out" ] || LC_ALL=C cat "$kept.out"; } && { [ ! -s "$kept.recording" ] || recorded; } && exit 0

}

# The receipts of what the kept answer showed this session, written once the host has its answer (started before
# it, the Python competes with printing it for the processor): by Python, in a process of its own with its
# standard streams closed, which nothing waits for.
recorded() {
    command -v "$python" >/dev/null 2>&1 || return 0
    # A job of a shell that exits at once: nothing waits for it, and it outlives the shell (one fork, not two).
    "$python" -P -c 'import sys; from gitmail.starts import main; sys.exit(main(sys.argv[1:]))' \
        record "$host" "$kept" </dev/null >/dev/null 2>&1 &
    return 0
}

mailbox=${GITMAIL_DIR:-${HOME:-}/.gitmail/mail.git}
case $mailbox in /*) ;; *) run ;; esac
[ -d "$mailbox/gitmail" ] || exit 0 # no mailbox yet: no mail

# The session: Claude Code names it in the environment; Codex only in the payload, whose first key it is.
session=${CLAUDE_CODE_SESSION_ID:-}
head=
if [ -z "$session" ]; then
    head=$(dd bs=512 count=1 2>/dev/null)
    case $head in
    *'"session_id"'*)
        session=${head#*\"session_id\"}
        while :; do case $session in [\ :]*) session=${session#?} ;; *) break ;; esac; done
        case $session in \"*) session=${session#\"} && session=${session%%\"*} ;; *) session= ;; esac
        ;;
    esac
fi
case $session in '' | *[!A-Za-z0-9_-]*) session= ;; esac

# The last moment a hook of this session saw (Python tells a turn from it: a wake must not break into one). Noted
# here on every call, since most calls start no Python; written only when it changes. A wake is gitmail's doing,
# not the session's: it is not noted.
if [ -n "$session" ] && [ -d "$mailbox/gitmail/sessions" ] && [ "$moment" != wake ]; then
    turn=$mailbox/gitmail/sessions/$host-$session.turn
    last=
    read -r last 2>/dev/null <"$turn"
    [ "$last" = "$moment" ] || { echo "$moment" >"$turn"; } 2>/dev/null
fi

# The repository: the nearest directory up from here with a .git (Python checks it properly when it runs). The
# host may start this with a PWD of its own; `cd -P .` makes PWD the real working directory, without a process.
cd -P . 2>/dev/null || run
dir=${PWD:-}
case $dir in /*) ;; *) dir= ;; esac
while [ -n "$dir" ] && [ ! -e "$dir/.git" ]; do
    case $dir in /) dir= ;; */*) dir=${dir%/*} && dir=${dir:-/} ;; *) dir= ;; esac
done

# Before a tool call runs (the edit moment), Python decides only where it may write a file another session leased, or
# where this cannot tell (no lease index yet, a session not yet seen in this work tree).
if [ "$moment" = edit ]; then
    [ -n "$dir" ] || exit 0 # outside any repository nothing is leased
    ref= line= top=
    if [ -n "$session" ]; then
        read -r line 2>/dev/null <"$mailbox/gitmail/sessions/$host-$session.stamps"
        read -r top 2>/dev/null <"$mailbox/gitmail/sessions/$host-$session.top"
        [ "$top" = "$dir" ] && ref=${line%%:*}
    fi
    case $ref in '' | *[!A-Za-z0-9%_-]*) ref= ;; esac
    index=$mailbox/gitmail/stamps/$ref.leases
    if [ -n "$ref" ] && [ -e "$index" ]; then
        [ -s "$index" ] || exit 0 # no lease in this repository
        payload=$head$(cat)
        leased "$index" || exit 0
        printf '%s' "$payload" | gitmail
        exit $?
    fi
fi

# The session's files, and where its repository's mail is stamped. Python names the repository (a worktree's is
# its repository's; gitmail.name may choose another) and writes it into the session's stamps line, with the work
# tree it found it for: here only the work tree is found, and the rest read back.
if [ -n "$dir" ] && [ -n "$session" ]; then
    shown=$mailbox/gitmail/sessions/$host-$session
    mine= everyone= seen= top=
    if [ "$moment" = session-start ]; then
        # A new session (no record yet) is answered from what the last start in this work tree kept, when the
        # mail, the names and the hook's settings are as they were then. A session with a record (resumed,
        # cleared, compacted) may have sent mail of its own or been written to: Python answers it.
        [ -e "$shown.json" ] || kept_answer
    else
        line=
        read -r line 2>/dev/null <"$shown.stamps"
        read -r top 2>/dev/null <"$shown.top"
        seen=${line%% *}
        quiet=" ${line#"$seen"} "
        ref=${seen%%:*}
        case $ref in '' | *[!A-Za-z0-9%_-]*) ref= ;; esac
        if [ -n "$ref" ] && [ "$top" = "$dir" ]; then
            read -r mine 2>/dev/null <"$mailbox/gitmail/stamps/$ref"
            read -r everyone 2>/dev/null <"$mailbox/gitmail/stamps/_broadcast"
            # Nothing new since this session last looked, at a moment Python said has nothing to do then.
            if [ "$ref:$mine:$everyone" = "$seen" ]; then
                case $quiet in *" $moment "*) due || exit 0 ;; esac
            fi
        fi
    fi
fi

# Something may be new: Python decides, with the whole payload (the part read above, then the rest).
if [ -z "$head" ]; then
    run
fi
{
    printf '%s' "$head"
    exec cat
} | gitmail
exit $?
