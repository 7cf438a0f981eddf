#!/bin/sh
# testbed ForceCommand wrapper (not a stand-in: the command still runs for real).
# Records every SSH command line in /var/log/testbed/commands.log (entries end with a NUL byte;
# "[sftp subsystem]" and "[interactive shell]" for sessions without a command), implements the
# "hang" fault (/run/testbed/hang: new sessions block until the client goes away, the command never
# runs), then runs the command with the user's login shell, as sshd would. The client's address
# of each session (the first field of $SSH_CONNECTION) goes to /var/log/testbed/clients.log.
cmd=${SSH_ORIGINAL_COMMAND-}
case $cmd in
  /usr/lib/openssh/sftp-server|internal-sftp) entry='[sftp subsystem]' ;;
  '') entry='[interactive shell]' ;;
  *) entry=$cmd ;;
esac
printf '%s\0' "$entry" >> /var/log/testbed/commands.log 2>/dev/null || true
printf '%s\n' "${SSH_CONNECTION%% *}" >> /var/log/testbed/clients.log 2>/dev/null || true
if [ -e /run/testbed/hang ]; then
  parent=$PPID
  while [ -d "/proc/$parent" ]; do sleep 1; done
  exit 255
fi
case $entry in
  '[sftp subsystem]') exec /usr/lib/openssh/sftp-server ;;
  '[interactive shell]') exec "${SHELL:-/bin/sh}" -l ;;
esac
exec "${SHELL:-/bin/sh}" -c "$cmd"
