# bash completion for wattprof: subcommands and their options, read from
# `wattprof --help` and `wattprof COMMAND --help` so it follows whatever
# this build has; values for the options that take a fixed set of them.
_wattprof() {
  local cur prev cmd words cword
  _init_completion 2>/dev/null || {
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  }
  local prog=${words[0]}
  if [ "$cword" -eq 1 ]; then
    COMPREPLY=($(compgen -W "$("$prog" --help 2>/dev/null | awk '/^  [a-z]/ {print $1}')" -- "$cur"))
    return
  fi
  cmd=${words[1]}
  if [ "$cmd" = help ]; then
    [ "$cword" -eq 2 ] &&
      COMPREPLY=($(compgen -W "$("$prog" --help 2>/dev/null | awk '/^  [a-z]/ && $1 != "help" {print $1}')" -- "$cur"))
    return
  fi
  case $prev in
    --sort) COMPREPLY=($(compgen -W "energy power cpu" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "csv json" -- "$cur")); return ;;
    --engine) COMPREPLY=($(compgen -W "ols ridge lasso forest" -- "$cur")); return ;;
    --alpha) COMPREPLY=($(compgen -W "auto" -- "$cur")); return ;;
    --domains) COMPREPLY=($(compgen -W "package dram core uncore psys" -- "$cur")); return ;;
    --loocv) COMPREPLY=($(compgen -W "closed refit none" -- "$cur")); return ;;
    --rule) COMPREPLY=($(compgen -W "bic cv score accurate" -- "$cur")); return ;;
    --user) COMPREPLY=($(compgen -u -- "$cur")); return ;;
    --pid) COMPREPLY=($(compgen -W "$(ls /proc | grep -E '^[0-9]+$')" -- "$cur")); return ;;
    --since | --until) COMPREPLY=($(compgen -W "now 10m 1h 1d" -- "$cur")); return ;;
    --meter-cgroup) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --socket | --out | --plot | --output | --model | --config | --db | --data | --predict)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$("$prog" "$cmd" --help 2>/dev/null | grep -oE -- '--[a-z][a-z-]*' | sort -u)" -- "$cur"))
  elif [ "$cmd" = show ]; then
    COMPREPLY=($(compgen -W "$(ls /proc | grep -E '^[0-9]+$')" -- "$cur"))
  elif [[ $cmd =~ ^(reload|train|select|gp|symreg|rank)$ ]]; then
    COMPREPLY=($(compgen -f -- "$cur")) # the model, data or config file
  fi
}
complete -F _wattprof wattprof
