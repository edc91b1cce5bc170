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
  # run ... -- CMD ARGS: the command's name, then what CMD's own completion
  # offers (bash-completion's _command_offset), else file names.
  if [ "$cmd" = run ]; then
    local i
    for ((i = 2; i < cword; i++)); do
      [ "${words[i]}" = -- ] || continue
      if [ "$cword" -eq $((i + 1)) ]; then
        COMPREPLY=($(compgen -c -- "$cur"))
      elif declare -F _command_offset >/dev/null; then
        # Its offset counts COMP_WORDS, which _init_completion may have rejoined.
        local j=1
        while [ "$j" -lt "$COMP_CWORD" ] && [ "${COMP_WORDS[j]}" != -- ]; do j=$((j + 1)); done
        _command_offset $((j + 1))
      else
        COMPREPLY=($(compgen -f -- "$cur"))
      fi
      return
    done
  fi
  case $prev in
    -n) COMPREPLY=($(compgen -W "5 10 20 50 100" -- "$cur")); return ;;
    -r | --repeat) COMPREPLY=($(compgen -W "3 5 10" -- "$cur")); return ;;
    --sort) COMPREPLY=($(compgen -W "energy power cpu" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "csv json" -- "$cur")); return ;;
    --engine) COMPREPLY=($(compgen -W "ols ridge lasso forest" -- "$cur")); return ;;
    --alpha) COMPREPLY=($(compgen -W "auto" -- "$cur")); return ;;
    --domains) COMPREPLY=($(compgen -W "package dram core uncore psys" -- "$cur")); return ;;
    --loocv) COMPREPLY=($(compgen -W "closed refit none" -- "$cur")); return ;;
    --rule) COMPREPLY=($(compgen -W "bic cv score accurate" -- "$cur")); return ;;
    --user) COMPREPLY=($(compgen -u -- "$cur")); return ;;
    --job) # the jobs the daemon knows (those the caller may see)
      COMPREPLY=($(compgen -W "$("$prog" jobs --csv 2>/dev/null | awk -F, 'NR > 1 {print $1}')" -- "$cur")); return ;;
    --pid) COMPREPLY=($(compgen -W "$(ls /proc | grep -E '^[0-9]+$')" -- "$cur")); return ;;
    --since | --until) COMPREPLY=($(compgen -W "now 10m 1h 1d" -- "$cur")); return ;;
    --meter-cgroup) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --socket | --out | --plot | --output | --model | --config | --db | --data | --predict)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
  esac
  if [[ $cur == -* ]]; then
    # Long options, and the short ones (-n, -k, -r) the help lists first on a line.
    COMPREPLY=($(compgen -W "$("$prog" "$cmd" --help 2>/dev/null |
      grep -oE -- '(--[a-z][a-z-]*|^  -[a-zA-Z]\>)' | sed 's/^ *//' | sort -u)" -- "$cur"))
  elif [ "$cmd" = show ]; then
    COMPREPLY=($(compgen -W "$(ls /proc | grep -E '^[0-9]+$')" -- "$cur"))
  elif [[ $cmd =~ ^(reload|train|select|gp|symreg|rank)$ ]]; then
    COMPREPLY=($(compgen -f -- "$cur")) # the model, data or config file
  fi
}
complete -F _wattprof wattprof
