# zsh_complete.zsh FPATH LINE: print the command line after zsh completes
# LINE once (TAB), read back through a pseudo-terminal (zsh/zpty). Used by
# test_completion.sh.
zmodload zsh/zpty
fp=$1 line=$2
zpty z zsh -f -i
zpty -w z "PS1='> '; setopt no_beep; fpath=($fp \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z 'show() { print -rn -- "<<B""UF:$BUFFER:E""ND>>"; }; zle -N show; bindkey "^Xp" show'
zpty -w -n z "$line"$'\t'
sleep 0.3
zpty -w -n z $'\C-xp'
out=
for i in {1..50}; do
  zpty -r -t z chunk 2>/dev/null && out+=$chunk
  [[ $out == *'<<BUF:'*':END>>'* ]] && break
  sleep 0.1
done
zpty -d z
out=${out##*<<BUF:}
print -r -- "${out%%:END>>*}"
