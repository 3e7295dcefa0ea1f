#!/bin/bash
# Data-parallel over a real TCP link: two network namespaces ("hosts") joined
# by a veth pair whose both ends are shaped to RATE with tbf, one rank in
# each, started by mpirun through an rsh agent that enters the namespace.
# Open MPI is held to TCP (btl tcp,self), so nothing goes through shared
# memory. Needs root, iproute2 and tc. Prints the link's round trip, then
# one line per model:
#   model rate 1rank_samples_s 2rank_samples_s speedup no_overlap_speedup
#         reduce_ms_per_step hidden_pct
#         zero1_speedup zero1_comm_ms_per_step zero1_hidden_pct
# (zero1: --shard-optimizer; its communication is the gradients'
# reduce-scatter, or all-reduce, and the parameters' all-gather.)
#   bench/dp_two_hosts.sh [RATE] [MODELS]   (defaults: 10gbit, "mnist transformer")
# (This kernel has no netem, so the link adds no delay of its own: its
# latency is the veth's, measured and printed.) Rounds interleave the runs
# (ROUNDS, default 3); the figures are medians. The artifacts are exported
# without --grads: the ranks run steps cut from train_step.
set -eu
cd "$(dirname "$0")/.."
RATE=${1:-10gbit}
MODELS=${2:-"mnist transformer"}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-30}
BIN=$(realpath "${TRAINSTEP_BIN:-build/trainstep}")
A=tsA$$ B=tsB$$ NET=10.77.$(( $$ % 200 )).
dir=$(mktemp -d)
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add "v$A" type veth peer name "v$B"
ip link set "v$A" netns "$A"; ip link set "v$B" netns "$B"
ip -n "$A" addr add "${NET}1/24" dev "v$A"; ip -n "$B" addr add "${NET}2/24" dev "v$B"
for ns in "$A" "$B"; do
  ip -n "$ns" link set lo up; ip -n "$ns" link set "v$ns" up
  # burst: a 10 Gbit/s link drains 256 KiB in 0.2 ms.
  ip netns exec "$ns" tc qdisc add dev "v$ns" root tbf rate "$RATE" burst 256kb latency 10ms
done
cat >"$dir/agent" <<AGENT
#!/bin/sh
# mpirun's rsh agent: host ${NET}N runs in namespace N (1: $A, 2: $B).
host=\$1; shift
case "\$host" in ${NET}1) ns=$A ;; ${NET}2) ns=$B ;; *) exit 1 ;; esac
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
chmod +x "$dir/agent"

# The link's round trip: 2000 one-byte TCP ping-pongs between the hosts.
ip netns exec "$B" python3 -c "
import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('${NET}2', 17777)); s.listen(1); c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while (b := c.recv(1)): c.sendall(b)" &
sleep 0.5
ip netns exec "$A" python3 -c "
import socket, time; s = socket.create_connection(('${NET}2', 17777))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t = time.perf_counter()
for _ in range(2000): s.sendall(b'x'); s.recv(1)
print(f'link: {\"$RATE\"} (tbf), TCP round trip {(time.perf_counter() - t) / 2000 * 1e6:.0f} us')"
wait

MPIRUN="ip netns exec $A mpirun --allow-run-as-root --host ${NET}1,${NET}2 -np 2
  --mca plm_rsh_agent $dir/agent --mca btl tcp,self --mca btl_tcp_if_include ${NET}0/24
  --mca oob_tcp_if_include ${NET}0/24"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
rate() { sed -n 's/.*; \([0-9.]*\) samples\/s$/\1/p'; }
for m in $MODELS; do
  art="$dir/$m.tstep"
  "$BIN" export "examples/$m/spec.py" --out "$art" >/dev/null
  : >"$dir/one"; : >"$dir/par"; : >"$dir/seq"; : >"$dir/hid"; : >"$dir/red"
  : >"$dir/zpar"; : >"$dir/zhid"; : >"$dir/zred"
  for _ in $(seq "$ROUNDS"); do
    ip netns exec "$A" "$BIN" bench "$art" --threads 1 --steps "$STEPS" | rate >>"$dir/one"
    out=$($MPIRUN "$BIN" bench "$art" --threads 1 --steps "$STEPS" --distributed mpi --profile)
    echo "$out" | rate >>"$dir/par"
    echo "$out" | sed -n 's/.*; \([0-9.]*\) ms\/step reducing.*/\1/p' >>"$dir/red"
    echo "$out" | sed -n 's/.*: \([0-9.]*\)% hidden behind the backward$/\1/p' >>"$dir/hid"
    $MPIRUN "$BIN" bench "$art" --threads 1 --steps "$STEPS" --distributed mpi --no-overlap |
      rate >>"$dir/seq"
    out=$($MPIRUN "$BIN" bench "$art" --threads 1 --steps "$STEPS" --distributed mpi --profile \
      --shard-optimizer)
    echo "$out" | rate >>"$dir/zpar"
    echo "$out" | sed -n 's/.*; \([0-9.]*\) ms\/step reducing.*/\1/p' >>"$dir/zred"
    echo "$out" | sed -n 's/.*: \([0-9.]*\)% hidden behind the backward$/\1/p' >>"$dir/zhid"
  done
  one=$(median <"$dir/one"); par=$(median <"$dir/par"); seq=$(median <"$dir/seq")
  red=$(median <"$dir/red"); hid=$(median <"$dir/hid")
  zpar=$(median <"$dir/zpar"); zred=$(median <"$dir/zred"); zhid=$(median <"$dir/zhid")
  awk -v m="$m" -v r="$RATE" -v one="$one" -v par="$par" -v seq="$seq" -v red="$red" -v hid="$hid" \
    -v zpar="$zpar" -v zred="$zred" -v zhid="$zhid" \
    'BEGIN { printf "%s %s %s %s %.2f %.2f %s %s %.2f %s %s\n", m, r, one, par, par / one,
             seq / one, red, hid, zpar / one, zred, zhid }'
done
