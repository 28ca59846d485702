# Two hosts on one machine, sourced by scripts/two_nodes.sh and scripts/slurm_nodes.sh: two network
# namespaces joined by a veth pair, host A 10.231.0.1 and host B 10.231.0.2, sharing this filesystem
# as nodes share a network filesystem. The names carry the caller's PID, so a second run on the host
# (another checkout's CI) cannot collide; the addresses live inside the namespaces, so they can.
# Needs root and ip(8).

# netns_up PREFIX: sets A, B (namespaces), VA, VB (their veth ends), IP_A, IP_B and brings them up
netns_up() {
  A=$1-a$$ B=$1-b$$ VA=$1-va$$ VB=$1-vb$$ IP_A=10.231.0.1 IP_B=10.231.0.2
  ip netns add $A
  ip netns add $B
  ip link add $VA type veth peer name $VB
  ip link set $VA netns $A
  ip link set $VB netns $B
  ip -n $A addr add $IP_A/24 dev $VA
  ip -n $B addr add $IP_B/24 dev $VB
  for ns in $A $B; do ip -n $ns link set lo up; done
  ip -n $A link set $VA up
  ip -n $B link set $VB up
}

# netns_down: kills what still runs in the namespaces and deletes them (the veth pair goes with them)
netns_down() {
  [ -n "${A:-}" ] || return 0
  ip netns pids $A 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns pids $B 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del $A 2>/dev/null || true
  ip netns del $B 2>/dev/null || true
}
