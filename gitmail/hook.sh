#!/bin/sh
# gitmail's hook: a session starts, a tool call, a prompt, a turn's end, a wake.
# Usage: hook.sh MOMENT HOST PYTHON [--watch]
#
# These fire all the time, and almost always nothing has changed. So this decides with shell built-ins alone
# whether anything may have arrived for this session's repository since the session last looked, and starts
# Python (`PYTHON -m gitmail hook MOMENT --host HOST`, which decides for real) only then: when the repository's
# change stamp or the broadcasts' stamp differs from what the session saw, or when this cannot tell. A session
# start whose answer would be the last one's, kept under the same stamps (gitmail/startcache.py), is answered from
# that. It never fails the session.

moment=$1 host=$2 python=$3 watch=${4:-}
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

# Whether the session is in a turn ("busy" from a prompt or a tool call until the turn ends): a wake must not break
# into a turn, whose next tool call or end brings the mail as context. Kept here on every call, since most calls
# start no Python; written only when it changes.
if [ -n "$session" ] && [ -d "$mailbox/gitmail/sessions" ]; then
    turn=$mailbox/gitmail/sessions/$host-$session.turn
    state=
    read -r state 2>/dev/null <"$turn"
    case $moment in
    tool | prompt) [ "$state" = busy ] || { echo busy >"$turn"; } 2>/dev/null ;;
    stop | session-start) [ "$state" = idle ] || { echo idle >"$turn"; } 2>/dev/null ;;
    wake) [ "$state" = busy ] && exit 0 ;;
    esac
fi

# The repository: the nearest directory up from here with a .git (Python checks it properly when it runs). The
# host may start this with a PWD of its own; `cd -P .` makes PWD the real working directory, without a process.
cd -P . 2>/dev/null || run
dir=${PWD:-}
case $dir in /*) ;; *) dir= ;; esac
while [ -n "$dir" ] && [ ! -e "$dir/.git" ]; do
    case $dir in /) dir= ;; */*) dir=${dir%/*} && dir=${dir:-/} ;; *) dir= ;; esac
done

# Its name as gitmail writes it in file names: lower-case letters, digits, '-' and '_' as they are; capitals
# and '.' as %XX; anything else is left to Python.
ref=
if [ -n "$dir" ] && [ -n "$session" ]; then
    rest=${dir##*/}
    while [ -n "$rest" ]; do
        c=${rest%"${rest#?}"}
        rest=${rest#?}
        case $c in
        [a-z0-9_-]) ref=$ref$c ;;
        .) ref=$ref%2E ;;
        A) ref=$ref%41 ;; B) ref=$ref%42 ;; C) ref=$ref%43 ;; D) ref=$ref%44 ;; E) ref=$ref%45 ;;
        F) ref=$ref%46 ;; G) ref=$ref%47 ;; H) ref=$ref%48 ;; I) ref=$ref%49 ;; J) ref=$ref%4A ;;
        K) ref=$ref%4B ;; L) ref=$ref%4C ;; M) ref=$ref%4D ;; N) ref=$ref%4E ;; O) ref=$ref%4F ;;
        P) ref=$ref%50 ;; Q) ref=$ref%51 ;; R) ref=$ref%52 ;; S) ref=$ref%53 ;; T) ref=$ref%54 ;;
        U) ref=$ref%55 ;; V) ref=$ref%56 ;; W) ref=$ref%57 ;; X) ref=$ref%58 ;; Y) ref=$ref%59 ;;
        Z) ref=$ref%5A ;;
        *) ref= && break ;;
        esac
    done
fi

if [ -n "$ref" ]; then
    mine= everyone= seen=
    read -r mine 2>/dev/null <"$mailbox/gitmail/stamps/$ref"
    read -r everyone 2>/dev/null <"$mailbox/gitmail/stamps/_broadcast"
    if [ "$moment" = session-start ]; then
        claims= kept= record=
        read -r claims 2>/dev/null <"$mailbox/gitmail/stamps/_claims"
        kept=$mailbox/gitmail/cache/$host-$ref
        read -r key 2>/dev/null <"$kept.key"
        flag=
        [ -n "$watch" ] && flag=watch
        if [ "$key" = "$ref:$mine:$everyone:$claims:${GITMAIL_WAKE:-}:$flag:${PATH:-}" ] &&
            read -r record 2>/dev/null <"$kept.record"; then
            shown=$mailbox/gitmail/sessions/$host-$session
            # With a remote that syncs by itself, the kept answer holds until a sync is due: until the time that
            # $kept.due was stamped with, which the record just written is older than.
            # A record that cannot be written (a full disk) leaves the answer to Python, which says so.
            { printf '%s\n' "$record" >"$shown.json" &&
                printf '%s\n' "$ref:$mine:$everyone" >"$shown.stamps"; } 2>/dev/null &&
                { [ ! -e "$kept.due" ] || [ "$kept.due" -nt "$shown.json" ]; } &&
                { [ ! -s "$kept.out" ] || cat "$kept.out"; } && exit 0
        fi
    else
        read -r seen 2>/dev/null <"$mailbox/gitmail/sessions/$host-$session.stamps"
        [ "$ref:$mine:$everyone" = "$seen" ] && exit 0 # nothing new since this session last looked
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
