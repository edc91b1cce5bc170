#!/usr/bin/env bash
# Bash completion (client/wattprof.bash) against the built wattprof: the
# subcommands, a subcommand's options and the fixed values of --sort and
# --format, as bash would offer them.
set -u
. "$SRCDIR/tests/helpers/lib.sh"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
ln -s "$WATTPROF" "$bin/wattprof"
PATH=$bin:$PATH
. "$SRCDIR/client/wattprof.bash"

complete_line() { # WORDS...: what bash offers for the last word
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _wattprof
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
}

check "subcommands from wattprof --help" \
  test "$(complete_line wattprof sh)" = "show "
check "every query subcommand is offered" \
  "$PYTHON" -c 'import sys; got = set(sys.argv[1].split()); sys.exit(not {"status", "top", "ps", "jobs", "show", "history", "export", "models", "reload", "run"} <= got)' "$(complete_line wattprof '')"
check "history's options" test "$(complete_line wattprof history --s)" = "--since --socket --step "
check "jobs' options" test "$(complete_line wattprof jobs --j)" = "--job --json "
check "--job without a daemon offers nothing" \
  test "$(WATTPROF_SOCKET=/nonexistent complete_line wattprof jobs --job '')" = " "
check "--sort values" test "$(complete_line wattprof ps --sort '')" = "cpu energy power "
check "--format values" test "$(complete_line wattprof export --format j)" = "json "
check "symreg's options" grep -q -- "--time-limit" <<<"$(complete_line wattprof symreg --)"
check "--rule values" test "$(complete_line wattprof symreg --rule '')" = "accurate bic cv score "
check "show completes pids" grep -qw "$$" <<<"$(complete_line wattprof show '')"
check "help completes command names" test "$(complete_line wattprof help tr)" = "train "
check "help is offered as a command" grep -qw help <<<"$(complete_line wattprof '')"
check "run's -r and -x long forms" test "$(complete_line wattprof run --re)" = "--repeat "
check "train takes --data" test "$(complete_line wattprof train --da)" = "--data "
check "--engine values" test "$(complete_line wattprof train --engine l)" = "lasso "
check "--alpha auto" test "$(complete_line wattprof train --alpha a)" = "auto "
check "top offers -n" grep -qw -- "-n" <<<"$(complete_line wattprof top -)"
check "-n takes a count" test "$(complete_line wattprof ps -n 1)" = "10 100 "
check "select offers -k" grep -qw -- "-k" <<<"$(complete_line wattprof select -)"
check "run -- completes a command name" grep -qw "sleep" <<<"$(complete_line wattprof run -r 3 -- slee)"
check "run -- never offers wattprof's own options there" \
  test -z "$(complete_line wattprof run -- --rep)" -o "$(complete_line wattprof run -- --rep)" != "--repeat "
mkdir "$bin/d" && touch "$bin/d/arg.txt"
check "run -- CMD completes CMD's arguments (files at least)" \
  grep -qF "$bin/d/arg.txt" <<<"$(complete_line wattprof run -- cat "$bin/d/a")"
# Where bash-completion is loaded, CMD's own completion takes over from CMD's word.
_command_offset() { COMPREPLY=("offset=$1"); }
check "run -- CMD hands over to CMD's completion (_command_offset at CMD's word)" \
  test "$(complete_line wattprof run -r 3 -- cat x)" = "offset=5 "
unset -f _command_offset
check "before --, run still completes its options" test "$(complete_line wattprof run --re)" = "--repeat "
finish
